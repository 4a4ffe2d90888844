//! The vocabulary every layer shares, with nothing above it: the protections a plan reports on
//! (ids, states, rows), the kinds of protected path and the nested walk's bounds, and the
//! helper's command-line flag. Layer 1 of `ARCHITECTURE.md`: imports the standard library and serde
//! only.

pub mod ids;
pub mod guard;

/// The first argument that selects the helper where `argv[0]` cannot be chosen (macOS:
/// `sandbox-exec` execs the helper by path).
pub const HELPER_FLAG: &str = "--localgpt-sandbox-helper";
