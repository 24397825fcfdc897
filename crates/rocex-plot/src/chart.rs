//! The charts of docs/performance.md, drawn as SVG: throughput by message size,
//! throughput by QP count, the latency distribution of rocex against kernel UDP, and
//! goodput against loss; and docs/storage.md's iSER IOPS per workload and setup.

use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::ranged1d::AsRangedCoord;
use plotters::prelude::*;

use crate::results::{LossResults, Percentiles, Results, StorageResults};

/// A chart that could not be drawn, and why.
#[derive(Debug)]
pub(crate) struct DrawError {
    pub(crate) chart: String,
    pub(crate) why: String,
}

const SIZE: (u32, u32) = (760, 430);
const FONT: &str = "sans-serif";
const ROCEX: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const TCP: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const UDP: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);

/// What plotters' SVG backend fails with.
type SvgError = DrawingAreaErrorKind<std::io::Error>;

/// The page of one chart.
type Page<'b> = DrawingArea<SVGBackend<'b>, Shift>;

/// A chart on a page, with plain (linear, log or segmented) axes.
type Chart<'a, 'b, X, Y> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>;

/// Draws one chart into the SVG file `path`: a white page, `draw`'s content, then the
/// file; a failure names the chart.
fn svg(path: &Path, draw: impl FnOnce(&Page<'_>) -> Result<(), SvgError>) -> Result<(), DrawError> {
    svg_sized(path, SIZE, draw)
}

/// [`svg`] on a page of `size` pixels.
fn svg_sized(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(&Page<'_>) -> Result<(), SvgError>,
) -> Result<(), DrawError> {
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)
        .and_then(|()| draw(&root))
        .and_then(|()| root.present())
        .map_err(|e| DrawError {
            chart: path.display().to_string(),
            why: e.to_string(),
        })
}

/// The captioned frame every chart shares, over `x` and `y`.
fn frame<'a, 'b, X: AsRangedCoord, Y: AsRangedCoord>(
    root: &'a Page<'b>,
    caption: &str,
    x: X,
    y: Y,
) -> Result<Chart<'a, 'b, X::CoordDescType, Y::CoordDescType>, SvgError> {
    ChartBuilder::on(root)
        .caption(caption, (FONT, 18))
        .margin(14)
        .x_label_area_size(42)
        .y_label_area_size(56)
        .build_cartesian_2d(x, y)
}

/// `4096` as `4 KiB`, `1048576` as `1 MiB`.
fn bytes(n: f64) -> String {
    match n {
        n if n >= f64::from(1 << 20) => format!("{} MiB", n / f64::from(1 << 20)),
        n if n >= 1024.0 => format!("{} KiB", n / 1024.0),
        n => format!("{n} B"),
    }
}

fn legend_line(color: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
}

/// A line through `pts` and its legend entry `label`.
fn line<X: Ranged, Y: Ranged>(
    c: &mut Chart<'_, '_, X, Y>,
    pts: Vec<(X::ValueType, Y::ValueType)>,
    color: RGBColor,
    label: impl Into<String>,
) -> Result<(), SvgError>
where
    (X::ValueType, Y::ValueType): Clone + 'static,
{
    c.draw_series(LineSeries::new(pts, color.stroke_width(2)))?
        .label(label)
        .legend(legend_line(color));
    Ok(())
}

/// A line through `pts` with a dot on each point, and its legend entry `label`.
fn dotted_line<X: Ranged, Y: Ranged>(
    c: &mut Chart<'_, '_, X, Y>,
    pts: Vec<(X::ValueType, Y::ValueType)>,
    color: RGBColor,
    label: impl Into<String>,
) -> Result<(), SvgError>
where
    (X::ValueType, Y::ValueType): Clone + 'static,
{
    line(c, pts.clone(), color, label)?;
    c.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))?;
    Ok(())
}

/// The legend box, at `position`.
fn legend<'a, 'b: 'a, X: Ranged, Y: Ranged>(
    c: &mut Chart<'a, 'b, X, Y>,
    position: SeriesLabelPosition,
) -> Result<(), SvgError> {
    c.configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()
}

/// Gb/s of `rocex perf write bw` against log2 of the message size, with iperf3's and raw
/// UDP's throughput as horizontal references.
pub(crate) fn by_size(r: &Results, path: &Path) -> Result<(), DrawError> {
    let pts: Vec<(f64, f64)> = r
        .msg_size
        .iter()
        .filter_map(|p| Some(((p.size as f64).log2(), p.gbps?)))
        .collect();
    let lo = pts
        .iter()
        .map(|p| p.0)
        .fold(f64::INFINITY, f64::min)
        .min(12.0);
    let hi = pts
        .iter()
        .map(|p| p.0)
        .fold(f64::NEG_INFINITY, f64::max)
        .max(20.0);
    let refs = [
        ("iperf3, 1 TCP stream", r.references.iperf3_gbps, TCP),
        ("raw UDP, 4124 B per sendto", r.references.udp_gbps, UDP),
    ];
    let top = pts
        .iter()
        .map(|p| p.1)
        .chain(refs.iter().filter_map(|x| x.1))
        .fold(1.0, f64::max)
        * 1.25;
    svg(path, |root| {
        let mut c = frame(
            root,
            "RDMA WRITE throughput by message size (1 QP, MTU 4096)",
            lo..hi,
            0.0..top,
        )?;
        c.configure_mesh()
            .x_labels((hi - lo) as usize + 1)
            .x_label_formatter(&|x| bytes(x.exp2().round()))
            .x_desc("message size")
            .y_desc("Gb/s (payload)")
            .draw()?;
        dotted_line(&mut c, pts, ROCEX, "rocex perf write bw")?;
        for (name, v, color) in refs {
            let Some(v) = v else { continue };
            line(
                &mut c,
                vec![(lo, v), (hi, v)],
                color,
                format!("{name}: {v:.1} Gb/s"),
            )?;
        }
        legend(&mut c, SeriesLabelPosition::LowerRight)
    })
}

/// Gb/s of `rocex perf write bw` (64 KiB) against log2 of the QP count; counts whose run
/// failed are named in the caption.
pub(crate) fn by_qps(r: &Results, path: &Path) -> Result<(), DrawError> {
    let pts: Vec<(f64, f64)> = r
        .qps
        .iter()
        .filter_map(|p| Some((f64::from(p.qps).log2(), p.gbps?)))
        .collect();
    let failed: Vec<String> = r
        .qps
        .iter()
        .filter(|p| p.gbps.is_none())
        .map(|p| p.qps.to_string())
        .collect();
    let hi = r
        .qps
        .iter()
        .map(|p| f64::from(p.qps).log2())
        .fold(12.0, f64::max);
    let top = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.25;
    let caption = if failed.is_empty() {
        "RDMA WRITE 64 KiB throughput by QP count".to_owned()
    } else {
        format!(
            "RDMA WRITE 64 KiB throughput by QP count (failed: {} QPs)",
            failed.join(", ")
        )
    };
    svg(path, |root| {
        let mut c = frame(root, &caption, -0.5..hi + 0.5, 0.0..top)?;
        c.configure_mesh()
            .x_labels(hi as usize + 2)
            .x_label_formatter(&|x| format!("{}", x.exp2().round()))
            .x_desc("RC QPs (all in one process on each side)")
            .y_desc("Gb/s (payload, all QPs)")
            .draw()?;
        dotted_line(&mut c, pts, ROCEX, "rocex perf write bw, MTU 4096")?;
        legend(&mut c, SeriesLabelPosition::LowerLeft)
    })
}

/// Round-trip percentiles (min, p50, p99, p99.9, max) of rocex's 8-byte WRITE and of the
/// kernel UDP busy-poll ping-pong, on a log scale.
pub(crate) fn latency(r: &Results, path: &Path) -> Result<(), DrawError> {
    let series = [
        (
            "rocex perf write lat, 8 B (round trip)",
            &r.latency.rocex_rtt_us,
            ROCEX,
        ),
        (
            "kernel UDP busy-poll ping-pong, 40 B (python3)",
            &r.latency.udp_rtt_us,
            UDP,
        ),
    ];
    let points = |p: &Percentiles| -> Vec<(SegmentValue<i32>, f64)> {
        p.points()
            .iter()
            .enumerate()
            .filter_map(|(i, (_, v))| Some((SegmentValue::CenterOf(i as i32), (*v)?)))
            .collect()
    };
    let all: Vec<f64> = series
        .iter()
        .flat_map(|s| points(s.1))
        .map(|p| p.1)
        .filter(|v| *v > 0.0)
        .collect();
    let lo = all.iter().copied().reduce(f64::min).unwrap_or(1.0) * 0.8;
    let hi = all.iter().copied().fold(1.0, f64::max) * 1.5;
    let labels = series[0].1.points().map(|(l, _)| l);
    svg(path, |root| {
        let mut c = frame(
            root,
            "Round-trip latency distribution",
            (0..4).into_segmented(),
            (lo..hi).log_scale(),
        )?;
        c.configure_mesh()
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels
                    .get(*i as usize)
                    .map_or_else(String::new, |l| (*l).to_owned()),
                _ => String::new(),
            })
            .y_label_formatter(&|y| format!("{y:.0}"))
            .x_desc("percentile")
            .y_desc("round trip, us (log)")
            .draw()?;
        for (name, p, color) in series {
            dotted_line(&mut c, points(p), color, name)?;
        }
        legend(&mut c, SeriesLabelPosition::UpperLeft)
    })
}

/// Goodput relative to lossless against the loss rate, both axes logarithmic: one line per
/// stream and recovery mode, rocex's solid, rxe's (`--rxe-recovery`) dashed.
pub(crate) fn loss(r: &LossResults, path: &Path) -> Result<(), DrawError> {
    const COLORS: [RGBColor; 2] = [ROCEX, TCP];
    svg(path, |root| {
        let mut c = frame(
            root,
            "Goodput under random loss, rocex <-> rocex",
            (0.05f64..20.0).log_scale(),
            (0.001f64..1.5).log_scale(),
        )?;
        c.configure_mesh()
            .x_label_formatter(&|x| format!("{x}%"))
            .y_label_formatter(&|y| format!("{y}"))
            .x_desc("datagrams lost (both ways, log)")
            .y_desc("goodput / lossless (log)")
            .draw()?;
        for s in &r.series {
            let color = COLORS[usize::from(s.op == "read")];
            let pts: Vec<(f64, f64)> = s
                .loss_pct
                .iter()
                .zip(&s.relative)
                .filter_map(|(&l, &g)| Some((l, g?)).filter(|_| l > 0.0))
                .map(|(l, g)| (l, g.max(0.001)))
                .collect();
            if s.mode == "rxe" {
                c.draw_series(DashedLineSeries::new(
                    pts.clone(),
                    6,
                    4,
                    color.stroke_width(2),
                ))?
                .label(s.label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 8, y)], color.stroke_width(2))
                });
                c.draw_series(
                    pts.into_iter()
                        .map(|p| Cross::new(p, 4, color.stroke_width(2))),
                )?;
            } else {
                dotted_line(&mut c, pts, color, s.label.as_str())?;
            }
        }
        legend(&mut c, SeriesLabelPosition::LowerLeft)
    })
}

/// The setups' bar colours, in the order of `StorageResults::setups` (repeated past four).
pub(crate) const SETUP_COLORS: [RGBColor; 4] = [
    RGBColor(0x7f, 0x7f, 0x7f),
    ROCEX,
    RGBColor(0xff, 0x7f, 0x0e),
    UDP,
];

/// iSER IOPS per workload (phase, block size, depth) on a log scale, one bar per setup in
/// each workload's group; a setup that does not run a workload has no bar there.
pub(crate) fn storage(r: &StorageResults, path: &Path) -> Result<(), DrawError> {
    let values = r.workloads.iter().flat_map(|w| w.iops.iter().flatten());
    let (min, max) = values.fold((f64::INFINITY, 1.0f64), |(lo, hi), &v| {
        (lo.min(v), hi.max(v))
    });
    let lo = 10f64.powf(min.min(max).log10().floor());
    let hi = 10f64.powf((max * 1.5).log10().ceil());
    let names: Vec<String> = r
        .workloads
        .iter()
        .map(|w| format!("{} {} qd{}", w.phase, w.bs, w.depth))
        .collect();
    let last = i32::try_from(r.workloads.len()).unwrap_or(i32::MAX) - 1;
    let width = 0.8 / r.setups.len().max(1) as f64;
    let caption = format!(
        "iSER IOPS per workload (medians of {} runs at {})",
        r.runs, r.rev
    );
    svg_sized(path, (1000, 460), |root| {
        // One category per workload, each split 0..1 among the setups' bars.
        let mut c = frame(
            root,
            &caption,
            (0..last.max(0)).nested_coord(|_| 0.0..1.0),
            (lo..hi).log_scale(),
        )?;
        c.configure_mesh()
            .disable_x_mesh()
            .x_labels(names.len())
            .x_label_formatter(&|x| {
                usize::try_from(*x.category())
                    .ok()
                    .and_then(|i| names.get(i))
                    .cloned()
                    .unwrap_or_default()
            })
            .y_label_formatter(&|y| format!("{y:.0}"))
            .x_desc("phase, block size, queue depth")
            .y_desc("IOPS (log)")
            .draw()?;
        for (j, setup) in r.setups.iter().enumerate() {
            let color = SETUP_COLORS[j % SETUP_COLORS.len()];
            let x = 0.1 + j as f64 * width;
            let bars = (0..).zip(&r.workloads).filter_map(|(i, w)| {
                let v = (*w.iops.get(j)?)?;
                Some(Rectangle::new(
                    [
                        (NestedValue::Value(i, x), lo),
                        (NestedValue::Value(i, x + width * 0.9), v),
                    ],
                    color.filled(),
                ))
            });
            c.draw_series(bars)?
                .label(setup.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        legend(&mut c, SeriesLabelPosition::UpperRight)
    })
}
