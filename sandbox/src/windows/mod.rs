//! The Windows backend (experimental): the plan rendered as a restricted token, the ACEs and
//! labels that confine it ([`acl`], pure, checked on any OS against the conformance table with
//! [`eval`], a model of Windows' access check), the installation record that makes every ACL
//! change a transaction ([`record`], pure, with its roll-back after a crash unit-tested), the
//! protection table ([`protections`]), and the thin Win32 glue that applies them (`glue`, Windows
//! only: the ACL store, the token, the job object, the suspended start).
//!
//! What was executed where: the plan, the model, the record and the conformance table run in
//! this project's CI on Linux; the glue is type-checked for `x86_64-pc-windows-msvc` there and
//! has never run on Windows. `localgpt sandbox run` on Windows refuses to run a command (the
//! backend's level is `none` there) until the glue has been run and checked on Windows.

pub mod acl;
pub mod eval;
#[cfg(windows)]
pub mod glue;
pub mod protections;
pub mod record;
pub mod sid;

pub use acl::WindowsPlan;
