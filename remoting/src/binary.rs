//! The ROCKETMQ header: Java's `RocketMQSerializable`, unchanged from 4.9.x to 5.x.
//!
//! Big-endian: `i16 code`, `u8 language`, `i16 version`, `i32 opaque`, `i32 flag`,
//! `i32 remark length` and the remark, `i32 extFields length` and the entries, each
//! `i16 key length`, key, `i32 value length`, value. Text is UTF-8.
//!
//! Java reads a zero-length remark, key or value as `null`, so an empty remark reads as none
//! and an entry with an empty key or value as absent (a header field Java would see as missing);
//! the writer leaves such entries out, since no reader could tell them from absent. Code and
//! version are 16-bit: Java truncates larger ones silently, this writer refuses them
//! ([`EncodeError::CodeOutOfRange`]). The reader is stricter than Java where Java misreads:
//! bytes left inside the header after the extFields (Java then reads them as the start of the
//! body) and text that is not UTF-8 (Java substitutes U+FFFD) are errors.

use bytes::{BufMut, BytesMut};

use crate::code::LanguageCode;
use crate::command::RemotingCommand;
use crate::error::{DecodeError, EncodeError};
use crate::header::ExtFields;

/// Appends `cmd`'s ROCKETMQ header to `dst`; on error, `dst` may hold a partial header (the
/// caller truncates).
pub(crate) fn encode_header(cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<(), EncodeError> {
    let code = i16::try_from(cmd.code).map_err(|_| EncodeError::CodeOutOfRange { code: cmd.code })?;
    let version =
        i16::try_from(cmd.version).map_err(|_| EncodeError::VersionOutOfRange { version: cmd.version })?;
    dst.put_i16(code);
    dst.put_u8(cmd.language.0);
    dst.put_i16(version);
    dst.put_i32(cmd.opaque);
    dst.put_i32(cmd.flag);
    let remark = cmd.remark.as_deref().unwrap_or("");
    put_len(dst, remark.len())?;
    dst.extend_from_slice(remark.as_bytes());
    let ext_len_at = dst.len();
    dst.put_i32(0);
    for (key, value) in &cmd.ext_fields {
        if key.is_empty() || value.is_empty() {
            continue;
        }
        let key_len = i16::try_from(key.len()).map_err(|_| EncodeError::KeyTooLong { len: key.len() })?;
        dst.put_i16(key_len);
        dst.extend_from_slice(key.as_bytes());
        put_len(dst, value.len())?;
        dst.extend_from_slice(value.as_bytes());
    }
    let ext_len = dst.len() - ext_len_at - 4;
    let ext_len = i32::try_from(ext_len)
        .map_err(|_| EncodeError::HeaderTooLarge { len: dst.len(), max: crate::command::MAX_HEADER_LEN })?;
    dst[ext_len_at..ext_len_at + 4].copy_from_slice(&ext_len.to_be_bytes());
    Ok(())
}

fn put_len(dst: &mut BytesMut, len: usize) -> Result<(), EncodeError> {
    // Anything over i32 is over the 24-bit header length as well.
    let len = i32::try_from(len)
        .map_err(|_| EncodeError::HeaderTooLarge { len, max: crate::command::MAX_HEADER_LEN })?;
    dst.put_i32(len);
    Ok(())
}

/// A cursor over header bytes that names what it was reading when they ran out.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.rest.len() < n {
            return Err(DecodeError::BinaryHeaderTruncated {
                field,
                needed: n as u64,
                available: self.rest.len(),
            });
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        Ok(self.take(field, N)?.try_into().expect("take returned N bytes"))
    }

    fn i16(&mut self, field: &'static str) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }

    fn i32(&mut self, field: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }

    /// A length-prefixed field's bytes.
    fn bytes(&mut self, field: &'static str, len: i32) -> Result<&'a [u8], DecodeError> {
        let len =
            usize::try_from(len).map_err(|_| DecodeError::NegativeFieldLength { field, length: len })?;
        self.take(field, len)
    }
}

fn text(bytes: &[u8], field: impl FnOnce() -> String) -> Result<String, DecodeError> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(s.to_owned()),
        Err(_) => Err(DecodeError::InvalidUtf8 { field: field() }),
    }
}

/// Reads a ROCKETMQ header, which must fill `header` exactly, into a command (without body;
/// ROCKETMQ serialize type).
pub(crate) fn decode_header(header: &[u8]) -> Result<RemotingCommand, DecodeError> {
    let mut r = Reader { rest: header };
    let code = r.i16("code")?;
    let [language] = r.array::<1>("language")?;
    let version = r.i16("version")?;
    let opaque = r.i32("opaque")?;
    let flag = r.i32("flag")?;
    let remark_len = r.i32("remark length")?;
    let remark = r.bytes("remark", remark_len)?;
    let remark = if remark.is_empty() { None } else { Some(text(remark, || "remark".into())?) };
    let ext_len = r.i32("extFields length")?;
    let ext = r.bytes("extFields", ext_len)?;
    if !r.rest.is_empty() {
        return Err(DecodeError::BinaryHeaderTrailingBytes { extra: r.rest.len() });
    }
    let mut ext_fields = ExtFields::new();
    let mut e = Reader { rest: ext };
    while !e.rest.is_empty() {
        let key_len = e.i16("extFields key length")?;
        let key = e.bytes("extFields key", i32::from(key_len))?;
        let value_len = e.i32("extFields value length")?;
        let value = e.bytes("extFields value", value_len)?;
        let key = text(key, || "extFields key".into())?;
        let value = text(value, || format!("extFields value of {key:?}"))?;
        // Java reads an empty key or value as null: the entry is as good as absent.
        if key.is_empty() || value.is_empty() {
            ext_fields.remove(&key);
            continue;
        }
        ext_fields.insert(key, value);
    }
    let mut cmd = RemotingCommand::request(i32::from(code).into());
    cmd.language = LanguageCode(language);
    cmd.version = i32::from(version);
    cmd.opaque = opaque;
    cmd.flag = flag;
    cmd.remark = remark;
    cmd.ext_fields = ext_fields;
    cmd.serialize_type = crate::SerializeType::RocketMq;
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RequestCode, ResponseCode};

    /// The fixed part: code, language, version, opaque, flag, remark length, extFields length.
    const FIXED_LEN: usize = 2 + 1 + 2 + 4 + 4 + 4 + 4;

    fn header(code: i16, remark: &[u8], ext: &[u8]) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(&code.to_be_bytes());
        h.push(9);
        h.extend_from_slice(&317i16.to_be_bytes());
        h.extend_from_slice(&7i32.to_be_bytes());
        h.extend_from_slice(&2i32.to_be_bytes());
        h.extend_from_slice(&(remark.len() as i32).to_be_bytes());
        h.extend_from_slice(remark);
        h.extend_from_slice(&(ext.len() as i32).to_be_bytes());
        h.extend_from_slice(ext);
        h
    }

    fn entry(key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut e = (key.len() as i16).to_be_bytes().to_vec();
        e.extend_from_slice(key);
        e.extend_from_slice(&(value.len() as i32).to_be_bytes());
        e.extend_from_slice(value);
        e
    }

    #[test]
    fn reads_every_field_of_the_layout() {
        let ext = [entry(b"topic", b"T"), entry(b"queueId", b"3")].concat();
        let cmd = decode_header(&header(310, b"hi", &ext)).unwrap();
        assert_eq!(cmd.code, 310);
        assert_eq!(cmd.language, LanguageCode::GO);
        assert_eq!(cmd.version, 317);
        assert_eq!(cmd.opaque, 7);
        assert!(cmd.is_oneway());
        assert_eq!(cmd.remark.as_deref(), Some("hi"));
        assert_eq!(cmd.ext_fields.len(), 2);
        assert_eq!(cmd.ext_fields["queueId"], "3");
    }

    #[test]
    fn writes_the_layout_java_reads() {
        let cmd = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2)
            .with_opaque(7)
            .with_version(317)
            .with_language(LanguageCode::GO)
            .with_remark("hi")
            .with_ext_field("queueId", "3")
            .with_ext_field("topic", "T")
            .oneway();
        let mut out = BytesMut::new();
        encode_header(&cmd, &mut out).unwrap();
        let ext = [entry(b"queueId", b"3"), entry(b"topic", b"T")].concat();
        assert_eq!(&out[..], &header(310, b"hi", &ext)[..]);
    }

    #[test]
    fn codes_and_versions_are_sign_extended_16_bit() {
        let cmd = decode_header(&header(-1, b"", b"")).unwrap();
        assert_eq!(cmd.code, -1);
        let too_big = RemotingCommand::request(RequestCode::POP_MESSAGE);
        assert_eq!(
            encode_header(&too_big, &mut BytesMut::new()),
            Err(EncodeError::CodeOutOfRange { code: 200050 })
        );
        let too_big = RemotingCommand::response(ResponseCode::SUCCESS).with_version(40000);
        assert_eq!(
            encode_header(&too_big, &mut BytesMut::new()),
            Err(EncodeError::VersionOutOfRange { version: 40000 })
        );
        let negative = RemotingCommand::response(ResponseCode::RPC_TIME_OUT);
        let mut out = BytesMut::new();
        encode_header(&negative, &mut out).unwrap();
        assert_eq!(decode_header(&out).unwrap().code, -1006);
    }

    #[test]
    fn empty_text_is_java_s_null() {
        let ext = [entry(b"topic", b""), entry(b"", b"v"), entry(b"a", b"x")].concat();
        let cmd = decode_header(&header(10, b"", &ext)).unwrap();
        assert_eq!(cmd.remark, None);
        assert_eq!(cmd.ext_fields.keys().collect::<Vec<_>>(), ["a"]);
        // ... so the writer leaves such entries out.
        let cmd = RemotingCommand::request(RequestCode::SEND_MESSAGE).with_remark("").with_ext_field("k", "");
        let mut out = BytesMut::new();
        encode_header(&cmd, &mut out).unwrap();
        assert_eq!(out.len(), FIXED_LEN);
        let back = decode_header(&out).unwrap();
        assert_eq!(back.remark, None);
        assert!(back.ext_fields.is_empty());
    }

    #[test]
    fn a_repeated_key_takes_its_last_value() {
        let ext = [entry(b"k", b"1"), entry(b"k", b"2")].concat();
        assert_eq!(decode_header(&header(10, b"", &ext)).unwrap().ext_fields["k"], "2");
        // And a later empty value makes it absent, as Java's put(k, null) does.
        let ext = [entry(b"k", b"1"), entry(b"k", b"")].concat();
        assert!(decode_header(&header(10, b"", &ext)).unwrap().ext_fields.is_empty());
    }

    #[test]
    fn every_truncation_is_an_error_naming_the_field() {
        let ext = [entry(b"topic", b"TopicA")].concat();
        let full = header(10, b"remark", &ext);
        for cut in 0..full.len() {
            let e = decode_header(&full[..cut]).unwrap_err();
            assert!(matches!(e, DecodeError::BinaryHeaderTruncated { .. }), "cut at {cut}: {e:?}");
        }
        // An entry that runs past the extFields length, though not past the header.
        let mut h = header(10, b"", &entry(b"topic", b"TopicA"));
        let ext_len_at = FIXED_LEN - 4;
        h[ext_len_at..ext_len_at + 4].copy_from_slice(&8i32.to_be_bytes());
        let e = decode_header(&h).unwrap_err();
        assert!(matches!(e, DecodeError::BinaryHeaderTrailingBytes { .. }), "{e:?}");
        h.truncate(FIXED_LEN + 8);
        let e = decode_header(&h).unwrap_err();
        assert_eq!(
            e,
            DecodeError::BinaryHeaderTruncated { field: "extFields value length", needed: 4, available: 1 }
        );
    }

    #[test]
    fn negative_lengths_are_errors() {
        let mut h = header(10, b"", b"");
        h[13..17].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(decode_header(&h), Err(DecodeError::NegativeFieldLength { field: "remark", length: -1 }));
        let mut h = header(10, b"", b"");
        h[17..21].copy_from_slice(&i32::MIN.to_be_bytes());
        assert_eq!(
            decode_header(&h),
            Err(DecodeError::NegativeFieldLength { field: "extFields", length: i32::MIN })
        );
        let mut e = entry(b"k", b"v");
        e[0..2].copy_from_slice(&(-2i16).to_be_bytes());
        assert_eq!(
            decode_header(&header(10, b"", &e)),
            Err(DecodeError::NegativeFieldLength { field: "extFields key", length: -2 })
        );
    }

    #[test]
    fn bytes_after_the_ext_fields_are_an_error() {
        let mut h = header(10, b"", &entry(b"a", b"x"));
        h.extend_from_slice(&[0, 0]);
        assert_eq!(decode_header(&h), Err(DecodeError::BinaryHeaderTrailingBytes { extra: 2 }));
    }

    #[test]
    fn text_that_is_not_utf8_is_an_error_naming_the_field() {
        assert_eq!(
            decode_header(&header(10, b"\xff", b"")),
            Err(DecodeError::InvalidUtf8 { field: "remark".into() })
        );
        assert_eq!(
            decode_header(&header(10, b"", &entry(b"\xc3", b"v"))),
            Err(DecodeError::InvalidUtf8 { field: "extFields key".into() })
        );
        assert_eq!(
            decode_header(&header(10, b"", &entry(b"topic", b"\xe2\x82"))),
            Err(DecodeError::InvalidUtf8 { field: "extFields value of \"topic\"".into() })
        );
    }

    #[test]
    fn a_key_over_16_bits_is_refused() {
        let cmd = RemotingCommand::request(RequestCode::SEND_MESSAGE).with_ext_field("k".repeat(32768), "v");
        assert_eq!(encode_header(&cmd, &mut BytesMut::new()), Err(EncodeError::KeyTooLong { len: 32768 }));
        let cmd = RemotingCommand::request(RequestCode::SEND_MESSAGE).with_ext_field("k".repeat(32767), "v");
        let mut out = BytesMut::new();
        encode_header(&cmd, &mut out).unwrap();
        assert_eq!(decode_header(&out).unwrap().ext_fields, cmd.ext_fields);
    }

    #[test]
    fn unknown_language_bytes_are_kept() {
        let mut h = header(10, b"", b"");
        h[2] = 99;
        assert_eq!(decode_header(&h).unwrap().language, LanguageCode(99));
    }
}
