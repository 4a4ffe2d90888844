//! `release-report`: the release report tool.
//!
//! ```text
//! release-report security [--dir DIR] [--note TEXT] RESULTS.json…
//!                                                      write DIR/sections/security.json (TEXT: a
//!                                                      paragraph on how the corpus was run)
//! release-report merge [--dir DIR]                    DIR/sections/*.json → report.json + report.md;
//!                                                      exit 1 when a gate failed
//! ```
//!
//! DIR defaults to `$LOCALGPT_REPORT_DIR` or `target/release-report`. RESULTS files are what
//! `localgpt sandbox test --full --json` prints (one per user).

use std::path::PathBuf;

use localgpt_harness::report;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let dir = take_opt(&mut args, "--dir").map_or_else(report::report_dir, PathBuf::from);
    let note = take_opt(&mut args, "--note");
    let code = match args.first().map(String::as_str) {
        Some("security") => {
            let files: Vec<PathBuf> = args[1..].iter().map(PathBuf::from).collect();
            if files.is_empty() {
                eprintln!("release-report security: give at least one results file");
                2
            } else {
                match report::read_results(&files) {
                    Ok(rs) => {
                        // Every vector of the embedded corpus must have a result in every column.
                        let expected: Vec<String> = match localgpt_corpus::load_embedded() {
                            Ok(c) => c.vectors.into_iter().map(|v| v.name).collect(),
                            Err(e) => {
                                eprintln!("release-report: the embedded corpus does not load ({e})");
                                std::process::exit(1);
                            }
                        };
                        let mut s = report::security_section(&rs, &expected);
                        if let Some(n) = &note {
                            s.markdown = format!("{n}\n\n{}", s.markdown);
                        }
                        match report::write_section(&dir, &s) {
                            Ok(p) => {
                                println!("{}: {}", p.display(), s.gate.as_ref().map_or(String::new(), |g| g.summary.clone()));
                                0
                            }
                            Err(e) => {
                                eprintln!("release-report: {e}");
                                1
                            }
                        }
                    }
                    Err(e) => {
                        eprintln!("release-report: {e}");
                        1
                    }
                }
            }
        }
        Some("merge") => match report::merge(&dir) {
            Ok(true) => {
                println!("release report: PASS ({})", dir.join("report.md").display());
                0
            }
            Ok(false) => {
                println!("release report: FAIL ({})", dir.join("report.md").display());
                // CI shows the end of a long log: say here what failed and why.
                print_failures(&dir);
                1
            }
            Err(e) => {
                eprintln!("release-report: {e}");
                1
            }
        },
        _ => {
            eprintln!("usage: release-report security [--dir DIR] [--note TEXT] RESULTS.json… | merge [--dir DIR]");
            2
        }
    };
    std::process::exit(code);
}

/// Prints each failed gate's summary and each missing section from the merged `report.json`.
fn print_failures(dir: &std::path::Path) {
    let Ok(text) = std::fs::read(dir.join("report.json")) else { return };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text) else { return };
    for m in v["missing_sections"].as_array().into_iter().flatten() {
        println!("  missing section: {}", m.as_str().unwrap_or("?"));
    }
    for g in v["gates"].as_array().into_iter().flatten().filter(|g| g["passed"] != serde_json::Value::Bool(true)) {
        println!("  FAILED gate {}: {}", g["title"].as_str().unwrap_or("?"), g["summary"].as_str().unwrap_or(""));
    }
}

/// Removes `NAME VALUE` from `args` and returns VALUE (a trailing `NAME` without a value stays).
fn take_opt(args: &mut Vec<String>, name: &str) -> Option<String> {
    let i = args.iter().position(|a| a == name).filter(|i| i + 1 < args.len())?;
    let v = args.remove(i + 1);
    args.remove(i);
    Some(v)
}
