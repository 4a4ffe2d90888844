//! Human and JSON renderings of capabilities, plans and results.

use std::fmt::Write;

use localgpt_sandbox::linux::landlock::fs_right_names;
use localgpt_sandbox::detect::Platform;
use localgpt_sandbox::plan::{Plan, ProtectionState};
#[cfg(unix)]
use localgpt_sandbox::run::RunResult;
use localgpt_sandbox::text::escape_controls;
#[cfg(unix)]
use localgpt_sandbox::text::{display_argv, escape_os};
use localgpt_sandbox::{Capabilities, SandboxError, SandboxLevel, SandboxPolicy};
use serde_json::{json, Value};

/// What each Landlock ABI adds.
pub const ABI_FEATURES: &[(u32, &str, &str)] = &[
    (1, "5.13", "filesystem access control (read, write, execute, create, remove)"),
    (2, "5.19", "refer: link/rename across directories"),
    (3, "6.2", "truncate"),
    (4, "6.7", "TCP bind/connect"),
    (5, "6.10", "ioctl on device files"),
    (6, "6.12", "scopes: abstract unix sockets and signals"),
    (7, "6.15", "audit logging flags"),
    (8, "7.0", "restrict all threads at once"),
    (9, "7.1", "pathname unix socket connect (resolve_unix)"),
];

fn mark(state: ProtectionState) -> &'static str {
    match state {
        ProtectionState::Enforced => "✓",
        ProtectionState::Degraded => "~",
        ProtectionState::Off => "✗",
    }
}

fn level_line(plan: &Plan) -> String {
    let mut s = plan.level.to_string();
    if let Some(l) = plan.landlock() {
        let _ = write!(s, " (Landlock ABI {} + seccomp)", l.abi);
    } else if plan.seccomp().is_some() {
        s.push_str(" (seccomp only)");
    }
    s
}

/// `text` with the control characters of every line escaped (lines stay lines): for reports
/// whose parts (paths, details, messages) could carry bytes a terminal would act on.
#[must_use]
pub fn escape_lines(text: &str) -> String {
    text.split('\n').map(escape_controls).collect::<Vec<_>>().join("\n")
}

/// The spec 6.1 banner. The command is shown as given (one argument: the `bash -c` string;
/// several: the argv), with control characters escaped, so a `\r` or an escape sequence cannot
/// hide what runs behind something harmless.
#[must_use]
#[cfg(unix)]
pub fn banner(cmd: &[std::ffi::OsString], plan: &Plan) -> String {
    let net = match (&plan.network_allowlist, plan.level > SandboxLevel::None) {
        (_, false) => "UNRESTRICTED".to_string(),
        (Some(a), true) => format!(
            "allowlist only ({}), through the sandbox's proxy",
            if a.allow.is_empty() { "no domain allowed".to_string() } else { escape_controls(&a.allow.iter().map(|d| d.text.as_str()).collect::<Vec<_>>().join(", ")) }
        ),
        (None, true) if plan.network == localgpt_sandbox::policy::NetworkPolicy::Full => "OPEN (network = full: the host's network; every other protection kept)".to_string(),
        (None, true) => "denied".to_string(),
    };
    let shown = match cmd {
        [one] => escape_os(one),
        many => display_argv(many),
    };
    format!(
        "🔒 Running sandboxed: {shown}\n  Workspace: {}\n  Network: {net}\n  Level: {}\n\n",
        escape_os(plan.workspace.as_os_str()),
        level_line(plan)
    )
}

/// The line after the command.
#[must_use]
#[cfg(unix)]
pub fn completion(r: &RunResult) -> String {
    let secs = r.duration_ms / 1000.0;
    let mut s = if r.timed_out {
        format!("\n⏱ Timed out after {secs:.1}s: every process of the command was killed (sandbox: {}); to allow longer: --timeout SECS ([sandbox] timeout_secs)", r.level)
    } else if r.cancelled {
        format!("\n✗ Cancelled after {secs:.1}s (sandbox: {})", r.level)
    } else if r.exit_code == 0 {
        format!("\n✓ Completed in {secs:.1}s (sandbox: {})", r.level)
    } else {
        format!("\n✗ Exited with {} in {secs:.1}s (sandbox: {})", r.exit_code, r.level)
    };
    // What the network allowlist refused (each host once; the full list is in `--json`).
    let mut shown: Vec<&str> = Vec::new();
    for e in r.network.iter().filter(|e| !e.allowed && e.via != "-") {
        if shown.contains(&e.host.as_str()) {
            continue;
        }
        if shown.len() == 5 {
            let _ = write!(s, "\n  … and more refused by the network policy (see --json)");
            break;
        }
        shown.push(&e.host);
        let what = if e.via == "dns" { format!("the name {}", e.host) } else { format!("{}:{}", e.host, e.port) };
        if e.refusal == Some(localgpt_sandbox::network::Refusal::Unreachable) {
            let _ = write!(s, "\n  {what} is allowed but could not be reached ({})", e.rule);
            continue;
        }
        let _ = write!(s, "\n  network policy refused {what} ({})", e.rule);
        if let Some(hint) = e.refusal.and_then(|r| localgpt_sandbox::network::allow_hint(&e.host, e.port, r)) {
            let _ = write!(s, "; to allow it: {hint}");
        }
    }
    // What the filesystem policy refused, as the command's errors name it.
    for f in &r.refusals {
        let _ = write!(s, "\n  {} of {} refused ({}): {}", f.access, f.path.display(), f.protection, f.why);
        if let Some(a) = &f.allow {
            let _ = write!(s, "; to allow it: {a}");
        }
    }
    for h in &r.hints {
        let _ = write!(s, "\n  {h}");
    }
    // Runs killed before their review, reviewed by this one.
    for w in &r.recovered {
        let _ = write!(s, "\n  ⚠ {}", escape_controls(w));
    }
    for (t, name) in [(r.stdout_truncated, "stdout"), (r.stderr_truncated, "stderr")] {
        if t {
            let _ = write!(s, "\n  {name} was truncated at the output cap; to keep more: --max-output BYTES ([sandbox] max_output_bytes)");
        }
    }
    s
}

/// `status --json`.
#[must_use]
pub fn status_json(caps: &Capabilities, plan: &Result<Plan, SandboxError>) -> Value {
    let abi = caps.landlock.abi;
    let features: Vec<Value> = ABI_FEATURES
        .iter()
        .map(|(a, k, what)| json!({"abi": a, "kernel": k, "adds": what, "available": abi >= *a}))
        .collect();
    let (level, namespaces, protections, warnings, error) = match plan {
        Ok(p) => (Some(p.level), json!(p.namespaces().is_some()), json!(p.protections), json!(p.warnings), Value::Null),
        Err(e) => (None, Value::Null, json!([]), json!([]), json!(e.to_string())),
    };
    json!({
        "platform": caps.platform,
        "backend": backend_name(caps),
        "seatbelt": caps.seatbelt,
        "kernel": caps.kernel,
        "landlock": {"abi": abi, "state": caps.landlock.state, "detail": caps.landlock.detail, "features": features},
        "seccomp": caps.seccomp,
        "user_namespaces": caps.user_namespaces,
        "cgroup_pids": caps.cgroup_pids,
        "cgroup_memory": caps.cgroup_memory,
        "uid": caps.uid,
        "kernel_level": caps.kernel_level(),
        "available_levels": available_levels(caps),
        "level": level,
        "namespaces": namespaces,
        "protections": protections,
        "warnings": warnings,
        "error": error,
    })
}

/// Levels a command can be run at here with `--level` (best first; `none` excluded).
#[must_use]
pub fn available_levels(caps: &Capabilities) -> Vec<SandboxLevel> {
    [SandboxLevel::Full, SandboxLevel::Standard, SandboxLevel::Minimal]
        .into_iter()
        .filter(|l| *l <= caps.best_level())
        .collect()
}

/// `status` for humans.
#[must_use]
pub fn status_text(caps: &Capabilities, plan: &Result<Plan, SandboxError>) -> String {
    let mut s = String::from("Sandbox Capabilities:\n");
    let ok = |b: bool| if b { "✓" } else { "✗" };
    let _ = writeln!(s, "  Backend:   {} ({})", backend_name(caps), caps.platform);
    if caps.platform != Platform::Linux {
        if let Some(f) = &caps.seatbelt {
            let _ = writeln!(s, "  Seatbelt:  {} {}", f.detail, ok(f.available));
        }
        if let Some(f) = &caps.windows {
            let _ = writeln!(s, "  Windows:   {} {}", f.detail, ok(f.available));
        }
        status_plan(&mut s, plan);
        if caps.platform == Platform::Macos {
            let _ = writeln!(s, "\nThe macOS backend is generated and checked on Linux in this project's CI; run `localgpt sandbox test` to check it on this Mac.");
        }
        return escape_lines(&s);
    }
    let _ = writeln!(s, "  Kernel:    {}", caps.kernel);
    let ll = &caps.landlock;
    if ll.abi > 0 {
        let _ = writeln!(s, "  Landlock:  ABI {} {}", ll.abi, ok(true));
    } else {
        let _ = writeln!(s, "  Landlock:  {} ({}) {}", ll.state, ll.detail, ok(false));
    }
    for (a, k, what) in ABI_FEATURES {
        let _ = writeln!(s, "    {} ABI {a} (Linux {k}): {what}", if ll.abi >= *a { "✓" } else { "·" });
    }
    let _ = writeln!(s, "  Seccomp:   {} {}", caps.seccomp.detail, ok(caps.seccomp.available));
    if let Some(b) = &caps.seccomp_broker {
        let what = if b.available { "the runner answers connect/bind/listen: the sandbox's own unix servers work, --allow-unix-socket available" } else { "unix sockets are socketpairs only; --allow-unix-socket refused" };
        let _ = writeln!(s, "  Broker:    {} ({}) {}", what, b.detail, ok(b.available));
    }
    if let Some(u) = &caps.user_namespaces {
        let _ = writeln!(s, "  Userns:    {} {}", u.detail, ok(u.available));
    }
    match &caps.cgroup_pids {
        Some(c) => {
            let _ = writeln!(s, "  Cgroup:    pids ({}) at {} ✓", c.version, c.base.display());
        }
        None => {
            let _ = writeln!(s, "  Cgroup:    no writable pids cgroup (process count falls back to RLIMIT_NPROC)");
        }
    }
    match &caps.cgroup_memory {
        Some(c) => {
            let _ = writeln!(s, "  Memory:    memory cgroup ({}) at {} ✓", c.version, c.base.display());
        }
        None => {
            let _ = writeln!(s, "  Memory:    no writable memory cgroup (only the private /tmp and /dev/shm are bounded)");
        }
    }
    status_plan(&mut s, plan);
    escape_lines(&s)
}

/// The backend that confines commands here.
#[must_use]
pub fn backend_name(caps: &Capabilities) -> &'static str {
    match caps.platform {
        Platform::Linux => "linux (namespaces, Landlock, seccomp)",
        Platform::Macos => "macos (Seatbelt via /usr/bin/sandbox-exec)",
        Platform::Windows => "windows (restricted token + ACEs + labels + job object; experimental)",
    }
}

fn status_plan(s: &mut String, plan: &Result<Plan, SandboxError>) {
    match plan {
        Ok(p) => {
            let _ = writeln!(s, "  Level:     {}", level_line(p));
            for w in &p.warnings {
                let _ = writeln!(s, "  ⚠ {w}");
            }
            let _ = writeln!(s, "\nProtections (default policy, this user):");
            for pr in &p.protections {
                let _ = writeln!(s, "  {} {:<26} {:<10} {} — {}", mark(pr.state), pr.id, format!("{:?}", pr.state).to_lowercase(), pr.mechanism, pr.detail);
            }
        }
        Err(e) => {
            let _ = writeln!(s, "  Level:     unavailable: {e}");
        }
    }
}

/// The plan as JSON, with right names added to every Landlock rule.
#[must_use]
pub fn plan_json(plan: &Plan) -> Value {
    let mut v = json!(plan);
    if let Some(ll) = plan.landlock() {
        v["linux"]["landlock"]["rules"] = ll
            .rules
            .iter()
            .map(|r| json!({"path": r.path, "access": fs_right_names(r.access), "access_bits": r.access, "reason": r.reason}))
            .collect();
        v["linux"]["landlock"]["handled_fs_names"] = json!(fs_right_names(ll.handled_fs));
    }
    if let Some(sc) = plan.seccomp() {
        v["linux"]["seccomp"]["program_len"] = json!(sc.program.len());
        if let Some(o) = v["linux"]["seccomp"].as_object_mut() {
            o.remove("program");
        }
    }
    v["env"] = json!({
        "names": plan.env.vars.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        "dropped": plan.env.dropped,
        "redirected_to_scratch": plan.env.redirected,
        "persistent_caches": plan.env.persistent_caches,
    });
    v
}

/// The Windows artefacts: token, ACEs and labels (in the order they are applied), reviewed
/// paths, job limits.
fn windows_text(s: &mut String, w: &localgpt_sandbox::windows::WindowsPlan) {
    let _ = writeln!(s, "\nWindows (experimental; never run on Windows in CI):");
    let _ = writeln!(s, "  token: CreateRestrictedToken({}), restricting SIDs {}, integrity {}", w.token.flags.join(" | "), w.token.restricting_sids.join(", "), w.token.integrity);
    let _ = writeln!(s, "  capability SID of this workspace: {}", w.capability_sid);
    let _ = writeln!(s, "  ACEs and labels (applied in this order, recorded first, removed in reverse when the last run holding them ends):");
    for a in &w.aces {
        let created = if a.create_dir { " (created for the run)" } else { "" };
        let _ = writeln!(s, "    {:<45} {}:{:<60} {}{created}", a.path.display(), a.part(), a.sddl(), a.reason);
    }
    for r in &w.reviewed {
        let _ = writeln!(s, "    {:<45} reviewed after the run: {}", r.path.display(), r.why);
    }
    for c in &w.absent_credentials {
        let _ = writeln!(s, "    {:<45} credential absent at launch: nothing to label", c.display());
    }
    let j = &w.job;
    let _ = writeln!(s, "  job object: kill on close {}, die on unhandled exception {}, at most {} processes, {} bytes committed, {} s of CPU, UI limits {}",
        j.kill_on_close, j.die_on_unhandled_exception, j.active_processes, j.job_memory_bytes, j.cpu_time_100ns / 10_000_000, j.ui_restrictions.join(","));
    if let Some(t) = &w.temp_dir {
        let _ = writeln!(s, "  TEMP/TMP: {}", t.display());
    }
}

/// `explain` for humans.
#[must_use]
pub fn explain_text(policy: &SandboxPolicy, plan: &Plan) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Policy: mode {}, workspace {}", policy.mode.as_str(), policy.workspace_path.display());
    let _ = writeln!(s, "Level:  {}", level_line(plan));
    for w in &plan.warnings {
        let _ = writeln!(s, "  ⚠ {w}");
    }
    if let Some(ll) = plan.landlock() {
        let _ = writeln!(s, "\nLandlock (ABI {}, rights handled up to ABI {}): handled fs rights: {}", ll.abi, ll.handled_abi, fs_right_names(ll.handled_fs).join(","));
        let _ = writeln!(s, "  TCP bind/connect handled (none granted): {}; scopes: {:#x}", ll.handled_net != 0, ll.scopes);
        for r in &ll.rules {
            let _ = writeln!(s, "  {:<45} {:<60} {}", r.path.display(), fs_right_names(r.access).join(","), r.reason);
        }
        for (dir, denied) in &ll.expanded {
            let _ = writeln!(s, "  expanded {} into its entries around denied {} (snapshot at launch)", dir.display(), denied.display());
        }
        for sk in &ll.skipped {
            let _ = writeln!(s, "  skipped {}: {}", sk.path.display(), sk.reason);
        }
        let _ = writeln!(s, "  denied: {}", policy.deny_paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "));
    }
    if let Some(root) = plan.namespaces().and_then(|n| n.fresh_root.as_ref()) {
        let _ = writeln!(s, "\nFresh root (the command's /; nothing else of the host exists in it):");
        for b in &root.binds {
            let _ = writeln!(s, "  bound {}", b.display());
        }
        for (l, t) in &root.symlinks {
            let _ = writeln!(s, "  link  {} -> {}", l.display(), t.display());
        }
    }
    if let Some(sc) = plan.seccomp() {
        let _ = writeln!(s, "\nseccomp ({} BPF instructions; default allow):", sc.program.len());
        for r in &sc.rules {
            let cond = r.condition_text.as_deref().unwrap_or("always");
            let _ = writeln!(s, "  {:<28} {:<34} {:<12} {}", r.syscall, cond, format!("{:?}", r.action).to_lowercase(), r.reason);
        }
    }
    if let Some(m) = &plan.macos {
        let _ = writeln!(s, "\nSeatbelt: {} -p PROFILE -DNAME=VALUE … -- HELPER {} COMMAND…", localgpt_sandbox::detect::SANDBOX_EXEC, localgpt_sandbox::macos::HELPER_FLAG);
        let _ = writeln!(s, "  denials tagged {}:<rule>", m.marker);
        let _ = writeln!(s, "  parameters:");
        for (k, v) in &m.params {
            let _ = writeln!(s, "    -D{k}={}", v.display());
        }
    }
    if let Some(w) = &plan.windows {
        windows_text(&mut s, w);
    }
    let _ = writeln!(s, "\nResources:");
    for r in plan.rlimits() {
        match r.soft {
            Some(soft) => { let _ = writeln!(s, "  {} = {} (soft {soft})", r.name, r.value); }
            None => { let _ = writeln!(s, "  {} = {}", r.name, r.value); }
        }
    }
    let _ = writeln!(s, "  process count: {}", serde_json::to_string(plan.process_limit()).unwrap_or_default());
    let _ = writeln!(s, "  timeout {} s, output cap {} bytes per stream", plan.timeout_secs, plan.max_output_bytes);
    let caches = plan.env.persistent_caches.as_ref().map_or_else(|| "per-run scratch".to_string(), |d| format!("this workspace's persistent caches {}", d.display()));
    let _ = writeln!(s, "\nEnvironment: {} kept, {} dropped ({}); caches redirected to {caches}: {}",
        plan.env.vars.len(), plan.env.dropped.len(), plan.env.dropped.join(","), plan.env.redirected.join(","));
    let _ = writeln!(s, "\nProtected workspace paths (this run):");
    for p in &plan.protected {
        let how = if plan.windows.is_some() {
            "deny ACE or review (see Windows above)"
        } else if p.private {
            "private copy for the run"
        } else if p.absent {
            "absent: reviewed after the run"
        } else {
            "reviewed in place after the run"
        };
        let _ = writeln!(s, "  {:<28} {:<8} {how} — {}", p.path.strip_prefix(&plan.workspace).unwrap_or(&p.path).display(), format!("{:?}", p.kind).to_lowercase(), p.reason);
    }
    for u in &plan.unprotectable {
        let _ = writeln!(s, "  {:<28} not protected: {}", u.path.strip_prefix(&plan.workspace).unwrap_or(&u.path).display(), u.why);
    }
    for w in &plan.nested_walks {
        let records = match &plan.walk_records {
            Some(d) => format!("records kept in {}", d.display()),
            None => "no records kept: where they would be, this run could write them, or that directory is not private to this user".to_string(),
        };
        let _ = writeln!(s, "  nested names in {}: {} directories looked at to depth {}, {} of them as earlier walks recorded them ({records}){}",
            localgpt_sandbox::guard::protected::root_name(&w.root, &plan.workspace), w.listings.len(), localgpt_sandbox::guard::protected::NESTED_DEPTH, w.from_records,
            if w.stopped { "; stopped by its budget" } else { "" });
    }
    let _ = writeln!(s, "\nThe protected-path table (data/protected-paths.toml; `[sandbox] protected_workspace_paths` replaces it):");
    for e in localgpt_sandbox::defaults::protected_table() {
        let _ = writeln!(s, "  {:<16} {:<8} {} [source: {}]", e.name, format!("{:?}", e.kind).to_lowercase(), e.why, e.source);
    }
    let _ = writeln!(s, "\nProtections:");
    for pr in &plan.protections {
        let _ = writeln!(s, "  {} {:<26} {} — {}", mark(pr.state), pr.id, pr.mechanism, pr.detail);
    }
    if let Some(m) = &plan.macos {
        let _ = writeln!(s, "\nProfile:");
        s.push_str(&m.profile);
    }
    escape_lines(&s)
}
