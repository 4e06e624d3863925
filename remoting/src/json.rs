//! The JSON header: a `RemotingCommand` as fastjson writes and reads it.
//!
//! **Writing** follows fastjson's output for Java's `RemotingCommand`: fields in alphabetical
//! order (`code`, `extFields`, `flag`, `language`, `opaque`, `remark`,
//! `serializeTypeCurrentRPC`, `version`), `language` by name, absent fields left out (Java leaves
//! out `null`s; an empty extFields is left out too, which every reader takes as no fields).
//!
//! **Reading** accepts what fastjson accepts from Java, Go and other clients, as checked against
//! the real fastjson of rocketmq-client 4.9.7 and 5.5.0 (`tests/java_vectors.rs`): fields in any
//! order, unknown fields ignored, a repeated field's last value, `null` or a missing field as
//! Java's default (code, version, opaque and flag 0, language `JAVA`), numbers written as strings
//! (`"code":"10"`) or with a fraction (`10.0`, truncated), the language by name in any case or by
//! its number, and extFields values that are numbers, booleans or objects (as their JSON text) or
//! `null` (as absent). `serializeTypeCurrentRPC` is ignored: the frame's type byte rules, as in
//! Java. Java reads a language name it does not know as `null`; this crate reads it as
//! [`LanguageCode::OTHER`]. Text that is not UTF-8 is an error (as in fastjson 1.2.83; 1.2.69
//! replaced it with U+FFFD).

use std::fmt;

use bytes::BytesMut;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use crate::code::LanguageCode;
use crate::command::RemotingCommand;
use crate::error::DecodeError;
use crate::header::ExtFields;

/// Appends `cmd`'s JSON header to `dst`.
pub(crate) fn encode_header(cmd: &RemotingCommand, dst: &mut BytesMut) {
    use std::fmt::Write as _;
    // Writing into a `BytesMut` cannot fail.
    dst.extend_from_slice(b"{\"code\":");
    let _ = write!(dst, "{}", cmd.code);
    if !cmd.ext_fields.is_empty() {
        dst.extend_from_slice(b",\"extFields\":{");
        for (i, (key, value)) in cmd.ext_fields.iter().enumerate() {
            if i > 0 {
                dst.extend_from_slice(b",");
            }
            json_string(dst, key);
            dst.extend_from_slice(b":");
            json_string(dst, value);
        }
        dst.extend_from_slice(b"}");
    }
    dst.extend_from_slice(b",\"flag\":");
    let _ = write!(dst, "{}", cmd.flag);
    dst.extend_from_slice(b",\"language\":");
    match cmd.language.name() {
        Some(name) => {
            dst.extend_from_slice(b"\"");
            dst.extend_from_slice(name.as_bytes());
            dst.extend_from_slice(b"\"");
        }
        // fastjson reads an enum from its ordinal, which is the code for every LanguageCode.
        None => {
            let _ = write!(dst, "{}", cmd.language.0);
        }
    }
    dst.extend_from_slice(b",\"opaque\":");
    let _ = write!(dst, "{}", cmd.opaque);
    if let Some(remark) = &cmd.remark {
        dst.extend_from_slice(b",\"remark\":");
        json_string(dst, remark);
    }
    dst.extend_from_slice(b",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
    let _ = write!(dst, "{}", cmd.version);
    dst.extend_from_slice(b"}");
}

/// Appends `s` as a JSON string, escaped as serde_json escapes it: `"`, `\\`, and the control
/// characters (`\b`, `\f`, `\n`, `\r`, `\t`, else `\u00xx`).
fn json_string(dst: &mut BytesMut, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    dst.reserve(s.len() + 2);
    dst.extend_from_slice(b"\"");
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0C => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x00..=0x1F => &[b'\\', b'u', b'0', b'0', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xF)]],
            _ => continue,
        };
        dst.extend_from_slice(&bytes[start..i]);
        dst.extend_from_slice(escape);
        start = i + 1;
    }
    dst.extend_from_slice(&bytes[start..]);
    dst.extend_from_slice(b"\"");
}

/// Reads a JSON header into a command (without body; JSON serialize type).
pub(crate) fn decode_header(header: &[u8]) -> Result<RemotingCommand, DecodeError> {
    let h: Header =
        serde_json::from_slice(header).map_err(|e| DecodeError::JsonHeader { reason: e.to_string() })?;
    let mut cmd = RemotingCommand::request(h.code.into());
    cmd.language = h.language;
    cmd.version = h.version;
    cmd.opaque = h.opaque;
    cmd.flag = h.flag;
    cmd.remark = h.remark;
    cmd.ext_fields = h.ext_fields;
    Ok(cmd)
}

struct Header {
    code: i32,
    language: LanguageCode,
    version: i32,
    opaque: i32,
    flag: i32,
    remark: Option<String>,
    ext_fields: ExtFields,
}

impl<'de> serde::Deserialize<'de> for Header {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(HeaderVisitor)
    }
}

enum Key {
    Code,
    Language,
    Version,
    Opaque,
    Flag,
    Remark,
    ExtFields,
    Other,
}

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(match v {
                    "code" => Key::Code,
                    "language" => Key::Language,
                    "version" => Key::Version,
                    "opaque" => Key::Opaque,
                    "flag" => Key::Flag,
                    "remark" => Key::Remark,
                    "extFields" => Key::ExtFields,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

struct HeaderVisitor;

impl<'de> Visitor<'de> for HeaderVisitor {
    type Value = Header;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object of RemotingCommand fields")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Header, A::Error> {
        let mut h = Header {
            code: 0,
            language: LanguageCode::JAVA,
            version: 0,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: ExtFields::new(),
        };
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Code => h.code = map.next_value_seed(JavaInt("code"))?.unwrap_or(0),
                Key::Version => h.version = map.next_value_seed(JavaInt("version"))?.unwrap_or(0),
                Key::Opaque => h.opaque = map.next_value_seed(JavaInt("opaque"))?.unwrap_or(0),
                Key::Flag => h.flag = map.next_value_seed(JavaInt("flag"))?.unwrap_or(0),
                Key::Language => h.language = map.next_value_seed(Language)?,
                Key::Remark => h.remark = map.next_value_seed(Remark)?,
                Key::ExtFields => h.ext_fields = map.next_value_seed(ExtFieldsSeed)?,
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(h)
    }
}

/// A Java `int` field as fastjson reads it: a number (a fraction truncated), a string of one,
/// or `null` (`None`).
struct JavaInt(&'static str);

impl<'de> DeserializeSeed<'de> for JavaInt {
    type Value = Option<i32>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<i32>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for JavaInt {
    type Value = Option<i32>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` as a Java int", self.0)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        i32::try_from(v)
            .map(Some)
            .map_err(|_| E::custom(format_args!("`{}` {v} is out of Java's int range", self.0)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        i32::try_from(v)
            .map(Some)
            .map_err(|_| E::custom(format_args!("`{}` {v} is out of Java's int range", self.0)))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        if v.is_finite() && v.trunc() >= f64::from(i32::MIN) && v.trunc() <= f64::from(i32::MAX) {
            Ok(Some(v.trunc() as i32))
        } else {
            Err(E::custom(format_args!("`{}` {v} is out of Java's int range", self.0)))
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        v.parse::<i32>()
            .map(Some)
            .map_err(|_| E::custom(format_args!("`{}` {v:?} is not a Java int", self.0)))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

struct Language;

impl<'de> DeserializeSeed<'de> for Language {
    type Value = LanguageCode;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<LanguageCode, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Language {
    type Value = LanguageCode;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`language` as a LanguageCode name or number")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<LanguageCode, E> {
        Ok(LanguageCode::KNOWN
            .iter()
            .find(|(_, name)| name.eq_ignore_ascii_case(v))
            .map_or(LanguageCode::OTHER, |(code, _)| *code))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<LanguageCode, E> {
        u8::try_from(v)
            .map(LanguageCode)
            .map_err(|_| E::custom(format_args!("`language` {v} is not a language code")))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<LanguageCode, E> {
        u8::try_from(v)
            .map(LanguageCode)
            .map_err(|_| E::custom(format_args!("`language` {v} is not a language code")))
    }

    fn visit_unit<E: de::Error>(self) -> Result<LanguageCode, E> {
        Ok(LanguageCode::JAVA)
    }
}

struct Remark;

impl<'de> DeserializeSeed<'de> for Remark {
    type Value = Option<String>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Remark {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`remark` as a string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

struct ExtFieldsSeed;

impl<'de> DeserializeSeed<'de> for ExtFieldsSeed {
    type Value = ExtFields;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<ExtFields, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ExtFieldsSeed {
    type Value = ExtFields;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`extFields` as an object")
    }

    fn visit_unit<E: de::Error>(self) -> Result<ExtFields, E> {
        Ok(ExtFields::new())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ExtFields, A::Error> {
        let mut out = ExtFields::new();
        while let Some(key) = map.next_key::<String>()? {
            // fastjson turns any value into its text; `null` is Java's absent field.
            match map.next_value_seed(ExtValue)? {
                None => {
                    out.remove(&key);
                }
                Some(value) => {
                    out.insert(key, value);
                }
            }
        }
        Ok(out)
    }
}

/// One extFields value as its text: a string as it is, a number, boolean, object or array as
/// its JSON text (as `serde_json::Value`'s `to_string` writes it), `null` as `None`. Strings
/// and numbers, nearly every value, are read without building a `Value`.
struct ExtValue;

impl<'de> DeserializeSeed<'de> for ExtValue {
    type Value = Option<String>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ExtValue {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an extFields value")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(serde_json::Value::from(v).to_string()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(serde_json::Value::from(v).to_string()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(serde_json::Value::from(v).to_string()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        use serde::Deserialize as _;
        let v = serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(Some(v.to_string()))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        use serde::Deserialize as _;
        let v = serde_json::Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
        Ok(Some(v.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(json: &str) -> Result<RemotingCommand, DecodeError> {
        decode_header(json.as_bytes())
    }

    #[test]
    fn writes_fields_in_fastjson_s_alphabetical_order() {
        let cmd = RemotingCommand::request(crate::RequestCode::GET_ROUTEINFO_BY_TOPIC)
            .with_opaque(1)
            .with_version(401)
            .with_ext_field("topic", "TBW102");
        let mut out = BytesMut::new();
        encode_header(&cmd, &mut out);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"code":105,"extFields":{"topic":"TBW102"},"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":401}"#
        );
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        for text in ["plain", "a \"q\" \\ b", "\u{0}\u{1}\u{8}\u{c}\n\r\t\u{1f}\u{7f}", "é ✓ \u{2028}", ""]
        {
            let mut out = BytesMut::new();
            json_string(&mut out, text);
            assert_eq!(&out[..], serde_json::to_vec(text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn ext_field_values_of_every_json_kind_read_as_their_text() {
        let cmd = decode(
            r#"{"code":10,"extFields":{"s":"x","i":-3,"u":7,"f":1.5,"b":true,"n":null,"o":{"k":[1,"v"]},"a":[true]}}"#,
        )
        .unwrap();
        let e = &cmd.ext_fields;
        assert_eq!(
            (e["s"].as_str(), e["i"].as_str(), e["u"].as_str(), e["f"].as_str()),
            ("x", "-3", "7", "1.5")
        );
        assert_eq!(
            (e["b"].as_str(), e["o"].as_str(), e["a"].as_str()),
            ("true", r#"{"k":[1,"v"]}"#, "[true]")
        );
        assert!(!e.contains_key("n"), "null is an absent field");
    }

    #[test]
    fn escapes_text_as_json() {
        let cmd = RemotingCommand::response(crate::ResponseCode::SYSTEM_ERROR)
            .with_remark("a \"quoted\"\nline \u{1}")
            .with_ext_field("k\"", "v\\");
        let mut out = BytesMut::new();
        encode_header(&cmd, &mut out);
        let back = decode_header(&out).unwrap();
        assert_eq!(back.remark, cmd.remark);
        assert_eq!(back.ext_fields, cmd.ext_fields);
    }

    #[test]
    fn reads_the_go_client_s_header() {
        // rocketmq-client-go writes every field, an empty remark and a possibly null extFields.
        let cmd = decode(
            r#"{"code":105,"language":"GO","version":317,"opaque":3,"flag":0,"remark":"","extFields":null}"#,
        )
        .unwrap();
        assert_eq!(cmd.code, 105);
        assert_eq!(cmd.language, LanguageCode::GO);
        assert_eq!(cmd.version, 317);
        assert_eq!(cmd.opaque, 3);
        assert_eq!(cmd.remark.as_deref(), Some(""));
        assert!(cmd.ext_fields.is_empty());
    }

    #[test]
    fn missing_and_null_fields_take_java_s_defaults() {
        let cmd = decode("{}").unwrap();
        assert_eq!((cmd.code, cmd.version, cmd.opaque, cmd.flag), (0, 0, 0, 0));
        assert_eq!(cmd.language, LanguageCode::JAVA);
        let cmd = decode(r#"{"code":null,"language":null,"remark":null}"#).unwrap();
        assert_eq!(cmd.code, 0);
        assert_eq!(cmd.language, LanguageCode::JAVA);
        assert_eq!(cmd.remark, None);
    }

    #[test]
    fn numbers_as_strings_and_fractions_are_read_as_fastjson_does() {
        let cmd = decode(r#"{"code":"10","version":"317","opaque":"5","flag":1.0}"#).unwrap();
        assert_eq!((cmd.code, cmd.version, cmd.opaque, cmd.flag), (10, 317, 5, 1));
        assert_eq!(decode(r#"{"code":10.9}"#).unwrap().code, 10);
        assert_eq!(decode(r#"{"code":-2147483648}"#).unwrap().code, i32::MIN);
    }

    #[test]
    fn out_of_range_or_non_numeric_ints_are_errors_naming_the_field() {
        for (json, field) in [
            (r#"{"code":4294967296}"#, "code"),
            (r#"{"opaque":"x"}"#, "opaque"),
            (r#"{"flag":true}"#, "flag"),
            (r#"{"version":[1]}"#, "version"),
            (r#"{"code":1e300}"#, "code"),
        ] {
            match decode(json) {
                Err(DecodeError::JsonHeader { reason }) => {
                    assert!(reason.contains(field), "{json}: {reason}")
                }
                other => panic!("{json}: {other:?}"),
            }
        }
    }

    #[test]
    fn languages_by_name_in_any_case_or_by_number() {
        assert_eq!(decode(r#"{"language":"go"}"#).unwrap().language, LanguageCode::GO);
        assert_eq!(decode(r#"{"language":12}"#).unwrap().language, LanguageCode::RUST);
        assert_eq!(decode(r#"{"language":200}"#).unwrap().language, LanguageCode(200));
        assert_eq!(decode(r#"{"language":"KLINGON"}"#).unwrap().language, LanguageCode::OTHER);
        assert!(decode(r#"{"language":300}"#).is_err());
    }

    #[test]
    fn ext_field_values_become_text_and_null_is_absent() {
        let cmd = decode(r#"{"extFields":{"a":1,"b":true,"c":null,"d":1.5,"e":{"x":1},"f":"s"}}"#).unwrap();
        let fields: Vec<(&str, &str)> =
            cmd.ext_fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(fields, [("a", "1"), ("b", "true"), ("d", "1.5"), ("e", r#"{"x":1}"#), ("f", "s")]);
    }

    #[test]
    fn a_repeated_field_takes_its_last_value_and_unknown_fields_are_ignored() {
        let cmd = decode(
            r#"{"code":10,"code":11,"zzz":[1,{"a":[null]}],"suspended":true,"extFields":{"k":"1","k":"2"},"serializeTypeCurrentRPC":"ROCKETMQ"}"#,
        )
        .unwrap();
        assert_eq!(cmd.code, 11);
        assert_eq!(cmd.ext_fields.get("k").map(String::as_str), Some("2"));
    }

    #[test]
    fn anything_but_one_json_object_is_an_error() {
        for json in
            ["", "null", "[]", "1", r#""x""#, r#"{"code":10} x"#, r#"{"code":10"#, "{\"remark\":\"\u{0}\"}"]
        {
            assert!(matches!(decode(json), Err(DecodeError::JsonHeader { .. })), "{json:?}");
        }
        assert!(matches!(decode_header(b"{\"remark\":\"\xff\"}"), Err(DecodeError::JsonHeader { .. })));
    }

    #[test]
    fn deep_nesting_is_no_stack_overflow() {
        // An ignored field is skipped without recursion; an extFields value is refused past
        // serde_json's depth limit.
        let deep = format!("{{\"code\":3,\"x\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(decode(&deep).unwrap().code, 3);
        let deep = format!("{{\"extFields\":{{\"a\":{}{}}}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(decode(&deep), Err(DecodeError::JsonHeader { .. })));
    }
}
