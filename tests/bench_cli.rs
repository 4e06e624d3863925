//! `logship bench`'s output. The table's shape, the verdicts and the exit code are checked on
//! synthetic reports (`bench --from-json FILE` prints a saved report again); `bench --quick`
//! runs as a smoke run that prints every scenario and closes its stores before it removes their
//! directories. Nothing here times anything, and no figure is compared with a threshold.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

const WIDTH: usize = 100;

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_logship"))
        .arg("bench")
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run logship bench")
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn row(scenario: &str, value: f64, unit: &str, baseline_name: &str, baseline: f64, target: &str) -> Value {
    json!({
        "scenario": scenario, "value": value, "unit": unit, "baseline_name": baseline_name,
        "baseline": baseline, "ratio": value / baseline, "target": target,
    })
}

/// Rows as the bench makes them, with the longest names it uses and large figures.
fn synthetic_rows() -> Vec<Value> {
    vec![
        row(
            "a new slave joins: 129 MB of 129-byte messages, logship slave of a rocketmq-rust 1.0.0 master",
            330.4,
            "MB/s",
            "plain program, mmap -> socket -> warmed mmap, 1 MiB frames",
            673.9,
            ">= 0.8",
        ),
        row(
            "SYNC puts/s, 64 producers, ASYNC_FLUSH, logship -> logship",
            1_234_567.0,
            "puts/s",
            "RocketMQ 5.5.1 -> RocketMQ 5.5.1",
            95_000.0,
            ">= 2",
        ),
        row(
            "idle replication latency p50 (put until a slave acks)",
            154.0,
            "us",
            "one TCP round trip p50, 2 ms apart like the puts",
            49.0,
            "<= 2",
        ),
        row(
            "idle replication latency p50 (put until a slave acks)",
            154.0,
            "us",
            "one TCP round trip p50, back to back",
            30.0,
            "-",
        ),
    ]
}

fn write_report(dir: &Path, name: &str, report: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string(report).unwrap()).unwrap();
    path.display().to_string()
}

/// The lines of the table that carry figures (a ratio column ending in `x`).
fn figure_lines(stdout: &str) -> Vec<&str> {
    stdout.lines().filter(|l| l.starts_with("  ") && l.split_whitespace().any(is_ratio)).collect()
}

fn is_ratio(word: &str) -> bool {
    word.strip_suffix('x').is_some_and(|n| n.parse::<f64>().is_ok())
}

/// The character column where the ratio cell of `line` ends.
fn ratio_end(line: &str) -> usize {
    let words: Vec<(usize, &str)> = line
        .char_indices()
        .filter(|&(i, c)| c != ' ' && (i == 0 || line[..i].ends_with(' ')))
        .map(|(i, _)| (i, line[i..].split(' ').next().unwrap()))
        .collect();
    let (i, w) = words.iter().find(|(_, w)| is_ratio(w) || *w == "ratio").expect("a ratio cell");
    line[..*i].chars().count() + w.chars().count()
}

#[test]
fn the_table_fits_100_columns_and_its_columns_line_up() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_report(dir.path(), "r.json", &json!({ "rows": synthetic_rows() }));
    let out = bench(&["--from-json", &file]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for line in stdout.lines() {
        assert!(line.chars().count() <= WIDTH, "a line over {WIDTH} columns:\n{line}\n\n{stdout}");
    }
    let header = stdout.lines().find(|l| l.contains("ratio") && l.contains("verdict")).expect("a header");
    let lines = figure_lines(&stdout);
    assert_eq!(lines.len(), 4, "{stdout}");
    let end = ratio_end(header);
    for l in &lines {
        assert_eq!(ratio_end(l), end, "the ratio column does not line up with the header:\n{stdout}");
    }
    // The long scenario and baseline names are wrapped, not cut.
    let flat = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("logship slave of a rocketmq-rust 1.0.0 master"), "{stdout}");
    assert!(flat.contains("1 MiB frames"), "{stdout}");
}

#[test]
fn each_target_row_has_a_met_or_missed_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows = synthetic_rows();
    rows.push(json!({
        "scenario": "SYNC put p99, 1 producer, new slave process", "value": null, "unit": "us",
        "baseline_name": "raw 8-byte TCP ping-pong p99", "baseline": 100.0, "ratio": null, "target": "<= 3",
    }));
    let file = write_report(dir.path(), "r.json", &json!({ "rows": rows }));
    let out = bench(&["--from-json", &file]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "without --fail-on-miss a miss is not an error:\n{stdout}\n{stderr}");
    let line = |baseline: &str| {
        stdout
            .lines()
            .find(|l| l.contains(baseline))
            .unwrap_or_else(|| panic!("no {baseline:?} line:\n{stdout}"))
    };
    assert!(line("plain program").trim_end().ends_with("MISSED"), "0.49x against >= 0.8:\n{stdout}");
    assert!(
        line("RocketMQ 5.5.1 -> RocketMQ 5.5.1").trim_end().ends_with("met"),
        "13x against >= 2:\n{stdout}"
    );
    assert!(line("2 ms apart").trim_end().ends_with("MISSED"), "3.14x against <= 2:\n{stdout}");
    let untargeted = line("back to back");
    assert!(
        !untargeted.contains("met") && !untargeted.contains("MISSED"),
        "no target, no verdict:\n{stdout}"
    );
    assert!(line("ping-pong p99").trim_end().ends_with("no fig"), "no figure is not a met target:\n{stdout}");
    assert!(stdout.contains("Targets: 1 of 4 met, 3 missed."), "{stdout}");
}

#[test]
fn fail_on_miss_makes_a_missed_target_exit_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let missed = write_report(dir.path(), "missed.json", &json!({ "rows": synthetic_rows() }));
    let out = bench(&["--from-json", &missed, "--fail-on-miss"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("2 target(s) missed"), "{stderr}");
    // The 13x row against `>= 2` and a row without a target.
    let met: Vec<Value> = [1, 3].map(|i| synthetic_rows()[i].clone()).to_vec();
    let met = write_report(dir.path(), "met.json", &json!({ "rows": met }));
    let out = bench(&["--from-json", &met, "--fail-on-miss"]);
    assert!(out.status.success(), "every target met:\n{}", text(&out).0);
    let out = bench(&["--from-json", &missed]);
    assert!(out.status.success(), "a miss without --fail-on-miss:\n{}", text(&out).0);
}

#[test]
fn a_scenario_with_several_baselines_is_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_report(dir.path(), "r.json", &json!({ "rows": synthetic_rows() }));
    let (stdout, _) = text(&bench(&["--from-json", &file]));
    let table = stdout.split("Targets:").next().unwrap();
    assert_eq!(
        table.matches("idle replication latency p50 (put until a slave acks)").count(),
        1,
        "the idle scenario is printed once, its two baselines under it:\n{stdout}"
    );
}

#[test]
fn a_quick_report_says_it_is_not_a_measurement() {
    let dir = tempfile::tempdir().unwrap();
    let quick = write_report(dir.path(), "q.json", &json!({ "quick": true, "rows": synthetic_rows() }));
    let (stdout, _) = text(&bench(&["--from-json", &quick]));
    assert!(stdout.starts_with("--quick: a smoke run"), "{stdout}");
    assert!(stdout.contains("not a measurement"), "{stdout}");
    let full = write_report(dir.path(), "f.json", &json!({ "quick": false, "rows": synthetic_rows() }));
    let (stdout, _) = text(&bench(&["--from-json", &full]));
    assert!(!stdout.contains("not a measurement"), "{stdout}");
}

/// The progress lines on stderr say what runs; what it found is in the report.
#[test]
fn a_result_is_never_printed_as_a_progress_line() {
    let out = bench(&["--quick", "--only", "roll"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "bench failed:\n{stdout}\n{stderr}");
    let progress: Vec<&str> = stderr.lines().filter(|l| l.trim_start().starts_with("running")).collect();
    assert!(!progress.is_empty(), "{stderr}");
    for l in progress {
        assert!(!l.contains(" us") && !l.contains("KiB from"), "a result as a progress line: {l}");
    }
    assert!(
        stdout.contains("the slowest put around the roll took"),
        "the roll's slowest put, in the notes:\n{stdout}"
    );
}

#[test]
fn bench_quick_runs_and_prints_every_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let out = bench(&["--quick", "--out", &out_dir.display().to_string()]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "bench failed:\n{stdout}\n{stderr}");
    let flat = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    for scenario in [
        "a new slave joins: 8 MiB of 129-byte messages, logship -> logship",
        "a new slave joins: 60 MiB of 1 KiB messages, logship -> logship",
        "a master rolls: put p99",
        "SYNC put p99, 1 producer, new slave process",
        "SYNC puts/s, 64 producers, new slave process",
        "idle replication latency p50",
        "SYNC puts/s, 64 producer(s)",
    ] {
        assert!(flat.contains(scenario), "no {scenario:?} row:\n{stdout}");
    }
    assert!(stdout.contains("not a measurement"), "{stdout}");
    for line in stdout.lines() {
        assert!(line.chars().count() <= WIDTH, "a line over {WIDTH} columns:\n{line}");
    }
    assert!(!stderr.contains("clean shutdown failed"), "a store closed after its directory went:\n{stderr}");
    // The saved report prints the same table again.
    let saved = out_dir.join("report.json");
    let again = bench(&["--from-json", &saved.display().to_string()]);
    let (printed, _) = text(&again);
    let table = |s: &str| s.lines().filter(|l| !l.starts_with("wrote ")).collect::<Vec<_>>().join("\n");
    assert_eq!(table(&printed), table(&stdout));
}

/// `--quick --series all` measures every series (nothing else), writes each into the report
/// with its x values and a value for every point of logship's curves, and draws each as an SVG.
#[test]
fn quick_series_give_a_value_per_point_and_a_plot_each() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let out = bench(&["--quick", "--series", "all", "--out", &out_dir.display().to_string()]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "bench failed:\n{stdout}\n{stderr}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["rows"], json!([]), "with --series alone no scenario runs: {report}");
    let kib = |k: u64| (k << 10) as f64;
    let expected: [(&str, Vec<f64>); 7] = [
        ("producers", vec![1.0, 4.0, 16.0, 64.0, 256.0]),
        ("size", vec![64.0, kib(1), kib(16), kib(256), kib(4096)]),
        ("slaves", vec![1.0, 2.0, 4.0, 8.0]),
        ("log", vec![kib(4096), kib(16 << 10)]),
        ("recovery", vec![kib(2048)]),
        ("memory", vec![1.0, 2.0, 4.0, 8.0]),
        ("memory-catchup", vec![kib(4096), kib(16 << 10)]),
    ];
    let series = report["series"].as_array().expect("a series list");
    let names: Vec<&str> = series.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, expected.iter().map(|(n, _)| *n).collect::<Vec<_>>());
    for (s, (name, x)) in series.iter().zip(&expected) {
        let got: Vec<f64> = s["x"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(&got, x, "{name}'s x values");
        let curves = s["curves"].as_array().unwrap();
        assert!(!curves.is_empty(), "{name} has no curve");
        for c in curves {
            let values = c["values"].as_array().unwrap();
            assert_eq!(values.len(), x.len(), "{name}: {c}");
            assert!(
                values.iter().all(|v| v.as_f64().is_some_and(f64::is_finite)),
                "{name}: a point without a value: {c}"
            );
        }
        let svg = std::fs::read_to_string(out_dir.join(format!("{name}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("<polyline"), "{name}.svg: {svg}");
        assert!(stdout.contains(s["title"].as_str().unwrap().split(' ').next().unwrap()), "{stdout}");
    }
    for line in stdout.lines() {
        assert!(line.chars().count() <= WIDTH, "a line over {WIDTH} columns:\n{line}");
    }
}
