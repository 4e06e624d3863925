//! fastjson's JSON: a reader that takes what RocketMQ's Java peers write, and a writer of what
//! they read.
//!
//! Java serializes its bodies and metadata files with fastjson (1.x in 4.9, fastjson 1 or 2 in
//! 5.x), which writes none of it as standard JSON:
//!
//! - a map whose keys are not strings has bare keys: a `HashMap<Long, String>` as
//!   `{0:"10.0.0.1:10911"}` (every `TopicRouteData` a NameServer sends a client older than
//!   4.9.4), a `Map<Integer, Long>` as `{0:12,1:3}` (`consumerOffset.json`);
//! - a map keyed by an object, such as `HashMap<MessageQueue, Long>`, has the object's JSON as
//!   the key: `{{"brokerName":"b","queueId":0,"topic":"T"}:5}`;
//! - the pretty form indents with tabs and, in 4.9, leaves integer-keyed maps half on one line
//!   (`{0:5\n\t\t}`); fastjson also reads single-quoted strings and keys.
//!
//! [`parse`] accepts all of that: an object key may be a string quoted with `"` or `'`, a bare
//! run of characters (`12`, `-1`, `abc`), or an object or array, and a key that is not a
//! string becomes a string of its JSON text, so a map with integer keys deserializes with
//! serde as usual. Everything else is strict JSON; nesting is limited to [`MAX_DEPTH`] (bodies
//! come from the network). [`to_pretty`] writes standard JSON (every key quoted) in fastjson's
//! pretty layout, which fastjson reads back into `Map<Integer, Long>` as well.

use serde_json::{Map, Number, Value};

/// The deepest nesting [`parse`] accepts.
pub const MAX_DEPTH: usize = 64;

/// Why a text is not fastjson's JSON: what was wrong, and at which byte.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} at byte {at} (line {line}, column {column})")]
pub struct JsonError {
    /// What was wrong.
    pub what: String,
    /// The byte offset of the problem.
    pub at: usize,
    /// Its line, from 1.
    pub line: usize,
    /// Its column (in bytes), from 1.
    pub column: usize,
}

/// Parses fastjson's JSON (see the module docs) into a [`Value`]. A UTF-8 byte-order mark
/// before it is skipped (some editors leave one in a config file).
pub fn parse(text: &[u8]) -> Result<Value, JsonError> {
    let mut p = Parser { s: text, at: 0 };
    if p.s.starts_with(&[0xEF, 0xBB, 0xBF]) {
        p.at = 3;
    }
    p.skip_ws();
    let v = p.value(0)?;
    p.skip_ws();
    if p.at != p.s.len() {
        return Err(p.error("unexpected text after the JSON value"));
    }
    Ok(v)
}

/// Drops `null` members of objects, recursively: fastjson treats a null field as absent, so a
/// field Java left `null` takes its default when read.
pub fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn error(&self, what: impl Into<String>) -> JsonError {
        let at = self.at.min(self.s.len());
        let before = &self.s[..at];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = at - before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
        JsonError { what: what.into(), at, line, column }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r' | 0x0C) = self.peek() {
            self.at += 1;
        }
    }

    fn expect(&mut self, b: u8) -> Result<(), JsonError> {
        if self.peek() == Some(b) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.error(format!("expected '{}'", b as char)))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        if depth > MAX_DEPTH {
            return Err(self.error(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(q @ (b'"' | b'\'')) => Ok(Value::String(self.string(q)?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(_) => Err(self.error("expected a JSON value")),
            None => Err(self.error("unexpected end of text")),
        }
    }

    fn literal(&mut self, word: &str, v: Value) -> Result<Value, JsonError> {
        if self.s[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(v)
        } else {
            Err(self.error("expected a JSON value"))
        }
    }

    /// An object key: a quoted string as itself; anything else as its JSON text.
    fn key(&mut self, depth: usize) -> Result<String, JsonError> {
        let start = self.at;
        match self.peek() {
            Some(q @ (b'"' | b'\'')) => return self.string(q),
            Some(b'{' | b'[') => {
                self.value(depth + 1)?;
            }
            Some(b) if is_bare_key_byte(b) => {
                while self.peek().is_some_and(is_bare_key_byte) {
                    self.at += 1;
                }
            }
            Some(_) => return Err(self.error("expected an object key")),
            None => return Err(self.error("unexpected end of text in an object")),
        }
        std::str::from_utf8(&self.s[start..self.at])
            .map(str::to_owned)
            .map_err(|_| JsonError { at: start, ..self.error("an object key that is not UTF-8") })
    }

    fn object(&mut self, depth: usize) -> Result<Value, JsonError> {
        self.expect(b'{')?;
        let mut map = Map::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Value::Object(map));
        }
        loop {
            self.skip_ws();
            let key = self.key(depth)?;
            self.skip_ws();
            self.expect(b':')?;
            self.skip_ws();
            let v = self.value(depth + 1)?;
            // Duplicate keys: the last wins, as fastjson's map puts do.
            map.insert(key, v);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Value::Object(map));
                }
                Some(_) => return Err(self.error("expected ',' or '}' in an object")),
                None => return Err(self.error("unexpected end of text in an object")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, JsonError> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Value::Array(items));
                }
                Some(_) => return Err(self.error("expected ',' or ']' in an array")),
                None => return Err(self.error("unexpected end of text in an array")),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let digits = self.s.get(self.at..self.at + 4).ok_or_else(|| self.error("truncated \\u escape"))?;
        let text = std::str::from_utf8(digits).map_err(|_| self.error("bad \\u escape"))?;
        let v = u32::from_str_radix(text, 16).map_err(|_| self.error("bad \\u escape"))?;
        self.at += 4;
        Ok(v)
    }

    fn string(&mut self, quote: u8) -> Result<String, JsonError> {
        self.at += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(b) = self.peek() else {
                return Err(self.error("unterminated string"));
            };
            self.at += 1;
            match b {
                _ if b == quote => break,
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return Err(self.error("unterminated string"));
                    };
                    self.at += 1;
                    match e {
                        b'"' => out.push(b'"'),
                        b'\'' => out.push(b'\''),
                        b'\\' => out.push(b'\\'),
                        b'/' => out.push(b'/'),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0C),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let c = if (0xD800..0xDC00).contains(&hi) {
                                // A surrogate pair; a lone surrogate becomes U+FFFD, as Java's
                                // String-to-UTF-8 encoding writes it.
                                if self.s[self.at..].starts_with(b"\\u") {
                                    let save = self.at;
                                    self.at += 2;
                                    let lo = self.hex4()?;
                                    if (0xDC00..0xE000).contains(&lo) {
                                        char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                                    } else {
                                        self.at = save;
                                        None
                                    }
                                } else {
                                    None
                                }
                            } else {
                                char::from_u32(hi)
                            };
                            let c = c.unwrap_or('\u{FFFD}');
                            let mut buf = [0; 4];
                            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return Err(self.error("bad escape in a string")),
                    }
                }
                _ => out.push(b),
            }
        }
        String::from_utf8(out).map_err(|_| self.error("a string that is not UTF-8"))
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let mut float = false;
        while let Some(b) = self.peek() {
            match b {
                b'0'..=b'9' => {}
                b'.' | b'e' | b'E' | b'+' => float = true,
                b'-' if float => {}
                _ => break,
            }
            self.at += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.at]).map_err(|_| self.error("bad number"))?;
        if !float {
            if let Ok(v) = text.parse::<i64>() {
                return Ok(Value::Number(v.into()));
            }
            if let Ok(v) = text.parse::<u64>() {
                return Ok(Value::Number(v.into()));
            }
        }
        let v: f64 = text.parse().map_err(|_| self.error(format!("bad number {text:?}")))?;
        Number::from_f64(v).map(Value::Number).ok_or_else(|| self.error(format!("bad number {text:?}")))
    }
}

/// A byte of a bare (unquoted, non-container) object key.
fn is_bare_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'-' | b'.' | b'+')
}

/// Writes `v` as standard JSON in fastjson's pretty layout: one member per line, indented by
/// tabs, `"key":value` without spaces, `{}` and `[]` for empty containers. Object members come
/// in the map's order (sorted by key).
pub fn to_pretty(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v, 0);
    out
}

fn indent(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth {
        out.push('\t');
    }
}

fn write_value(out: &mut String, v: &Value, depth: usize) {
    match v {
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(out, depth + 1);
                out.push_str(&serde_json::to_string(k).expect("a string serializes"));
                out.push(':');
                write_value(out, v, depth + 1);
            }
            indent(out, depth);
            out.push('}');
        }
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(out, depth + 1);
                write_value(out, v, depth + 1);
            }
            indent(out, depth);
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn p(text: &str) -> Result<Value, JsonError> {
        parse(text.as_bytes())
    }

    #[test]
    fn bare_integer_keys_read_as_strings() {
        assert_eq!(
            p(r#"{"brokerAddrs":{0:"a:1",1:"b:2"}}"#).unwrap(),
            json!({"brokerAddrs": {"0": "a:1", "1": "b:2"}})
        );
        assert_eq!(p(r#"{ -1 : "x" }"#).unwrap(), json!({"-1": "x"}));
    }

    #[test]
    fn object_keys_read_as_their_json_text() {
        assert_eq!(
            p(r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5}}"#).unwrap(),
            json!({"offsetTable": {r#"{"brokerName":"b","queueId":0,"topic":"T"}"#: 5}})
        );
        assert_eq!(p(r#"{[1,2]:true}"#).unwrap(), json!({"[1,2]": true}));
    }

    #[test]
    fn strings_that_look_like_keys_are_left_alone() {
        assert_eq!(p(r#"{"a":"{0:1}","b":[{2:"x"}]}"#).unwrap(), json!({"a": "{0:1}", "b": [{"2": "x"}]}));
    }

    #[test]
    fn reads_fastjson_4_integer_keyed_maps_half_on_one_line() {
        let text =
            "{\n\t\"offsetTable\":{\n\t\t\"TopicA@GroupA\":{0:12,1:4,2:0,3:1234567890123\n\t\t}\n\t}\n}";
        let v = p(text).unwrap();
        assert_eq!(
            v,
            json!({"offsetTable": {"TopicA@GroupA": {"0": 12, "1": 4, "2": 0, "3": 1234567890123i64}}})
        );
    }

    #[test]
    fn reads_fastjson_5_pretty_output_with_bare_keys_and_tabs() {
        let text = "{\n\t\"dataVersion\":{\n\t\t\"counter\":0,\n\t\t\"timestamp\":1796195507973\n\t},\n\t\"offsetTable\":{\n\t\t1:10,\n\t\t18:0\n\t}\n}";
        let v = p(text).unwrap();
        assert_eq!(v["offsetTable"]["18"], json!(0));
        assert_eq!(v["dataVersion"]["timestamp"], json!(1796195507973i64));
    }

    #[test]
    fn reads_single_quotes_escapes_and_surrogate_pairs() {
        let v = p(r#"{'a':'it\'s', "b":"\u00e9\ud83d\ude00\n", "c":[true,false,null,-1.5e3]}"#).unwrap();
        assert_eq!(v, json!({"a": "it's", "b": "é😀\n", "c": [true, false, null, -1500.0]}));
    }

    #[test]
    fn a_lone_surrogate_becomes_the_replacement_character() {
        assert_eq!(p(r#""\ud800x""#).unwrap(), json!("\u{FFFD}x"));
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        assert_eq!(parse(b"\xEF\xBB\xBF{\"a\":1}").unwrap(), json!({"a": 1}));
    }

    #[test]
    fn rejects_truncated_and_trailing_text_with_the_position() {
        let e = p("{\n\t\"a\":{0:1,").unwrap_err();
        assert_eq!((e.line, e.what.as_str()), (2, "unexpected end of text in an object"));
        for bad in ["", "{", "{0", "{0:", r#"{"a":1"#, "[1,", r#""abc"#, "{}x", "{:1}", "[,]", "\"\\", "{} x"]
        {
            assert!(p(bad).is_err(), "{bad:?}");
        }
        assert!(p("{\"a\" 1}").is_err());
        assert!(p("[1,]").is_err());
        assert!(parse(b"{\"\xff\":1}").is_err(), "a key that is not UTF-8");
    }

    #[test]
    fn refuses_nesting_deeper_than_the_limit() {
        let deep = "[".repeat(MAX_DEPTH + 2) + &"]".repeat(MAX_DEPTH + 2);
        assert!(p(&deep).unwrap_err().what.contains("nested deeper"));
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(p(&ok).is_ok());
        let deep_key = "{".to_string() + &"[".repeat(MAX_DEPTH + 2) + &"]".repeat(MAX_DEPTH + 2) + ":1}";
        assert!(p(&deep_key).is_err(), "a key nests too");
    }

    #[test]
    fn keeps_64_bit_integers_exact() {
        assert_eq!(p("9223372036854775807").unwrap(), json!(i64::MAX));
        assert_eq!(p("-9223372036854775808").unwrap(), json!(i64::MIN));
        assert_eq!(p("18446744073709551615").unwrap(), json!(u64::MAX));
    }

    #[test]
    fn nulls_are_stripped_from_objects_at_every_depth() {
        let mut v = json!({"a": null, "b": [{"c": null, "d": 1}, null], "e": {"f": null}});
        strip_nulls(&mut v);
        assert_eq!(v, json!({"b": [{"d": 1}, null], "e": {}}));
    }

    #[test]
    fn writes_fastjson_pretty_layout() {
        let v = json!({"b": {}, "a": [1, "x"], "c": {"0": 5}});
        assert_eq!(
            to_pretty(&v),
            "{\n\t\"a\":[\n\t\t1,\n\t\t\"x\"\n\t],\n\t\"b\":{},\n\t\"c\":{\n\t\t\"0\":5\n\t}\n}"
        );
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|v| json!(v)),
            ".{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z0-9%@_]{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn what_the_writer_writes_the_reader_reads_back(v in arb_value()) {
            prop_assert_eq!(parse(to_pretty(&v).as_bytes()).unwrap(), v.clone());
            prop_assert_eq!(parse(v.to_string().as_bytes()).unwrap(), v);
        }

        #[test]
        fn the_reader_never_panics_on_arbitrary_text(s in "\\PC{0,64}") {
            let _ = parse(s.as_bytes());
        }

        #[test]
        fn the_reader_never_panics_on_arbitrary_bytes(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse(&b);
        }
    }
}
