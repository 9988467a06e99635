//! The SVG picture of a Gantt timeline ([`crate::reporting::gantt`]): one band per
//! WarpGroup with its issue row, WGMMA row and thin TMA lanes, bars coloured
//! by kind, a time axis in cycles, row labels, a legend and a title. Plain
//! SVG 1.1; every bar carries a `<title>` tooltip.

use std::fmt::Write as _;

use crate::reporting::gantt::{GanttRecorder, GanttRow, RowKind, SpanKind};
use crate::reporting::svg::{escape, nice_step};

const WIDTH: f64 = 1200.0;
const LEFT: f64 = 230.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 72.0;
const BOTTOM: f64 = 44.0;
/// Height of an issue or WGMMA row, and of a TMA lane.
const ROW_H: f64 = 14.0;
const LANE_H: f64 = 5.0;
const GAP: f64 = 3.0;
/// Extra space between two WarpGroups.
const BAND_GAP: f64 = 8.0;

/// Legend entries: (category, colour).
const KINDS: [(&str, &str); 6] = [
    ("tma load", "#1f77b4"),
    ("tma store", "#9467bd"),
    ("wgmma", "#2ca02c"),
    ("wait", "#f4a3a3"),
    ("bubble", "#bbbbbb"),
    ("compute", "#ff7f0e"),
];

fn color(kind: &SpanKind) -> &'static str {
    let cat = kind.category();
    KINDS
        .iter()
        .find(|(k, _)| *k == cat)
        .map_or("black", |k| k.1)
}

fn height(kind: RowKind) -> f64 {
    match kind {
        RowKind::Tma => LANE_H,
        RowKind::Issue | RowKind::Wgmma => ROW_H,
    }
}

/// Renders `rows` as an SVG document.
/// The timeline of `rec` as a standalone SVG Gantt chart titled `title`.
pub fn svg(rec: &GanttRecorder, title: &str) -> String {
    render(&rec.rows(), title)
}

/// Writes the SVG chart of `rec`, titled `title`, to `path` atomically.
pub fn write_svg(path: &std::path::Path, rec: &GanttRecorder, title: &str) -> std::io::Result<()> {
    crate::load::write_atomic(path, svg(rec, title).as_bytes())
}

pub(crate) fn render(rows: &[GanttRow], title: &str) -> String {
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for s in rows.iter().flat_map(|r| &r.spans) {
        lo = lo.min(s.start);
        hi = hi.max(s.end);
    }
    if lo >= hi {
        (lo, hi) = (0, 1);
    }
    let step = nice_step((hi - lo) as f64, 10.0).max(1.0);
    let t_lo = (lo as f64 / step).floor() * step;
    let t_hi = ((hi as f64 / step).ceil() * step).max(t_lo + step);
    let pw = WIDTH - LEFT - RIGHT;
    let px = |c: f64| LEFT + (c - t_lo) / (t_hi - t_lo) * pw;

    // Row tops, with a gap between WarpGroups.
    let mut tops = Vec::with_capacity(rows.len());
    let mut y = TOP;
    for (i, r) in rows.iter().enumerate() {
        if i > 0 && r.kind == RowKind::Issue {
            y += BAND_GAP;
        }
        tops.push(y);
        y += height(r.kind) + if r.kind == RowKind::Tma { 1.0 } else { GAP };
    }
    let plot_bottom = y;
    let total_h = (plot_bottom + BOTTOM).ceil();

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH}" height="{total_h}" viewBox="0 0 {WIDTH} {total_h}" font-family="sans-serif" font-size="11">
<rect x="0" y="0" width="{WIDTH}" height="{total_h}" fill="white"/>
<text x="{:.1}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    // Legend under the title.
    for (i, (name, col)) in KINDS.iter().enumerate() {
        let x = LEFT + i as f64 * 110.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x:.1}" y="38" width="14" height="10" fill="{col}"/><text x="{:.1}" y="47">{}</text>"#,
            x + 18.0,
            escape(name)
        );
    }
    // Bands and grid.
    s.push_str("<g stroke=\"#e4e4e4\" stroke-width=\"1\">\n");
    let n = ((t_hi - t_lo) / step).round() as i64;
    for i in 0..=n {
        let x = px(t_lo + i as f64 * step);
        let _ = writeln!(
            s,
            r#"<line x1="{x:.1}" y1="{TOP:.1}" x2="{x:.1}" y2="{plot_bottom:.1}"/>"#
        );
    }
    s.push_str("</g>\n");
    // Row labels: the WarpGroup on its issue row, the part on the others.
    s.push_str("<g text-anchor=\"end\">\n");
    for (r, &top) in rows.iter().zip(&tops) {
        let (text, size) = match r.kind {
            RowKind::Issue => (r.name.as_str(), 11),
            RowKind::Wgmma => ("wgmma", 9),
            RowKind::Tma if r.name.ends_with(" tma") => ("tma", 9),
            RowKind::Tma => continue,
        };
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" font-size="{size}">{}</text>"#,
            LEFT - 6.0,
            top + ROW_H.min(height(r.kind) + 4.0) - 3.0,
            escape(text)
        );
    }
    s.push_str("</g>\n");
    // Bars.
    for (r, &top) in rows.iter().zip(&tops) {
        let _ = writeln!(s, r#"<g class="row" data-name="{}">"#, escape(&r.name));
        for sp in &r.spans {
            let x = px(sp.start as f64);
            let w = (px(sp.end as f64) - x).max(0.5);
            let _ = writeln!(
                s,
                r#"<rect class="span" x="{x:.2}" y="{top:.1}" width="{w:.2}" height="{:.1}" fill="{}"><title>{} [{}, {}) {} cycles</title></rect>"#,
                height(r.kind),
                color(&sp.kind),
                escape(&sp.kind.label()),
                sp.start,
                sp.end,
                sp.end - sp.start
            );
        }
        s.push_str("</g>\n");
    }
    // Time axis.
    let _ = writeln!(
        s,
        r#"<line x1="{LEFT:.1}" y1="{plot_bottom:.1}" x2="{:.1}" y2="{plot_bottom:.1}" stroke="black"/>"#,
        LEFT + pw
    );
    s.push_str("<g text-anchor=\"middle\">\n");
    for i in 0..=n {
        let t = t_lo + i as f64 * step;
        let x = px(t);
        let _ = writeln!(
            s,
            r#"<line x1="{x:.1}" y1="{plot_bottom:.1}" x2="{x:.1}" y2="{:.1}" stroke="black"/><text x="{x:.1}" y="{:.1}">{t:.0}</text>"#,
            plot_bottom + 4.0,
            plot_bottom + 16.0
        );
    }
    s.push_str("</g>\n");
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">cycle</text>"#,
        LEFT + pw / 2.0,
        plot_bottom + 34.0
    );
    s.push_str("</svg>\n");
    s
}
