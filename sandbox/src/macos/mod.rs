//! The macOS backend: the plan rendered as a Seatbelt profile ([`profile`], pure, checked on any
//! OS against the conformance table with [`eval`], an evaluator of the SBPL subset it emits, and
//! [`sbpl`]'s well-formedness check), and the thin glue that runs it (`/usr/bin/sandbox-exec`
//! re-executing this binary as the helper, which checks that it is confined, sets the rlimits,
//! reports on the report pipe and execs the command: `helper`, macOS only).
//!
//! What was executed where: the profile generator, the evaluator and the conformance table run in
//! this project's CI on Linux; the glue is type-checked for `aarch64-apple-darwin` and
//! `x86_64-apple-darwin` there, and has not run on a Mac in CI. `localgpt sandbox test` on a Mac
//! checks the real backend.

pub mod denials;
pub mod eval;
#[cfg(target_os = "macos")]
pub mod helper;
pub mod profile;
pub mod protections;
pub mod sbpl;

pub use profile::MacosPlan;

pub use crate::model::HELPER_FLAG;
