//! `localgpt sandbox probe NAME ARGS…` (hidden): runs one escape probe compiled into this binary.
//! Dispatched before clap parses anything, so probe arguments (including `--`) reach the probe
//! verbatim. See `localgpt_harness::probes`.

/// If argv is `localgpt sandbox probe NAME ARGS…`, runs the probe and exits.
pub fn dispatch() {
    let os: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if os.len() >= 3 && os[1] == "sandbox" && os[2] == "probe" {
        // Probe arguments come from the corpus (UTF-8); anything else is shown, not trusted.
        let args: Vec<String> = os.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        let Some(name) = args.get(3) else {
            eprintln!("usage: localgpt sandbox probe NAME ARGS… (internal: escape probes for `sandbox test`)");
            eprintln!("probes: {}", localgpt_harness::probes::NAMES.join(", "));
            std::process::exit(2);
        };
        std::process::exit(localgpt_harness::probes::run(name, &args[4..]));
    }
}
