//! Paired ratios of a macro workload (sandboxed time / bare time of the same round) and the
//! attribution of a ratio above the goal to its measured causes.
//!
//! Rounds are interleaved (every round runs every variant once, in a shuffled order), so a
//! round's ratio compares two runs made seconds apart under the same machine load; the summary
//! is the min / median / max of the rounds' ratios, never a ratio of means.
//!
//! Attribution is additive over two controls measured in the same rounds, each the workload
//! under one mechanism alone with a policy that allows everything: a **Landlock control** (a
//! one-rule ruleset, `/` with every right: the kernel's own cost of Landlock's checks, whatever
//! the rules) and a **seccomp control** (a one-instruction filter returning `ALLOW`: the cost of
//! every syscall taking the kernel's filtered path, whatever the filter). A level's excess over
//! bare is split into the controls' excesses (Landlock's only for a level that uses it) and a
//! residual; each part above the goal is named, and a residual above [`TOLERANCE`] is reported
//! as unexplained. Nothing is called a cause that a control in the same run did not show.
//!
//! A control only adds work to the bare run, so a control whose median ratio came out *below*
//! 1 measured the rounds' noise, not a cost: its shortfall is a lower bound on how far one
//! variant's median can stray in that run. A residual within that bound is reported as within
//! the run's noise (with the bound), not as unexplained; one beyond it still is.

use serde::Serialize;

/// The goal for every workload and level (issue 17): at most 2 % over bare.
pub const GOAL: f64 = 1.02;
/// A residual (level − the controls' parts) below this is within the rounds' noise.
pub const TOLERANCE: f64 = 0.02;

/// Min / median / max of one variant's paired ratios.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct RatioSummary {
    /// Rounds with both runs measured.
    pub n: usize,
    /// Smallest ratio.
    pub min: f64,
    /// Median ratio (nearest rank).
    pub median: f64,
    /// Largest ratio.
    pub max: f64,
}

/// The ratio variant / bare of every round in which both were measured (`None`: that run
/// failed or was not made). Rounds are matched by index.
#[must_use]
pub fn paired_ratios(bare: &[Option<f64>], variant: &[Option<f64>]) -> Vec<f64> {
    bare.iter()
        .zip(variant)
        .filter_map(|(b, v)| match (b, v) {
            (Some(b), Some(v)) if *b > 0.0 => Some(v / b),
            _ => None,
        })
        .collect()
}

/// Summarises ratios; `None` when there are none.
#[must_use]
pub fn summarize(ratios: &[f64]) -> Option<RatioSummary> {
    let s = crate::stats::sorted(ratios);
    (!s.is_empty()).then(|| RatioSummary { n: s.len(), min: s[0], median: crate::stats::percentile(&s, 0.5), max: s[s.len() - 1] })
}

/// Why a level's median ratio is what it is, from the controls of the same run.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Attribution {
    /// Whether the median ratio meets [`GOAL`].
    pub within_goal: bool,
    /// The Landlock control's excess over bare (`ratio − 1`), for a level that uses Landlock.
    pub landlock: Option<f64>,
    /// The seccomp control's excess over bare, when measured.
    pub seccomp: Option<f64>,
    /// What neither control explains: `level − 1 − landlock⁺ − seccomp⁺`.
    pub residual: f64,
    /// The run's noise as its controls show it: how far the lower of their medians fell below
    /// bare (0 when neither did).
    pub noise: f64,
    /// One line per cause: each measured part above the goal, and an unexplained residual.
    pub causes: Vec<String>,
}

/// Attributes `level` (a median ratio) to the controls' medians. `uses_landlock`: whether the
/// level's Landlock ruleset checks every open against its rules, as one that handles reads does
/// (Standard; minimal applies none, and Full confines reads with its fresh root instead).
#[must_use]
pub fn attribute(level: f64, uses_landlock: bool, landlock_control: Option<f64>, seccomp_control: Option<f64>) -> Attribution {
    let landlock = if uses_landlock { landlock_control.map(|c| c - 1.0) } else { None };
    let seccomp = seccomp_control.map(|c| c - 1.0);
    let residual = level - 1.0 - landlock.unwrap_or(0.0).max(0.0) - seccomp.unwrap_or(0.0).max(0.0);
    // (Both controls count here, the one a level does not use too: each is a variant of the run.)
    let noise = [landlock_control, seccomp_control].into_iter().flatten().map(|c| 1.0 - c).fold(0.0, f64::max);
    let goal = GOAL - 1.0;
    let mut causes = Vec::new();
    if level > GOAL {
        if let Some(l) = landlock.filter(|l| *l > goal) {
            causes.push(format!(
                "Landlock's check on each open: +{:.1} % under a one-rule ruleset alone (the kernel's path walk, not the shape of our rules)",
                l * 100.0
            ));
        }
        if let Some(c) = seccomp.filter(|c| *c > goal) {
            causes.push(format!(
                "seccomp on every syscall: +{:.1} % under a one-instruction allow-all filter alone (the kernel's filtered syscall path, not our filter's length)",
                c * 100.0
            ));
        }
        if residual > TOLERANCE.max(noise) {
            causes.push(format!("unexplained by the controls: +{:.1} % beyond them", residual * 100.0));
        } else if residual > TOLERANCE {
            causes.push(format!(
                "within this run's noise: +{:.1} % beyond the controls, while an allow-all control measured {:.1} % under bare, which only noise can do (more rounds separate them: MACRO_MODE=--full)",
                residual * 100.0,
                noise * 100.0
            ));
        } else if causes.is_empty() {
            // No part above the goal alone, nothing beyond them: the parts add up.
            let part = |p: Option<f64>| p.map_or_else(|| "not measured".to_string(), |p| format!("{:+.1} %", p * 100.0));
            causes.push(format!(
                "the controls together, each under the goal alone (Landlock {}, seccomp {}), +{:.1} % beyond them",
                part(landlock),
                part(seccomp),
                residual.max(0.0) * 100.0
            ));
        }
    }
    Attribution { within_goal: level <= GOAL, landlock, seccomp, residual, noise, causes }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_pair_rounds_and_skip_failed_runs() {
        let bare = [Some(1.0), Some(2.0), None, Some(4.0)];
        let v = [Some(1.1), None, Some(3.0), Some(4.4)];
        let r = paired_ratios(&bare, &v);
        assert_eq!(r.len(), 2);
        assert!((r[0] - 1.1).abs() < 1e-9 && (r[1] - 1.1).abs() < 1e-9);
        let s = summarize(&[1.3, 1.0, 1.1]).unwrap();
        assert_eq!((s.n, s.min, s.median, s.max), (3, 1.0, 1.1, 1.3));
        assert!(summarize(&[]).is_none());
    }

    #[test]
    fn within_goal_names_no_cause() {
        let a = attribute(1.015, true, Some(1.10), Some(1.00));
        assert!(a.within_goal && a.causes.is_empty());
    }

    #[test]
    fn landlock_control_explains_a_level_that_costs_as_much() {
        let a = attribute(1.12, true, Some(1.11), Some(1.01));
        assert!(!a.within_goal);
        assert_eq!(a.causes.len(), 1, "{:?}", a.causes);
        assert!(a.causes[0].starts_with("Landlock"), "{:?}", a.causes);
    }

    #[test]
    fn a_residual_beyond_the_controls_is_unexplained() {
        let a = attribute(1.20, true, Some(1.10), Some(1.01));
        assert!(a.causes.iter().any(|c| c.starts_with("Landlock")));
        assert!(a.causes.iter().any(|c| c.starts_with("unexplained")), "{:?}", a.causes);
        // Minimal has no Landlock: the control does not count for it.
        let m = attribute(1.05, false, Some(1.10), Some(1.05));
        assert!(m.landlock.is_none());
        assert_eq!(m.causes.len(), 1, "{:?}", m.causes);
        assert!(m.causes[0].starts_with("seccomp"), "{:?}", m.causes);
        // Over the goal with both controls quiet: nothing is named but the residual.
        let n = attribute(1.04, true, Some(1.0), Some(1.0));
        assert_eq!(n.causes.len(), 1);
        assert!(n.causes[0].starts_with("unexplained"));
        // Just over the goal, each control under it, nothing beyond them: their sum is the cause.
        let t = attribute(1.021, true, Some(1.011), Some(1.010));
        assert_eq!(t.causes.len(), 1, "{:?}", t.causes);
        assert!(t.causes[0].starts_with("the controls together") && t.causes[0].contains("Landlock +1.1 %"), "{:?}", t.causes);
    }

    #[test]
    fn a_control_below_bare_bounds_the_noise_and_only_a_residual_within_it_is_called_noise() {
        // A control 6 % under bare: a residual of 5 % is within that run's noise…
        let a = attribute(1.05, true, Some(0.94), Some(1.00));
        assert!((a.noise - 0.06).abs() < 1e-9);
        assert_eq!(a.causes.len(), 1, "{:?}", a.causes);
        assert!(a.causes[0].starts_with("within this run's noise") && a.causes[0].contains("6.0 % under bare"), "{:?}", a.causes);
        // …one of 7.4 % is not (the controls of a real run: 0.982 and 0.949).
        let b = attribute(1.074, true, Some(0.982), Some(0.949));
        assert!(b.causes.iter().any(|c| c.starts_with("unexplained")), "{:?}", b.causes);
        // A level that does not use Landlock: its control still measures the run's noise.
        let c = attribute(1.04, false, Some(0.95), Some(1.00));
        assert!(c.landlock.is_none() && c.causes[0].starts_with("within this run's noise"), "{:?}", c.causes);
        // Controls at or above bare: no noise bound, the fixed tolerance alone.
        let d = attribute(1.05, true, Some(1.0), Some(1.01));
        assert_eq!(d.noise, 0.0);
        assert!(d.causes.iter().any(|c| c.starts_with("unexplained")), "{:?}", d.causes);
    }
}
