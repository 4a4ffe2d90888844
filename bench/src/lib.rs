//! # localgpt-bench
//!
//! The pure parts of the benchmark tools (`localgpt-latency`, `localgpt-macro-bench`,
//! `localgpt-proxy-bench`): percentile summaries, paired ratios and the attribution of a macro
//! workload's overhead, the SVG CDF plot, and the parser that turns a `perf trace` of one
//! sandboxed run into a per-phase breakdown of the helper's start-up — deterministic and
//! unit-tested without timing — and the few process helpers the binaries share ([`host`]).

#[cfg(target_os = "linux")]
pub mod host;
pub mod paired;
pub mod phases;
pub mod stats;
pub mod svg;
