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

/// Log-scale ticks (1-2-5 per decade) covering `[lo, hi]`.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut v = Vec::new();
    let mut dec = 10f64.powf(lo.log10().floor());
    while dec <= hi * 1.0001 {
        for m in [1.0, 2.0, 5.0] {
            let t = dec * m;
            if t >= lo * 0.9999 && t <= hi * 1.0001 {
                v.push(t);
            }
        }
        dec *= 10.0;
    }
    v
}

/// The largest 1-2-5 value ≤ `x` (x > 0).
fn nice_floor(x: f64) -> f64 {
    let dec = 10f64.powf(x.log10().floor());
    [5.0, 2.0, 1.0].iter().map(|m| dec * m).find(|v| *v <= x).unwrap_or(dec)
}

fn tick_label(t: f64) -> String {
    if t >= 1.0 {
        format!("{t:.0}")
    } else if t >= 0.1 {
        format!("{t:.1}")
    } else {
        format!("{t:.2}")
    }
}

/// Renders the panels as one SVG document: the x axis (latency, ms) is logarithmic and covers
/// every sample, so both the body and the tail are visible; y is the cumulative fraction of runs,
/// with the p50, p90 and p99 lines marked.
#[must_use]
pub fn cdf_svg(panels: &[Panel], caption: &str) -> String {
    let width = 1180.0;
    let panel_h = 320.0;
    let (ml, mr, mt, mb) = (70.0, 420.0, 40.0, 48.0);
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
        let lo = sorted.iter().filter_map(|v| v.first().copied()).filter(|x| *x > 0.0).fold(f64::INFINITY, f64::min);
        let hi = sorted.iter().filter_map(|v| v.last().copied()).fold(0.0f64, f64::max);
        let (lo, hi) = if lo.is_finite() && hi > lo { (nice_floor(lo * 0.95), hi * 1.1) } else { (0.1, 10.0) };
        let (llo, lhi) = (lo.log10(), hi.log10());
        let sx = |x: f64| x0 + ((x.max(lo).log10() - llo) / (lhi - llo)) * (x1 - x0);
        let sy = |f: f64| y0 - f * (y0 - y1);
        let _ = writeln!(s, r#"<text x="{x0}" y="{}" font-size="14" font-weight="bold">{}</text>"#, top + 22.0, esc(&panel.title));
        for t in log_ticks(lo, hi) {
            let x = sx(t);
            let _ = writeln!(s, r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#e5e5e5"/>"##);
            let _ = writeln!(s, r#"<text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#, y0 + 15.0, tick_label(t));
        }
        for f in [0.0, 0.25, 0.5, 0.75, 1.0] {
            let y = sy(f);
            let _ = writeln!(s, r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#e5e5e5"/>"##);
            let _ = writeln!(s, r#"<text x="{}" y="{:.1}" text-anchor="end">{f}</text>"#, x0 - 6.0, y + 4.0);
        }
        for (f, name) in [(0.9, "p90"), (0.99, "p99")] {
            let y = sy(f);
            let _ = writeln!(s, r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#bbbbbb" stroke-dasharray="4 3"/>"##);
            let _ = writeln!(s, r##"<text x="{}" y="{:.1}" fill="#888" font-size="10">{name}</text>"##, x0 + 4.0, y - 2.0);
        }
        let _ = writeln!(s, r##"<rect x="{x0}" y="{y1}" width="{}" height="{}" fill="none" stroke="#444"/>"##, x1 - x0, y0 - y1);
        let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="middle">latency of one run (ms, log scale), wall clock from spawn to reap</text>"#, (x0 + x1) / 2.0, y0 + 34.0);
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
            // A step function, downsampled to at most ~800 steps per curve, keeping the last.
            let stride = (v.len() / 800).max(1);
            let mut prev_y = sy(0.0);
            for (i, x) in v.iter().enumerate() {
                if i % stride == 0 || i + 1 == v.len() {
                    let xx = sx(*x);
                    let yy = sy((i + 1) as f64 / n);
                    let _ = write!(pts, "{xx:.1},{prev_y:.1} {xx:.1},{yy:.1} ");
                    prev_y = yy;
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
                r#"<text x="{}" y="{:.1}">{} — p50 {p50:.2}, p99 {p99:.2} ms</text>"#,
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
    fn log_scale_ticks() {
        assert_eq!(log_ticks(0.5, 30.0), vec![0.5, 1.0, 2.0, 5.0, 10.0, 20.0]);
        assert_eq!(tick_label(0.5), "0.5");
        assert_eq!(nice_floor(0.77), 0.5);
        assert_eq!(nice_floor(3.0), 2.0);
        assert_eq!(tick_label(20.0), "20");
    }
}
