//! The `logship` server binary.
// A binary has no public API: `pub` inside it marks what modules share.
#![allow(unreachable_pub)]
#![forbid(unsafe_code)]

// Wired into the commands as they land (binary issue).
#[allow(dead_code)]
mod config;

fn main() -> anyhow::Result<()> {
    anyhow::bail!("the logship binary is not built yet: see README.md")
}
