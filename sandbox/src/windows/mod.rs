//! The Windows backend (experimental): the plan rendered as a restricted token, the ACEs and
//! labels that confine it ([`acl`], pure, checked on any OS against the conformance table with
//! [`eval`], a model of Windows' access check), the installation record that makes every ACL
//! change a transaction ([`record`], pure, with its roll-back after a crash unit-tested), the
//! protection table ([`protections`]), the command line and environment block ([`cmdline`]), and
//! the thin Win32 glue that applies them (`glue` and `run`, Windows only: the ACL store, the
//! token, the job object, the suspended start checked from outside, the capped output, the
//! timeout on the whole job).
//!
//! What was executed where: the plan, the model, the record and the conformance table run in
//! this project's CI on Linux; the glue is type-checked for `x86_64-pc-windows-msvc` and built
//! for `x86_64-pc-windows-gnu`, whose binary runs under Wine in CI (`ci/wine-check`): `status`,
//! the refusals, and the parent side (exit codes, output caps, the timeout, the job's tree kill)
//! with the ACEs and the token check cut in a test-only build, since Wine enforces neither.
//! Nothing has run on Windows itself: `localgpt sandbox run` there refuses unless the user opts
//! in with `LOCALGPT_EXPERIMENTAL_WINDOWS=1`, and even then every ACE is read back and the
//! suspended command's token checked (restricted, Low integrity, the capability SID) before it
//! runs an instruction — under Wine that check refuses.

pub mod acl;
pub mod cmdline;
pub mod eval;
#[cfg(windows)]
pub mod glue;
pub mod protections;
pub mod record;
#[cfg(windows)]
pub mod run;
pub mod sid;

pub use acl::WindowsPlan;
