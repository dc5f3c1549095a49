//! The pure parts of the HTML report: escaping, axis ticks, the
//! percentile axis's log(1/(1−p)) mapping, series to SVG paths, and a line
//! chart drawn as inline SVG. Plain values in, text out; no I/O.

use std::fmt::Write as _;

/// `text` safe inside HTML or SVG text and attribute values (quoted).
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Where percentile `p` (a fraction below 1) sits on the spectrum's x axis:
/// log10(1/(1−p)), as HdrHistogram's plotter draws it (50 % at 0.30, 90 %
/// at 1, 99 % at 2, 99.9 % at 3).
pub(crate) fn percentile_x(p: f64) -> f64 {
    -(1.0 - p.clamp(0.0, 1.0 - 1e-12)).log10()
}

/// The percentile (fraction) at spectrum position `x`, [`percentile_x`]'s
/// inverse.
pub(crate) fn percentile_at(x: f64) -> f64 {
    1.0 - 10f64.powf(-x)
}

/// The spectrum axis's labelled ticks up to `max_x`: 50 %, 90 %, 99 %,
/// 99.9 %, … (`0 %` at the origin).
pub(crate) fn percentile_ticks(max_x: f64) -> Vec<(f64, String)> {
    let mut ticks = vec![(0.0, "0%".to_owned()), (percentile_x(0.5), "50%".into())];
    let mut k = 1u32;
    while f64::from(k) <= max_x + 1e-9 {
        // 90 %, 99 %, 99.9 %, …: k nines.
        let label = match k {
            1 => "90%".to_owned(),
            2 => "99%".to_owned(),
            _ => format!("99.{}%", "9".repeat(k as usize - 2)),
        };
        ticks.push((f64::from(k), label));
        k += 1;
    }
    ticks
}

/// Up to about `n` round tick values (1, 2 or 5 × 10^k apart) covering
/// `[lo, hi]`, from the first multiple at or below `lo`.
pub(crate) fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || n == 0 {
        return Vec::new();
    }
    let (lo, hi) = if hi > lo { (lo, hi) } else { (lo, lo + 1.0) };
    let raw = (hi - lo) / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).floor();
    // Round away float noise (0.6000000000000001) at the step's decimals.
    let scale = 10f64.powi((-step.log10().floor()).max(0.0) as i32);
    let mut out = Vec::new();
    let mut i = first;
    loop {
        let v = (i * step * scale).round() / scale;
        out.push(if v == 0.0 { 0.0 } else { v });
        if v >= hi - step * 1e-9 {
            break;
        }
        i += 1.0;
    }
    out
}

/// A tick value as a short label: no trailing zeros (`0.5`, `2`, `1500`).
pub(crate) fn tick_label(v: f64) -> String {
    if v.abs() >= 1000.0 && v.fract() == 0.0 {
        return format!("{v:.0}");
    }
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_owned()
    }
}

/// A linear map from a data range onto a pixel range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scale {
    pub d0: f64,
    pub d1: f64,
    pub r0: f64,
    pub r1: f64,
}

impl Scale {
    pub(crate) fn at(&self, v: f64) -> f64 {
        if self.d1 == self.d0 {
            return self.r0;
        }
        self.r0 + (v - self.d0) / (self.d1 - self.d0) * (self.r1 - self.r0)
    }
}

/// The `d` attribute of an SVG path through each segment's points (one
/// `M` per segment, `L` after it); empty segments are skipped.
pub(crate) fn path_d(segments: &[Vec<(f64, f64)>], x: Scale, y: Scale) -> String {
    let mut d = String::new();
    for seg in segments {
        for (i, &(px, py)) in seg.iter().enumerate() {
            let cmd = if i == 0 { 'M' } else { 'L' };
            if !d.is_empty() {
                d.push(' ');
            }
            let _ = write!(d, "{cmd}{:.1},{:.1}", x.at(px), y.at(py));
        }
    }
    d
}

/// One line of a chart, drawn in pieces (a gap between stages).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    pub label: String,
    pub color: &'static str,
    /// Drawn dashed (the base run of a comparison).
    pub dashed: bool,
    pub segments: Vec<Vec<(f64, f64)>>,
}

/// What a vertical marker shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MarkerKind {
    /// A stage starts.
    Stage,
    Failover,
    /// The audit found acknowledged writes missing.
    Audit,
}

impl MarkerKind {
    fn class(self) -> &'static str {
        match self {
            MarkerKind::Stage => "stage",
            MarkerKind::Failover => "failover",
            MarkerKind::Audit => "audit",
        }
    }
}

/// A vertical line at `x` with a short label and a tooltip.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Marker {
    pub x: f64,
    pub kind: MarkerKind,
    pub label: String,
    pub title: String,
}

/// A shaded span of the x axis (a stage whose thresholds failed).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Band {
    pub x0: f64,
    pub x1: f64,
    pub label: String,
    pub title: String,
}

/// A line chart.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_range: (f64, f64),
    /// Tick positions and labels of the x axis (empty: [`nice_ticks`]).
    pub x_ticks: Vec<(f64, String)>,
    pub series: Vec<Series>,
    pub markers: Vec<Marker>,
    pub bands: Vec<Band>,
}

/// The chart's width in its own units; the page scales it to its width.
pub(crate) const WIDTH: f64 = 1200.0;
/// The plot's height (axes included), without the marks above it and the
/// legend below it.
pub(crate) const PLOT_HEIGHT: f64 = 280.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
/// The title's band above everything.
const TITLE: f64 = 26.0;
const BOTTOM: f64 = 44.0;
/// One line of text: a lane of marker labels, a row of the legend.
const LINE: f64 = 14.0;
/// The width of one character of the 11 px labels, an upper estimate for
/// the sans-serif fonts browsers pick (measured at 5.5–6.3 px), so that
/// labels laid out with it never touch.
pub(crate) const CHAR: f64 = 6.6;

/// The estimated width of a label of 11 px text.
pub(crate) fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * CHAR
}

/// Greedy lanes for labels spanning `[x, x + width)` in order of `x`:
/// each goes into the first lane whose last label ended before it starts.
/// Returns each label's lane (in the input's order) and the lanes used.
pub(crate) fn lanes(spans: &[(f64, f64)]) -> (Vec<usize>, usize) {
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by(|&a, &b| spans[a].0.total_cmp(&spans[b].0));
    let mut ends: Vec<f64> = Vec::new();
    let mut lane = vec![0; spans.len()];
    for i in order {
        let (x, w) = spans[i];
        let l = match ends.iter().position(|&e| e + 6.0 <= x) {
            Some(l) => l,
            None => {
                ends.push(f64::NEG_INFINITY);
                ends.len() - 1
            }
        };
        ends[l] = x + w;
        lane[i] = l;
    }
    (lane, ends.len())
}

/// The legend's entries laid out in rows under the plot: each entry's
/// (x, row), and the rows used.
fn legend_rows(labels: &[&str]) -> (Vec<(f64, usize)>, usize) {
    let mut at = Vec::new();
    let (mut x, mut row) = (LEFT, 0);
    for l in labels {
        let w = 22.0 + text_width(l) + 18.0;
        if x > LEFT && x + w > WIDTH - RIGHT {
            x = LEFT;
            row += 1;
        }
        at.push((x, row));
        x += w;
    }
    (at, if labels.is_empty() { 0 } else { row + 1 })
}

impl Chart {
    /// The largest y of any point (0 with none).
    fn y_max(&self) -> f64 {
        self.series
            .iter()
            .flat_map(|s| s.segments.iter().flatten())
            .map(|p| p.1)
            .fold(0.0, f64::max)
    }

    /// The chart as an `<svg>` element, as wide as the page: the title;
    /// the markers' labels in lanes above the plot (none over another);
    /// the plot with its axes, bands, marker lines and one
    /// `<path class="series">` per series; the legend in rows under it.
    pub(crate) fn svg(&self) -> String {
        let (x0, x1) = if self.x_range.1 > self.x_range.0 {
            self.x_range
        } else {
            (self.x_range.0, self.x_range.0 + 1.0)
        };
        let xs = Scale {
            d0: x0,
            d1: x1,
            r0: LEFT,
            r1: WIDTH - RIGHT,
        };
        let markers: Vec<&Marker> = self
            .markers
            .iter()
            .filter(|m| m.x >= x0 && m.x <= x1)
            .collect();
        // A label right of its line, or left of it where it would run
        // past the chart's edge.
        let spans: Vec<(f64, f64)> = markers
            .iter()
            .map(|m| {
                let (x, w) = (xs.at(m.x), text_width(&m.label));
                let start = if x + 3.0 + w <= WIDTH {
                    x + 3.0
                } else {
                    (x - 3.0 - w).max(0.0)
                };
                (start, w)
            })
            .collect();
        let (lane, lanes) = lanes(&spans);
        let top = TITLE + LINE * lanes as f64 + 4.0;
        let bottom = top + PLOT_HEIGHT - BOTTOM;
        let labels: Vec<&str> = self.series.iter().map(|s| s.label.as_str()).collect();
        let (legend, rows) = legend_rows(&labels);
        let height = bottom + BOTTOM + LINE * rows as f64 + 6.0;
        let y_ticks = nice_ticks(0.0, self.y_max(), 5);
        let y1 = y_ticks
            .last()
            .copied()
            .unwrap_or(1.0)
            .max(f64::MIN_POSITIVE);
        let ys = Scale {
            d0: 0.0,
            d1: y1,
            r0: bottom,
            r1: top,
        };
        let l = Layout {
            x0,
            x1,
            xs,
            ys,
            top,
            bottom,
            y_ticks,
        };
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg class="chart" viewBox="0 0 {WIDTH} {height:.0}" role="img"><title>{}</title>"#,
            escape(&self.title)
        );
        let _ = write!(
            s,
            r#"<text class="title" x="{LEFT}" y="18">{}</text>"#,
            escape(&self.title)
        );
        self.write_bands(&mut s, &l);
        self.write_axes(&mut s, &l);
        write_markers(&mut s, &l, &markers, &lane, &spans);
        self.write_series(&mut s, &l, legend);
        s.push_str("</svg>");
        s
    }

    /// The bands (a stage, a window) as shaded spans over the plot, each
    /// labelled where it is wide enough.
    fn write_bands(&self, s: &mut String, l: &Layout) {
        let Layout {
            x0,
            x1,
            xs,
            top,
            bottom,
            ..
        } = *l;
        for b in &self.bands {
            let (a, z) = (xs.at(b.x0.max(x0)), xs.at(b.x1.min(x1)));
            let _ = write!(
                s,
                r#"<rect class="band" x="{a:.1}" y="{top:.1}" width="{:.1}" height="{:.1}"><title>{}</title></rect>"#,
                (z - a).max(0.0),
                bottom - top,
                escape(&b.title),
            );
            // The label only where the band is wide enough for it.
            if z - a >= text_width(&b.label) + 6.0 {
                let _ = write!(
                    s,
                    r#"<text class="band-label" x="{:.1}" y="{:.1}">{}</text>"#,
                    a + 3.0,
                    top + 12.0,
                    escape(&b.label)
                );
            }
        }
    }

    /// The axes, the y grid and ticks, the x ticks (the chart's own, or
    /// round numbers) and both axis labels.
    fn write_axes(&self, s: &mut String, l: &Layout) {
        let Layout {
            x0,
            x1,
            xs,
            ys,
            top,
            bottom,
            ..
        } = *l;
        let y_ticks = &l.y_ticks;
        // Axes and grid.
        let r = WIDTH - RIGHT;
        let _ = write!(
            s,
            r#"<g class="axis"><line x1="{LEFT}" y1="{bottom:.1}" x2="{r:.1}" y2="{bottom:.1}"/><line x1="{LEFT}" y1="{top:.1}" x2="{LEFT}" y2="{bottom:.1}"/>"#,
        );
        for &v in y_ticks {
            let y = ys.at(v);
            let _ = write!(
                s,
                r#"<line class="grid" x1="{LEFT}" y1="{y:.1}" x2="{r:.1}" y2="{y:.1}"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                LEFT - 4.0,
                y + 4.0,
                tick_label(v)
            );
        }
        let x_ticks: Vec<(f64, String)> = if self.x_ticks.is_empty() {
            nice_ticks(x0, x1, 10)
                .into_iter()
                .filter(|v| *v >= x0 && *v <= x1)
                .map(|v| (v, tick_label(v)))
                .collect()
        } else {
            self.x_ticks.clone()
        };
        for (v, label) in &x_ticks {
            let x = xs.at(*v);
            let _ = write!(
                s,
                r#"<line x1="{x:.1}" y1="{bottom:.1}" x2="{x:.1}" y2="{:.1}"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                bottom + 4.0,
                // Below the lowest y tick's label, which ends at the axis.
                bottom + 19.0,
                escape(label),
            );
        }
        let mid = (top + bottom) / 2.0;
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text x="14" y="{mid:.1}" text-anchor="middle" transform="rotate(-90 14 {mid:.1})">{}</text></g>"#,
            (LEFT + WIDTH - RIGHT) / 2.0,
            bottom + 35.0,
            escape(&self.x_label),
            escape(&self.y_label)
        );
    }

    /// One `<path class="series">` per series, then the legend in rows
    /// under the axis label.
    fn write_series(&self, s: &mut String, l: &Layout, legend: Vec<(f64, usize)>) {
        let Layout { xs, ys, bottom, .. } = *l;
        for series in &self.series {
            let d = path_d(&series.segments, xs, ys);
            let _ = write!(
                s,
                r#"<path class="series{}" data-series="{}" d="{d}" stroke="{}"><title>{}</title></path>"#,
                if series.dashed { " dashed" } else { "" },
                escape(&series.label),
                series.color,
                escape(&series.label)
            );
        }
        // The legend, in rows under the axis label.
        for (series, (lx, row)) in self.series.iter().zip(legend) {
            let ly = bottom + BOTTOM + 4.0 + LINE * row as f64;
            let _ = write!(
                s,
                r#"<g class="legend"><line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{}"{}/><text x="{:.1}" y="{:.1}">{}</text></g>"#,
                lx + 18.0,
                series.color,
                if series.dashed {
                    r#" stroke-dasharray="5 3""#
                } else {
                    ""
                },
                lx + 22.0,
                ly + 4.0,
                escape(&series.label)
            );
        }
    }
}

/// Where a chart's parts go: the x range drawn, the two scales, the
/// plot's top and bottom and the y axis's ticks.
struct Layout {
    x0: f64,
    x1: f64,
    xs: Scale,
    ys: Scale,
    top: f64,
    bottom: f64,
    y_ticks: Vec<f64>,
}

/// Each marker as a line across the plot with its label in its lane
/// above it (`lane` and `spans` are the labels' lanes and x spans).
fn write_markers(
    s: &mut String,
    layout: &Layout,
    markers: &[&Marker],
    lane: &[usize],
    spans: &[(f64, f64)],
) {
    let Layout { xs, bottom, .. } = *layout;
    for (m, (l, (lx, _))) in markers.iter().zip(lane.iter().zip(spans)) {
        let x = xs.at(m.x);
        let _ = write!(
            s,
            r#"<g class="marker {}"><line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{bottom:.1}"/><text x="{lx:.1}" y="{:.1}">{}</text><title>{}</title></g>"#,
            m.kind.class(),
            TITLE + LINE * *l as f64 + 4.0,
            TITLE + LINE * (*l as f64 + 1.0),
            escape(&m.label),
            escape(&m.title)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup() {
        assert_eq!(
            escape(r#"<script>alert("x&y")</script>'"#),
            "&lt;script&gt;alert(&quot;x&amp;y&quot;)&lt;/script&gt;&#39;"
        );
        assert_eq!(escape("plain stage"), "plain stage");
    }

    #[test]
    fn percentiles_sit_at_their_nines() {
        assert!((percentile_x(0.9) - 1.0).abs() < 1e-12);
        assert!((percentile_x(0.99) - 2.0).abs() < 1e-12);
        assert!((percentile_x(0.999) - 3.0).abs() < 1e-9);
        assert!((percentile_x(0.5) - 2f64.log10()).abs() < 1e-12);
        assert_eq!(percentile_x(0.0), 0.0);
        // 100 % would be infinitely far: clamped to a finite point.
        assert!(percentile_x(1.0).is_finite());
        for p in [0.25, 0.5, 0.9, 0.9999] {
            assert!((percentile_at(percentile_x(p)) - p).abs() < 1e-12);
        }
        let labels: Vec<String> = percentile_ticks(4.2).into_iter().map(|t| t.1).collect();
        assert_eq!(labels, ["0%", "50%", "90%", "99%", "99.9%", "99.99%"]);
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(nice_ticks(0.0, 10.0, 5), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(nice_ticks(0.0, 9.1, 5), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(nice_ticks(0.0, 0.7, 3), [0.0, 0.5, 1.0]);
        assert_eq!(nice_ticks(0.0, 201.0, 4), [0.0, 100.0, 200.0, 300.0]);
        assert_eq!(nice_ticks(12.0, 47.0, 4), [10.0, 20.0, 30.0, 40.0, 50.0]);
        // No data: one unit.
        assert_eq!(nice_ticks(0.0, 0.0, 5), [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        assert!(nice_ticks(f64::NAN, 1.0, 5).is_empty());
        assert_eq!(tick_label(0.30000000000000004), "0.3");
        assert_eq!(tick_label(2.0), "2");
        assert_eq!(tick_label(1500.0), "1500");
    }

    #[test]
    fn a_series_becomes_one_subpath_per_segment() {
        let x = Scale {
            d0: 0.0,
            d1: 10.0,
            r0: 0.0,
            r1: 100.0,
        };
        let y = Scale {
            d0: 0.0,
            d1: 1.0,
            r0: 50.0,
            r1: 0.0,
        };
        let d = path_d(
            &[vec![(0.0, 0.0), (5.0, 1.0)], vec![], vec![(10.0, 0.5)]],
            x,
            y,
        );
        assert_eq!(d, "M0.0,50.0 L50.0,0.0 M100.0,25.0");
        assert_eq!(path_d(&[], x, y), "");
    }

    #[test]
    fn a_chart_draws_each_series_and_escapes_its_labels() {
        let chart = Chart {
            title: "w <b>".into(),
            x_label: "s".into(),
            y_label: "ops/s".into(),
            x_range: (0.0, 10.0),
            x_ticks: Vec::new(),
            series: vec![
                Series {
                    label: "insert".into(),
                    color: "#1f77b4",
                    dashed: false,
                    segments: vec![vec![(0.0, 1.0), (10.0, 2.0)]],
                },
                Series {
                    label: "<script>x</script>".into(),
                    color: "#ff7f0e",
                    dashed: true,
                    segments: vec![vec![(0.0, 3.0)]],
                },
            ],
            markers: vec![Marker {
                x: 4.0,
                kind: MarkerKind::Failover,
                label: "failover".into(),
                title: "a → b".into(),
            }],
            bands: Vec::new(),
        };
        let svg = chart.svg();
        assert_eq!(svg.matches(r#"<path class="series"#).count(), 2, "{svg}");
        assert!(svg.contains(r#"class="series dashed""#));
        assert!(svg.contains(r#"<g class="marker failover">"#));
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(!svg.contains("<b>"), "{svg}");
        assert!(svg.contains("&lt;script&gt;x&lt;/script&gt;"));
    }

    #[test]
    fn labels_that_would_touch_go_into_separate_lanes() {
        // Two labels 100 wide at 0 and 50 collide; one at 120 fits after
        // the first; one at 300 fits in the first lane again.
        let (lane, n) = lanes(&[(0.0, 100.0), (50.0, 100.0), (120.0, 50.0), (300.0, 10.0)]);
        assert_eq!(lane, [0, 1, 0, 0]);
        assert_eq!(n, 2);
        assert_eq!(lanes(&[]), (vec![], 0));
    }

    #[test]
    fn the_legend_wraps_into_rows_within_the_width() {
        let long = "x".repeat(60);
        let labels: Vec<&str> = (0..5).map(|_| long.as_str()).collect();
        let (at, rows) = legend_rows(&labels);
        // 60 characters: about 436 units each, two to a row of 1120.
        assert_eq!(rows, 3);
        assert_eq!(at.iter().map(|a| a.1).collect::<Vec<_>>(), [0, 0, 1, 1, 2]);
        for (x, _) in at {
            assert!(x + 22.0 + text_width(&long) <= WIDTH - RIGHT);
        }
    }
}
