//! `rocex-plot RESULTS.json OUT_DIR`: draws the charts of docs/performance.md
//! (`msg_size.svg`, `qps.svg`, `latency.svg`) from the results `just bench-compare`
//! collects, `rocex-plot --loss LOSS.json OUT_DIR` the chart `loss.svg` from `just
//! bench-loss`'s, and `rocex-plot --storage STORAGE.json OUT_DIR` docs/storage.md's
//! `storage.svg` from `proto-tests/storage/bench.sh`'s, so that the pictures always come
//! from a measured run.
#![forbid(unsafe_code)]

mod chart;
mod results;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chart::DrawError;
use results::{LossResults, Results, StorageResults};

/// What went wrong, and with which file.
#[derive(Debug)]
enum Error {
    Usage,
    Read(PathBuf, io::Error),
    Parse(PathBuf, serde_json::Error),
    /// Well-formed JSON whose contents the chart cannot draw.
    Content(PathBuf, String),
    Draw(DrawError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Usage => write!(
                f,
                "usage: rocex-plot RESULTS.json OUT_DIR | rocex-plot --loss LOSS.json OUT_DIR \
                 | rocex-plot --storage STORAGE.json OUT_DIR"
            ),
            Self::Read(p, e) => write!(f, "{}: {e}", p.display()),
            Self::Parse(p, e) => write!(f, "{}: not the results expected: {e}", p.display()),
            Self::Content(p, why) => write!(f, "{}: {why}", p.display()),
            Self::Draw(d) => write!(f, "{}: {}", d.chart, d.why),
        }
    }
}

/// One chart's drawing function.
type Draw = fn(&Results, &Path) -> Result<(), DrawError>;

/// Reads the results and draws every chart into `out`; returns the files written.
fn plot(results: &Path, out: &Path) -> Result<Vec<PathBuf>, Error> {
    let text = std::fs::read_to_string(results).map_err(|e| Error::Read(results.to_owned(), e))?;
    let r: Results =
        serde_json::from_str(&text).map_err(|e| Error::Parse(results.to_owned(), e))?;
    std::fs::create_dir_all(out).map_err(|e| Error::Read(out.to_owned(), e))?;
    let charts: [(&str, Draw); 3] = [
        ("msg_size.svg", chart::by_size),
        ("qps.svg", chart::by_qps),
        ("latency.svg", chart::latency),
    ];
    let mut written = Vec::new();
    for (name, draw) in charts {
        let path = out.join(name);
        draw(&r, &path).map_err(Error::Draw)?;
        written.push(path);
    }
    Ok(written)
}

/// Reads `just bench-loss`'s results and draws `loss.svg` into `out`.
fn plot_loss(results: &Path, out: &Path) -> Result<Vec<PathBuf>, Error> {
    let text = std::fs::read_to_string(results).map_err(|e| Error::Read(results.to_owned(), e))?;
    let r: LossResults =
        serde_json::from_str(&text).map_err(|e| Error::Parse(results.to_owned(), e))?;
    std::fs::create_dir_all(out).map_err(|e| Error::Read(out.to_owned(), e))?;
    let path = out.join("loss.svg");
    chart::loss(&r, &path).map_err(Error::Draw)?;
    Ok(vec![path])
}

/// Reads `proto-tests/storage/bench.sh`'s medians and draws `storage.svg` into `out`.
fn plot_storage(results: &Path, out: &Path) -> Result<Vec<PathBuf>, Error> {
    let text = std::fs::read_to_string(results).map_err(|e| Error::Read(results.to_owned(), e))?;
    let r: StorageResults =
        serde_json::from_str(&text).map_err(|e| Error::Parse(results.to_owned(), e))?;
    r.check()
        .map_err(|why| Error::Content(results.to_owned(), why))?;
    std::fs::create_dir_all(out).map_err(|e| Error::Read(out.to_owned(), e))?;
    let path = out.join("storage.svg");
    chart::storage(&r, &path).map_err(Error::Draw)?;
    Ok(vec![path])
}

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let run = match args.as_slice() {
        [flag, results, out] if flag.as_os_str() == "--loss" => plot_loss(results, out),
        [flag, results, out] if flag.as_os_str() == "--storage" => plot_storage(results, out),
        [results, out] => plot(results, out),
        _ => Err(Error::Usage),
    };
    match run {
        Ok(files) => {
            for f in files {
                println!("wrote {}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rocex-plot: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"{
      "msg_size": [{"size": 4096, "gbps": 5.0}, {"size": 65536, "gbps": 14.0},
                   {"size": 1048576, "gbps": null}],
      "qps": [{"qps": 1, "gbps": 14.0}, {"qps": 16, "gbps": 12.5}, {"qps": 4096, "gbps": null}],
      "references": {"iperf3_gbps": 19.7, "udp_gbps": null},
      "latency": {
        "rocex_rtt_us": {"min": 7.0, "p50": 8.3, "p99": 10.4, "p999": 30.0, "max": 120.0},
        "udp_rtt_us": {"min": 4.0, "p50": 4.8, "p99": 6.2, "p999": null, "max": 50.0}
      }
    }"#;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rocex-plot-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn draws_every_chart_and_names_failed_runs() {
        let d = scratch("ok");
        std::fs::write(d.join("r.json"), SAMPLE).unwrap();
        let files = plot(&d.join("r.json"), &d.join("svg")).unwrap();
        assert_eq!(files.len(), 3);
        let svg = |n: &str| std::fs::read_to_string(d.join("svg").join(n)).unwrap();
        assert!(svg("msg_size.svg").starts_with("<svg"));
        assert!(svg("msg_size.svg").contains("iperf3, 1 TCP stream: 19.7 Gb/s"));
        assert!(
            !svg("msg_size.svg").contains("raw UDP"),
            "a missing reference is left out"
        );
        assert!(svg("qps.svg").contains("failed: 4096 QPs"));
        assert!(svg("latency.svg").contains("p99.9"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn draws_the_loss_chart() {
        let d = scratch("loss");
        let json = r#"{"runs": 1, "series": [
          {"op": "write", "mode": "rocex", "label": "64 KiB WRITE, rocex recovery",
           "loss_pct": [0, 1, 10], "gbps": [20, 16, 6], "relative": [1, 0.8, 0.3]},
          {"op": "write", "mode": "rxe", "label": "64 KiB WRITE, rxe's recovery",
           "loss_pct": [0, 1, 10], "gbps": [20, 2, null], "relative": [1, 0.1, null]}]}"#;
        std::fs::write(d.join("l.json"), json).unwrap();
        let files = plot_loss(&d.join("l.json"), &d.join("svg")).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("64 KiB WRITE, rocex recovery"));
        assert!(svg.contains("rxe&apos;s recovery") || svg.contains("rxe's recovery"));
        let e = plot_loss(&d.join("svg").join("loss.svg"), &d).unwrap_err();
        assert!(matches!(e, Error::Parse(..)), "an SVG is not results");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// `fill="#RRGGBB"` rectangles in `svg`: the bars of one colour and its legend swatch.
    fn rects_filled(svg: &str, c: plotters::style::RGBColor) -> usize {
        let fill = format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
        svg.lines()
            .filter(|l| l.trim_start().starts_with("<rect") && l.contains(&fill))
            .count()
    }

    #[test]
    fn draws_one_bar_per_measured_cell_of_each_setup() {
        let d = scratch("storage");
        let json = r#"{"runs": 3, "rev": "abc1234",
          "setups": ["rxe<->rxe", "rocex target", "rocex initiator", "rocex both"],
          "workloads": [
            {"phase": "write", "bs": "4k", "depth": 1, "iops": [172, 389, 561, 5004]},
            {"phase": "write", "bs": "4k", "depth": 16, "iops": [589, 790, null, null]},
            {"phase": "verify", "bs": "128k", "depth": 1, "iops": [103, 72, 121, 450.5]}]}"#;
        std::fs::write(d.join("s.json"), json).unwrap();
        let files = plot_storage(&d.join("s.json"), &d.join("svg")).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.starts_with("<svg"));
        for label in [
            "rxe&lt;-&gt;rxe",
            "rocex target",
            "rocex initiator",
            "rocex both",
        ] {
            assert!(svg.contains(label), "{label} in the legend");
        }
        for workload in ["write 4k qd1", "write 4k qd16", "verify 128k qd1"] {
            assert!(svg.contains(workload), "{workload} on the x axis");
        }
        assert!(svg.contains("medians of 3 runs at abc1234"));
        // Each colour: one bar per non-null cell, plus its legend swatch.
        let bars: Vec<usize> = chart::SETUP_COLORS
            .iter()
            .map(|c| rects_filled(&svg, *c) - 1)
            .collect();
        assert_eq!(bars, [3, 3, 2, 2]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn storage_cells_must_match_the_setups() {
        let d = scratch("storage-bad");
        let short = r#"{"runs": 1, "rev": "x", "setups": ["a", "b"],
          "workloads": [{"phase": "write", "bs": "4k", "depth": 1, "iops": [1]}]}"#;
        std::fs::write(d.join("s.json"), short).unwrap();
        let e = plot_storage(&d.join("s.json"), &d).unwrap_err();
        assert!(matches!(e, Error::Content(..)));
        assert!(
            e.to_string()
                .contains("write 4k qd1: 1 IOPS cells for 2 setups"),
            "{e}"
        );
        let zero = short.replace("[1]", "[1, 0]");
        std::fs::write(d.join("s.json"), zero).unwrap();
        let e = plot_storage(&d.join("s.json"), &d).unwrap_err();
        assert!(e.to_string().contains("IOPS 0 is not positive"), "{e}");
        assert!(
            !d.join("storage.svg").exists(),
            "nothing drawn from bad input"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn bad_input_is_an_error_that_names_the_file() {
        let d = scratch("bad");
        std::fs::write(d.join("r.json"), "{\"qps\": 1}").unwrap();
        let e = plot(&d.join("r.json"), &d).unwrap_err();
        assert!(matches!(e, Error::Parse(..)));
        assert!(e.to_string().contains("r.json"));
        let e = plot(&d.join("missing.json"), &d).unwrap_err();
        assert!(matches!(e, Error::Read(..)));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
