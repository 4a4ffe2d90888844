//! The vocabulary every layer shares, with nothing above it: the protections a plan reports on
//! (ids, states, rows). Layer 1 of `ARCHITECTURE.md`: imports the standard library and serde
//! only.

pub mod ids;
