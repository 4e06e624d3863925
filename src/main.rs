//! The `logship` server binary.

fn main() -> anyhow::Result<()> {
    anyhow::bail!("the logship binary is not built yet: see README.md")
}
