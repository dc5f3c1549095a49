//! The pure parts of the HTML report: escaping, axis ticks, the
//! percentile axis's log(1/(1−p)) mapping, series to SVG paths, and a line
//! chart drawn as inline SVG. Plain values in, text out; no I/O.

use std::fmt::Write as _;

/// `text` safe inside HTML or SVG text and attribute values (quoted).
pub fn escape(text: &str) -> String {
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
pub fn percentile_x(p: f64) -> f64 {
    -(1.0 - p.clamp(0.0, 1.0 - 1e-12)).log10()
}

/// The percentile (fraction) at spectrum position `x`, [`percentile_x`]'s
/// inverse.
pub fn percentile_at(x: f64) -> f64 {
    1.0 - 10f64.powf(-x)
}

/// The spectrum axis's labelled ticks up to `max_x`: 50 %, 90 %, 99 %,
/// 99.9 %, … (`0 %` at the origin).
pub fn percentile_ticks(max_x: f64) -> Vec<(f64, String)> {
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
pub fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
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
pub fn tick_label(v: f64) -> String {
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
pub struct Scale {
    pub d0: f64,
    pub d1: f64,
    pub r0: f64,
    pub r1: f64,
}

impl Scale {
    pub fn at(&self, v: f64) -> f64 {
        if self.d1 == self.d0 {
            return self.r0;
        }
        self.r0 + (v - self.d0) / (self.d1 - self.d0) * (self.r1 - self.r0)
    }
}

/// The `d` attribute of an SVG path through each segment's points (one
/// `M` per segment, `L` after it); empty segments are skipped.
pub fn path_d(segments: &[Vec<(f64, f64)>], x: Scale, y: Scale) -> String {
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
pub struct Series {
    pub label: String,
    pub color: &'static str,
    /// Drawn dashed (the base run of a comparison).
    pub dashed: bool,
    pub segments: Vec<Vec<(f64, f64)>>,
}

/// What a vertical marker shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
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
pub struct Marker {
    pub x: f64,
    pub kind: MarkerKind,
    pub label: String,
    pub title: String,
    /// The label's line (0 first): a second run's marks below the first's.
    pub row: u8,
}

/// A shaded span of the x axis (a stage whose thresholds failed).
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    pub x0: f64,
    pub x1: f64,
    pub label: String,
    pub title: String,
}

/// A line chart.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Chart {
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

pub const WIDTH: f64 = 760.0;
pub const HEIGHT: f64 = 260.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 40.0;

impl Chart {
    /// The largest y of any point (0 with none).
    fn y_max(&self) -> f64 {
        self.series
            .iter()
            .flat_map(|s| s.segments.iter().flatten())
            .map(|p| p.1)
            .fold(0.0, f64::max)
    }

    /// The chart as an `<svg>` element: axes with ticks, bands, markers,
    /// one `<path class="series">` per series, and a legend.
    pub fn svg(&self) -> String {
        let (x0, x1) = if self.x_range.1 > self.x_range.0 {
            self.x_range
        } else {
            (self.x_range.0, self.x_range.0 + 1.0)
        };
        let y_ticks = nice_ticks(0.0, self.y_max(), 5);
        let y1 = y_ticks
            .last()
            .copied()
            .unwrap_or(1.0)
            .max(f64::MIN_POSITIVE);
        let xs = Scale {
            d0: x0,
            d1: x1,
            r0: LEFT,
            r1: WIDTH - RIGHT,
        };
        let ys = Scale {
            d0: 0.0,
            d1: y1,
            r0: HEIGHT - BOTTOM,
            r1: TOP,
        };
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg class="chart" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img"><title>{}</title>"#,
            escape(&self.title)
        );
        let _ = write!(
            s,
            r#"<text class="title" x="{LEFT}" y="18">{}</text>"#,
            escape(&self.title)
        );
        for b in &self.bands {
            let (a, z) = (xs.at(b.x0.max(x0)), xs.at(b.x1.min(x1)));
            let _ = write!(
                s,
                r#"<rect class="band" x="{a:.1}" y="{TOP}" width="{:.1}" height="{:.1}"><title>{}</title></rect><text class="band-label" x="{:.1}" y="{:.1}">{}</text>"#,
                (z - a).max(0.0),
                HEIGHT - BOTTOM - TOP,
                escape(&b.title),
                a + 3.0,
                TOP + 12.0,
                escape(&b.label)
            );
        }
        // Axes and grid.
        let _ = write!(
            s,
            r#"<g class="axis"><line x1="{LEFT}" y1="{b:.1}" x2="{r:.1}" y2="{b:.1}"/><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{b:.1}"/>"#,
            b = HEIGHT - BOTTOM,
            r = WIDTH - RIGHT
        );
        for &v in &y_ticks {
            let y = ys.at(v);
            let _ = write!(
                s,
                r#"<line class="grid" x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                WIDTH - RIGHT,
                LEFT - 4.0,
                y + 4.0,
                tick_label(v)
            );
        }
        let x_ticks: Vec<(f64, String)> = if self.x_ticks.is_empty() {
            nice_ticks(x0, x1, 8)
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
                r#"<line x1="{x:.1}" y1="{b:.1}" x2="{x:.1}" y2="{:.1}"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                HEIGHT - BOTTOM + 4.0,
                HEIGHT - BOTTOM + 16.0,
                escape(label),
                b = HEIGHT - BOTTOM
            );
        }
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text x="12" y="{:.1}" text-anchor="middle" transform="rotate(-90 12 {:.1})">{}</text></g>"#,
            (LEFT + WIDTH - RIGHT) / 2.0,
            HEIGHT - 6.0,
            escape(&self.x_label),
            (TOP + HEIGHT - BOTTOM) / 2.0,
            (TOP + HEIGHT - BOTTOM) / 2.0,
            escape(&self.y_label)
        );
        for m in &self.markers {
            if m.x < x0 || m.x > x1 {
                continue;
            }
            let x = xs.at(m.x);
            let _ = write!(
                s,
                r#"<g class="marker {}"><line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}"/><text x="{:.1}" y="{:.1}">{}</text><title>{}</title></g>"#,
                m.kind.class(),
                HEIGHT - BOTTOM,
                x + 3.0,
                TOP - 2.0
                    + 12.0 * f64::from(m.row)
                    + if m.kind == MarkerKind::Stage {
                        0.0
                    } else {
                        24.0
                    },
                escape(&m.label),
                escape(&m.title)
            );
        }
        for (i, series) in self.series.iter().enumerate() {
            let d = path_d(&series.segments, xs, ys);
            let _ = write!(
                s,
                r#"<path class="series{}" data-series="{}" d="{d}" stroke="{}"><title>{}</title></path>"#,
                if series.dashed { " dashed" } else { "" },
                escape(&series.label),
                series.color,
                escape(&series.label)
            );
            // The legend, top right, one entry per series.
            let ly = TOP + 4.0 + 14.0 * i as f64;
            let lx = WIDTH - RIGHT - 170.0;
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
        s.push_str("</svg>");
        s
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
                row: 0,
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
}
