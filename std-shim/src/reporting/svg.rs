//! A small hand-written SVG line chart: a logarithmic or linear x axis, a
//! linear y axis, any number of series with a legend, ticks, grid lines,
//! axis labels and a title. Plain SVG 1.1 that any browser shows.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// Chart width in pixels.
pub const WIDTH: f64 = 960.0;
/// Chart height in pixels.
pub const HEIGHT: f64 = 560.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 64.0;

/// One named curve.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Stroke colour (any SVG colour, e.g. `#1f77b4`).
    pub color: String,
    /// Points `(x, y)`, drawn in the given order; non-finite values, and
    /// non-positive x on a logarithmic axis, are skipped.
    pub points: Vec<(f64, f64)>,
}

/// A line chart.
#[derive(Clone, Debug)]
pub struct LineChart {
    /// Title above the plot.
    pub title: String,
    /// Label under the x axis.
    pub x_label: String,
    /// Label left of the y axis.
    pub y_label: String,
    /// Logarithmic x axis (ticks at powers of ten).
    pub log_x: bool,
    /// Formats an x tick value.
    pub x_tick: fn(f64) -> String,
    /// The curves.
    pub series: Vec<Series>,
}

/// Escapes text for SVG content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// A 1-2-5 step near `span / target`.
pub(crate) fn nice_step(span: f64, target: f64) -> f64 {
    let raw = (span / target).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Formats a y tick without float noise.
fn fmt_num(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{v:.decimals$}")
}

impl LineChart {
    fn visible(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        let log = self.log_x;
        self.series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(move |&(x, y)| x.is_finite() && y.is_finite() && (!log || x > 0.0))
    }

    /// The chart as an SVG document.
    pub fn render(&self) -> String {
        let (mut x_lo, mut x_hi, mut y_lo, mut y_hi) = (
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
        );
        for (x, y) in self.visible() {
            let x = if self.log_x { x.log10() } else { x };
            x_lo = x_lo.min(x);
            x_hi = x_hi.max(x);
            y_lo = y_lo.min(y);
            y_hi = y_hi.max(y);
        }
        if x_lo > x_hi {
            (x_lo, x_hi, y_lo, y_hi) = (0.0, 1.0, 0.0, 1.0);
        }
        // x domain: whole decades on a log axis, else padded.
        let x_ticks: Vec<f64>;
        if self.log_x {
            x_lo = x_lo.floor();
            x_hi = x_hi.ceil().max(x_lo + 1.0);
            x_ticks = (x_lo as i64..=x_hi as i64).map(|d| d as f64).collect();
        } else {
            if x_hi - x_lo < 1e-12 {
                x_lo -= 0.5;
                x_hi += 0.5;
            }
            let step = nice_step(x_hi - x_lo, 8.0);
            x_lo = (x_lo / step).floor() * step;
            x_hi = (x_hi / step).ceil() * step;
            let n = ((x_hi - x_lo) / step).round() as i64;
            x_ticks = (0..=n).map(|i| x_lo + i as f64 * step).collect();
        }
        if y_hi - y_lo < 1e-12 {
            y_lo -= 0.5;
            y_hi += 0.5;
        }
        let y_step = nice_step(y_hi - y_lo, 6.0);
        y_lo = (y_lo / y_step).floor() * y_step;
        y_hi = (y_hi / y_step).ceil() * y_step;
        let (pw, ph) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
        let px = |x: f64| {
            let x = if self.log_x { x.log10() } else { x };
            LEFT + (x - x_lo) / (x_hi - x_lo) * pw
        };
        let py = |y: f64| TOP + ph - (y - y_lo) / (y_hi - y_lo) * ph;

        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">
<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>
<text x="{:.1}" y="28" text-anchor="middle" font-size="16">{}</text>"#,
            WIDTH / 2.0,
            escape(&self.title)
        );
        // Grid and ticks.
        s.push_str("<g stroke=\"#dddddd\" stroke-width=\"1\">\n");
        for &t in &x_ticks {
            let x = LEFT + (t - x_lo) / (x_hi - x_lo) * pw;
            let _ = writeln!(
                s,
                r#"<line x1="{x:.1}" y1="{TOP:.1}" x2="{x:.1}" y2="{:.1}"/>"#,
                TOP + ph
            );
        }
        let ny = ((y_hi - y_lo) / y_step).round() as i64;
        for i in 0..=ny {
            let y = py(y_lo + i as f64 * y_step);
            let _ = writeln!(
                s,
                r#"<line x1="{LEFT:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}"/>"#,
                LEFT + pw
            );
        }
        s.push_str("</g>\n");
        let _ = writeln!(
            s,
            r#"<rect x="{LEFT:.1}" y="{TOP:.1}" width="{pw:.1}" height="{ph:.1}" fill="none" stroke="black"/>"#
        );
        s.push_str("<g text-anchor=\"middle\">\n");
        for &t in &x_ticks {
            let x = LEFT + (t - x_lo) / (x_hi - x_lo) * pw;
            let v = if self.log_x { 10f64.powi(t as i32) } else { t };
            let _ = writeln!(
                s,
                r#"<text x="{x:.1}" y="{:.1}">{}</text>"#,
                TOP + ph + 18.0,
                escape(&(self.x_tick)(v))
            );
        }
        s.push_str("</g>\n<g text-anchor=\"end\">\n");
        for i in 0..=ny {
            let v = y_lo + i as f64 * y_step;
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
                LEFT - 6.0,
                py(v) + 4.0,
                fmt_num(v, y_step)
            );
        }
        s.push_str("</g>\n");
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + pw / 2.0,
            HEIGHT - 18.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            s,
            r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">{}</text>"#,
            TOP + ph / 2.0,
            TOP + ph / 2.0,
            escape(&self.y_label)
        );
        // Curves.
        for series in &self.series {
            let pts: Vec<(f64, f64)> = series
                .points
                .iter()
                .copied()
                .filter(|&(x, y)| x.is_finite() && y.is_finite() && (!self.log_x || x > 0.0))
                .map(|(x, y)| (px(x), py(y)))
                .collect();
            let color = escape(&series.color);
            let _ = writeln!(
                s,
                r#"<g class="series" data-name="{}">"#,
                escape(&series.name)
            );
            if !pts.is_empty() {
                let path: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
                let _ = writeln!(
                    s,
                    r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
                    path.join(" ")
                );
                for (x, y) in &pts {
                    let _ = writeln!(
                        s,
                        r#"<circle cx="{x:.1}" cy="{y:.1}" r="2.5" fill="{color}"/>"#
                    );
                }
            }
            s.push_str("</g>\n");
        }
        // Legend, top left inside the plot.
        let lh = 18.0;
        let _ = writeln!(
            s,
            r##"<rect x="{:.1}" y="{:.1}" width="170" height="{:.1}" fill="white" fill-opacity="0.85" stroke="#999999"/>"##,
            LEFT + 10.0,
            TOP + 10.0,
            8.0 + lh * self.series.len() as f64
        );
        for (i, series) in self.series.iter().enumerate() {
            let y = TOP + 10.0 + 4.0 + lh * i as f64 + lh / 2.0;
            let color = escape(&series.color);
            let _ = writeln!(
                s,
                r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{color}" stroke-width="2"/>"#,
                LEFT + 18.0,
                LEFT + 42.0
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
                LEFT + 50.0,
                y + 4.0,
                escape(&series.name)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

/// Renders `chart` and writes it to `path` atomically.
pub fn write_svg(path: &Path, chart: &LineChart) -> io::Result<()> {
    crate::load::write_atomic(path, chart.render().as_bytes())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Checks that every element is closed in order (a small XML
    /// well-formedness check: tags balance, attributes are quoted).
    pub(crate) fn assert_balanced(svg: &str) {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = svg;
        while let Some(i) = rest.find('<') {
            rest = &rest[i + 1..];
            let j = rest.find('>').expect("unterminated tag");
            let tag = &rest[..j];
            rest = &rest[j + 1..];
            if tag.starts_with('?') || tag.starts_with('!') {
                continue;
            }
            assert_eq!(
                tag.matches('"').count() % 2,
                0,
                "unbalanced quotes in <{tag}>"
            );
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop().unwrap_or_else(|| panic!("stray </{name}>"));
                assert_eq!(open, name.trim(), "mismatched </{name}>");
            } else if !tag.ends_with('/') {
                let name = tag.split_whitespace().next().unwrap().to_string();
                stack.push(name);
            }
        }
        assert!(stack.is_empty(), "unclosed: {stack:?}");
        assert!(!rest.contains('>'));
    }

    fn chart() -> LineChart {
        LineChart {
            title: "a <b> & c".into(),
            x_label: "working set".into(),
            y_label: "cycles".into(),
            log_x: true,
            x_tick: |v| format!("{v}"),
            series: vec![
                Series {
                    name: "measured".into(),
                    color: "#1f77b4".into(),
                    points: vec![(2.0, 366.0), (20.0, 369.0), (2e6, 761.0)],
                },
                Series {
                    name: "simulated".into(),
                    color: "#d62728".into(),
                    points: vec![(2.0, 545.0), (0.0, 1.0), (f64::NAN, 3.0), (2e6, 545.0)],
                },
            ],
        }
    }

    #[test]
    fn renders_both_series_balanced() {
        let svg = chart().render();
        assert_balanced(&svg);
        assert!(svg.starts_with("<?xml"));
        assert!(svg.contains(r#"data-name="measured""#));
        assert!(svg.contains(r#"data-name="simulated""#));
        assert_eq!(svg.matches("<polyline").count(), 2);
        // 3 + 2 drawable points.
        assert_eq!(svg.matches("<circle").count(), 5);
        assert!(svg.contains("a &lt;b&gt; &amp; c"));
        // Decades 1 .. 10^7 as ticks.
        assert!(
            svg.contains(">1</text>") && svg.contains(">10000000</text>"),
            "{svg}"
        );
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn degenerate_charts_render() {
        let mut c = chart();
        c.series.clear();
        assert_balanced(&c.render());
        c.series.push(Series {
            name: "one".into(),
            color: "red".into(),
            points: vec![(5.0, 5.0)],
        });
        c.log_x = false;
        let svg = c.render();
        assert_balanced(&svg);
        assert!(!svg.contains("NaN"));
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(400.0, 6.0), 100.0);
        assert_eq!(nice_step(10.0, 6.0), 2.0);
        assert_eq!(nice_step(0.3, 6.0), 0.05);
        assert_eq!(fmt_num(0.15, 0.05), "0.15");
        assert_eq!(fmt_num(300.0, 50.0), "300");
    }

    #[test]
    fn writes_atomically() {
        let dir = std::env::temp_dir().join(format!("simfa-svg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("c.svg");
        write_svg(&p, &chart()).unwrap();
        assert_balanced(&std::fs::read_to_string(&p).unwrap());
        assert!(write_svg(&dir.join("missing/c.svg"), &chart()).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
