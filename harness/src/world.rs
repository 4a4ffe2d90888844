//! The world of one run: a fresh directory tree outside `/tmp` (which the sandbox may write),
//! with a workspace, an outside directory with canaries, a fake `$HOME` full of secret canaries,
//! listeners (TCP, UDP, pathname and abstract unix sockets), and — when a vector needs them — a
//! pseudo-terminal, SysV IPC objects, a kernel key and host files in `/tmp` and `/dev/shm`.
//! Everything is observed from outside the sandbox and torn down on drop.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use localgpt_corpus::Vector;

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A unique token: lowercase letters and digits, starting with `lgtok`.
#[must_use]
pub fn new_token() -> String {
    let n = SEQ.fetch_add(1, Ordering::SeqCst);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("lgtok{}x{}x{}", std::process::id(), n, nanos % 1_000_000)
}

fn mkdtemp(base: &Path, prefix: &str) -> std::io::Result<PathBuf> {
    fs::create_dir_all(base)?;
    for _ in 0..100 {
        let p = base.join(format!("{prefix}{}", new_token()));
        match fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("cannot create a unique directory"))
}

/// Where worlds live: `$LOCALGPT_TEST_DIR` or `/var/tmp` (never `/tmp` or `/dev/shm`).
#[must_use]
pub fn world_base() -> PathBuf {
    std::env::var_os("LOCALGPT_TEST_DIR").filter(|v| !v.is_empty()).map_or_else(|| PathBuf::from("/var/tmp"), PathBuf::from)
}

/// Secret files under the fake `$HOME`: (secret name, relative path).
pub const HOME_SECRETS: &[(&str, &str)] = &[
    ("ssh", ".ssh/id_rsa"),
    ("aws", ".aws/credentials"),
    ("gnupg", ".gnupg/private-keys-v1.d/lg.key"),
    ("docker", ".docker/config.json"),
    ("netrc", ".netrc"),
    ("git_credentials", ".git-credentials"),
    ("kube", ".kube/config"),
    ("gh", ".config/gh/hosts.yml"),
    ("npmrc", ".npmrc"),
    ("pypirc", ".pypirc"),
    ("cargo", ".cargo/credentials.toml"),
];

/// A listener observed from outside.
#[derive(Default, Debug, Clone)]
pub struct Seen {
    /// Connections accepted.
    pub connections: usize,
    /// Bytes or datagrams received.
    pub data: Vec<u8>,
}

impl Seen {
    /// Anything at all arrived.
    #[must_use]
    pub fn anything(&self) -> bool {
        self.connections > 0 || !self.data.is_empty()
    }
}

/// The key `ci/lgtest-user` plants for the CI user (looked at first).
pub const CI_GROUP_SECRET: &str = "/etc/ssl/private/localgpt-ci-group-secret.key";

/// A file under `/etc` that is not world-readable, is group-readable, and that this process can
/// read — for an unprivileged user one it does not own, so through one of its groups — with its
/// first line (the secret looked for in the output). Found by looking, not from the sandbox's
/// own list: a secret the sandbox does not know about is a finding. Looked for once per process
/// (the facts, the pinned gaps and every world that names it share the answer).
#[must_use]
pub fn group_secret() -> Option<(PathBuf, String)> {
    static FOUND: std::sync::OnceLock<Option<(PathBuf, String)>> = std::sync::OnceLock::new();
    FOUND.get_or_init(find_group_secret).clone()
}

fn find_group_secret() -> Option<(PathBuf, String)> {
    // SAFETY: trivial getter.
    let uid = unsafe { libc::geteuid() };
    let qualifies = |p: &Path| -> Option<String> {
        let m = fs::symlink_metadata(p).ok()?;
        let mode = m.mode();
        if !m.file_type().is_file() || mode & 0o004 != 0 || mode & 0o040 == 0 || (uid != 0 && m.uid() == uid) {
            return None;
        }
        let text = fs::read_to_string(p).ok()?;
        let line = text.lines().map(str::trim).find(|l| l.len() >= 8)?;
        Some(line.chars().take(80).collect())
    };
    if let Some(s) = qualifies(Path::new(CI_GROUP_SECRET)) {
        return Some((PathBuf::from(CI_GROUP_SECRET), s));
    }
    let mut stack = vec![(PathBuf::from("/etc"), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries.iter().rev() {
            if p.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                if depth < 4 {
                    stack.push((p.clone(), depth + 1));
                }
            } else if let Some(s) = qualifies(p) {
                return Some((p.clone(), s));
            }
        }
    }
    None
}

fn drain(s: &mut dyn Read, into: &mut Vec<u8>) {
    let mut buf = [0u8; 4096];
    for _ in 0..64 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => into.extend_from_slice(&buf[..n]),
        }
    }
}

/// The SysV objects of a world.
pub struct Sysv {
    /// Shared memory id.
    pub shm: i32,
    /// Message queue id.
    pub msg: i32,
    /// Semaphore set id.
    pub sem: i32,
}

/// A `.git` directory as `git init` makes it (config, HEAD, objects, refs, hooks with a sample,
/// info/exclude, description) with one commit's worth of files, without running git.
fn make_git_dir(git: &Path, config: &str) -> std::io::Result<()> {
    for d in ["objects/info", "objects/pack", "refs/heads", "refs/tags", "hooks", "info", "logs/refs/heads"] {
        fs::create_dir_all(git.join(d))?;
    }
    fs::write(git.join("config"), config)?;
    fs::write(git.join("HEAD"), "ref: refs/heads/main\n")?;
    fs::write(git.join("description"), "Unnamed repository; edit this file 'description' to name the repository.\n")?;
    fs::write(git.join("info/exclude"), "# git ls-files --others --exclude-from=.git/info/exclude\n")?;
    fs::write(git.join("hooks/pre-commit.sample"), "#!/bin/sh\n# An example hook script.\nexit 0\n")?;
    Ok(())
}

/// The workspace of `kind` (see [`localgpt_corpus::WorldKind`]).
fn make_workspace(ws: &Path, outside: &Path, kind: localgpt_corpus::WorldKind) -> std::io::Result<()> {
    use localgpt_corpus::WorldKind;
    let config = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n";
    match kind {
        WorldKind::GitRepo => make_git_dir(&ws.join(".git"), config)?,
        WorldKind::HooksPath => {
            make_git_dir(&ws.join(".git"), &format!("{config}\thooksPath = .husky/_\n"))?;
            fs::create_dir_all(ws.join(".husky/_"))?;
            fs::write(ws.join(".husky/_/h"), "#!/usr/bin/env sh\n# husky\n")?;
            fs::write(ws.join(".husky/_/.gitignore"), "*\n")?;
            fs::write(ws.join(".husky/pre-commit"), "npm test\n")?;
        }
        WorldKind::GitWorktree => {
            // The main repository outside, with this worktree registered.
            let main = outside.join("main/.git");
            make_git_dir(&main, config)?;
            let wt = main.join("worktrees/ws");
            fs::create_dir_all(&wt)?;
            fs::write(wt.join("gitdir"), format!("{}\n", ws.join(".git").display()))?;
            fs::write(wt.join("commondir"), "../..\n")?;
            fs::write(wt.join("HEAD"), "ref: refs/heads/wt\n")?;
            fs::write(ws.join(".git"), format!("gitdir: {}\n", wt.display()))?;
        }
        WorldKind::NoGit | WorldKind::TmpWorkspace => {}
        WorldKind::Submodule => {
            make_git_dir(&ws.join(".git"), &format!("{config}[submodule \"sub\"]\n\turl = ../sub.git\n\tactive = true\n"))?;
            make_git_dir(&ws.join(".git/modules/sub"), &format!("{config}\tworktree = ../../../sub\n"))?;
            fs::create_dir_all(ws.join("sub"))?;
            fs::write(ws.join("sub/.git"), "gitdir: ../.git/modules/sub\n")?;
            fs::write(ws.join(".gitmodules"), "[submodule \"sub\"]\n\tpath = sub\n\turl = ../sub.git\n")?;
        }
        WorldKind::HomeWorkspace => make_git_dir(&ws.join(".git"), config)?,
        WorldKind::NestedRepo => {
            make_git_dir(&ws.join(".git"), config)?;
            make_git_dir(&ws.join("sub/repo/.git"), config)?;
            fs::create_dir_all(ws.join("sub/.vscode"))?;
            fs::write(ws.join("sub/.vscode/settings.json"), "{}\n")?;
        }
    }
    fs::write(ws.join("notes.txt"), "workspace file\n")
}

/// One world.
pub struct World {
    /// Root directory (removed on drop).
    pub root: PathBuf,
    /// The workspace.
    pub ws: PathBuf,
    /// A directory outside the workspace.
    pub outside: PathBuf,
    /// The fake `$HOME`.
    pub home: PathBuf,
    /// Empty `$XDG_CONFIG_HOME`.
    pub xdg: PathBuf,
    /// The unique token of this world.
    pub token: String,
    /// Named secrets (see `localgpt_corpus::SECRET_NAMES`).
    pub secrets: BTreeMap<String, String>,
    /// Placeholder values.
    pub vars: BTreeMap<String, String>,
    tcp: TcpListener,
    udp: UdpSocket,
    unix: Vec<UnixListener>,
    dgram: UnixDatagram,
    /// Abstract sockets (Linux only).
    abstract_stream: Option<UnixListener>,
    abstract_dgram: Option<UnixDatagram>,
    accepted: Vec<Box<dyn ReadStream>>,
    /// Pseudo-terminal (master, slave) when the vector uses `{pty}`.
    pub pty: Option<(OwnedFd, OwnedFd)>,
    /// Everything read from the pty's master so far ([`World::pty_output`]).
    pty_seen: Vec<u8>,
    /// SysV objects when the vector uses them.
    pub sysv: Option<Sysv>,
    /// Kernel key id when the vector uses `{key_desc}`.
    pub key: Option<i64>,
    host_files: Vec<PathBuf>,
    /// Directories whose entries starting with the token are removed on drop.
    host_globs: Vec<PathBuf>,
    /// Host processes of the world, killed on drop.
    children: Vec<std::process::Child>,
    /// The granted socket's accepting thread (`{agent_sock}`), stopped on drop.
    agent: Option<(std::sync::Arc<std::sync::atomic::AtomicBool>, std::thread::JoinHandle<()>)>,
    /// The host client of `{squat_name}`: stop flag, connections made, thread.
    squat: Option<HostClient>,
    /// The host client of `{host_ip}:{free_port}`.
    inbound: Option<HostClient>,
    /// A second TCP listener on 127.0.0.1, with SO_REUSEPORT (`{tcp_reuse_port}`).
    tcp_reuse: Option<TcpListener>,
    /// Snapshots taken before the run (path → (content, metadata summary)).
    pub before: BTreeMap<String, Snapshot>,
}

trait ReadStream: Read + Send {}
impl ReadStream for TcpStream {}
impl ReadStream for UnixStream {}

/// What a file looked like before the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Content (None: absent or unreadable).
    pub content: Option<Vec<u8>>,
    /// mode, uid, gid, mtime (s, ns), xattr names.
    pub meta: Option<(u32, u32, u32, i64, i64, Vec<String>)>,
}

/// Lists the extended attribute names of a path (without following symlinks).
#[must_use]
pub fn xattrs(p: &Path) -> Vec<String> {
    let Ok(cp) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else { return Vec::new() };
    let mut buf = vec![0u8; 4096];
    // SAFETY: valid path and buffer.
    #[cfg(target_os = "linux")]
    let n = unsafe { libc::llistxattr(cp.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: valid path and buffer.
    #[cfg(not(target_os = "linux"))]
    let n = unsafe { libc::listxattr(cp.as_ptr(), buf.as_mut_ptr().cast(), buf.len(), libc::XATTR_NOFOLLOW) };
    if n <= 0 {
        return Vec::new();
    }
    let mut v: Vec<String> = buf[..n as usize].split(|&b| b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect();
    v.sort();
    v
}

/// The content of a regular file (following links), without blocking: a FIFO a probe left
/// where a checked file was has none (opening it for reading would wait for a writer).
fn read_regular(p: &Path) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(p).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut v = Vec::new();
    f.read_to_end(&mut v).ok()?;
    Some(v)
}

/// Snapshot of a path.
#[must_use]
pub fn snapshot(p: &Path) -> Snapshot {
    Snapshot {
        content: read_regular(p),
        meta: fs::symlink_metadata(p).ok().map(|m| (m.mode(), m.uid(), m.gid(), m.mtime(), m.mtime_nsec(), xattrs(p))),
    }
}

impl World {
    /// Builds a world for `v` under `base`.
    ///
    /// # Errors
    /// A message when any part of the world cannot be created.
    pub fn new(base: &Path, v: &Vector) -> Result<World, String> {
        let e = |what: &str, err: std::io::Error| format!("world: {what}: {err}");
        let root = mkdtemp(base, "lgw-").map_err(|x| e("mkdir", x))?;
        let root = fs::canonicalize(&root).map_err(|x| e("canonicalize", x))?;
        if root.starts_with("/tmp") || root.starts_with("/dev/shm") {
            let _ = fs::remove_dir_all(&root);
            return Err(format!("world root {} is under /tmp or /dev/shm, which the sandbox may write", root.display()));
        }
        let token = root.file_name().map(|n| n.to_string_lossy().trim_start_matches("lgw-").to_string()).unwrap_or_default();
        // (A workspace in the host's /tmp lies outside the root, which never is: removed on drop.)
        let tmp_parent = (v.world == localgpt_corpus::WorldKind::TmpWorkspace).then(|| PathBuf::from(format!("/tmp/{token}-tmpws")));
        let ws = tmp_parent.as_ref().map_or_else(|| root.join("ws"), |p| p.join("ws"));
        let outside = root.join("outside");
        let home = if v.world == localgpt_corpus::WorldKind::HomeWorkspace { ws.clone() } else { root.join("home") };
        let xdg = root.join("xdg");
        for d in [&ws, &outside, &home, &xdg, &outside.join("dbus"), &outside.join("systemd"), &outside.join("repo/.git/hooks")] {
            fs::create_dir_all(d).map_err(|x| e("mkdir", x))?;
        }
        let mut secrets = BTreeMap::new();
        let canary = outside.join("canary.txt");
        let outside_secret = format!("lgsecret-outside-{token}");
        fs::write(&canary, format!("canary {outside_secret}\n")).map_err(|x| e("canary", x))?;
        secrets.insert("outside".to_string(), outside_secret);
        for (name, rel) in HOME_SECRETS {
            let p = home.join(rel);
            if let Some(parent) = p.parent() {
                fs::create_dir_all(parent).map_err(|x| e("mkdir home", x))?;
            }
            let s = format!("lgsecret-{name}-{token}");
            let content = match *name {
                // A real ~/.npmrc: settings beside the token (the sandbox gives npm a scrubbed copy).
                "npmrc" => format!("registry=https://registry.npmjs.org/\nsave-exact=true\n//registry.npmjs.org/:_authToken={s}\n"),
                _ => format!("-----BEGIN SECRET-----\n{s}\n-----END SECRET-----\n"),
            };
            fs::write(&p, content).map_err(|x| e("secret", x))?;
            fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).map_err(|x| e("chmod", x))?;
            secrets.insert((*name).to_string(), s);
        }
        let _ = fs::set_permissions(home.join(".ssh"), fs::Permissions::from_mode(0o700));
        let ino = fs::metadata(home.join(".ssh/id_rsa")).map(|m| m.ino()).unwrap_or(0);
        secrets.insert("stat_ssh".into(), format!("ino={ino} "));
        fs::write(home.join(".bashrc"), "# bashrc canary\nexport LG_BASHRC=1\n").map_err(|x| e("bashrc", x))?;
        fs::write(home.join(".profile"), "# profile canary\n").map_err(|x| e("profile", x))?;
        fs::create_dir_all(home.join(".config/git")).map_err(|x| e("mkdir", x))?;
        fs::write(home.join(".config/git/config"), "[user]\n\tname = LG\n").map_err(|x| e("gitconfig", x))?;
        // Toolchain configs as users have them: ordinary settings beside a credential.
        let s = format!("lgsecret-gitconfig-{token}");
        fs::write(home.join(".gitconfig"), format!(
            "[core]\n\tautocrlf = input\n[http]\n\textraHeader = Authorization: Bearer {s}\n[url \"https://x-access-token:{s}@github.com/\"]\n\tinsteadOf = https://github.com/\n"
        )).map_err(|x| e("gitconfig", x))?;
        secrets.insert("gitconfig".into(), s);
        let s = format!("lgsecret-cargoconfig-{token}");
        fs::write(home.join(".cargo/config.toml"), format!("[build]\njobs = 2\n[registry]\ntoken = \"{s}\"\n")).map_err(|x| e("cargo config", x))?;
        secrets.insert("cargo_config".into(), s);
        let s = format!("lgsecret-pipconf-{token}");
        fs::create_dir_all(home.join(".config/pip")).map_err(|x| e("mkdir", x))?;
        fs::write(home.join(".config/pip/pip.conf"), format!("[global]\ntimeout = 30\nindex-url = https://user:{s}@pypi.example.test/simple\n")).map_err(|x| e("pip.conf", x))?;
        secrets.insert("pip_conf".into(), s);
        let git_config = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n";
        fs::write(outside.join("repo/.git/config"), git_config).map_err(|x| e("repo", x))?;
        make_workspace(&ws, &outside, v.world).map_err(|x| e("workspace", x))?;
        let env_secret = format!("lgsecret-env-{token}");
        secrets.insert("env".into(), env_secret.clone());
        let victim_secret = format!("lgsecret-victim-{token}");
        secrets.insert("victim".into(), victim_secret);
        // Written by the host while the command runs (a vector's `during`), never at launch.
        let late_secret = format!("lgsecret-late-{token}");
        secrets.insert("late".into(), late_secret.clone());

        let tcp = TcpListener::bind("127.0.0.1:0").map_err(|x| e("tcp listener", x))?;
        tcp.set_nonblocking(true).map_err(|x| e("nonblocking", x))?;
        let udp = UdpSocket::bind("127.0.0.1:0").map_err(|x| e("udp socket", x))?;
        udp.set_nonblocking(true).map_err(|x| e("nonblocking", x))?;
        // The fourth: where the sandbox's own walk service listens, in the user's private state
        // directory (`guard::walkd`).
        let state_walks = home.join(".local/state/localgpt/sandbox/walks");
        for d in [home.join(".local/state"), home.join(".local/state/localgpt"), home.join(".local/state/localgpt/sandbox"), state_walks.clone()] {
            fs::create_dir_all(&d).map_err(|x| e("mkdir", x))?;
            fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).map_err(|x| e("chmod", x))?;
        }
        let socks = [outside.join("docker.sock"), outside.join("dbus/system_bus_socket"), outside.join("systemd/private"), state_walks.join("walkd-vector.sock")];
        let mut unix = Vec::new();
        for s in &socks {
            let l = UnixListener::bind(s).map_err(|x| e("unix listener", x))?;
            l.set_nonblocking(true).map_err(|x| e("nonblocking", x))?;
            unix.push(l);
        }
        let dgram_path = outside.join("log");
        let dgram = UnixDatagram::bind(&dgram_path).map_err(|x| e("unix dgram", x))?;
        dgram.set_nonblocking(true).map_err(|x| e("nonblocking", x))?;
        let abstract_name = format!("{token}-stream");
        let abstract_dgram_name = format!("{token}-dgram");
        #[cfg(not(target_os = "linux"))]
        let (abstract_stream, abstract_dgram) = (None, None);
        #[cfg(target_os = "linux")]
        let (abstract_stream, abstract_dgram) = {
            use std::os::linux::net::SocketAddrExt;
            let a = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).map_err(|x| e("abstract", x))?;
            let l = UnixListener::bind_addr(&a).map_err(|x| e("abstract listener", x))?;
            l.set_nonblocking(true).map_err(|x| e("nonblocking", x))?;
            let b = std::os::unix::net::SocketAddr::from_abstract_name(abstract_dgram_name.as_bytes()).map_err(|x| e("abstract", x))?;
            let d = UnixDatagram::bind_addr(&b).map_err(|x| e("abstract dgram", x))?;
            d.set_nonblocking(true).map_err(|x| e("nonblocking", x))?;
            (Some(l), Some(d))
        };

        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let mut vars = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            vars.insert(k.to_string(), v);
        };
        put("ws", ws.display().to_string());
        put("outside", outside.display().to_string());
        put("home", home.display().to_string());
        put("canary", canary.display().to_string());
        put("token", token.clone());
        put("tcp_port", tcp.local_addr().map_err(|x| e("addr", x))?.port().to_string());
        put("udp_port", udp.local_addr().map_err(|x| e("addr", x))?.port().to_string());
        put("docker_sock", socks[0].display().to_string());
        put("dbus_sock", socks[1].display().to_string());
        put("systemd_sock", socks[2].display().to_string());
        put("state_sock", socks[3].display().to_string());
        put("dgram_sock", dgram_path.display().to_string());
        put("agent_sock", outside.join("agent.sock").display().to_string());
        put("ws_agent_sock", ws.join("agent.sock").display().to_string());
        put("abstract_name", abstract_name);
        put("abstract_dgram", abstract_dgram_name);
        put("squat_name", format!("{token}-squat"));
        put("secret_env", env_secret);
        put("late_secret", late_secret);
        put("uid", uid.to_string());
        put("gid", gid.to_string());

        let mut w = World {
            root,
            ws,
            outside,
            home,
            xdg,
            token,
            secrets,
            vars,
            tcp,
            udp,
            unix,
            dgram,
            abstract_stream,
            abstract_dgram,
            accepted: Vec::new(),
            pty: None,
            pty_seen: Vec::new(),
            sysv: None,
            key: None,
            host_files: tmp_parent.into_iter().collect(),
            host_globs: Vec::new(),
            children: Vec::new(),
            agent: None,
            squat: None,
            inbound: None,
            tcp_reuse: None,
            before: BTreeMap::new(),
        };
        if let Some(cfg) = &v.config {
            let dir = w.xdg.join("localgpt");
            fs::create_dir_all(&dir).map_err(|x| e("mkdir xdg/localgpt", x))?;
            fs::write(dir.join("config.toml"), w.subst(cfg)).map_err(|x| e("config.toml", x))?;
        }
        // Whatever a probe plants in the host's /tmp or /dev/shm under the token goes at drop.
        for dir in ["/tmp", "/dev/shm"] {
            w.host_globs.push(PathBuf::from(dir));
        }
        let text = serde_json::to_string(v).unwrap_or_default();
        let tty_check = v.check.iter().any(|c| matches!(c, localgpt_corpus::Check::TtyInputEmpty | localgpt_corpus::Check::TtyOutputEmpty | localgpt_corpus::Check::TtyOutputLacks(_)));
        if text.contains("{pty}") || tty_check || v.terminal {
            w.make_pty()?;
        }
        if text.contains("{shm_id}") || text.contains("{msg_id}") || text.contains("{sem_id}") {
            w.make_sysv()?;
        }
        if v.check.iter().any(|c| matches!(c, localgpt_corpus::Check::SecretNotInOutput(n) if n == "argv")) {
            w.make_argv_holder()?;
        }
        if v.check.iter().any(|c| matches!(c, localgpt_corpus::Check::SecretNotInOutput(n) if n == "home_activity")) {
            w.make_home_activity()?;
        }
        if text.contains("{group_secret}") {
            w.use_group_secret()?;
        }
        if text.contains("{etc_secret}") {
            w.make_etc_secret()?;
        }
        if text.contains("{agent_sock}") {
            w.make_agent(&w.outside.join("agent.sock"))?;
        }
        if text.contains("{squat_name}") {
            w.make_squat_client()?;
        }
        if text.contains("{tcp_reuse_port}") {
            w.make_tcp_reuse()?;
        }
        if text.contains("{free_port}") {
            w.make_inbound_client()?;
        }
        if text.contains("{ws_agent_sock}") {
            w.make_agent(&w.ws.join("agent.sock"))?;
        }
        if text.contains("{key_desc}") {
            w.make_key()?;
        }
        if text.contains("{host_tmp_secret}") || text.contains("{host_shm_secret}") {
            w.make_host_files()?;
        }
        Ok(w)
    }

    fn make_pty(&mut self) -> Result<(), String> {
        // SAFETY: standard pty allocation; every returned fd is owned below.
        unsafe {
            // Non-blocking: `pty_output` reads what is queued and stops.
            let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NONBLOCK);
            if m < 0 || libc::grantpt(m) != 0 || libc::unlockpt(m) != 0 {
                return Err(format!("pty: {}", std::io::Error::last_os_error()));
            }
            let mut name = [0 as libc::c_char; 128];
            #[cfg(target_os = "linux")]
            if libc::ptsname_r(m, name.as_mut_ptr(), name.len()) != 0 {
                return Err("ptsname".into());
            }
            #[cfg(not(target_os = "linux"))]
            {
                // The harness is single-threaded here; ptsname's static buffer is copied at once.
                let p = libc::ptsname(m);
                if p.is_null() {
                    return Err("ptsname".into());
                }
                let b = std::ffi::CStr::from_ptr(p).to_bytes();
                for (i, c) in b.iter().take(name.len() - 1).enumerate() {
                    name[i] = *c as libc::c_char;
                }
            }
            let path = std::ffi::CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned();
            let s = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NONBLOCK);
            if s < 0 {
                return Err(format!("open {path}: {}", std::io::Error::last_os_error()));
            }
            let mut t: libc::termios = std::mem::zeroed();
            libc::tcgetattr(s, &mut t);
            libc::cfmakeraw(&mut t);
            libc::tcsetattr(s, libc::TCSANOW, &t);
            self.vars.insert("pty".into(), path);
            self.pty = Some((OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s)));
        }
        Ok(())
    }

    /// Bytes written to the pty's terminal side (what the user's terminal would show), read
    /// from its (non-blocking) master: everything since the world was made (each call reads
    /// what is new, and keeps it for the next).
    #[must_use]
    pub fn pty_output(&mut self) -> Vec<u8> {
        if let Some((m, _)) = &self.pty {
            // (A failed dup panics: an empty answer would read as "nothing reached the terminal".)
            drain(&mut std::fs::File::from(m.try_clone().expect("dup the pty master")), &mut self.pty_seen);
        }
        self.pty_seen.clone()
    }

    /// The pty's terminal side, three times: the standard streams of a `terminal` vector's run
    /// (opened again, blocking: the harness's own descriptor is non-blocking, a flag its
    /// duplicates would share).
    ///
    /// # Errors
    /// The world has no pty, or it cannot be opened.
    pub fn pty_stdio(&self) -> Result<Vec<(i32, OwnedFd)>, String> {
        let path = self.vars.get("pty").filter(|_| self.pty.is_some()).ok_or("the world has no pty")?;
        (0..3)
            .map(|fd| {
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .custom_flags(libc::O_NOCTTY)
                    .open(path)
                    .map(|f| (fd, OwnedFd::from(f)))
                    .map_err(|e| format!("open {path}: {e}"))
            })
            .collect()
    }

    /// Bytes waiting in the pty's input queue (what TIOCSTI would have injected), read from its
    /// (non-blocking) terminal side.
    #[must_use]
    pub fn pty_input(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some((_, s)) = &self.pty {
            drain(&mut std::fs::File::from(s.try_clone().expect("dup the pty terminal side")), &mut out);
        }
        out
    }

    #[cfg(not(target_os = "linux"))]
    fn make_sysv(&mut self) -> Result<(), String> {
        Err(format!("the SysV message queues of the world are Linux only ({} here)", std::env::consts::OS))
    }

    #[cfg(target_os = "linux")]
    fn make_sysv(&mut self) -> Result<(), String> {
        let shm_secret = format!("lgsecret-shm-{}", self.token);
        let msg_secret = format!("lgsecret-msg-{}", self.token);
        // SAFETY: SysV calls with valid buffers; objects are removed on drop.
        unsafe {
            let shm = libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600);
            let msg = libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o600);
            let sem = libc::semget(libc::IPC_PRIVATE, 1, libc::IPC_CREAT | 0o600);
            if shm < 0 || msg < 0 || sem < 0 {
                return Err(format!("sysv: {}", std::io::Error::last_os_error()));
            }
            self.sysv = Some(Sysv { shm, msg, sem });
            let p = libc::shmat(shm, std::ptr::null(), 0);
            if p as isize == -1 {
                return Err("shmat".into());
            }
            std::ptr::copy_nonoverlapping(shm_secret.as_ptr(), p.cast::<u8>(), shm_secret.len());
            libc::shmdt(p);
            let mut m = vec![0u8; 8 + msg_secret.len()];
            m[..8].copy_from_slice(&1i64.to_ne_bytes());
            m[8..].copy_from_slice(msg_secret.as_bytes());
            if libc::msgsnd(msg, m.as_ptr().cast(), msg_secret.len(), libc::IPC_NOWAIT) != 0 {
                return Err("msgsnd".into());
            }
            if libc::semctl(sem, 0, libc::SETVAL, 1) != 0 {
                return Err("semctl".into());
            }
        }
        self.vars.insert("shm_id".into(), self.sysv.as_ref().map_or(0, |s| s.shm).to_string());
        self.vars.insert("msg_id".into(), self.sysv.as_ref().map_or(0, |s| s.msg).to_string());
        self.vars.insert("sem_id".into(), self.sysv.as_ref().map_or(0, |s| s.sem).to_string());
        self.secrets.insert("shm".into(), shm_secret);
        self.secrets.insert("msg".into(), msg_secret);
        Ok(())
    }

    /// Whether the SysV objects are as created: (shm intact, message still queued, sem = 1).
    #[cfg(not(target_os = "linux"))]
    #[must_use]
    pub fn sysv_intact(&self) -> (bool, bool, bool) {
        (true, true, true)
    }

    /// Whether the SysV objects are as created: (shm intact, message still queued, sem = 1).
    #[cfg(target_os = "linux")]
    #[must_use]
    pub fn sysv_intact(&self) -> (bool, bool, bool) {
        let Some(s) = &self.sysv else { return (true, true, true) };
        let want = self.secrets.get("shm").cloned().unwrap_or_default();
        // SAFETY: SysV calls on our own objects.
        unsafe {
            let p = libc::shmat(s.shm, std::ptr::null(), libc::SHM_RDONLY);
            let shm_ok = p as isize != -1 && {
                let got = std::slice::from_raw_parts(p.cast::<u8>(), want.len());
                let ok = got == want.as_bytes();
                libc::shmdt(p);
                ok
            };
            let mut ds: libc::msqid_ds = std::mem::zeroed();
            let msg_ok = libc::msgctl(s.msg, libc::IPC_STAT, &mut ds) == 0 && ds.msg_qnum == 1;
            let sem_ok = libc::semctl(s.sem, 0, libc::GETVAL) == 1;
            (shm_ok, msg_ok, sem_ok)
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn make_key(&mut self) -> Result<(), String> {
        Err(format!("the kernel keyring is Linux only ({} here)", std::env::consts::OS))
    }

    #[cfg(target_os = "linux")]
    fn make_key(&mut self) -> Result<(), String> {
        let desc = format!("{}-key", self.token);
        let secret = format!("lgsecret-key-{}", self.token);
        let cd = std::ffi::CString::new(desc.clone()).map_err(|x| x.to_string())?;
        // SAFETY: add_key/keyctl with valid strings.
        let id = unsafe {
            libc::syscall(libc::SYS_add_key, c"user".as_ptr(), cd.as_ptr(), secret.as_ptr(), secret.len(), -4i64)
        };
        if id < 0 {
            return Err(format!("add_key: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: KEYCTL_SETPERM on our own key: possessor and user may view/read/search.
        unsafe { libc::syscall(libc::SYS_keyctl, 5, id, 0x3f3f_0000u32) };
        self.key = Some(id);
        self.vars.insert("key_desc".into(), desc);
        self.secrets.insert("key".into(), secret);
        Ok(())
    }

    /// A host socket a vector grants (`allow_unix_sockets = ["{agent_sock}"]`), like an
    /// ssh-agent: it accepts and drops connections, so that a probe connecting to it many times
    /// never waits on a full backlog. Connections to it are allowed and not observed; the
    /// other listeners' checks say whether anything else was reached.
    fn make_agent(&mut self, path: &Path) -> Result<(), String> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let l = UnixListener::bind(path).map_err(|x| format!("agent socket: {x}"))?;
        l.set_nonblocking(true).map_err(|x| format!("agent socket: {x}"))?;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let s = std::sync::Arc::clone(&stop);
        let t = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok(_) => {}
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(2)),
                }
            }
        });
        self.agent = Some((stop, t));
        Ok(())
    }

    /// A host client that tries, every few milliseconds until the world is dropped, to connect
    /// to the abstract name `{squat_name}` (as an X client or a D-Bus client connects to the
    /// name it knows), and counts the connections made.
    #[cfg(target_os = "linux")]
    fn make_squat_client(&mut self) -> Result<(), String> {
        use std::os::linux::net::SocketAddrExt;
        let a = std::os::unix::net::SocketAddr::from_abstract_name(format!("{}-squat", self.token).as_bytes()).map_err(|x| format!("squat name: {x}"))?;
        self.squat = Some(HostClient::start(move || std::os::unix::net::UnixStream::connect_addr(&a).map(|mut c| {
            let _ = std::io::Write::write_all(&mut c, b"host client hello");
        })));
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    fn make_squat_client(&mut self) -> Result<(), String> {
        Ok(())
    }

    /// Connections the `{squat_name}` host client made so far.
    #[must_use]
    pub fn squat_reached(&self) -> u32 {
        self.squat.as_ref().map_or(0, HostClient::reached)
    }

    /// A port free on every address now (`{free_port}`), the host's non-loopback address
    /// (`{host_ip}`), and a host client that tries to connect to that address and port all
    /// through the run: a listener the command makes on the wildcard address would take
    /// connections from the network.
    fn make_inbound_client(&mut self) -> Result<(), String> {
        let ip = host_ipv4().ok_or("the host has no IPv4 address outside 127.0.0.0/8")?;
        let port = TcpListener::bind("0.0.0.0:0").and_then(|l| l.local_addr()).map_err(|x| format!("free port: {x}"))?.port();
        self.vars.insert("free_port".into(), port.to_string());
        self.vars.insert("host_ip".into(), ip.to_string());
        let to = std::net::SocketAddr::from((ip, port));
        self.inbound = Some(HostClient::start(move || {
            TcpStream::connect_timeout(&to, std::time::Duration::from_millis(200)).map(|mut c| {
                let _ = std::io::Write::write_all(&mut c, b"host client hello");
            })
        }));
        Ok(())
    }

    /// Connections the `{host_ip}:{free_port}` host client made so far.
    #[must_use]
    pub fn inbound_reached(&self) -> u32 {
        self.inbound.as_ref().map_or(0, HostClient::reached)
    }

    /// A second listener on 127.0.0.1 with SO_REUSEPORT set (`{tcp_reuse_port}`), as services
    /// that scale over several processes have: another socket of the same user with the option
    /// may bind the same port and take part of its connections.
    fn make_tcp_reuse(&mut self) -> Result<(), String> {
        use std::os::fd::FromRawFd;
        // SAFETY: a fresh socket, configured, bound and listening, then owned by a TcpListener.
        let l = unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            let one: libc::c_int = 1;
            let sa = libc::sockaddr_in { sin_family: libc::AF_INET as libc::sa_family_t, sin_port: 0, sin_addr: libc::in_addr { s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be() }, ..std::mem::zeroed() };
            if fd < 0
                || libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, (&one as *const libc::c_int).cast(), 4) != 0
                || libc::bind(fd, (&sa as *const libc::sockaddr_in).cast(), std::mem::size_of::<libc::sockaddr_in>() as u32) != 0
                || libc::listen(fd, 128) != 0
            {
                return Err(format!("SO_REUSEPORT listener: {}", std::io::Error::last_os_error()));
            }
            TcpListener::from_raw_fd(fd)
        };
        l.set_nonblocking(true).map_err(|x| format!("nonblocking: {x}"))?;
        self.vars.insert("tcp_reuse_port".into(), l.local_addr().map_err(|x| format!("addr: {x}"))?.port().to_string());
        self.tcp_reuse = Some(l);
        Ok(())
    }

    fn make_host_files(&mut self) -> Result<(), String> {
        for (var, dir, name) in [("host_tmp_secret", "/tmp", "host_tmp"), ("host_shm_secret", "/dev/shm", "host_shm")] {
            let p = PathBuf::from(dir).join(format!("{}-{name}", self.token));
            let s = format!("lgsecret-{name}-{}", self.token);
            if fs::write(&p, &s).is_ok() {
                let _ = fs::set_permissions(&p, fs::Permissions::from_mode(0o600));
                self.host_files.push(p.clone());
                self.vars.insert(var.into(), p.display().to_string());
                self.secrets.insert(name.into(), s);
            }
        }
        Ok(())
    }

    /// Starts a host process outside the sandbox with a secret in its command line (as tools
    /// that take `--password=…` do); it is killed on drop.
    fn make_argv_holder(&mut self) -> Result<(), String> {
        let secret = format!("lgsecret-argv-{}", self.token);
        let child = std::process::Command::new("bash")
            .args(["-c", "sleep 120; :", &format!("--password={secret}")])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("world: argv holder: {e}"))?;
        self.secrets.insert("argv".into(), secret);
        self.children.push(child);
        Ok(())
    }

    /// Starts a host process that keeps creating and removing a file in the world's `$HOME`
    /// whose name is a secret (as a user's editor or shell does with their own files); it is
    /// killed on drop.
    fn make_home_activity(&mut self) -> Result<(), String> {
        let secret = format!("lgsecret-activity-{}", self.token);
        let f = self.home.join(&secret);
        let script = format!("for i in $(seq 600); do : > '{0}'; rm -f '{0}'; sleep 0.02; done", f.display());
        let child = std::process::Command::new("bash")
            .args(["-c", &script])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("world: home activity: {e}"))?;
        self.secrets.insert("home_activity".into(), secret);
        self.children.push(child);
        Ok(())
    }

    /// Names the `/etc` secret this user reads only through a group ([`group_secret`]).
    fn use_group_secret(&mut self) -> Result<(), String> {
        let (p, secret) = group_secret().ok_or("world: no file under /etc that this user reads only through a group")?;
        self.vars.insert("group_secret".into(), p.display().to_string());
        self.secrets.insert("group".into(), secret);
        Ok(())
    }

    /// Plants a root-only secret file under /etc (as /etc/shadow or a host key is); removed on
    /// drop. Only root can: the vectors that use it require root.
    fn make_etc_secret(&mut self) -> Result<(), String> {
        let p = PathBuf::from(format!("/etc/lgsecret-{}.key", self.token));
        let secret = format!("lgsecret-etc-{}", self.token);
        fs::write(&p, &secret).map_err(|e| format!("world: {}: {e}", p.display()))?;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).map_err(|e| format!("world: chmod {}: {e}", p.display()))?;
        self.host_files.push(p.clone());
        self.vars.insert("etc_secret".into(), p.display().to_string());
        self.secrets.insert("etc".into(), secret);
        Ok(())
    }

    /// Registers a host path to remove on drop (files the probes may plant in /tmp).
    pub fn remove_on_drop(&mut self, p: PathBuf) {
        self.host_files.push(p);
    }

    /// Substitutes `{placeholders}`.
    #[must_use]
    pub fn subst(&self, s: &str) -> String {
        let mut out = s.to_string();
        for (k, v) in &self.vars {
            out = out.replace(&format!("{{{k}}}"), v);
        }
        out
    }

    /// TCP listener: connections and data since the last call.
    pub fn observe_tcp(&mut self) -> Seen {
        let mut seen = Seen::default();
        for l in std::iter::once(&self.tcp).chain(self.tcp_reuse.as_ref()) {
            while let Ok((s, _)) = l.accept() {
                seen.connections += 1;
                let _ = s.set_nonblocking(true);
                self.accepted.push(Box::new(s));
            }
        }
        for s in &mut self.accepted {
            drain(s.as_mut(), &mut seen.data);
        }
        seen
    }

    /// Everything the UDP socket received.
    pub fn observe_udp(&self) -> Seen {
        let mut seen = Seen::default();
        let mut buf = [0u8; 65536];
        while let Ok((n, _)) = self.udp.recv_from(&mut buf) {
            seen.connections += 1;
            seen.data.extend_from_slice(&buf[..n.max(1)]);
        }
        seen
    }

    /// The pathname stream listeners.
    pub fn observe_unix(&mut self) -> Seen {
        let mut seen = Seen::default();
        for l in &self.unix {
            while let Ok((s, _)) = l.accept() {
                seen.connections += 1;
                let _ = s.set_nonblocking(true);
                let mut s = s;
                drain(&mut s, &mut seen.data);
            }
        }
        seen
    }

    /// The pathname datagram socket.
    pub fn observe_dgram(&self) -> Seen {
        let mut seen = Seen::default();
        let mut buf = [0u8; 65536];
        while let Ok(n) = self.dgram.recv(&mut buf) {
            seen.connections += 1;
            seen.data.extend_from_slice(&buf[..n.max(1)]);
        }
        seen
    }

    /// The abstract listeners (stream and datagram).
    pub fn observe_abstract(&mut self) -> Seen {
        let mut seen = Seen::default();
        let (Some(stream), Some(dgram)) = (&self.abstract_stream, &self.abstract_dgram) else { return seen };
        while let Ok((s, _)) = stream.accept() {
            seen.connections += 1;
            let _ = s.set_nonblocking(true);
            let mut s = s;
            drain(&mut s, &mut seen.data);
        }
        let mut buf = [0u8; 65536];
        while let Ok(n) = dgram.recv(&mut buf) {
            seen.connections += 1;
            seen.data.extend_from_slice(&buf[..n.max(1)]);
        }
        seen
    }

    /// A connected TCP socket to this world's listener (for the inherited-socket vector).
    ///
    /// # Errors
    /// Connect failure.
    pub fn connect_tcp(&self) -> std::io::Result<TcpStream> {
        TcpStream::connect(self.tcp.local_addr()?)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for c in [self.squat.take(), self.inbound.take()].into_iter().flatten() {
            c.stop();
        }
        if let Some((stop, t)) = self.agent.take() {
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            let _ = t.join();
        }
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        #[cfg(target_os = "linux")]
        if let Some(s) = &self.sysv {
            // SAFETY: removing our own IPC objects.
            unsafe {
                libc::shmctl(s.shm, libc::IPC_RMID, std::ptr::null_mut());
                libc::msgctl(s.msg, libc::IPC_RMID, std::ptr::null_mut());
                libc::semctl(s.sem, 0, libc::IPC_RMID);
            }
        }
        #[cfg(target_os = "linux")]
        if let Some(id) = self.key {
            // SAFETY: KEYCTL_INVALIDATE on our own key.
            unsafe { libc::syscall(libc::SYS_keyctl, 21, id) };
        }
        let globbed = self.host_globs.iter().filter_map(|d| fs::read_dir(d).ok()).flat_map(|rd| {
            rd.flatten().filter(|e| e.file_name().to_string_lossy().starts_with(&self.token)).map(|e| e.path()).collect::<Vec<_>>()
        });
        for p in self.host_files.iter().cloned().chain(globbed.collect::<Vec<_>>()) {
            if p.is_dir() {
                let _ = fs::remove_dir_all(&p);
            } else {
                let _ = fs::remove_file(&p);
            }
        }
        // The sandbox may have left read-only or setuid files: make everything removable first.
        fn unlock(p: &Path) {
            if let Ok(m) = fs::symlink_metadata(p) {
                if m.is_dir() {
                    let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o700));
                    if let Ok(rd) = fs::read_dir(p) {
                        for e in rd.flatten() {
                            unlock(&e.path());
                        }
                    }
                }
            }
        }
        unlock(&self.root);
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// A host process's client (a thread of the harness, outside every sandbox) that tries to
/// connect every few milliseconds until stopped, and counts the connections it made.
pub struct HostClient {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    reached: std::sync::Arc<std::sync::atomic::AtomicU32>,
    thread: std::thread::JoinHandle<()>,
}

impl HostClient {
    fn start(connect: impl Fn() -> std::io::Result<()> + Send + 'static) -> HostClient {
        use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let reached = std::sync::Arc::new(AtomicU32::new(0));
        let (s, r) = (std::sync::Arc::clone(&stop), std::sync::Arc::clone(&reached));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                if connect().is_ok() {
                    r.fetch_add(1, Ordering::SeqCst);
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        });
        HostClient { stop, reached, thread }
    }

    fn reached(&self) -> u32 {
        self.reached.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn stop(self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = self.thread.join();
    }
}

/// The host's first IPv4 address outside 127.0.0.0/8 (`getifaddrs`).
#[must_use]
pub fn host_ipv4() -> Option<std::net::Ipv4Addr> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we free below; each entry is read while the list lives.
    unsafe {
        if libc::getifaddrs(&mut head) != 0 {
            return None;
        }
        let mut found = None;
        let mut p = head;
        while !p.is_null() {
            let a = (*p).ifa_addr;
            if !a.is_null() && i32::from((*a).sa_family) == libc::AF_INET {
                let sin = &*(a as *const libc::sockaddr_in);
                let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                if !ip.is_loopback() && !ip.is_unspecified() {
                    found = Some(ip);
                    break;
                }
            }
            p = (*p).ifa_next;
        }
        libc::freeifaddrs(head);
        found
    }
}
