//! # localgpt-bench
//!
//! The pure parts of the latency tool (`localgpt-latency`): percentile summaries, the SVG CDF
//! plot, and the parser that turns a `perf trace` of one sandboxed run into a per-phase
//! breakdown of the helper's start-up. Everything that spawns processes or reads clocks lives in
//! the binary (`src/main.rs`); everything here is deterministic and unit-tested without timing.

pub mod phases;
pub mod stats;
pub mod svg;
