//! Scale series: how a figure grows with the work (message size, producers, slaves). Each
//! series is printed as a small table, kept in the report's JSON, and drawn as an SVG file: one
//! panel per unit, a line per curve, logarithmic x (every series here grows geometrically).
//! The SVG is written by hand: a few hundred bytes of markup need no plotting crate.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::text::{WIDTH, figure, wrap};

/// One series: x values and the curves measured at each.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Series {
    /// Its short name, also the file name of its plot (`size`, `producers`, `slaves`).
    pub name: String,
    /// What it shows, as a title.
    pub title: String,
    /// What x is, with its unit.
    pub x_label: String,
    /// The x values.
    pub x: Vec<f64>,
    /// The curves, each with a value per x (NaN or null where it was not measured).
    pub curves: Vec<Curve>,
}

/// One curve of a series.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Curve {
    /// Its name, in the table's header and the plot's legend.
    pub name: String,
    /// The unit of its values.
    pub unit: String,
    /// A value per x of the series; `None` where it was not measured.
    pub values: Vec<Option<f64>>,
}

/// An x value as a reader writes it: 64 B, 16 KiB, 4 MiB for sizes; plain numbers otherwise.
fn x_text(series: &Series, x: f64) -> String {
    if series.x_label.contains("bytes") {
        let x = x as u64;
        if x >= 1 << 30 && x % (1 << 30) == 0 {
            return format!("{} GiB", x >> 30);
        }
        if x >= 1_000_000 && x % 1_000_000 == 0 {
            return format!("{} MB", x / 1_000_000);
        }
        if x >= 1 << 20 && x % (1 << 20) == 0 {
            return format!("{} MiB", x >> 20);
        }
        if x >= 1 << 10 && x % (1 << 10) == 0 {
            return format!("{} KiB", x >> 10);
        }
        return format!("{x} B");
    }
    figure(x).trim_end_matches(".0").to_string()
}

const X_COL: usize = 10;
const COL: usize = 14;

/// The series as a table: a column per curve, as many tables as it takes to fit [`WIDTH`].
pub fn render(s: &Series) -> String {
    let mut out = String::new();
    for l in wrap(&s.title, WIDTH) {
        let _ = writeln!(out, "{l}");
    }
    let per_table = ((WIDTH - X_COL) / (COL + 1)).max(1);
    for chunk in s.curves.chunks(per_table) {
        // Header: each curve's name wrapped into its column, then its unit.
        let names: Vec<Vec<String>> = chunk.iter().map(|c| wrap(&c.name, COL)).collect();
        let height = names.iter().map(Vec::len).max().unwrap_or(1);
        for i in 0..height {
            let first = if i == height - 1 { short(&s.x_label, X_COL) } else { String::new() };
            let mut line = format!("{first:<X_COL$}");
            for n in &names {
                // Bottom-aligned: a shorter name starts lower.
                let cell = (i + n.len()).checked_sub(height).and_then(|j| n.get(j));
                let _ = write!(line, " {:>COL$}", cell.map_or("", String::as_str));
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        let mut units = format!("{:<X_COL$}", "");
        for c in chunk {
            let _ = write!(units, " {:>COL$}", format!("({})", c.unit));
        }
        let _ = writeln!(out, "{}", units.trim_end());
        for (i, &x) in s.x.iter().enumerate() {
            let mut line = format!("{:<X_COL$}", x_text(s, x));
            for c in chunk {
                let v = c.values.get(i).copied().flatten().unwrap_or(f64::NAN);
                let _ = write!(line, " {:>COL$}", figure(v));
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    out
}

/// The first word of `label` that fits `width` (the table's x column is narrow).
fn short(label: &str, width: usize) -> String {
    let first = label.split(',').next().unwrap_or(label);
    first.chars().take(width).collect()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const COLOURS: [&str; 8] =
    ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

/// The series as an SVG document: one panel per unit, stacked.
pub fn svg(s: &Series) -> String {
    let mut units: Vec<&str> = Vec::new();
    for c in &s.curves {
        if !units.contains(&c.unit.as_str()) {
            units.push(&c.unit);
        }
    }
    // The title in lines that fit the width (about 7 px a character at 14 px).
    let title = wrap(&s.title, 90);
    let (w, ph, left, right) = (720.0, 260.0, 80.0, 200.0);
    let top = 22.0 + 18.0 * title.len() as f64;
    let height = top + ph * units.len().max(1) as f64 + 20.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" viewBox="0 0 {w} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, line) in title.iter().enumerate() {
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" font-size="14" text-anchor="middle">{}</text>"#,
            w / 2.0,
            20.0 + 18.0 * i as f64,
            esc(line)
        );
    }
    let xs: Vec<f64> = s.x.iter().map(|&x| x.max(f64::MIN_POSITIVE).log10()).collect();
    let (x0, x1) = bounds(&xs);
    let plot_w = w - left - right;
    let px = |lx: f64| left + if x1 > x0 { (lx - x0) / (x1 - x0) * plot_w } else { plot_w / 2.0 };
    for (pi, unit) in units.iter().enumerate() {
        let y_top = top + ph * pi as f64;
        let plot_h = ph - 60.0;
        let curves: Vec<(usize, &Curve)> =
            s.curves.iter().enumerate().filter(|(_, c)| c.unit == *unit).collect();
        let values: Vec<f64> = curves
            .iter()
            .flat_map(|(_, c)| c.values.iter().flatten().copied())
            .filter(|v| v.is_finite())
            .collect();
        let (lo, hi) = bounds(&values);
        // Logarithmic y when the values span more than 50x, linear from 0 otherwise.
        let log = lo > 0.0 && hi / lo > 50.0;
        let (y0, y1) = if log {
            (lo.log10().floor(), hi.log10().ceil())
        } else {
            (0.0, if hi > 0.0 { hi * 1.1 } else { 1.0 })
        };
        let py = |v: f64| {
            let v = if log { v.log10() } else { v };
            y_top + plot_h - (v - y0) / (y1 - y0).max(f64::MIN_POSITIVE) * plot_h
        };
        let _ = writeln!(
            out,
            r##"<rect x="{left}" y="{y_top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>"##
        );
        let _ = writeln!(
            out,
            r#"<text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">{}</text>"#,
            y_top + plot_h / 2.0,
            y_top + plot_h / 2.0,
            esc(unit)
        );
        // y ticks: five, or one per decade.
        let ticks: Vec<f64> = if log {
            (y0 as i32..=y1 as i32).map(|e| 10f64.powi(e)).collect()
        } else {
            (0..=4).map(|i| y0 + (y1 - y0) * f64::from(i) / 4.0).collect()
        };
        for t in ticks {
            let y = py(t);
            let _ = writeln!(
                out,
                r##"<line x1="{left}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                left + plot_w,
                left - 4.0,
                y + 4.0,
                figure(t)
            );
        }
        for (&x, &lx) in s.x.iter().zip(&xs) {
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                px(lx),
                y_top + plot_h + 16.0,
                esc(&x_text(s, x))
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            left + plot_w / 2.0,
            y_top + plot_h + 34.0,
            esc(&s.x_label)
        );
        for (li, (ci, c)) in curves.iter().enumerate() {
            let colour = COLOURS[ci % COLOURS.len()];
            let points: Vec<String> = c
                .values
                .iter()
                .zip(&xs)
                .filter_map(|(v, &lx)| {
                    v.filter(|v| v.is_finite() && (!log || *v > 0.0))
                        .map(|v| format!("{:.1},{:.1}", px(lx), py(v)))
                })
                .collect();
            let _ = writeln!(
                out,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
                points.join(" ")
            );
            for p in &points {
                let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
                let _ = writeln!(out, r#"<circle cx="{x}" cy="{y}" r="3" fill="{colour}"/>"#);
            }
            let ly = y_top + 12.0 + 16.0 * li as f64;
            let lx = left + plot_w + 12.0;
            let _ = writeln!(
                out,
                r#"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
                lx + 16.0,
                lx + 20.0,
                ly + 4.0,
                esc(&c.name)
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

fn bounds(v: &[f64]) -> (f64, f64) {
    let lo = v.iter().copied().filter(|v| v.is_finite()).fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().filter(|v| v.is_finite()).fold(f64::NEG_INFINITY, f64::max);
    if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sized(x: &[f64]) -> Series {
        Series {
            name: "s".into(),
            title: "t".into(),
            x_label: "log, bytes".into(),
            x: x.to_vec(),
            curves: vec![],
        }
    }

    /// Sizes read as they are written on the command line: decimal megabytes (the issue's 129
    /// MB) as MB, whole binary units as KiB, MiB and GiB.
    #[test]
    fn byte_x_values_are_written_in_the_unit_they_were_given_in() {
        let s = sized(&[]);
        let text = |x: f64| x_text(&s, x);
        assert_eq!(text(1.5e6), "1500000 B");
        assert_eq!(text(129_000_000.0), "129 MB");
        assert_eq!(text((8u64 << 30) as f64), "8 GiB");
        assert_eq!(text((1020u64 << 20) as f64), "1020 MiB");
        assert_eq!(text(16384.0), "16 KiB");
        assert_eq!(text(64.0), "64 B");
        let plain = Series { x_label: "slaves".into(), ..sized(&[]) };
        assert_eq!(x_text(&plain, 8.0), "8");
    }

    /// A long title is drawn in lines that fit the plot's width, every word kept, and the
    /// panels start below it.
    #[test]
    fn a_long_title_is_wrapped_above_the_panels() {
        let s = Series {
            name: "s".into(),
            title: "word ".repeat(40),
            x_label: "slaves".into(),
            x: vec![1.0, 2.0],
            curves: vec![Curve { name: "c".into(), unit: "us".into(), values: vec![Some(1.0), None] }],
        };
        let svg = svg(&s);
        let titles: Vec<&str> = svg.lines().filter(|l| l.contains(r#"font-size="14""#)).collect();
        assert!(titles.len() >= 2, "{svg}");
        assert_eq!(titles.iter().map(|l| l.matches("word").count()).sum::<usize>(), 40, "{svg}");
        let panel = svg.lines().find(|l| l.starts_with("<rect x=")).expect("a panel");
        assert!(panel.contains(&format!(r#"y="{}""#, 22 + 18 * titles.len())), "{panel}");
    }
}
