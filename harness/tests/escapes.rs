//! The escape corpus as tests: one test per vector × level × user
//! (`<family>::<vector>::<level>::<user>`), run against the real `localgpt` binary
//! (`$LOCALGPT_BIN`, else `target/<profile>/localgpt`).
//!
//! A test fails on an escape, an invalid probe (no effect bare) or an error. Skipped and
//! not-preventable cases pass, print their reason, and are appended to `$LOCALGPT_SKIP_LOG`.
//! `LOCALGPT_ESCAPE_LEVELS=standard,full` (or `LOCALGPT_TEST_LEVEL=full`) restricts the levels; `LOCALGPT_ESCAPE_RESULTS=FILE`
//! appends every result as a JSON line.

use std::io::Write;
use std::sync::OnceLock;

use libtest_mimic::{Arguments, Failed, Trial};
use localgpt_harness::engine::{find_bin, Facts, Suite};

fn user_label() -> String {
    Facts::detect().user
}

fn main() {
    let args = Arguments::from_args();
    let corpus = match localgpt_corpus::load_embedded() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("escape corpus invalid: {e}");
            std::process::exit(101);
        }
    };
    if let Err(e) = corpus.validate_probes(localgpt_harness::probes::NAMES) {
        eprintln!("escape corpus invalid: {e}");
        std::process::exit(101);
    }
    // `LOCALGPT_ESCAPE_LEVELS=a,b`, else `LOCALGPT_TEST_LEVEL` (ci/test runs the integration
    // suites once per level), else every level `sandbox status` lists.
    let only: Option<Vec<String>> = ["LOCALGPT_ESCAPE_LEVELS", "LOCALGPT_TEST_LEVEL"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|s| !s.is_empty()))
        .map(|s| s.split(',').map(str::to_string).collect());
    // The levels come from `sandbox status` of the binary under test; listing must not fail,
    // so an unusable binary becomes one failing test that says why.
    let bin = find_bin();
    static SUITE: OnceLock<Result<Suite, String>> = OnceLock::new();
    let suite = SUITE.get_or_init(|| match &bin {
        Some(b) => Suite::new(b, only.as_deref()),
        None => Err("cannot find the localgpt binary: set LOCALGPT_BIN or build it (cargo build)".into()),
    });
    let user = user_label();
    let mut trials = Vec::new();
    match suite {
        Err(e) => {
            let e = e.clone();
            trials.push(Trial::test("suite::setup", move || Err(Failed::from(e.clone()))));
        }
        Ok(s) => {
            for l in &s.levels {
                let lname = l.name.clone();
                let incons = l.inconsistency.clone();
                trials.push(Trial::test(format!("consistency::status-agrees-with-explain::{lname}::{user}"), move || match &incons {
                    Some(e) => Err(Failed::from(e.clone())),
                    None => Ok(()),
                }));
            }
            for v in &corpus.vectors {
                for l in &s.levels {
                    let v = v.clone();
                    let level = l.name.clone();
                    let name = format!("{}::{}::{}::{}", v.family, v.name, level, user);
                    trials.push(Trial::test(name.clone(), move || {
                        let s = match SUITE.get() {
                            Some(Ok(s)) => s,
                            _ => return Err(Failed::from("suite not initialised")),
                        };
                        let r = s.run_case(&v, &level);
                        if let Ok(p) = std::env::var("LOCALGPT_ESCAPE_RESULTS") {
                            if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(p) {
                                let _ = writeln!(f, "{}", serde_json::to_string(&r).unwrap_or_default());
                            }
                        }
                        println!("{name}: {}: {}", r.verdict, r.detail);
                        if r.verdict == "skipped" || r.verdict == "not_preventable" {
                            let line = format!("SKIP: {name}: {}: {}", r.verdict, r.detail);
                            if let Some(log) = std::env::var_os("LOCALGPT_SKIP_LOG") {
                                if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
                                    let _ = writeln!(f, "{line}");
                                }
                            }
                        }
                        if r.passed() {
                            Ok(())
                        } else {
                            Err(Failed::from(format!("{}: {}", r.verdict, r.detail)))
                        }
                    }));
                }
            }
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
