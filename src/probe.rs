//! `localgpt sandbox probe NAME ARGS…` (hidden): runs one escape probe compiled into this binary.
//! Dispatched before clap parses anything, so probe arguments (including `--`) reach the probe
//! verbatim. See `localgpt_harness::probes`.

/// If argv is `localgpt sandbox probe NAME ARGS…`, runs the probe and exits.
pub fn dispatch() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() >= 3 && args[1] == "sandbox" && args[2] == "probe" {
        let Some(name) = args.get(3) else {
            eprintln!("usage: localgpt sandbox probe NAME ARGS… (internal: escape probes for `sandbox test`)");
            eprintln!("probes: {}", localgpt_harness::probes::NAMES.join(", "));
            std::process::exit(2);
        };
        std::process::exit(localgpt_harness::probes::run(name, &args[4..]));
    }
}
