//! `localgpt-macro-bench`: what the sandbox costs on real work (issue 17's macro overhead).
//!
//! Workloads an agent runs — a directory walk, `git grep` and `git status` in a 20 000-file
//! repository, an incremental `cargo build`, a clean `cargo build` of a crate with
//! dependencies, an import-heavy Python start, `make -j2` of a C project — are run bare, at
//! every level `localgpt sandbox status --json` lists, under bubblewrap (the peer, when
//! installed) and under two controls, this tool re-executed with one mechanism alone and a policy
//! that allows everything: a one-rule Landlock ruleset (`/` with every filesystem right) and a
//! one-instruction seccomp filter (`ALLOW`), which show the kernel's own cost of each mechanism
//! whatever our rules are. Rounds are interleaved: every round runs every
//! variant of a workload once, in a shuffled order, the workload's untimed `prepare` step bare
//! before each run (say `touch src/lib.rs`), so that drift falls on every variant alike.
//!
//! Each run is timed twice: *inside* (bash's `time` around the workload, in the sandbox: the
//! work itself) and *end to end* (spawn to exit, as the agent waits: start-up and the review
//! after the run included). The report gives, per workload and variant, the min / median / max
//! of the paired ratios against the bare run of the same round, inside and end to end, the CPU
//! ratio, and for every level above the 1.02× goal its causes as the controls of the same run
//! measured them ([`localgpt_bench::paired::attribute`]). A workload whose tool is missing is
//! skipped and listed with the reason.
//!
//! Informative: the section has no gate (goals are reported met or not, with causes). Exits 1
//! when a run failed (its figures would be missing), 2 when it could not run at all. Writes
//! `<out>/sections/macro.json` and `<out>/macro.md`.
//!
//! ```text
//! localgpt-macro-bench [--quick | --full] [--rounds N] [--bin PATH] [--out DIR] [--only a,b] [--no-bwrap] [--seed S]
//! ```

#[cfg(target_os = "linux")]
mod macro_linux;

fn main() {
    #[cfg(target_os = "linux")]
    macro_linux::main();
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("localgpt-macro-bench measures the Linux backend; there is nothing to measure on {}", std::env::consts::OS);
        std::process::exit(2);
    }
}
