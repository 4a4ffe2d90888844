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

// (On Windows only `is` is used: the Linux mechanisms' cuts have nothing to cut there.)
#![cfg_attr(not(unix), allow(dead_code))]

use crate::model::ids::ProtectionId;

#[cfg(feature = "ablation")]
mod imp {
    use super::ProtectionId;
    use std::cell::Cell;
    use std::sync::OnceLock;

    static ABLATED: OnceLock<Vec<ProtectionId>> = OnceLock::new();

    thread_local! {
        /// Set while the reference plan (the protection table reported) is made.
        static REFERENCE: Cell<bool> = const { Cell::new(false) };
    }

    /// The ids in `LOCALGPT_ABLATE` (read once). An unknown id ends the process: an ablation
    /// run that silently removed nothing would report a protection as uncaught for no reason.
    pub fn ablated() -> &'static [ProtectionId] {
        ABLATED.get_or_init(|| {
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
        })
    }

    pub fn is(id: ProtectionId) -> bool {
        !REFERENCE.with(Cell::get) && ablated().contains(&id)
    }

    pub fn reference<T>(f: impl FnOnce() -> T) -> T {
        REFERENCE.with(|r| r.set(true));
        let out = f();
        REFERENCE.with(|r| r.set(false));
        out
    }
}

/// The protections named in `LOCALGPT_ABLATE` (what [`crate::plan::ablate::cut`] removes).
#[cfg(feature = "ablation")]
#[must_use]
pub fn ablated() -> &'static [ProtectionId] {
    imp::ablated()
}

/// Whether `id` is ablated in this process (always `false` without the feature).
#[cfg(feature = "ablation")]
#[must_use]
pub fn is(id: ProtectionId) -> bool {
    imp::is(id)
}

/// Whether `id` is ablated in this process (always `false` without the feature).
#[cfg(not(feature = "ablation"))]
#[must_use]
#[inline]
pub const fn is(_id: ProtectionId) -> bool {
    false
}

/// Whether any protection is ablated.
#[cfg(feature = "ablation")]
#[must_use]
pub fn active() -> bool {
    ProtectionId::ALL.iter().any(|p| is(*p))
}

/// Runs `f` (making the reference plan) with nothing ablated.
#[cfg(feature = "ablation")]
pub fn reference<T>(f: impl FnOnce() -> T) -> T {
    imp::reference(f)
}
