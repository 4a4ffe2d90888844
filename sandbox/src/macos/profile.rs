//! Rendering a plan as a Seatbelt profile (pure; runs on any OS).
//!
//! The profile is the same text for every run of a mode: it names paths only through
//! parameters (`(subpath (param "READ_0"))`), and their values go to `sandbox-exec` as
//! `-DREAD_0=/Users/me/project`. Sections come in a fixed order:
//!
//! 1. `(version 1)` and `(deny default)`: what no rule allows is denied;
//! 2. processes: fork; signals and process information only within the sandbox (exec is allowed
//!    where reads are, in 4);
//! 3. what ordinary tools need from the system: sysctl reads, the directory service, logging
//!    and notification services, the terminals the command opens itself (Seatbelt's pty
//!    extension), the device nodes of the plan;
//! 4. reads and exec: metadata everywhere (`stat`, `realpath`), contents below the plan's
//!    readable roots; never a denied path;
//! 5. writes below the writable roots; never a denied or protected path, nor an ancestor of one
//!    inside a writable root;
//! 6. denies, each tagged with the run's marker (`(with message "…")`): credentials and
//!    secrets (read, write, exec), protected workspace paths (write: not created, changed,
//!    renamed or removed), their ancestors (write: not renamed or removed, so a protected path
//!    cannot be moved aside and rebuilt);
//! 7. network: denied.
//!
//! Allow rules exclude what the deny rules cover (`require-not`), so the profile means the same
//! whichever rule Seatbelt lets win (see [`super::eval`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::sbpl::quote;
use crate::guard::protected::{ProtectedKind, ProtectedPath};
use crate::plan::resolve::PathResolver;
use crate::plan::decision::{confined_rlimits, RlimitNumbers, RlimitSetting};
use crate::policy::{SandboxLevel, SandboxMode, SandboxPolicy};

/// macOS's `RLIMIT_*` numbers (`<sys/resource.h>`).
const MACOS_RLIMITS: RlimitNumbers = RlimitNumbers { fsize: 1, nofile: 8, core: 4 };

/// The mach services the profile lets the command look up: user and group lookups, logging,
/// notifications. Nothing that starts programs (launch services), holds secrets (the keychain's
/// security server) or reads preferences on the command's behalf.
pub const MACH_SERVICES: &[&str] = &[
    "com.apple.system.opendirectoryd.libinfo", "com.apple.system.logger", "com.apple.logd", "com.apple.system.notification_center",
];

/// Entries of a protected `.git` directory that make code run later or redirect git (the same
/// classes [`crate::guard::review::classify_git_path`] sends to review on Linux): not writable at all
/// on macOS. The rest of `.git` (objects, refs, the index, logs) stays writable, so commits work.
pub const GIT_CODE_ENTRIES: &[&str] = &[
    "hooks", "config", "config.worktree", "commondir", "gitdir", "info/attributes", "objects/info/alternates", "remotes", "branches",
    "rebase-merge", "rebase-apply", "sequencer", "worktrees", "modules",
];

/// The macOS artefacts of a plan.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct MacosPlan {
    /// The profile (`sandbox-exec -p`).
    pub profile: String,
    /// Its parameters (`-DNAME=VALUE`), in order.
    pub params: Vec<(String, PathBuf)>,
    /// The tag of this run's denials in the system log.
    pub marker: String,
    /// Resource limits the helper sets before exec (macOS numbers).
    pub rlimits: Vec<RlimitSetting>,
}

impl MacosPlan {
    /// `sandbox-exec`'s arguments before the command: `-p PROFILE -DNAME=VALUE… --`.
    #[must_use]
    pub fn sandbox_exec_args(&self) -> Vec<std::ffi::OsString> {
        let mut v: Vec<std::ffi::OsString> = vec!["-p".into(), self.profile.clone().into()];
        for (k, p) in &self.params {
            let mut a = std::ffi::OsString::from(format!("-D{k}="));
            a.push(p.as_os_str());
            v.push(a);
        }
        v.push("--".into());
        v
    }
}

/// What [`compile`] needs.
pub struct Inputs<'a> {
    /// The policy (with the run's extra denies).
    pub policy: &'a SandboxPolicy,
    /// The level (Standard: Seatbelt confines files; Minimal: only denies, protections and
    /// network).
    pub level: SandboxLevel,
    /// The protected workspace paths.
    pub protected: &'a [ProtectedPath],
    /// The per-run scratch directory (writable).
    pub scratch: Option<&'a Path>,
    /// The binary that is exec'd inside the sandbox to check it and start the command.
    pub helper: Option<&'a Path>,
    /// The run's denial tag.
    pub marker: &'a str,
    /// The plan's resolver.
    pub resolver: &'a mut PathResolver,
    /// Resolve paths through this machine's filesystem (the plan is for this machine); a plan
    /// made for a Mac elsewhere only normalises them.
    pub resolve_here: bool,
}

/// Collects parameters: one name per (prefix, path), numbered in order of first use.
struct Params {
    list: Vec<(String, PathBuf)>,
}

impl Params {
    fn name(&mut self, prefix: &str, p: &Path) -> String {
        if let Some((n, _)) = self.list.iter().find(|(n, v)| v == p && n.strip_prefix(prefix).is_some_and(|r| r.starts_with('_'))) {
            return n.clone();
        }
        let i = self.list.iter().filter(|(n, _)| n.strip_prefix(prefix).is_some_and(|r| r.starts_with('_'))).count();
        let n = format!("{prefix}_{i}");
        self.list.push((n.clone(), p.to_path_buf()));
        n
    }

    /// `(KIND (param "NAME"))` for each path.
    fn filters(&mut self, kind: &str, prefix: &str, paths: &[PathBuf]) -> Vec<String> {
        paths.iter().map(|p| format!("({kind} (param \"{}\"))", self.name(prefix, p))).collect()
    }
}

/// One filter standing for any of `fs` (`None` when empty).
fn any(fs: &[String]) -> Option<String> {
    match fs {
        [] => None,
        [one] => Some(one.clone()),
        many => Some(format!("(require-any\n    {})", many.join("\n    "))),
    }
}

/// `(allow OPS)` everywhere but `excluded`, as one line.
fn allow_all_but(ops: &str, excluded: Option<&String>) -> String {
    match excluded {
        Some(x) => format!("(allow {ops} (require-not {x}))\n"),
        None => format!("(allow {ops})\n"),
    }
}

/// `allowed` without `excluded` (`allowed` alone when nothing is excluded).
fn but_not(allowed: &str, excluded: Option<&String>) -> String {
    match excluded {
        Some(x) => format!("(require-all {allowed}\n  (require-not {x}))"),
        None => allowed.to_string(),
    }
}

fn dedup(v: &mut Vec<PathBuf>) {
    let mut seen = std::collections::HashSet::new();
    v.retain(|p| seen.insert(p.clone()));
}

/// The paths a protected path stands for on macOS, each with whether everything below it is
/// protected too (see [`GIT_CODE_ENTRIES`]): a `.git` directory itself only as an entry (it
/// cannot be created, replaced, renamed or removed), its code-running entries whole.
#[must_use]
pub fn protected_targets(p: &ProtectedPath) -> Vec<(PathBuf, bool)> {
    match p.kind {
        ProtectedKind::GitDir => std::iter::once((p.path.clone(), false)).chain(GIT_CODE_ENTRIES.iter().map(|e| (p.path.join(e), true))).collect(),
        ProtectedKind::Dir | ProtectedKind::File => vec![(p.path.clone(), true)],
    }
}

/// Renders the profile of a plan.
#[must_use]
pub fn compile(i: Inputs<'_>) -> MacosPlan {
    let Inputs { policy, level, protected, scratch, helper, marker, resolver, resolve_here } = i;
    let mut canon = |p: &Path| if resolve_here { resolver.canonicalize_lenient(p).path } else { crate::plan::resolve::normalize(p) };
    let mut params = Params { list: Vec::new() };
    // Every deny path as given (normalised) and resolved: Seatbelt sees resolved paths, and a
    // link that is later replaced must not open the original name either.
    let mut denied: Vec<PathBuf> = Vec::new();
    for d in &policy.deny_paths {
        denied.push(crate::plan::resolve::normalize(d));
        denied.push(canon(d));
    }
    dedup(&mut denied);
    let mut protect_tree: Vec<PathBuf> = Vec::new();
    let mut protect_entry: Vec<PathBuf> = Vec::new();
    for (p, tree) in protected.iter().flat_map(protected_targets) {
        if tree { &mut protect_tree } else { &mut protect_entry }.push(canon(&p));
    }
    dedup(&mut protect_tree);
    dedup(&mut protect_entry);
    let protect: Vec<PathBuf> = protect_entry.iter().chain(&protect_tree).cloned().collect();
    let mut writes: Vec<PathBuf> = Vec::new();
    if policy.mode == SandboxMode::WorkspaceWrite {
        writes.push(canon(&policy.workspace_path));
        writes.extend(policy.writable_paths.iter().map(|p| canon(p)));
    }
    writes.extend(scratch.map(&mut canon));
    dedup(&mut writes);
    let mut reads: Vec<PathBuf> = vec![canon(&policy.workspace_path)];
    reads.extend(policy.read_only_paths.iter().chain(&policy.writable_paths).map(|p| canon(p)));
    reads.extend(scratch.map(&mut canon));
    dedup(&mut reads);
    // Ancestors of denied and protected paths that could be renamed: those inside a writable
    // root (the others are not writable anyway).
    let mut keep: Vec<PathBuf> = Vec::new();
    for p in denied.iter().chain(&protect) {
        let mut a = p.parent();
        while let Some(x) = a {
            if writes.iter().any(|w| x.starts_with(w)) && !protect.iter().any(|q| q == x) {
                keep.push(x.to_path_buf());
            }
            a = x.parent();
        }
    }
    dedup(&mut keep);
    let mut devices: Vec<PathBuf> = policy.device_paths.clone();
    dedup(&mut devices);

    let denied_f = params.filters("subpath", "DENY", &denied);
    let protect_f = [params.filters("literal", "PROTECT", &protect_entry), params.filters("subpath", "PROTECT", &protect_tree)].concat();
    let keep_f = params.filters("literal", "KEEP", &keep);
    let device_f = params.filters("subpath", "DEVICE", &devices);
    // Minimal level confines no reads or writes: no roots to name.
    let fs_confined = level >= SandboxLevel::Standard;
    let read_f = if fs_confined { params.filters("subpath", "READ", &reads) } else { Vec::new() };
    let write_f = if fs_confined { params.filters("subpath", "WRITE", &writes) } else { Vec::new() };
    let helper_f = helper.map(|h| format!("(literal (param \"{}\"))", params.name("HELPER", &canon(h))));
    let not_read = any(&denied_f);
    let not_write = any(&[denied_f.clone(), protect_f.clone(), keep_f.clone()].concat());
    let tag = |what: &str| format!("(with message \"{}\")", quote(&format!("{marker}:{what}")));

    let mut s = String::from("(version 1)\n(deny default)\n");
    let _ = writeln!(s, ";; localgpt-sandbox: Seatbelt profile generated from the plan (level {level}, mode {}).", policy.mode.as_str());
    let _ = writeln!(s, ";; Paths are -D parameters only; every string below is a constant of the generator.\n");
    s.push_str(";; processes: fork and exec (exec where reads are allowed, below); signals and process\n;; information only within the sandbox\n");
    s.push_str("(allow process-fork)\n(allow signal (target same-sandbox))\n(allow process-info* (target same-sandbox))\n\n");
    s.push_str(";; system services ordinary tools need\n(allow sysctl-read)\n");
    let mach: Vec<String> = MACH_SERVICES.iter().map(|m| format!("(global-name \"{m}\")")).collect();
    let _ = writeln!(s, "(allow mach-lookup\n  {})", mach.join("\n  "));
    s.push_str("(allow ipc-posix-shm-read-data ipc-posix-shm-read-metadata (ipc-posix-name \"apple.shm.notification_center\"))\n");
    s.push_str("(allow ipc-posix-sem)\n");
    s.push_str(";; terminals the command opens itself (not the user's other terminals)\n(allow pseudo-tty)\n");
    s.push_str("(allow file-read* file-write* file-ioctl (require-all (regex #\"^/dev/ttys[0-9]+$\") (extension \"com.apple.sandbox.pty\")))\n");
    if let Some(d) = any(&device_f) {
        let _ = writeln!(s, "(allow file-read* file-write-data file-ioctl\n  {d})");
    }
    s.push('\n');
    s.push_str(";; reads and exec\n");
    s.push_str(&allow_all_but("file-read-metadata", not_read.as_ref()));
    if fs_confined {
        if let Some(r) = any(&read_f) {
            let _ = writeln!(s, "(allow file-read* process-exec\n  {})", but_not(&r, not_read.as_ref()));
        }
    } else {
        s.push_str(&allow_all_but("file-read* process-exec", not_read.as_ref()));
    }
    if let Some(h) = &helper_f {
        let _ = writeln!(s, "(allow file-read* process-exec\n  {})", but_not(h, not_read.as_ref()));
    }
    s.push('\n');
    s.push_str(";; writes\n");
    if fs_confined {
        if let Some(w) = any(&write_f) {
            let _ = writeln!(s, "(allow file-write*\n  {})", but_not(&w, not_write.as_ref()));
        }
    } else {
        s.push_str(&allow_all_but("file-write*", not_write.as_ref()));
    }
    s.push('\n');
    s.push_str(";; denied: credentials and secrets; protected workspace paths; their ancestors\n");
    if let Some(d) = any(&denied_f) {
        let _ = writeln!(s, "(deny file-read* file-write* process-exec\n  {d}\n  {})", tag("credential"));
    }
    if let Some(p) = any(&protect_f) {
        let _ = writeln!(s, "(deny file-write*\n  {p}\n  {})", tag("protected"));
    }
    if let Some(k) = any(&keep_f) {
        let _ = writeln!(s, "(deny file-write*\n  {k}\n  {})", tag("ancestor"));
    }
    s.push('\n');
    s.push_str(";; network\n");
    let _ = writeln!(s, "(deny network* {})", tag("network"));

    // (Only confined plans get a profile: level none runs without one.)
    MacosPlan { profile: s, params: params.list, marker: marker.to_string(), rlimits: confined_rlimits(policy, &MACOS_RLIMITS) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{build_sandbox_policy_for, SandboxSettings};
    use crate::detect::{assumed_for, Platform};
    use crate::plan::{make_plan, Plan, ProtectionId, RunContext};
    use crate::guard::review::{classify_git_path, GitPathClass};

    /// A macOS plan for a fixed world under `root`: `home/`, `home/proj` (a git repository)
    /// as the workspace.
    fn mac_plan(root: &Path, mode: SandboxMode, level: Option<SandboxLevel>) -> Plan {
        let home = root.join("home");
        let ws = home.join("proj");
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
        let mut s = SandboxSettings { mode, home: Some(home), dangerously_allow_full_access: mode == SandboxMode::FullAccess, ..Default::default() };
        if let Some(l) = level {
            s.level = crate::policy::LevelSetting::Exactly(l);
        }
        let policy = build_sandbox_policy_for(&ws, &s, Platform::Macos).unwrap();
        let ctx = RunContext {
            scratch: Some(PathBuf::from("/private/tmp/localgpt-sandbox-u501/run-golden")),
            run_id: Some("golden".into()),
            helper_exe: Some(PathBuf::from("/usr/local/bin/localgpt")),
            ..RunContext::default()
        };
        make_plan(&policy, &assumed_for(Platform::Macos), &ctx).unwrap()
    }

    fn golden(name: &str, plan: &Plan, root: &Path) {
        let m = plan.macos.as_ref().expect("a macOS plan has a profile");
        let root = root.to_string_lossy().into_owned();
        let mut text = m.profile.clone();
        text.push_str("\n;; parameters (the test's temporary directory shown as {root})\n");
        for (k, v) in &m.params {
            text.push_str(&format!(";; -D{k}={}\n", v.to_string_lossy().replace(&root, "{root}")));
        }
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(format!("{name}.sb"));
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1 to create it, then review it)", path.display()));
        assert!(want == text, "{name}: the generated profile differs from {} (review the change; UPDATE_GOLDEN=1 rewrites it)\n{text}", path.display());
    }

    #[test]
    fn golden_profiles_for_the_default_modes() {
        let d = crate::test_dir();
        let root = d.path();
        golden("macos-workspace-write", &mac_plan(root, SandboxMode::WorkspaceWrite, None), root);
        golden("macos-read-only", &mac_plan(root, SandboxMode::ReadOnly, None), root);
        golden("macos-minimal", &mac_plan(root, SandboxMode::WorkspaceWrite, Some(SandboxLevel::Minimal)), root);
    }

    #[test]
    fn generated_profiles_are_well_formed() {
        let d = crate::test_dir();
        for (mode, level) in [(SandboxMode::WorkspaceWrite, None), (SandboxMode::ReadOnly, None), (SandboxMode::WorkspaceWrite, Some(SandboxLevel::Minimal))] {
            let plan = mac_plan(d.path(), mode, level);
            let m = plan.macos.as_ref().unwrap();
            let names: Vec<&str> = m.params.iter().map(|(k, _)| k.as_str()).collect();
            crate::macos::sbpl::check(&m.profile, &names).unwrap_or_else(|e| panic!("{mode:?} {level:?}: {e}\n{}", m.profile));
            assert!(m.profile.starts_with("(version 1)\n(deny default)\n"));
            // Every parameter is used, and every path of the plan is a parameter, not text.
            for n in &names {
                assert!(m.profile.contains(&format!("(param \"{n}\")")), "{n} unused");
            }
            assert!(!m.profile.contains(&d.path().to_string_lossy().into_owned()));
            let args = m.sandbox_exec_args();
            assert_eq!(args[0], "-p");
            assert_eq!(args.last().map(|a| a.to_string_lossy().into_owned()), Some("--".into()));
        }
    }

    #[test]
    fn a_path_cannot_inject_rules() {
        // A workspace whose name is SBPL: it only ever reaches Seatbelt as a -D value.
        let d = crate::test_dir();
        let evil = d.path().join("home/x\") (allow default) (\"");
        std::fs::create_dir_all(&evil).unwrap();
        let s = SandboxSettings { home: Some(d.path().join("home")), ..Default::default() };
        let policy = build_sandbox_policy_for(&evil, &s, Platform::Macos).unwrap();
        let plan = make_plan(&policy, &assumed_for(Platform::Macos), &RunContext::default()).unwrap();
        let m = plan.macos.unwrap();
        assert!(!m.profile.contains("(allow default)"));
        assert!(m.params.iter().any(|(_, v)| v == &policy.workspace_path));
        let names: Vec<&str> = m.params.iter().map(|(k, _)| k.as_str()).collect();
        crate::macos::sbpl::check(&m.profile, &names).unwrap();
    }

    #[test]
    fn protection_table_has_every_id_once_in_order() {
        let d = crate::test_dir();
        for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly, SandboxMode::FullAccess] {
            let plan = mac_plan(d.path(), mode, None);
            let ids: Vec<ProtectionId> = plan.protections.iter().map(|p| p.id).collect();
            assert_eq!(ids, ProtectionId::ALL, "{mode:?}");
            assert_eq!(plan.macos.is_some(), mode != SandboxMode::FullAccess);
        }
    }

    #[test]
    fn full_level_is_refused_on_macos() {
        let d = crate::test_dir();
        let home = d.path().join("home");
        std::fs::create_dir_all(home.join("p")).unwrap();
        let s = SandboxSettings { home: Some(home.clone()), level: crate::policy::LevelSetting::Exactly(SandboxLevel::Full), ..Default::default() };
        let policy = build_sandbox_policy_for(&home.join("p"), &s, Platform::Macos).unwrap();
        let e = make_plan(&policy, &assumed_for(Platform::Macos), &RunContext::default()).unwrap_err().to_string();
        assert!(e.contains("Linux namespaces"), "{e}");
        // A Linux policy is not turned into a Mac plan.
        let linux = build_sandbox_policy_for(&home.join("p"), &SandboxSettings { home: Some(home), ..Default::default() }, Platform::Linux).unwrap();
        assert!(make_plan(&linux, &assumed_for(Platform::Macos), &RunContext::default()).is_err());
    }

    #[test]
    fn git_code_entries_are_what_the_review_holds_back() {
        for e in GIT_CODE_ENTRIES {
            let inside = Path::new(e).join("x");
            let class = classify_git_path(Path::new(e));
            let inner = classify_git_path(&inside);
            let held = |c| c != GitPathClass::Plain;
            // Directories (hooks, to-do lists' directories, nested git dirs) hold code-running
            // files; the files themselves are classified directly.
            assert!(held(class) || held(inner) || ["rebase-merge", "rebase-apply", "sequencer", "worktrees", "modules"].contains(e), "{e}");
        }
        // Every path the review holds back lies under an entry.
        for p in ["hooks/pre-commit", "config", "config.worktree", "commondir", "info/attributes", "objects/info/alternates", "remotes/origin", "branches/x",
            "rebase-merge/git-rebase-todo", "sequencer/todo", "worktrees/w/config.worktree", "worktrees/w/hooks/x", "modules/m/config", "modules/m/hooks/x"] {
            assert_ne!(classify_git_path(Path::new(p)), GitPathClass::Plain, "{p}");
            assert!(GIT_CODE_ENTRIES.iter().any(|e| Path::new(p).starts_with(e)), "{p}");
        }
    }

    #[test]
    fn params_are_numbered_per_prefix_and_reused() {
        let mut p = Params { list: Vec::new() };
        assert_eq!(p.name("READ", Path::new("/a")), "READ_0");
        assert_eq!(p.name("WRITE", Path::new("/a")), "WRITE_0");
        assert_eq!(p.name("READ", Path::new("/b")), "READ_1");
        assert_eq!(p.name("READ", Path::new("/a")), "READ_0");
        assert_eq!(p.list.len(), 3);
    }
}
