//! The warnings a plan carries (printed before every run and in `--json`): skipped grants,
//! root-equivalent sockets, degradations the user should see.

use super::*;

/// `paths` for a message: displayed, comma-separated.
pub(super) fn path_list(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}


/// The warnings of `plan`.
pub(super) fn warnings(plan: &Plan, caps: &Capabilities, policy: &SandboxPolicy) -> Vec<String> {
    let mut w: Vec<String> = policy.skipped_grants.iter().map(|p| format!("{} does not exist: its grant is skipped for this run", p.display())).collect();
    if let Some(why) = &policy.tool_caches_unavailable {
        w.push(format!("tool caches are per-run for this run (the persistent ones cannot be used: {why}); `persistent_caches = false` in [sandbox.env] says so for good"));
    }
    w.extend(policy.ignored_settings.iter().cloned());
    for g in plan.unix_sockets.iter().filter(|g| g.root_equivalent) {
        w.push(format!("GRANTED SOCKET {} controls a container runtime: whoever connects to it is root on the host; the command may connect to it", g.given.display()));
    }
    w.extend(policy.moved_denies.iter().map(|(rule, at)| {
        format!("denied {} was moved since a previous run (same file, found by its inode): it is now at {}, denied there too", rule.display(), at.display())
    }));
    match plan.level {
        SandboxLevel::None => w.push(if plan.mode == SandboxMode::FullAccess {
            "FULL ACCESS: this command runs with no sandbox at all (acknowledged with --dangerously-allow-full-access)".to_string()
        } else {
            "UNSANDBOXED: no kernel confinement is available; only the timeout and output caps apply".to_string()
        }),
        SandboxLevel::Minimal if plan.windows.is_some() => w.push(
            "Windows (experimental, unelevated tier): writes are confined to the workspace and the run's temp directory and credentials are unreadable, but other reads and the network are NOT confined; this backend is experimental: its plan is checked by a model and its glue under Wine, never on Windows itself".to_string(),
        ),
        SandboxLevel::Minimal if plan.namespaces().is_some_and(|n| n.fresh_root.is_some()) => w.push(format!(
            "degraded to minimal: no Landlock ({}); namespaces confine the command instead: a fresh root holds only the granted paths, everything outside the workspace is read-only, credentials are masked, processes and network are isolated (`sandbox status` lists what is and is not enforced)",
            why_minimal(caps)
        )),
        SandboxLevel::Minimal if plan.namespaces().is_some() => w.push(format!(
            "degraded to minimal: no Landlock ({}), so reads outside the workspace are NOT confined; namespaces still make everything outside the workspace read-only, mask credentials and isolate processes and network",
            why_minimal(caps)
        )),
        SandboxLevel::Minimal => w.push(format!(
            "degraded to minimal: network and dangerous syscalls are blocked but the filesystem is NOT confined ({})",
            why_minimal(caps)
        )),
        _ => {}
    }
    if let Some(n) = plan.namespaces().filter(|n| plan.landlock().is_none() && !n.unmaskable.is_empty()) {
        w.push(format!(
            "without Landlock, these denied paths are not hidden if the command creates them (absent at launch, inside a writable grant; a mount can only mask what exists): {}",
            path_list(&n.unmaskable)
        ));
    }
    if let Some(ll) = plan.landlock() {
        // A writable root with a denied path inside is granted entry by entry (Landlock cannot
        // take a subtree out of a grant): nothing new can be created directly in it.
        let ws = &plan.workspace;
        let roots = std::iter::once((ws, "the workspace".to_string()))
            .chain(policy.writable_paths.iter().filter(|p| *p != ws).map(|p| (p, format!("the writable grant {}", p.display()))));
        for (root, what) in roots {
            if let Some((_, denied)) = ll.expanded.iter().find(|(dir, _)| dir == root || root.starts_with(dir)) {
                let why = if plan.namespaces().is_some() { " (it does not exist, so no mount can hide it)" } else { "" };
                w.push(format!(
                    "{what} contains the denied path {}{why}: it is granted entry by entry (snapshot at launch), so new files directly in {} cannot be created at this level",
                    denied.display(),
                    root.display()
                ));
            }
        }
    }
    // A protected path that could not be protected is said at every run, not only by `status`.
    if !plan.unprotectable.is_empty() {
        let rel = |p: &Path| p.strip_prefix(&plan.workspace).unwrap_or(p).display().to_string();
        let mut list: Vec<String> = plan.unprotectable.iter().take(3).map(|u| format!("{} ({})", rel(&u.path), u.why)).collect();
        if plan.unprotectable.len() > 3 {
            list.push(format!("and {} more (`localgpt sandbox status`)", plan.unprotectable.len() - 3));
        }
        w.push(format!("NOT PROTECTED for this run: {}", list.join("; ")));
    }
    if plan.level == SandboxLevel::Standard && plan.kernel_level < SandboxLevel::Full {
        if let Some(u) = caps.user_namespaces.as_ref().filter(|u| !u.available) {
            w.push(format!("running at standard, not full: user namespaces are unavailable ({})", u.detail));
        }
    }
    w
}
