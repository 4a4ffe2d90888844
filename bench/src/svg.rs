//! A hand-written SVG CDF plot: one panel per command, one polyline per variant.

use std::fmt::Write;

/// One curve: a label and its samples in milliseconds (any order).
pub struct Curve {
    /// Legend text.
    pub label: String,
    /// Samples (ms).
    pub samples: Vec<f64>,
}

/// One panel (a command) with its curves.
pub struct Panel {
    /// Panel title.
    pub title: String,
    /// Curves.
    pub curves: Vec<Curve>,
}

const COLORS: [&str; 10] =
    ["#222222", "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A "nice" axis step for a range of `span` with about `ticks` ticks.
fn nice_step(span: f64, ticks: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / ticks;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f < 1.5 {
        1.0
    } else if f < 3.0 {
        2.0
    } else if f < 7.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Renders the panels as one SVG document. The x axis of each panel runs from 0 to a little
/// above the largest p99.5 among its curves (the long tail beyond is clipped and said so in the
/// caption); y is the cumulative fraction of runs.
#[must_use]
pub fn cdf_svg(panels: &[Panel], caption: &str) -> String {
    let width = 960.0;
    let panel_h = 300.0;
    let (ml, mr, mt, mb) = (70.0, 250.0, 40.0, 45.0);
    let height = panels.len() as f64 * panel_h + 40.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (pi, panel) in panels.iter().enumerate() {
        let top = pi as f64 * panel_h;
        let x0 = ml;
        let x1 = width - mr;
        let y0 = top + panel_h - mb;
        let y1 = top + mt;
        let sorted: Vec<Vec<f64>> = panel.curves.iter().map(|c| crate::stats::sorted(&c.samples)).collect();
        let xmax = sorted
            .iter()
            .filter(|v| !v.is_empty())
            .map(|v| crate::stats::percentile(v, 0.995))
            .fold(0.0f64, f64::max)
            * 1.08;
        let xmax = if xmax > 0.0 && xmax.is_finite() { xmax } else { 1.0 };
        let sx = |x: f64| x0 + (x.min(xmax) / xmax) * (x1 - x0);
        let sy = |f: f64| y0 - f * (y0 - y1);
        let _ = writeln!(s, r#"<text x="{x0}" y="{}" font-size="14" font-weight="bold">{}</text>"#, top + 22.0, esc(&panel.title));
        // grid and axes
        let step = nice_step(xmax, 8.0);
        let mut t = 0.0;
        while t <= xmax + 1e-9 {
            let x = sx(t);
            let _ = writeln!(s, r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#e5e5e5"/>"##);
            let label = if step < 1.0 { format!("{t:.1}") } else { format!("{t:.0}") };
            let _ = writeln!(s, r#"<text x="{x:.1}" y="{}" text-anchor="middle">{label}</text>"#, y0 + 15.0);
            t += step;
        }
        for f in [0.0, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0] {
            let y = sy(f);
            let _ = writeln!(s, r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#e5e5e5"/>"##);
            let _ = writeln!(s, r#"<text x="{}" y="{:.1}" text-anchor="end">{f}</text>"#, x0 - 6.0, y + 4.0);
        }
        let _ = writeln!(s, r##"<rect x="{x0}" y="{y1}" width="{}" height="{}" fill="none" stroke="#444"/>"##, x1 - x0, y0 - y1);
        let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="middle">latency of one run (ms), wall clock, spawn to reap</text>"#, (x0 + x1) / 2.0, y0 + 32.0);
        let _ = writeln!(
            s,
            r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">fraction of runs ≤ x</text>"#,
            (y0 + y1) / 2.0,
            (y0 + y1) / 2.0
        );
        for (ci, (curve, v)) in panel.curves.iter().zip(&sorted).enumerate() {
            if v.is_empty() {
                continue;
            }
            let color = COLORS[ci % COLORS.len()];
            let n = v.len() as f64;
            let mut pts = String::new();
            // Downsample to at most ~600 points per curve, always keeping the last one.
            let stride = (v.len() / 600).max(1);
            for (i, x) in v.iter().enumerate() {
                if i % stride == 0 || i + 1 == v.len() {
                    let _ = write!(pts, "{:.1},{:.1} ", sx(*x), sy((i + 1) as f64 / n));
                }
            }
            let _ = writeln!(s, r#"<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{}"/>"#, pts.trim_end());
            let ly = y1 + 8.0 + ci as f64 * 18.0;
            let lx = x1 + 12.0;
            let _ = writeln!(s, r#"<line x1="{lx}" y1="{ly:.1}" x2="{}" y2="{ly:.1}" stroke="{color}" stroke-width="3"/>"#, lx + 18.0);
            let p50 = crate::stats::percentile(v, 0.5);
            let p99 = crate::stats::percentile(v, 0.99);
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{:.1}">{} (p50 {p50:.2}, p99 {p99:.2})</text>"#,
                lx + 24.0,
                ly + 4.0,
                esc(&curve.label)
            );
        }
    }
    let _ = writeln!(s, r##"<text x="{ml}" y="{}" fill="#555">{}</text>"##, height - 12.0, esc(caption));
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_one_polyline_per_curve_and_escapes() {
        let panels = vec![Panel {
            title: "bash -c true <x>".into(),
            curves: vec![
                Curve { label: "bare".into(), samples: vec![1.0, 2.0, 3.0] },
                Curve { label: "standard & co".into(), samples: vec![2.0, 3.0, 4.0] },
                Curve { label: "empty".into(), samples: vec![] },
            ],
        }];
        let svg = cdf_svg(&panels, "caption");
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("&lt;x&gt;"));
        assert!(svg.contains("standard &amp; co"));
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(10.0, 10.0), 1.0);
        assert_eq!(nice_step(25.0, 10.0), 2.0);
        assert_eq!(nice_step(4.0, 8.0), 0.5);
    }
}
