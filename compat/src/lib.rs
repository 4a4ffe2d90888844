//! The compatibility corpus harness (issue 5): the schema of `compat-commands/`, its loading and
//! validation, the runner that runs every command bare and sandboxed in identical fresh fixtures,
//! the comparison with declared normalisations (of the output, and of the workspace left behind:
//! `tree`), and the release-report section.
//!
//! Pure parts (`schema`, `load`, `normalise`, `compare`, `report`) are unit-tested; `runner`
//! drives real processes.

pub mod compare;
pub mod load;
pub mod normalise;
pub mod report;
pub mod results;
#[cfg(unix)]
pub mod runner;
pub mod schema;
pub mod tree;
