//! Linux glue: the only code that makes confinement syscalls. It applies a plan and decides
//! nothing (see [`crate::plan`]).

pub mod apply;
pub mod namespaces;
pub mod supervise;
