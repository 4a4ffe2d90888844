//! # localgpt-harness
//!
//! Runs the LocalGPT sandbox corpora against the real `localgpt` binary and verifies every
//! effect from outside the sandbox.
//!
//! * [`probes`] — the attack functions compiled into the binary (`localgpt sandbox probe`).
//! * [`world`] — a fresh world per run: workspace, canaries, secret `$HOME`, listeners, victim.
//! * [`engine`] — bare run (must escape) + sandboxed run + outside checks → a verdict, for every
//!   vector at every level the machine reaches (from `sandbox status`), as the current user.
//! * [`cover`] — one runnable vector per protection (the kernel matrix's subset).
//! * [`report`] — gates and the release report (`target/release-report/`), shared by every
//!   suite through section files.

pub mod cover;
#[cfg(unix)]
pub mod engine;
#[cfg(unix)]
pub mod probes;
pub mod report;
#[cfg(unix)]
pub mod world;

#[cfg(unix)]
pub use engine::{run_all, CaseResult, Suite};
