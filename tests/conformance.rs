//! The cross-backend conformance table (`conformance/table.yaml`) on both backends:
//!
//! * Linux: every row is executed through the binary at the suite's level (ci/test runs the
//!   suite at every level the machine reaches, as root and as an unprivileged user), in a fresh
//!   world, and its effect is checked from outside the sandbox; every row that must not take
//!   effect is also run bare, where it must (or it proves nothing).
//! * macOS: every row is evaluated against the Seatbelt profile generated for the same world,
//!   under both readings of rule precedence; and a profile with one rule flipped must fail.

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use localgpt_corpus::conformance::{self, Expect, Mode, Op, Places, Row};
use localgpt_sandbox::config::{build_sandbox_policy_for, SandboxSettings};
use localgpt_sandbox::detect::{assumed_for, Platform};
use localgpt_sandbox::plan::{make_plan, RunContext};
use localgpt_sandbox::SandboxMode;
use support::*;

/// A world for one row: the support world plus the table's files, links and listeners.
struct ConfWorld {
    w: World,
    places: Places,
    token: String,
    /// What reading each file (or listing each directory) prints.
    markers: BTreeMap<PathBuf, String>,
    tcp: TcpProbe,
    unix: UnixProbe,
    victim: Option<CanaryProcess>,
}

const FILES: &[&str] = &[
    "ws/src/main.rs", "ws/README.md", "ws/a.txt", "ws/b.txt", "ws/.git/HEAD", "ws/.vscode/tasks.json", "ws/.idea/workspace.xml",
    "home/.ssh/id_ed25519", "home/.ssh/config", "home/.ssh/authorized_keys", "home/.aws/credentials", "home/.gnupg/private-keys-v1.d/key.key",
    "home/.netrc", "home/.docker/config.json", "home/.kube/config", "home/.config/gh/hosts.yml", "home/.git-credentials", "home/.pypirc",
    "home/.cargo/credentials.toml", "home/.vault-token", "home/.password-store/mail.gpg", "home/.bashrc", "home/notes.txt", "outside/secret.txt",
];
const SCRIPTS: &[&str] = &["ws/tool.sh", "ws/.git/hooks/pre-commit", "home/.cargo/bin/tool", "home/.local/bin/tool", "home/bin/tool", "outside/tool"];
const DIRS: &[&str] = &["ws/.git/objects/info", "ws/.git/refs/heads", "ws/.git/info", "ws/.idea/runConfigurations", "home/.config/autostart"];

impl ConfWorld {
    fn new() -> ConfWorld {
        let w = World::new();
        let token = unique_token();
        let mut markers = BTreeMap::new();
        for d in DIRS {
            fs::create_dir_all(w.root.join(d)).unwrap();
        }
        for f in FILES {
            let p = w.root.join(f);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            let m = format!("CONTENT-{}-{token}", f.replace('/', "_"));
            fs::write(&p, format!("{m}\n")).unwrap();
            markers.insert(p, m);
        }
        for s in SCRIPTS {
            let p = w.root.join(s);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            let m = format!("EXECUTED-{}-{token}", s.replace('/', "_"));
            fs::write(&p, format!("#!/bin/sh\necho {m}\n")).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
            markers.insert(p, m);
        }
        // Config files that must stay valid (git reads them when planning).
        let git_config = w.ws.join(".git/config");
        fs::write(&git_config, format!("[core]\n\trepositoryformatversion = 0\n# CONTENT-git-config-{token}\n")).unwrap();
        markers.insert(git_config, format!("CONTENT-git-config-{token}"));
        let gitconfig = w.home.join(".gitconfig");
        fs::write(&gitconfig, format!("[user]\n\tname = CONTENT-gitconfig-{token}\n")).unwrap();
        markers.insert(gitconfig, format!("CONTENT-gitconfig-{token}"));
        // Listing a directory shows a known entry.
        markers.insert(w.outside.clone(), "secret.txt".into());
        markers.insert(w.home.join(".ssh"), "id_ed25519".into());
        for (link, target) in [("link-to-key", w.home.join(".ssh/id_ed25519")), ("link-to-outside", w.outside.join("secret.txt")), ("link-to-bashrc", w.home.join(".bashrc"))] {
            std::os::unix::fs::symlink(&target, w.ws.join(link)).unwrap();
            let m = markers[&target].clone();
            markers.insert(w.ws.join(link), m);
        }
        let tcp = TcpProbe::new();
        let unix = UnixProbe::pathname(&w.outside.join("agent.sock"));
        let places = Places { ws: w.ws.clone(), home: w.home.clone(), outside: w.outside.clone(), etc: PathBuf::from("/etc") };
        ConfWorld { w, places, token, markers, tcp, unix, victim: None }
    }

    fn spawn_victim(&mut self) -> u32 {
        let c = CanaryProcess::spawn();
        let pid = c.pid();
        self.victim = Some(c);
        pid
    }

    /// The line a write or create row writes.
    fn data(&self, row: &Row) -> String {
        let d = match (row.op, &row.data) {
            (_, Some(d)) => d.clone(),
            (Op::Create, None) => "CREATED-{token}".into(),
            _ => "WRITTEN-{token}".into(),
        };
        d.replace("{token}", &self.token).replace("\\t", "\t")
    }

    /// The shell snippet that attempts `row`.
    fn script(&mut self, row: &Row) -> String {
        let target = self.places.expand(&row.path);
        let q = sh_quote(&target);
        let tok = &self.token;
        match row.op {
            Op::Read => format!("if [ -d {q} ]; then ls -a -- {q}; else cat -- {q}; fi"),
            Op::Write => format!("printf '%s\\n' {} >> {q}", sh_quote(self.data(row))),
            Op::Create => format!("mkdir -p -- \"$(dirname -- {q})\" && printf '%s\\n' {} > {q}", sh_quote(self.data(row))),
            Op::Exec => format!("{q} && echo EXIT-OK-{tok}"),
            Op::Unlink => format!("rm -- {q}"),
            Op::Rename => format!("mv -- {q} {}", sh_quote(format!("{target}.moved"))),
            Op::Connect if row.path == "tcp" => {
                let port = self.tcp.port;
                format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED-{tok}")
            }
            Op::Connect => {
                let path = target.strip_prefix("unix:").unwrap_or(&target).to_string();
                let py = python3().map_or_else(|| "python3".into(), |p| p.display().to_string());
                format!("{py} -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' {} && echo CONNECTED-{tok}", sh_quote(path))
            }
            Op::Signal if row.path == "outside" => {
                let pid = self.spawn_victim();
                format!("kill -TERM {pid}")
            }
            Op::Signal => format!("sleep 30 & kill -TERM $! && wait $!; [ $? -eq 143 ] && echo SIGNALLED-{tok}"),
        }
    }

    /// Whether `row` took effect, judged from outside (and from the output for reads and exec).
    fn effect(&mut self, row: &Row, out: &Out) -> bool {
        let target = PathBuf::from(self.places.expand(&row.path));
        let tok = self.token.clone();
        let content = |p: &Path| fs::read_to_string(p).unwrap_or_default();
        match row.op {
            Op::Read => match self.markers.get(&target) {
                Some(m) => out.stdout.contains(m.as_str()),
                // A system file: its first bytes.
                None => fs::read(&target).is_ok_and(|b| !b.is_empty() && out.stdout_raw.windows(b.len().min(64)).any(|w| w == &b[..b.len().min(64)])),
            },
            Op::Write | Op::Create => {
                let line = self.data(row);
                content(&target).lines().any(|l| l == line)
            }
            Op::Exec => match self.markers.get(&target) {
                Some(m) => out.stdout.contains(m.as_str()),
                None => out.stdout.contains(&format!("EXIT-OK-{tok}")),
            },
            Op::Unlink | Op::Rename => fs::symlink_metadata(&target).is_err(),
            Op::Connect if row.path == "tcp" => self.tcp.observe().connections > 0,
            Op::Connect => self.unix.observe().connections > 0,
            Op::Signal if row.path == "outside" => self.victim.as_mut().is_some_and(|v| {
                // A signalled victim is gone within moments; a live one stays.
                for _ in 0..50 {
                    if !v.alive() {
                        return true;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                false
            }),
            Op::Signal => out.stdout.contains(&format!("SIGNALLED-{tok}")),
        }
    }
}

/// One row on Linux at `level`: `None` when it passes, else why not.
fn linux_row(row: &Row, level: &str) -> Option<String> {
    if row.op == Op::Connect && row.path.starts_with("unix:") && python3().is_none() {
        skip(&format!("conformance {}", row.id), "python3 is not installed (it makes the unix connection)");
        return None;
    }
    let mut cw = ConfWorld::new();
    let script = cw.script(row);
    let o = cw.w.sandboxed_with(&["--level", level, "--mode", row.mode.as_str()], &script);
    if o.stderr.contains("sandbox setup failed") || o.stderr.contains("is not available here") {
        return Some(format!("the sandbox did not start: {}", o.describe()));
    }
    let effect = cw.effect(row, &o);
    let ok = match row.expect {
        Expect::Allow => effect,
        // A read's effect is the contents shown: a masked (empty) credential reveals nothing.
        Expect::Deny if row.op == Op::Read => !effect,
        Expect::Deny => !effect && !o.success(),
        Expect::Protected => !effect,
    };
    if !ok {
        return Some(format!("expected {:?}, effect {}, exit {:?}: {}", row.expect, if effect { "seen" } else { "not seen" }, o.code(), o.describe()));
    }
    if row.expect != Expect::Allow {
        // Bare, in a fresh world, the same operation must take effect.
        let mut bare = ConfWorld::new();
        let script = bare.script(row);
        let b = bare.w.bare(&script);
        if !bare.effect(row, &b) {
            return Some(format!("the operation does not take effect even bare, so the row proves nothing: {}", b.describe()));
        }
    }
    None
}

#[test]
fn conformance_table_holds_on_linux() {
    let rows = conformance::load().expect("the conformance table loads");
    let probe = World::new();
    let level = suite_level(&probe);
    if level != "full" && level != "standard" {
        skip("conformance_table_holds_on_linux", &format!("the suite runs at level {level:?}: the table describes full and standard"));
        return;
    }
    // Rows run in parallel, a few at a time (each in its own world).
    let failures: Vec<String> = std::thread::scope(|s| {
        let chunks: Vec<&[Row]> = rows.chunks(rows.len().div_ceil(4)).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| s.spawn(|| chunk.iter().filter_map(|r| linux_row(r, &level).map(|why| format!("{} ({:?} {}): {why}", r.id, r.op, r.path))).collect::<Vec<_>>()))
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    println!("conformance at {level}: {} rows, {} failed", rows.len(), failures.len());
    assert!(failures.is_empty(), "{} of {} rows fail at level {level}:\n{}", failures.len(), rows.len(), failures.join("\n\n"));
}

/// The macOS profile for the unchanged world in `mode`, and the world's places as a Mac sees
/// them.
fn macos_profile(cw: &ConfWorld, mode: Mode) -> (String, Vec<(String, PathBuf)>, Places) {
    let s = SandboxSettings {
        mode: if mode == Mode::ReadOnly { SandboxMode::ReadOnly } else { SandboxMode::WorkspaceWrite },
        home: Some(cw.w.home.clone()),
        ..Default::default()
    };
    let policy = build_sandbox_policy_for(&cw.w.ws, &s, Platform::Macos).expect("macOS policy");
    let ctx = RunContext { scratch: Some(PathBuf::from("/private/tmp/localgpt-sandbox-u501/run")), ..RunContext::default() };
    let plan = make_plan(&policy, &assumed_for(Platform::Macos), &ctx).expect("macOS plan");
    let m = plan.macos.expect("a Seatbelt profile");
    let places = Places { etc: PathBuf::from("/private/etc"), ..cw.places.clone() };
    (m.profile, m.params, places)
}

/// Failures of the table's rows on a (possibly altered) macOS profile.
fn macos_failures(cw: &ConfWorld, rows: &[Row], alter: impl Fn(&str) -> String) -> Vec<String> {
    let mut failures = Vec::new();
    for mode in [Mode::WorkspaceWrite, Mode::ReadOnly] {
        let (profile, params, places) = macos_profile(cw, mode);
        let of_mode: Vec<&Row> = rows.iter().filter(|r| r.mode == mode).collect();
        let outcomes = conformance::evaluate_macos(&of_mode, &alter(&profile), &params, &places).expect("the profile parses");
        for (row, o) in of_mode.iter().zip(outcomes) {
            if !o.pass {
                failures.push(format!("{}: expected {:?}, {}{} {}", row.id, row.expect, if o.allowed { "allowed" } else { "denied" }, if o.ambiguous { " (ambiguous)" } else { "" }, o.detail));
            }
        }
    }
    failures
}

#[test]
fn conformance_table_holds_on_the_macos_profile() {
    let rows = conformance::load().expect("the conformance table loads");
    let cw = ConfWorld::new();
    let failures = macos_failures(&cw, &rows, str::to_string);
    println!("conformance on the macOS profile: {} rows, {} failed", rows.len(), failures.len());
    assert!(failures.is_empty(), "{} rows fail on the macOS profile:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn a_flipped_rule_in_the_macos_profile_fails_the_table() {
    let rows = conformance::load().expect("the conformance table loads");
    let cw = ConfWorld::new();
    let flips: &[(&str, &str)] = &[
        // The credential denies become allows.
        ("(deny file-read* file-write* process-exec", "(allow file-read* file-write* process-exec"),
        // The protected paths' deny becomes an allow.
        ("(deny file-write*\n  (require-any\n    (literal (param \"PROTECT_0\"))", "(allow file-write*\n  (require-any\n    (literal (param \"PROTECT_0\"))"),
        // The network deny becomes an allow.
        ("(deny network*", "(allow network*"),
    ];
    for (from, to) in flips {
        // (Read-only mode has no protected paths: a flip that finds nothing there changes nothing.)
        let failures = macos_failures(&cw, &rows, |p| p.replacen(from, to, 1));
        assert!(!failures.is_empty(), "flipping {from:?} to {to:?} left every row passing");
    }
}

/// The Windows plan for the unchanged world in `mode`.
fn windows_plan(cw: &ConfWorld, mode: Mode) -> localgpt_sandbox::windows::WindowsPlan {
    let s = SandboxSettings {
        mode: if mode == Mode::ReadOnly { SandboxMode::ReadOnly } else { SandboxMode::WorkspaceWrite },
        home: Some(cw.w.home.clone()),
        ..Default::default()
    };
    let policy = build_sandbox_policy_for(&cw.w.ws, &s, Platform::Windows).expect("Windows policy");
    let ctx = RunContext { scratch: Some(cw.w.outside.join("run-temp")), ..RunContext::default() };
    let plan = make_plan(&policy, &assumed_for(Platform::Windows), &ctx).expect("Windows plan");
    plan.windows.expect("a Windows plan")
}

/// Failures of the table's rows on a (possibly altered) Windows plan.
fn windows_failures(cw: &ConfWorld, rows: &[Row], alter: impl Fn(&mut localgpt_sandbox::windows::WindowsPlan)) -> Vec<String> {
    let mut failures = Vec::new();
    for mode in [Mode::WorkspaceWrite, Mode::ReadOnly] {
        let mut plan = windows_plan(cw, mode);
        alter(&mut plan);
        let of_mode: Vec<&Row> = rows.iter().filter(|r| r.mode == mode).collect();
        for (row, o) in of_mode.iter().zip(conformance::evaluate_windows(&of_mode, &plan, &cw.places)) {
            if !o.pass {
                failures.push(format!("{}: expected {:?} on Windows, {}{}: {}", row.id, row.windows_expect(), if o.allowed { "allowed" } else { "denied" }, if o.reviewed { " (reviewed)" } else { "" }, o.detail));
            }
        }
    }
    failures
}

#[test]
fn conformance_table_holds_on_the_windows_plan() {
    let rows = conformance::load().expect("the conformance table loads");
    let cw = ConfWorld::new();
    let failures = windows_failures(&cw, &rows, |_| {});
    let differ = rows.iter().filter(|r| r.windows.is_some()).count();
    println!("conformance on the Windows plan (model): {} rows ({differ} decided otherwise by design), {} failed", rows.len(), failures.len());
    assert!(failures.is_empty(), "{} rows fail on the Windows plan:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn a_removed_ace_or_label_in_the_windows_plan_fails_the_table() {
    use localgpt_sandbox::windows::acl::{AceEntry, AceKind};
    type Pick<'a> = Box<dyn Fn(&AceEntry) -> bool + 'a>;
    let rows = conformance::load().expect("the conformance table loads");
    let cw = ConfWorld::new();
    let ws = cw.places.ws.canonicalize().unwrap();
    let home = cw.places.home.canonicalize().unwrap();
    // Each removal must make at least one row fail.
    let removals: Vec<(&str, Pick)> = vec![
        ("the deny ACE on .git/hooks", Box::new(|a| a.kind == AceKind::Deny && a.path == ws.join(".git/hooks"))),
        ("the deny ACE on .vscode", Box::new(|a| a.kind == AceKind::Deny && a.path == ws.join(".vscode"))),
        ("the deny ACE on .git", Box::new(|a| a.kind == AceKind::Deny && a.path == ws.join(".git"))),
        ("the credential label on ~/.ssh", Box::new(|a| a.kind == AceKind::Label && a.path == home.join(".ssh"))),
        ("the workspace's allow ACE", Box::new(|a| a.kind == AceKind::Allow && a.path == ws)),
        ("the workspace's Low label", Box::new(|a| a.kind == AceKind::Label && a.path == ws)),
    ];
    let base = windows_plan(&cw, Mode::WorkspaceWrite);
    for (what, matches) in &removals {
        assert!(base.aces.iter().any(matches), "{what} is in the plan: {:#?}", base.aces);
        let failures = windows_failures(&cw, &rows, |p| p.aces.retain(|a| !matches(a)));
        assert!(!failures.is_empty(), "removing {what} left every row passing");
        println!("without {what}: {} rows fail, e.g. {}", failures.len(), failures[0]);
    }
}
