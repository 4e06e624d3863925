//! What `logship bench` prints: the table of rows (each scenario once, a line per baseline, a
//! verdict per target), the notes, and the summary of targets met and missed. The same
//! [`Report`] is the `--json` output, and `--from-json FILE` prints a saved one again, so that
//! runs can be compared and the table's shape checked without measuring anything.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::Row;
use super::series::{self, Series};
use super::text::{WIDTH, figure, wrap};

/// What one run found: its rows, its notes and its scale series.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct Report {
    /// A `--quick` smoke run: its figures are not a measurement.
    #[serde(default)]
    pub quick: bool,
    /// `uptime`'s load averages when the run ended, if they could be read.
    #[serde(default)]
    pub load: Option<String>,
    /// Every figure beside its baseline.
    pub rows: Vec<Row>,
    /// What the bench noticed about the run (peers killed, failed puts, where a put was slow).
    #[serde(default)]
    pub notes: Vec<String>,
    /// The scale series (`--series`).
    #[serde(default)]
    pub series: Vec<Series>,
}

/// Whether a row's ratio meets its target.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The ratio meets the target.
    Met,
    /// The ratio misses the target.
    Missed,
    /// There is no ratio (a figure was not measured): the target is not met.
    NoFigure,
}

impl Verdict {
    fn word(self) -> &'static str {
        match self {
            Self::Met => "met",
            Self::Missed => "MISSED",
            Self::NoFigure => "no fig",
        }
    }
}

/// A target read from its text: `>= 0.8`, `<= 2`; `-` is no target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// The ratio must be at least this.
    AtLeast(f64),
    /// The ratio must be at most this.
    AtMost(f64),
}

impl Target {
    /// Parses `>= X` or `<= X`; `-` (or nothing) is `Ok(None)`.
    pub fn parse(text: &str) -> anyhow::Result<Option<Self>> {
        let t = text.trim();
        if t.is_empty() || t == "-" {
            return Ok(None);
        }
        let (op, bound) = t.split_at(t.len().min(2));
        let bound: f64 =
            bound.trim().parse().map_err(|_| anyhow::anyhow!("target {text:?}: `>= X`, `<= X` or `-`"))?;
        match op {
            ">=" => Ok(Some(Self::AtLeast(bound))),
            "<=" => Ok(Some(Self::AtMost(bound))),
            _ => anyhow::bail!("target {text:?}: `>= X`, `<= X` or `-`"),
        }
    }

    /// The verdict on `ratio`.
    pub fn judge(self, ratio: f64) -> Verdict {
        if !ratio.is_finite() {
            return Verdict::NoFigure;
        }
        let met = match self {
            Self::AtLeast(b) => ratio >= b,
            Self::AtMost(b) => ratio <= b,
        };
        if met { Verdict::Met } else { Verdict::Missed }
    }
}

/// The verdict on one row, `None` without a target.
pub fn verdict(row: &Row) -> anyhow::Result<Option<Verdict>> {
    Ok(Target::parse(&row.target)?.map(|t| t.judge(row.ratio)))
}

impl Report {
    /// Sets every row's verdict from its target and ratio.
    pub fn judge(&mut self) -> anyhow::Result<()> {
        for r in &mut self.rows {
            r.verdict = verdict(r)?;
        }
        Ok(())
    }

    /// The rows whose target was not met (missed, or without a figure).
    pub fn misses(&self) -> Vec<&Row> {
        self.rows.iter().filter(|r| matches!(r.verdict, Some(Verdict::Missed | Verdict::NoFigure))).collect()
    }
}

/// `text` wrapped to [`WIDTH`], every line after `indent` spaces.
fn push_wrapped(out: &mut String, text: &str, indent: usize) {
    for l in wrap(text, WIDTH - indent) {
        let _ = writeln!(out, "{:indent$}{l}", "");
    }
}

// The columns of a baseline line: indent, baseline name, logship's figure, the baseline's,
// ratio, target, verdict. 2 + 36 + 1 + 17 + 1 + 17 + 1 + 8 + 1 + 7 + 1 + 7 = 99.
const NAME: usize = 36;
const FIG: usize = 17;
const RATIO: usize = 8;
const TARGET: usize = 7;
const VERDICT: usize = 7;

fn cells(name: &str, ours: &str, theirs: &str, ratio: &str, target: &str, verdict: &str) -> String {
    format!(
        "  {name:<NAME$} {ours:>FIG$} {theirs:>FIG$} {ratio:>RATIO$} {target:>TARGET$} {verdict:<VERDICT$}"
    )
    .trim_end()
    .to_string()
}

const QUICK: &str = "--quick: a smoke run with small sizes and one round. These figures are not a \
                     measurement; run without --quick, on a quiet machine, for figures.";

/// The table, the notes and the summary, as printed.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    if report.quick {
        push_wrapped(&mut out, QUICK, 0);
        out.push('\n');
    }
    if !report.rows.is_empty() {
        out.push_str("scenario\n");
        out.push_str(&cells("baseline (same run)", "logship", "baseline", "ratio", "target", "verdict"));
        out.push('\n');
        let mut last: Option<&str> = None;
        for r in &report.rows {
            if last != Some(r.scenario.as_str()) {
                push_wrapped(&mut out, &r.scenario, 0);
                last = Some(&r.scenario);
            }
            let name = wrap(&r.baseline_name, NAME);
            let ratio = if r.ratio.is_finite() { format!("{:.2}x", r.ratio) } else { "-".into() };
            let verdict = r.verdict.map_or("", Verdict::word);
            let target = if r.target.trim() == "-" { "" } else { r.target.trim() };
            let unit = |v: f64| format!("{:>10} {:<6}", figure(v), r.unit);
            out.push_str(&cells(&name[0], &unit(r.value), &unit(r.baseline), &ratio, target, verdict));
            out.push('\n');
            for more in &name[1..] {
                let _ = writeln!(out, "  {more}");
            }
            if let Some(f) = r.failed_puts.as_ref().filter(|f| super::has_failures(f)) {
                let baseline = f.baseline.as_ref().map(|b| format!("; baseline: {b}")).unwrap_or_default();
                push_wrapped(&mut out, &format!("failed puts (in no figure): {}{baseline}", f.value), 4);
            }
        }
    }
    for s in &report.series {
        out.push('\n');
        out.push_str(&series::render(s));
    }
    if !report.notes.is_empty() {
        out.push_str("\nNotes:\n");
        for n in &report.notes {
            let mut lines = wrap(n, WIDTH - 4).into_iter();
            if let Some(first) = lines.next() {
                let _ = writeln!(out, "  - {first}");
            }
            for l in lines {
                let _ = writeln!(out, "    {l}");
            }
        }
    }
    out.push('\n');
    let targeted: Vec<&Row> = report.rows.iter().filter(|r| r.verdict.is_some()).collect();
    let misses = report.misses();
    if !targeted.is_empty() {
        let line = format!(
            "Targets: {} of {} met, {} missed.",
            targeted.len() - misses.len(),
            targeted.len(),
            misses.len()
        );
        push_wrapped(&mut out, &line, 0);
        for m in &misses {
            let why = match m.verdict {
                Some(Verdict::NoFigure) => "no figure".to_string(),
                _ => format!("{:.2}x", m.ratio),
            };
            push_wrapped(
                &mut out,
                &format!("missed: {} against {}: {why}, target {}", m.scenario, m.baseline_name, m.target),
                2,
            );
        }
    }
    push_wrapped(
        &mut out,
        "Ratios compare figures measured in this run on this machine; absolute figures vary between machines.",
        0,
    );
    if let Some(load) = &report.load {
        push_wrapped(&mut out, &format!("Load when the run ended: {load}."), 0);
    }
    if report.quick {
        push_wrapped(&mut out, QUICK, 0);
    }
    out
}

/// Writes each series' SVG plot and the report's JSON into `dir`; returns the paths written.
pub fn write_files(dir: &std::path::Path, report: &Report) -> anyhow::Result<Vec<std::path::PathBuf>> {
    use anyhow::Context as _;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    for s in &report.series {
        let path = dir.join(format!("{}.svg", s.name));
        std::fs::write(&path, series::svg(s)).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    let path = dir.join("report.json");
    std::fs::write(&path, serde_json::to_string_pretty(report)?)
        .with_context(|| format!("writing {}", path.display()))?;
    written.push(path);
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_judge_ratios() {
        assert_eq!(Target::parse("-").unwrap(), None);
        assert_eq!(Target::parse(">= 0.8").unwrap(), Some(Target::AtLeast(0.8)));
        assert_eq!(Target::parse("<= 2").unwrap(), Some(Target::AtMost(2.0)));
        assert!(Target::parse("about 2").is_err());
        assert_eq!(Target::AtLeast(0.8).judge(0.79), Verdict::Missed);
        assert_eq!(Target::AtLeast(0.8).judge(0.8), Verdict::Met);
        assert_eq!(Target::AtMost(2.0).judge(3.2), Verdict::Missed);
        assert_eq!(Target::AtMost(2.0).judge(f64::NAN), Verdict::NoFigure);
    }
}
