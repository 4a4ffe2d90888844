//! Protection ablation: a **test-only** build (cargo feature `ablation`, which no release
//! build enables) that removes the mechanisms of the protections named in
//! `LOCALGPT_ABLATE` (comma-separated ids, e.g. `io-uring,ptrace`) from every plan it makes,
//! while the plan's protection table still reports them as before. The escape corpus then shows
//! that each protection matters: with it removed, at least one vector that names it must escape
//! (the harness's `localgpt-ablation`). A protection no vector catches is a corpus gap.
//!
//! Each cut removes every layer of the protection it can reach (Landlock rights and scopes,
//! seccomp rows, mounts, rlimits, cgroups, the environment filter, the runner's caps); where
//! two protections share one mechanism the cut removes it for both and `plan::ablate::cut` says so. Without
//! the feature nothing of this exists: [`is`] is a constant `false`.
//!
//! The ids are read once, where a run's plan is made, and travel as flags on the plan (the
//! runner prints each cut): the planner, the compilers and the helper read the plan, not this
//! process's environment, and the reference plan (the protection table reported) is the same
//! planner called without them.

// (On Windows only `is` is used: the Linux mechanisms' cuts have nothing to cut there.)
#![cfg_attr(not(unix), allow(dead_code))]

use crate::model::ids::ProtectionId;

/// The protections `LOCALGPT_ABLATE` names, read when a run's plan is made
/// ([`crate::plan::RunContext::ablate`]); the plan then carries them
/// ([`crate::plan::Plan::ablated`], [`crate::plan::HelperPlan::ablated`]) and every cut reads
/// the plan, never this process's environment. An unknown id ends the process: an ablation
/// run that silently removed nothing would report a protection as uncaught for no reason.
#[cfg(feature = "ablation")]
#[must_use]
pub fn requested() -> Vec<ProtectionId> {
    let v = std::env::var("LOCALGPT_ABLATE").unwrap_or_default();
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            ProtectionId::parse(s).unwrap_or_else(|| {
                eprintln!("localgpt (ablation build): LOCALGPT_ABLATE names an unknown protection `{s}`");
                std::process::exit(2)
            })
        })
        .collect()
}

/// Without the feature nothing is ever ablated.
#[cfg(not(feature = "ablation"))]
#[must_use]
pub fn requested() -> Vec<ProtectionId> {
    Vec::new()
}

/// Whether `id` is among `cut` (a plan's ablated protections).
#[cfg(feature = "ablation")]
#[must_use]
pub fn is(cut: &[ProtectionId], id: ProtectionId) -> bool {
    cut.contains(&id)
}

/// Whether `id` is among `cut`: always `false` without the feature, whatever a plan says.
#[cfg(not(feature = "ablation"))]
#[must_use]
#[inline]
pub const fn is(_cut: &[ProtectionId], _id: ProtectionId) -> bool {
    false
}
