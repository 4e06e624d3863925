//! A message's properties as a Java broker handles them: a `java.util.HashMap<String, String>`
//! (whose iteration order is the stored order) parsed from and serialized to the properties
//! string (`MessageDecoder.string2messageProperties` / `messageProperties2String`) of each
//! RocketMQ line.
//!
//! No RocketMQ reader depends on the order or on the trailing separator; they matter for a
//! record to be byte for byte what a Java broker of the same line stores for the same input.
//! The order is reproduced exactly as long as no hash bucket holds more than eight keys (Java
//! then turns the bucket into a tree, whose order this does not follow).

use logship_store::codec::java_string_hash;

use crate::settings::RocketmqLine;

/// Separates a property's name from its value.
const NAME_VALUE: char = '\u{1}';
/// Separates properties.
const SEPARATOR: char = '\u{2}';

/// A `HashMap<String, String>` with Java's iteration order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JavaProperties {
    /// In insertion order (a replaced value keeps its key's place).
    entries: Vec<(String, String)>,
    /// The table's capacity now (it only grows, as Java's).
    capacity: usize,
}

/// Java's `HashMap.hash`: the hash code with its high half folded in.
fn spread(key: &str) -> u32 {
    let h = java_string_hash(key) as u32;
    h ^ (h >> 16)
}

impl JavaProperties {
    /// An empty map as the line's broker makes it: `new HashMap()` (16) in 4.9,
    /// `new HashMap(128)` in 5.x.
    pub fn new(line: RocketmqLine) -> Self {
        let capacity = match line {
            RocketmqLine::V4_9 => 16,
            RocketmqLine::V5 => 128,
        };
        Self { entries: Vec::new(), capacity }
    }

    /// `string2messageProperties`: the entries of a properties string, in order; an entry is
    /// kept only with a non-empty name and value (so at least 3 characters); a later duplicate
    /// replaces an earlier one's value.
    pub fn parse(line: RocketmqLine, properties: &str) -> Self {
        let mut map = Self::new(line);
        for entry in properties.split(SEPARATOR) {
            if let Some((name, value)) = entry.split_once(NAME_VALUE) {
                if !name.is_empty() && !value.is_empty() {
                    map.put(name, value);
                }
            }
        }
        map
    }

    /// `put`: sets `name` (keeping its place if present).
    pub fn put(&mut self, name: &str, value: &str) {
        if let Some(e) = self.entries.iter_mut().find(|(n, _)| n == name) {
            e.1 = value.to_string();
            return;
        }
        self.entries.push((name.to_string(), value.to_string()));
        // A bucket of more than eight keys below capacity 64 doubles the table (treeifyBin).
        let bucket = |cap: usize, k: &str| spread(k) as usize & (cap - 1);
        let b = bucket(self.capacity, name);
        let in_bucket = self.entries.iter().filter(|(n, _)| bucket(self.capacity, n) == b).count();
        if in_bucket > 8 && self.capacity < 64 {
            self.capacity *= 2;
        }
        if self.entries.len() > self.capacity * 3 / 4 {
            self.capacity *= 2;
        }
    }

    /// `get`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// `remove`: the value it had.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        let at = self.entries.iter().position(|(n, _)| n == name)?;
        Some(self.entries.remove(at).1)
    }

    /// Whether it holds `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The entries in Java's iteration order: by bucket, then insertion within a bucket.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        let mask = self.capacity - 1;
        let mut order: Vec<(usize, usize)> =
            self.entries.iter().enumerate().map(|(i, (n, _))| (spread(n) as usize & mask, i)).collect();
        order.sort_unstable();
        order.into_iter().map(move |(_, i)| (self.entries[i].0.as_str(), self.entries[i].1.as_str()))
    }

    /// `messageProperties2String` of `line`: `name\u{1}value\u{2}` for each entry; 4.9 drops
    /// the last `\u{2}`.
    pub fn serialize(&self, line: RocketmqLine) -> String {
        let mut out = String::new();
        for (name, value) in self.iter() {
            out.push_str(name);
            out.push(NAME_VALUE);
            out.push_str(value);
            out.push(SEPARATOR);
        }
        if line == RocketmqLine::V4_9 {
            out.pop();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(m: &JavaProperties) -> Vec<&str> {
        m.iter().map(|(n, _)| n).collect()
    }

    #[test]
    fn the_order_is_java_s_hash_map_order_the_jars_produced() {
        // Observed on the real brokers (spec-clients 2.4.3): 4.9.7 stores
        // p1, KEYS, UNIQ_KEY, CLUSTER, TAGS; 5.5.0 MSG_REGION, UNIQ_KEY, CLUSTER, TAGS, p1, KEYS,
        // WAIT, TRACE_ON.
        let sent = "KEYS\u{1}k1\u{2}UNIQ_KEY\u{1}U\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagA\u{2}p1\u{1}v1";
        let mut v4 = JavaProperties::parse(RocketmqLine::V4_9, sent);
        v4.put("CLUSTER", "c1");
        v4.remove("WAIT");
        assert_eq!(names(&v4), ["p1", "KEYS", "UNIQ_KEY", "CLUSTER", "TAGS"]);
        let mut v5 = JavaProperties::parse(RocketmqLine::V5, sent);
        v5.put("MSG_REGION", "DefaultRegion");
        v5.put("TRACE_ON", "true");
        let mut v5 = JavaProperties::parse(RocketmqLine::V5, &v5.serialize(RocketmqLine::V5));
        v5.put("CLUSTER", "c1");
        assert_eq!(
            names(&v5),
            ["MSG_REGION", "UNIQ_KEY", "CLUSTER", "TAGS", "p1", "KEYS", "WAIT", "TRACE_ON"]
        );
    }

    #[test]
    fn each_line_serializes_its_own_layout() {
        let m = JavaProperties::parse(RocketmqLine::V4_9, "a\u{1}1\u{2}b\u{1}2\u{2}");
        assert_eq!(m.serialize(RocketmqLine::V4_9), "a\u{1}1\u{2}b\u{1}2");
        assert_eq!(m.serialize(RocketmqLine::V5), "a\u{1}1\u{2}b\u{1}2\u{2}");
        assert_eq!(JavaProperties::new(RocketmqLine::V4_9).serialize(RocketmqLine::V4_9), "");
    }

    #[test]
    fn entries_java_would_skip_are_skipped_and_duplicates_keep_their_place() {
        let m = JavaProperties::parse(
            RocketmqLine::V5,
            "\u{1}x\u{2}a\u{1}\u{2}ab\u{2}k\u{1}1\u{2}k\u{1}2\u{2}z\u{1}a\u{1}b",
        );
        assert_eq!(m.entries, [("k".to_string(), "2".to_string()), ("z".to_string(), "a\u{1}b".to_string())]);
    }

    #[test]
    fn the_table_grows_as_java_s_does() {
        let mut m = JavaProperties::new(RocketmqLine::V4_9);
        for i in 0..13 {
            m.put(&format!("key{i}"), "v");
        }
        assert_eq!(m.capacity, 32, "the 13th key passes 16 * 0.75");
        let mut m = JavaProperties::new(RocketmqLine::V5);
        for i in 0..97 {
            m.put(&format!("key{i}"), "v");
        }
        assert_eq!(m.capacity, 256);
    }
}
