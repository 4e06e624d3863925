//! The declaration of a configuration key: its RocketMQ name, default, parser, one-line doc and
//! the subcommands that read it, written once in a [`declare_keys!`] block. Each block gives
//! the parser (a `match` on the key) and the section of the configuration reference
//! (`docs/configuration.md`), so that parsing, the known-keys list and the docs cannot drift.

/// `logship master` reads the key.
pub const MASTER: u8 = 1;
/// `logship slave` reads the key.
pub const SLAVE: u8 = 2;
/// `logship broker` (controller mode) reads the key.
pub const BROKER: u8 = 4;
/// Every serving subcommand reads the key.
pub const ALL: u8 = MASTER | SLAVE | BROKER;

/// A key's default as the docs show it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum KeyDefault {
    /// A value the key's parser takes: setting the key to it changes nothing (a test checks).
    Value(&'static str),
    /// A default that is not one value (derived from other keys, or unset), described.
    Note(&'static str),
}

/// One configuration key.
#[derive(Copy, Clone, Debug)]
pub struct KeyDoc {
    /// The key, as in `broker.conf`.
    pub name: &'static str,
    /// Other spellings read the same way (RocketMQ's legacy names).
    pub aliases: &'static [&'static str],
    /// Which subcommands read it: [`MASTER`], [`SLAVE`], [`BROKER`].
    pub roles: u8,
    /// Its default.
    pub default: KeyDefault,
    /// What it does, one line of Markdown.
    pub doc: &'static str,
}

/// A group of keys parsed by one function, and one table of the configuration reference.
#[derive(Copy, Clone, Debug)]
pub struct Section {
    /// The table's heading.
    pub title: &'static str,
    /// Its keys, in the order the docs list them.
    pub keys: &'static [KeyDoc],
}

/// Declares a section of keys: a `const` [`Section`] and a function
/// `fn(targets..., key, value) -> Result<bool, BrokerConfigError>` that parses one of its keys
/// into the targets (`Ok(false)`: not one of these keys). Each entry reads
/// `"name" [| "alias"]*, ROLES, Value "default" | Note "described", "doc" => assignment;`.
macro_rules! declare_keys {
    (
        $vis:vis fn $set:ident($($p:ident: $t:ty),+; $key:ident, $v:ident);
        $cvis:vis const $table:ident = $title:literal;
        $( $name:literal $(| $alias:literal)*, $roles:expr, $dk:ident $default:literal, $doc:literal
            => $body:expr; )*
    ) => {
        $cvis const $table: crate::config::keys::Section = crate::config::keys::Section {
            title: $title,
            keys: &[$(crate::config::keys::KeyDoc {
                name: $name,
                aliases: &[$($alias),*],
                roles: $roles,
                default: crate::config::keys::KeyDefault::$dk($default),
                doc: $doc,
            }),*],
        };

        #[allow(unused_variables)]
        $vis fn $set($($p: $t),+, $key: &str, $v: &str) -> Result<bool, crate::config::BrokerConfigError> {
            match $key {
                $($name $(| $alias)* => {
                    $body;
                })*
                _ => return Ok(false),
            }
            Ok(true)
        }
    };
}
pub(crate) use declare_keys;

/// The subcommands of `roles`, for the docs.
pub fn roles_text(roles: u8) -> String {
    let names = [(MASTER, "master"), (SLAVE, "slave"), (BROKER, "broker")];
    names.iter().filter(|(r, _)| roles & r != 0).map(|(_, n)| *n).collect::<Vec<_>>().join(", ")
}

/// The known key `key` was probably meant as: the same key in another case, else the nearest
/// by edit distance (at most 2, and less than half the key's length).
pub fn suggestion<'a>(key: &str, known: impl Iterator<Item = &'a str> + Clone) -> Option<&'a str> {
    if let Some(k) = known.clone().find(|k| k.eq_ignore_ascii_case(key)) {
        return Some(k);
    }
    let lower = key.to_ascii_lowercase();
    let limit = 2.min(key.len().saturating_sub(1) / 2);
    known
        .map(|k| (edit_distance(&lower, &k.to_ascii_lowercase()), k))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, k)| (d, k))
        .map(|(_, k)| k)
}

/// Levenshtein distance, with a swap of two neighbours counting as one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// The Markdown tables of `sections`, as `docs/configuration.md` holds them between its
/// `<!-- keys -->` markers.
pub fn markdown(sections: &[Section]) -> String {
    let mut out = String::new();
    for section in sections {
        out.push_str(&format!(
            "\n### {}\n\n| key | default | read by | meaning |\n|---|---|---|---|\n",
            section.title
        ));
        for k in section.keys {
            let mut name = format!("`{}`", k.name);
            for alias in k.aliases {
                name.push_str(&format!(" (also `{alias}`)"));
            }
            let default = match k.default {
                KeyDefault::Value("") => "empty".to_string(),
                KeyDefault::Value(v) => format!("`{v}`"),
                KeyDefault::Note(n) => n.to_string(),
            };
            out.push_str(&format!("| {name} | {default} | {} | {} |\n", roles_text(k.roles), k.doc));
        }
    }
    out
}
