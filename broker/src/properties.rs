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
    entries: Vec<Entry>,
    /// The table's capacity now (it only grows, as Java's).
    capacity: usize,
}

/// One property, with its name's [`spread`] hash (computed once).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    hash: u32,
    name: String,
    value: String,
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

    /// What [`parse`](Self::parse) of this map's [`serialize`](Self::serialize) gives (Java's
    /// send path turns its map into the string and reads the string back), without the string:
    /// the entries in iteration order into a new map of `line`, less those with an empty
    /// value.
    pub fn reparsed(self, line: RocketmqLine) -> Self {
        // A separator inside a name or value would read back differently: take the text's way.
        let plain = self
            .entries
            .iter()
            .all(|e| !e.name.contains([NAME_VALUE, SEPARATOR]) && !e.value.contains(SEPARATOR));
        if !plain {
            return Self::parse(line, &self.serialize(line));
        }
        let order = self.order();
        let mut slots: Vec<Option<Entry>> = self.entries.into_iter().map(Some).collect();
        let mut map = Self::new(line);
        map.entries.reserve(slots.len());
        for i in order {
            let Some(e) = slots[i].take() else { continue };
            if !e.name.is_empty() && !e.value.is_empty() {
                map.insert(e);
            }
        }
        map
    }

    /// `put`: sets `name` (keeping its place if present).
    pub fn put(&mut self, name: &str, value: &str) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.name == name) {
            value.clone_into(&mut e.value);
            return;
        }
        self.insert(Entry { hash: spread(name), name: name.to_string(), value: value.to_string() });
    }

    /// Adds an entry whose name is not in the map, growing the table as Java's does.
    fn insert(&mut self, entry: Entry) {
        let bucket = |cap: usize, hash: u32| hash as usize & (cap - 1);
        let b = bucket(self.capacity, entry.hash);
        self.entries.push(entry);
        // A bucket of more than eight keys below capacity 64 doubles the table (treeifyBin).
        let in_bucket = self.entries.iter().filter(|e| bucket(self.capacity, e.hash) == b).count();
        if in_bucket > 8 && self.capacity < 64 {
            self.capacity *= 2;
        }
        if self.entries.len() > self.capacity * 3 / 4 {
            self.capacity *= 2;
        }
    }

    /// `get`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.entries.iter().find(|e| e.name == name).map(|e| e.value.as_str())
    }

    /// `remove`: the value it had.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        let at = self.entries.iter().position(|e| e.name == name)?;
        Some(self.entries.remove(at).value)
    }

    /// Whether it holds `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The entries' indexes in Java's iteration order: by bucket, then insertion within a
    /// bucket.
    fn order(&self) -> Vec<usize> {
        let mask = self.capacity - 1;
        let mut order: Vec<(usize, usize)> =
            self.entries.iter().enumerate().map(|(i, e)| (e.hash as usize & mask, i)).collect();
        order.sort_unstable();
        order.into_iter().map(|(_, i)| i).collect()
    }

    /// The entries in Java's iteration order: by bucket, then insertion within a bucket.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.order().into_iter().map(move |i| (self.entries[i].name.as_str(), self.entries[i].value.as_str()))
    }

    /// `messageProperties2String` of `line`: `name\u{1}value\u{2}` for each entry; 4.9 drops
    /// the last `\u{2}`.
    pub fn serialize(&self, line: RocketmqLine) -> String {
        let len: usize = self.entries.iter().map(|e| e.name.len() + e.value.len() + 2).sum();
        let mut out = String::with_capacity(len);
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
        let entries: Vec<(&str, &str)> =
            m.entries.iter().map(|e| (e.name.as_str(), e.value.as_str())).collect();
        assert_eq!(entries, [("k", "2"), ("z", "a\u{1}b")]);
    }

    #[test]
    fn reparsed_is_the_parse_of_the_serialized_string() {
        let sent = "KEYS\u{1}k1\u{2}UNIQ_KEY\u{1}U\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagA\u{2}p1\u{1}v\u{1}1";
        for line in [RocketmqLine::V4_9, RocketmqLine::V5] {
            let mut cases = Vec::new();
            let mut m = JavaProperties::parse(line, sent);
            m.put("MSG_REGION", "DefaultRegion");
            m.put("TRACE_ON", "true");
            cases.push(m.clone());
            // An empty value is dropped by the read back; separators in a value take the text's way.
            m.put("EMPTY", "");
            cases.push(m.clone());
            m.put("ODD", "a\u{2}b\u{1}c");
            cases.push(m.clone());
            // Enough keys to grow the table on the way back.
            let mut big = JavaProperties::new(line);
            for i in 0..40 {
                big.put(&format!("key{i}"), "v");
            }
            cases.push(big);
            for m in cases {
                let want = JavaProperties::parse(line, &m.serialize(line));
                let got = m.reparsed(line);
                assert_eq!(got, want);
                assert_eq!(got.serialize(line), want.serialize(line));
            }
        }
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
