//! fastjson's non-standard JSON, made standard for serde_json.
//!
//! fastjson writes a map whose keys are not strings with bare keys: a `HashMap<Long, String>`
//! as `{0:"10.0.0.1:10911"}` (every `TopicRouteData` a NameServer sends a client older than
//! 4.9.4, and every Java `JSON.toJSONString` of such a map), and a map keyed by an object, such
//! as `HashMap<MessageQueue, Long>`, with the object's JSON as the key. [`standardize`] quotes
//! every such key (its JSON text becomes the key's string) and leaves everything else
//! byte for byte; then a map with integer keys deserializes with serde_json as usual.

use std::borrow::Cow;

/// How deep containers may nest (serde_json's own limit is 128).
const MAX_DEPTH: usize = 128;

/// `json` with every bare (non-string) object key turned into a JSON string, or why it is not
/// JSON fastjson could have written. Borrows when nothing needed quoting.
pub fn standardize(json: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    let mut s = Scanner { src: json, pos: 0, out: None, depth: 0 };
    s.ws();
    s.value()?;
    s.ws();
    if s.pos != json.len() {
        return Err(format!("trailing characters at byte {}", s.pos));
    }
    Ok(match s.out {
        Some(out) => Cow::Owned(out),
        None => Cow::Borrowed(json),
    })
}

struct Scanner<'a> {
    src: &'a [u8],
    pos: usize,
    /// The rewritten text, once a key needed quoting: everything before `pos` is in it.
    out: Option<Vec<u8>>,
    depth: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.pos))
    }

    /// Copies `src[from..self.pos]` to the output, if one exists.
    fn emit(&mut self, from: usize) {
        if let Some(out) = &mut self.out {
            out.extend_from_slice(&self.src[from..self.pos]);
        }
    }

    fn ws(&mut self) {
        let from = self.pos;
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
        self.emit(from);
    }

    fn byte(&mut self, b: u8) -> Result<(), String> {
        if self.peek() != Some(b) {
            return self.err(&format!("expected '{}'", b as char));
        }
        let from = self.pos;
        self.pos += 1;
        self.emit(from);
        Ok(())
    }

    /// Skips one value, copying it; returns nothing, since only keys are rewritten.
    fn value(&mut self) -> Result<(), String> {
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => {
                let from = self.pos;
                self.string()?;
                self.emit(from);
                Ok(())
            }
            Some(_) => {
                let from = self.pos;
                self.scalar()?;
                self.emit(from);
                Ok(())
            }
            None => self.err("expected a value"),
        }
    }

    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("nested too deep");
        }
        Ok(())
    }

    fn object(&mut self) -> Result<(), String> {
        self.enter()?;
        self.byte(b'{')?;
        self.ws();
        if self.peek() == Some(b'}') {
            self.byte(b'}')?;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.key()?;
            self.ws();
            self.byte(b':')?;
            self.ws();
            self.value()?;
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.byte(b',')?;
                    self.ws();
                }
                Some(b'}') => {
                    self.byte(b'}')?;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return self.err("expected ',' or '}'"),
            }
        }
    }

    fn array(&mut self) -> Result<(), String> {
        self.enter()?;
        self.byte(b'[')?;
        self.ws();
        if self.peek() == Some(b']') {
            self.byte(b']')?;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.value()?;
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.byte(b',')?;
                    self.ws();
                }
                Some(b']') => {
                    self.byte(b']')?;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return self.err("expected ',' or ']'"),
            }
        }
    }

    /// An object key: a string stays; anything else becomes a string of its JSON text.
    fn key(&mut self) -> Result<(), String> {
        let from = self.pos;
        if self.peek() == Some(b'"') {
            self.string()?;
            self.emit(from);
            return Ok(());
        }
        // A bare key: scan it without copying, then write it quoted.
        let saved = self.out.take();
        match self.peek() {
            Some(b'{') => self.object()?,
            Some(b'[') => self.array()?,
            Some(_) => self.scalar()?,
            None => return self.err("expected a key"),
        }
        let raw = std::str::from_utf8(&self.src[from..self.pos])
            .map_err(|_| format!("key at byte {from} is not UTF-8"))?;
        let mut out = saved.unwrap_or_else(|| self.src[..from].to_vec());
        out.extend_from_slice(&serde_json::to_vec(raw).expect("a string serializes"));
        self.out = Some(out);
        Ok(())
    }

    /// A string, escapes included; the caller copies it.
    fn string(&mut self) -> Result<(), String> {
        self.pos += 1; // the opening quote
        loop {
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => self.pos += 2,
                Some(_) => self.pos += 1,
                None => return self.err("unterminated string"),
            }
        }
    }

    /// A number or literal; the caller copies it. Its validity is left to serde_json.
    fn scalar(&mut self) -> Result<(), String> {
        let from = self.pos;
        while let Some(b) = self.peek() {
            if matches!(b, b',' | b':' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r' | b'{' | b'[' | b'"') {
                break;
            }
            self.pos += 1;
        }
        if self.pos == from {
            return self.err("expected a value");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn std(json: &str) -> String {
        String::from_utf8(standardize(json.as_bytes()).unwrap().into_owned()).unwrap()
    }

    #[test]
    fn bare_integer_keys_are_quoted() {
        assert_eq!(std(r#"{"brokerAddrs":{0:"a:1",1:"b:2"}}"#), r#"{"brokerAddrs":{"0":"a:1","1":"b:2"}}"#);
        assert_eq!(std(r#"{ -1 : "x" }"#), r#"{ "-1" : "x" }"#);
    }

    #[test]
    fn object_keys_become_their_json_text() {
        assert_eq!(
            std(r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5}}"#),
            r#"{"offsetTable":{"{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"T\"}":5}}"#
        );
    }

    #[test]
    fn standard_json_is_borrowed_unchanged() {
        let json = br#"{"a":[1,2,{"b":"c\"}d"}],"e":null, "f" : true}"#;
        assert!(matches!(standardize(json), Ok(Cow::Borrowed(_))));
    }

    #[test]
    fn strings_that_look_like_keys_are_left_alone() {
        assert_eq!(std(r#"{"a":"{0:1}","b":[{2:"x"}]}"#), r#"{"a":"{0:1}","b":[{"2":"x"}]}"#);
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        for bad in ["", "{", "{0", "{0:", r#"{"a":1"#, "[1,", r#""abc"#, "{}x", "{:1}", "[,]", "\"\\"] {
            assert!(standardize(bad.as_bytes()).is_err(), "{bad:?}");
        }
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(standardize(deep.as_bytes()).is_err());
    }
}
