//! `broker.conf`'s syntax: Java properties.

use super::BrokerConfigError;

/// Java properties, read as `java.util.Properties.load(InputStream)` reads them (RocketMQ
/// loads `broker.conf` that way): bytes are ISO-8859-1; lines end at `\n`, `\r` or `\r\n`;
/// `#` and `!` start comment lines; a key ends at the first unescaped `=`, `:`, space, tab or
/// form feed; a trailing odd backslash continues a line; `\t`, `\n`, `\r`, `\f`, `\uXXXX` and
/// `\<any>` escapes. Values keep trailing whitespace, as Java's do. Two differences, both on
/// input Java mishandles: a leading UTF-8 byte order mark is dropped (Java would make it part
/// of the first key), and an empty key is an error (Java stores it under `""`).
pub fn parse_properties(
    bytes: &[u8],
    origin: &str,
) -> Result<Vec<(String, String, usize)>, BrokerConfigError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text: String = bytes.iter().map(|&b| char::from(b)).collect();
    let natural = natural_lines(&text);
    let syntax = |line: usize, text: &str| BrokerConfigError::Syntax {
        origin: origin.to_string(),
        line,
        text: text.to_string(),
        reason: None,
    };
    let mut out = Vec::new();
    let mut next = 0;
    while next < natural.len() {
        let (line, raw) = (next + 1, natural[next]);
        next += 1;
        let first = raw.trim_start_matches(is_java_space);
        if first.is_empty() || first.starts_with(['#', '!']) {
            continue;
        }
        let mut logical = first.to_string();
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            let Some(more) = natural.get(next) else { break };
            next += 1;
            logical.push_str(more.trim_start_matches(is_java_space));
        }
        let (key, value) = split_key_value(&logical);
        let bad_escape = |_| BrokerConfigError::Syntax {
            origin: origin.to_string(),
            line,
            text: raw.to_string(),
            reason: Some("malformed \\uXXXX escape: \\u needs four hex digits".into()),
        };
        let key = unescape(key).map_err(bad_escape)?;
        if key.is_empty() {
            return Err(syntax(line, raw));
        }
        out.push((key, unescape(value).map_err(bad_escape)?, line));
    }
    Ok(out)
}

/// Java's whitespace in properties files: space, tab, form feed.
fn is_java_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

/// Splits at `\r\n`, `\r` or `\n`, as Java's `LineReader` does.
fn natural_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.find(['\r', '\n']) {
            Some(i) => {
                lines.push(&rest[..i]);
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[i + skip..];
            }
            None => {
                lines.push(rest);
                rest = "";
            }
        }
    }
    lines
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    s.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

fn split_key_value(line: &str) -> (&str, &str) {
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => return (&line[..i], line[i + 1..].trim_start_matches(is_java_space)),
            c if is_java_space(c) => {
                let rest = line[i..].trim_start_matches(is_java_space);
                let rest =
                    rest.strip_prefix(['=', ':']).map_or(rest, |r| r.trim_start_matches(is_java_space));
                return (&line[..i], rest);
            }
            _ => {}
        }
    }
    (line, "")
}

/// Java's `loadConvert`; `Err` for a `\u` without four hex digits.
fn unescape(s: &str) -> Result<String, ()> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                if hex.len() != 4 || !hex.chars().all(|h| h.is_ascii_hexdigit()) {
                    return Err(());
                }
                // Four hex digits are a UTF-16 unit; a lone surrogate becomes U+FFFD.
                let unit = u32::from_str_radix(&hex, 16).map_err(|_| ())?;
                out.push(char::from_u32(unit).unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}
