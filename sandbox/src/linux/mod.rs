//! The Linux backend: the artefacts a [`crate::plan::Plan`] compiles to on Linux — Landlock
//! rules ([`landlock`]), the seccomp table and its BPF program per architecture ([`seccomp`]),
//! namespaces and mounts ([`mounts`]) — and the thin code that applies them. The artefact
//! planners are pure data and compile on every Unix; the glue (the helper, `apply`, the
//! namespace set-up, the supervisor, the protected paths' staging and review) is Linux only and
//! decides nothing.

pub mod compile;
pub mod landlock;
pub mod mounts;
pub mod seccomp;
pub mod syscalls;

#[cfg(target_os = "linux")]
pub mod apply;
#[cfg(target_os = "linux")]
pub mod helper;
#[cfg(target_os = "linux")]
pub mod namespaces;
#[cfg(target_os = "linux")]
pub mod protect;
#[cfg(target_os = "linux")]
pub mod supervise;
#[cfg(target_os = "linux")]
pub mod unixgrant;
#[cfg(target_os = "linux")]
pub mod proxy;
