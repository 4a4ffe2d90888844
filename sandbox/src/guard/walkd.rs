//! The walk service: the launch walk for nested protected names ([`super::nested`]) kept warm by
//! a process of the user's, so that a run's cost does not grow with the workspace.
//!
//! Without it every launch looks at every directory of every writable root to the walk's depth
//! (a `stat` per recorded directory, a read per unrecorded one) and every review after the run
//! looks at them all again: in a repository of 20 000 directories that is most of a run's time.
//! The service keeps the walk's records in memory and asks the kernel to report every change to a
//! recorded directory (`inotify`, one watch per directory): a record the kernel reported nothing
//! about still holds, without a look. A launch then costs what changed since the last one, and
//! the review after the run reads only the directories the kernel reported changed since the
//! launch (the run's *token*) and those new in them.
//!
//! Trust, as the records' ([`super::nested`]): the service is a process of this user, started
//! unconfined by the CLI after a run, listening on a socket in the records' directory (private to
//! the user, outside everything a run can write; the planner asks the service only when that
//! holds). The client checks that the peer is of its user and in its mount namespace (another
//! namespace sees other files). The service decides nothing from what a client says but which
//! root to walk: everything it answers it read from the filesystem itself, and a client can make
//! it forget nothing (the record of changes is kept; a token older than what is kept is refused).
//! A directory is recorded only once the kernel watches it and a read after the watch shows it
//! as the walk read it, on a filesystem whose change times are kept ([`super::records`]); any other
//! directory the walk looked at is read again by every launch and after every run. A lost event
//! (the kernel's queue overflowed) or a change of the mount table forgets everything: the next
//! launch reads every directory again, within its budget, and tokens from before are refused.
//! Anything that goes wrong on the client's side (no service, a service of another version, no
//! answer) is the walk done in the process, as without a service; a service that fails between
//! a launch and its review makes the review walk the whole root.
//!
//! It also keeps git's listing of a worktree where lint-staged is in force ([`Request::List`]): what
//! git lists for its configurations, asked at launch and after every run, is given again while
//! the kernel reports nothing that could change it (`super::listing` has the rules), so that a
//! run that made no directory and no file of those names asks git nothing.
//!
//! It is on unless `LOCALGPT_SANDBOX_WALK_SERVICE=0` (the CLI starts it after a run that walked
//! more than [`MIN_DIRS`] directories and did not find one), for roots whose records show more
//! than about a hundred directories ([`MIN_RECORD`]: below, the walk in the process is cheaper
//! than a round trip), and leaves after ten minutes without a request, or once its socket is
//! gone (the records' directory removed).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::listing::Lister;
use super::nested::{walk_nested, Known, Listing, NestedWalk, WalkCache};

/// The variable that turns the service off (`0`; on otherwise).
pub const ENV: &str = "LOCALGPT_SANDBOX_WALK_SERVICE";

/// The smallest record file (bytes) of a root for which the service is asked: below, about a
/// hundred directories, the walk in the process costs less than a round trip to it.
pub const MIN_RECORD: u64 = 16 << 10;

/// The fewest directories of a root walked in the process after which the CLI starts the
/// service (its records then reach about [`MIN_RECORD`]).
pub const MIN_DIRS: usize = 100;

/// How long the service waits for a request before it leaves.
pub const IDLE: Duration = Duration::from_secs(600);

/// The variable that shortens [`IDLE`] (seconds, 1 to 600: the tests).
pub const IDLE_ENV: &str = "LOCALGPT_SANDBOX_WALK_SERVICE_IDLE";

fn idle() -> Duration {
    std::env::var(IDLE_ENV).ok().and_then(|v| v.parse::<u64>().ok()).filter(|s| (1..=600).contains(s)).map_or(IDLE, Duration::from_secs)
}

/// The most directories the service watches (beyond, what a walk reads is read again each time).
pub const MAX_WATCHES: usize = 200_000;

/// The most roots it keeps (the least recently asked about goes first).
const MAX_ROOTS: usize = 32;

/// The most worktrees' git listings it keeps ([`Request::List`]; the least recently asked about
/// goes first).
const MAX_LISTS: usize = 8;

/// The most changes it remembers per root (a token older than those is refused).
const MAX_LOG: usize = 100_000;

/// The largest message either side reads.
const MAX_MESSAGE: u64 = 64 << 20;

/// The wire's version (part of the socket's name, with the walk's rules).
const PROTOCOL: &[u8] = b"localgpt-walkd 2";

/// Whether the service is on for this process: unless [`ENV`] is `0`.
#[must_use]
pub fn enabled() -> bool {
    std::env::var_os(ENV).is_none_or(|v| v != "0")
}

/// The socket of the service for this version and these walk rules, in the records' directory.
#[must_use]
pub fn socket_path(dir: &Path) -> PathBuf {
    let mut k = PROTOCOL.to_vec();
    k.extend_from_slice(&super::nested::rules_key());
    dir.join(format!("walkd-{:016x}.sock", super::records::fnv1a64(&k)))
}

/// What a client asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// The launch walk of `root` for `names`, reading at most `budget` entries of directories
    /// with no record.
    Walk {
        /// The writable root (canonical).
        root: PathBuf,
        /// The protected names looked for.
        names: Vec<String>,
        /// The most entries read in directories with no record.
        budget: u64,
    },
    /// The walk after the run whose launch walk gave `token`.
    After {
        /// The writable root (canonical).
        root: PathBuf,
        /// The protected names looked for.
        names: Vec<String>,
        /// What the launch walk's answer gave.
        token: u64,
    },
    /// What git lists now in the worktree `root` for a hook manager that reads `names` wherever
    /// git lists one (lint-staged: `gitoracle::listed_files`); the answer's [`Answer::found`]
    /// holds the files (none a directory). The service keeps git's answer while nothing changed
    /// that could change it (the rules: `guard::listing`).
    List {
        /// The worktree (canonical).
        root: PathBuf,
        /// The names listed (any case).
        names: Vec<String>,
    },
}

/// What the service answers (`None` on the wire: it cannot, and the client walks).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// Where the record of changes stood when the walk was made (give it back after the run).
    pub token: u64,
    /// As [`NestedWalk::found`].
    pub found: Vec<(PathBuf, bool)>,
    /// As [`NestedWalk::repos`].
    pub repos: Vec<PathBuf>,
    /// As [`NestedWalk::stopped`].
    pub stopped: Option<PathBuf>,
    /// How many directories were held by their record.
    pub from_records: u64,
    /// How many directories the walk looked at.
    pub looked_at: u64,
}

struct Rd<'a>(&'a [u8]);

impl Rd<'_> {
    fn u64(&mut self) -> Option<u64> {
        let (h, t) = self.0.split_first_chunk::<8>()?;
        self.0 = t;
        Some(u64::from_le_bytes(*h))
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = usize::try_from(self.u64()?).ok()?;
        if n > self.0.len() {
            return None;
        }
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        Some(h.to_vec())
    }
    fn path(&mut self) -> Option<PathBuf> {
        let b = self.bytes()?;
        // Absolute, without a NUL: what a walk's path is.
        (b.first() == Some(&b'/') && !b.contains(&0)).then(|| PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(b)))
    }
    fn end(&self) -> Option<()> {
        self.0.is_empty().then_some(())
    }
}

fn put(b: &mut Vec<u8>, v: &[u8]) {
    b.extend_from_slice(&(v.len() as u64).to_le_bytes());
    b.extend_from_slice(v);
}

fn put_path(b: &mut Vec<u8>, p: &Path) {
    put(b, p.as_os_str().as_encoded_bytes());
}

impl Request {
    /// The request's bytes.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut b = PROTOCOL.to_vec();
        let (op, root, names, n) = match self {
            Request::Walk { root, names, budget } => (b'W', root, names, *budget),
            Request::After { root, names, token } => (b'A', root, names, *token),
            Request::List { root, names } => (b'L', root, names, 0),
        };
        b.push(op);
        b.extend_from_slice(&n.to_le_bytes());
        put_path(&mut b, root);
        b.extend_from_slice(&(names.len() as u64).to_le_bytes());
        for x in names {
            put(&mut b, x.as_bytes());
        }
        b
    }

    /// A request from its bytes, or `None` (anything else).
    #[must_use]
    pub fn decode(b: &[u8]) -> Option<Request> {
        let rest = b.strip_prefix(PROTOCOL)?;
        let (&op, rest) = rest.split_first()?;
        let mut r = Rd(rest);
        let n = r.u64()?;
        let root = r.path()?;
        let count = r.u64()?;
        if count > 64 {
            return None;
        }
        let names = (0..count).map(|_| String::from_utf8(r.bytes()?).ok().filter(|s| !s.is_empty() && !s.contains('/'))).collect::<Option<Vec<_>>>()?;
        r.end()?;
        match op {
            b'W' => Some(Request::Walk { root, names, budget: n }),
            b'A' => Some(Request::After { root, names, token: n }),
            // (Nothing else in its number: one reading of each message.)
            b'L' if n == 0 => Some(Request::List { root, names }),
            _ => None,
        }
    }
}

impl Answer {
    /// The answer's bytes (`None`: a refusal).
    #[must_use]
    pub fn encode(a: Option<&Answer>) -> Vec<u8> {
        let mut b = PROTOCOL.to_vec();
        let Some(a) = a else {
            b.push(b'N');
            return b;
        };
        b.push(b'Y');
        for n in [a.token, a.from_records, a.looked_at, a.found.len() as u64, a.repos.len() as u64] {
            b.extend_from_slice(&n.to_le_bytes());
        }
        for (p, dir) in &a.found {
            b.push(u8::from(*dir));
            put_path(&mut b, p);
        }
        for p in &a.repos {
            put_path(&mut b, p);
        }
        match &a.stopped {
            Some(p) => {
                b.push(1);
                put_path(&mut b, p);
            }
            None => b.push(0),
        }
        b
    }

    /// An answer from its bytes: `Some(None)` for a refusal, `None` for anything else.
    #[must_use]
    pub fn decode(b: &[u8]) -> Option<Option<Answer>> {
        let rest = b.strip_prefix(PROTOCOL)?;
        match rest.split_first()? {
            (b'N', []) => Some(None),
            (b'Y', rest) => {
                let mut r = Rd(rest);
                let (token, from_records, looked_at, nf, nr) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?);
                let mut a = Answer { token, from_records, looked_at, ..Answer::default() };
                for _ in 0..nf {
                    let (&d, t) = r.0.split_first()?;
                    r.0 = t;
                    if d > 1 {
                        return None;
                    }
                    a.found.push((r.path()?, d == 1));
                }
                for _ in 0..nr {
                    a.repos.push(r.path()?);
                }
                let (&s, t) = r.0.split_first()?;
                r.0 = t;
                a.stopped = match s {
                    0 => None,
                    1 => Some(r.path()?),
                    _ => return None,
                };
                r.end()?;
                Some(Some(a))
            }
            _ => None,
        }
    }
}

// ---- client -------------------------------------------------------------------------------------

fn ns_id(pid: &str) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(format!("/proc/{pid}/ns/mnt")).ok()?;
    Some((m.dev(), m.ino()))
}

/// The peer of `s` is a process of this user in this mount namespace.
fn trusted_peer(s: &UnixStream) -> bool {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt into a ucred of the length given.
    let rc = unsafe { libc::getsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, std::ptr::addr_of_mut!(cred).cast(), &mut len) };
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    static OWN: std::sync::OnceLock<Option<(u64, u64)>> = std::sync::OnceLock::new();
    rc == 0 && cred.pid > 0 && cred.uid == me && ns_id(&cred.pid.to_string()).is_some_and(|id| Some(id) == *OWN.get_or_init(|| ns_id("self")))
}

/// Asks the service listening in `dir`: its answer, `Some(None)` when it refused, `None` when
/// there is none to ask (or it could not be trusted, or did not answer in time).
#[must_use]
pub fn ask(dir: &Path, req: &Request) -> Option<Option<Answer>> {
    let mut s = UnixStream::connect(socket_path(dir)).ok()?;
    if !trusted_peer(&s) {
        return None;
    }
    // A first walk of a large root takes what the walk takes in the process.
    let _ = s.set_read_timeout(Some(Duration::from_secs(120)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
    s.write_all(&req.encode()).ok()?;
    s.shutdown(std::net::Shutdown::Write).ok()?;
    let mut b = Vec::new();
    s.take(MAX_MESSAGE).read_to_end(&mut b).ok()?;
    Answer::decode(&b)
}

/// What git lists in the worktree `worktree` for `names` ([`Request::List`]), from the service
/// listening in `dir`: `None` when there is none to ask, it refused (git could not list them
/// there: the caller asks git itself, for its message), or it answered with anything but files
/// in that worktree.
#[must_use]
pub fn listed(dir: &Path, worktree: &Path, names: &[String]) -> Option<Vec<PathBuf>> {
    let a = ask(dir, &Request::List { root: worktree.to_path_buf(), names: names.to_vec() })??;
    (a.repos.is_empty() && a.stopped.is_none() && a.found.iter().all(|(p, dir)| !dir && p.starts_with(worktree) && p != worktree)).then(|| a.found.into_iter().map(|(p, _)| p).collect())
}

/// Starts the service (`exe sandbox walk-service`, in a session of its own, no standard streams)
/// unless one answers in `dir`, asking it to walk the roots of `warm` before it listens (its first
/// walk of a root, which watches every directory, costs several times a walk in a process: done
/// then, no run waits for it).
///
/// # Errors
/// Why it could not be started.
pub fn start(dir: &Path, exe: &Path, warm: &[Request]) -> Result<(), String> {
    if let Ok(s) = UnixStream::connect(socket_path(dir)) {
        if trusted_peer(&s) {
            return Ok(());
        }
    }
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["sandbox", "walk-service"]);
    for r in warm {
        cmd.arg("--warm").arg(hex(&r.encode()));
    }
    // A process that outlives the run holds nothing of its caller's: no standard stream (a
    // caller reading the CLI's output to its end would wait for the service to leave), no other
    // inherited descriptor (a pipe a script passed down without close-on-exec), no working
    // directory in the workspace.
    cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).current_dir("/");
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    // SAFETY: setsid and close_range are async-signal-safe system calls; they only detach the
    // child from the terminal and mark its descriptors above the standard ones close-on-exec
    // (CLOSE_RANGE_CLOEXEC, 5.11: the exec closes them; the standard library's own error pipe
    // is close-on-exec already; an older kernel refuses the flag and they stay, as before).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::setsid();
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
            Ok(())
        });
    }
    cmd.spawn().map(drop).map_err(|e| format!("start {}: {e}", exe.display()))
}

/// `b` in lower-case hexadecimal (a request on the service's command line).
#[must_use]
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The bytes of [`hex`]'s text, or `None`.
#[must_use]
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if b.len() % 2 != 0 {
        return None;
    }
    b.chunks(2).map(|c| u8::from_str_radix(std::str::from_utf8(c).ok()?, 16).ok()).collect()
}

// ---- service ------------------------------------------------------------------------------------

/// One root the service keeps (with the names it is walked for).
struct Root {
    root: PathBuf,
    names: Vec<String>,
    /// The root's device and inode when first walked (another directory at its path: forgotten).
    id: (u64, u64),
    /// The device whose directories may be recorded (change times kept), if any.
    trusted_dev: Option<u64>,
    ino: OwnedFd,
    /// Watch → directory (path, depth).
    wds: HashMap<i32, (PathBuf, usize)>,
    /// The directories recorded and watched, that the kernel reported no change in since read.
    cache: WalkCache,
    /// Directories reported changed since they were last read (path → depth).
    pending: HashMap<PathBuf, usize>,
    /// Directories a walk read that are not recorded (read at every launch and after every
    /// run), with what was read last.
    volatile: HashMap<PathBuf, Listing>,
    /// What the walk finds, kept up to date as directories are read again: `None` until a walk
    /// of the whole root that did not stop (then every walk is a whole one).
    facts: Option<Facts>,
    /// The changes seen: (sequence number, directory, depth).
    log: Vec<(u64, PathBuf, usize)>,
    /// Tokens below this are refused (changes before it are forgotten).
    floor: u64,
    used: Instant,
    unsaved: bool,
    /// Directories the last walk could not read (and their depths): what they hold is neither
    /// known nor watched (a watch needs the permission to read), so the service does not answer
    /// for the root while one of them stays so; the client walks it itself, and says so, or
    /// after a run gives its owner's reading back ([`super::nested::read_unreadable`]).
    unreadable: Vec<(PathBuf, usize)>,
}

/// The protected names found, and the directories git discovers as repositories.
#[derive(Default)]
struct Facts {
    found: std::collections::BTreeMap<PathBuf, bool>,
    repos: std::collections::BTreeSet<PathBuf>,
}

impl Facts {
    /// What the listing `l` gives.
    fn add(&mut self, l: &Listing, names: &[&str]) {
        for e in &l.entries {
            if super::nested::step(l.depth, &e.name, e.dir, names) == super::nested::Step::Found {
                self.found.insert(l.path.join(&e.name), e.dir);
            }
        }
        if l.is_repository() {
            self.repos.insert(l.path.clone());
        }
    }

    /// Forgets what the directory `dir` itself gave.
    fn remove_of(&mut self, dir: &Path) {
        let of: Vec<PathBuf> = self.found.range(dir.to_path_buf()..).map(|(p, _)| p).take_while(|p| p.starts_with(dir)).filter(|p| p.parent() == Some(dir)).cloned().collect();
        for p in of {
            self.found.remove(&p);
        }
        self.repos.remove(dir);
    }

    /// Forgets what `dir` and everything below it gave.
    fn remove_below(&mut self, dir: &Path) {
        let below: Vec<PathBuf> = self.found.range(dir.to_path_buf()..).map(|(p, _)| p).take_while(|p| p.starts_with(dir)).cloned().collect();
        for p in below {
            self.found.remove(&p);
        }
        let below: Vec<PathBuf> = self.repos.range(dir.to_path_buf()..).take_while(|p| p.starts_with(dir)).cloned().collect();
        for p in below {
            self.repos.remove(&p);
        }
    }
}

/// The service's state.
struct Service {
    dir: PathBuf,
    roots: Vec<Root>,
    lists: Vec<Lister>,
    seq: u64,
    watches: usize,
}

/// The directory at `p` (no link followed): its device and inode.
fn dir_id(p: &Path) -> Option<(u64, u64)> {
    super::nested::dir_state(p).map(|s| s.id)
}

fn subdirs(l: &Listing) -> impl Iterator<Item = PathBuf> + '_ {
    l.entries.iter().filter(|e| e.dir).map(|e| l.path.join(&e.name))
}

impl Root {
    fn new(root: &Path, names: &[String]) -> Option<Root> {
        let id = dir_id(root)?;
        // SAFETY: inotify_init1 with valid flags; the descriptor is owned below.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        let trusted_dev = Some(id.0).filter(|_| super::records::change_time_kept_at(root));
        Some(Root {
            root: root.to_path_buf(),
            names: names.to_vec(),
            id,
            trusted_dev,
            // SAFETY: a descriptor we just opened and own.
            ino: unsafe { OwnedFd::from_raw_fd(fd) },
            wds: HashMap::new(),
            cache: WalkCache::default(),
            pending: HashMap::new(),
            volatile: HashMap::new(),
            facts: None,
            log: Vec::new(),
            floor: 0,
            used: Instant::now(),
            unsaved: false,
            unreadable: Vec::new(),
        })
    }

    /// Forgets every record (a lost event): the next launch reads again.
    fn forget(&mut self, seq: u64) {
        // (Nothing to write to disk: what is there stays the records' last word.)
        self.unsaved = false;
        self.cache = WalkCache::default();
        self.pending.clear();
        self.volatile.clear();
        self.facts = None;
        self.log.clear();
        self.floor = seq;
    }

    /// Forgets `dir` and everything below it (gone, or another directory now).
    fn drop_below(&mut self, dir: &Path) {
        let under = |p: &Path| p.starts_with(dir);
        let drop: Vec<Vec<u8>> = self.cache.iter().filter(|l| under(&l.path)).map(|l| l.path.as_os_str().as_encoded_bytes().to_vec()).collect();
        for p in drop {
            self.cache.remove(&p);
        }
        self.pending.retain(|p, _| !under(p));
        self.volatile.retain(|p, _| !under(p));
        if let Some(f) = &mut self.facts {
            f.remove_below(dir);
        }
    }

    /// Reads the kernel's reports: each watched directory reported is taken out of the records
    /// and read again by the next walk (what was recorded below a subdirectory of it that was
    /// made, removed or moved is forgotten: another directory may be at that path now).
    fn drain(&mut self, seq: &mut u64) {
        let mut gone: Vec<PathBuf> = Vec::new();
        super::listing::read_events(self.ino.as_raw_fd(), |wd, mask, name| {
            if mask & libc::IN_Q_OVERFLOW != 0 {
                *seq += 1;
                self.forget(*seq);
                gone.clear();
                return;
            }
            let Some((path, depth)) = self.wds.get(&wd).cloned() else { return };
            if mask & libc::IN_IGNORED != 0 {
                self.wds.remove(&wd);
            }
            *seq += 1;
            self.cache.remove(path.as_os_str().as_encoded_bytes());
            self.log.push((*seq, path.clone(), depth));
            if mask & (libc::IN_DELETE_SELF | libc::IN_MOVE_SELF) != 0 {
                gone.push(path.clone());
            } else {
                self.pending.insert(path.clone(), depth);
            }
            if mask & libc::IN_ISDIR != 0 && !name.is_empty() {
                gone.push(path.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name)));
            }
        });
        if self.log.len() > MAX_LOG {
            let cut = self.log.len() - MAX_LOG;
            self.floor = self.floor.max(self.log[cut - 1].0);
            self.log.drain(..cut);
        }
        for g in gone {
            self.drop_below(&g);
        }
    }

    /// Records what a walk read: a directory is recorded once the kernel watches it and, read
    /// again after that, it shows what was read; any other is volatile.
    fn keep(&mut self, l: Listing, names: &[&str], watches: &mut usize) {
        self.unsaved = true;
        self.pending.remove(&l.path);
        let watched = self.trusted_dev == Some(l.id.0) && *watches < MAX_WATCHES && self.watch(&l, watches);
        if watched && super::nested::reads_the_same(&l, names) {
            self.volatile.remove(&l.path);
            self.cache.insert(l);
        } else {
            self.cache.remove(l.path.as_os_str().as_encoded_bytes());
            self.volatile.insert(l.path.clone(), l);
        }
    }

    fn watch(&mut self, l: &Listing, watches: &mut usize) -> bool {
        let Ok(c) = std::ffi::CString::new(l.path.as_os_str().as_encoded_bytes()) else { return false };
        let mask = libc::IN_CREATE | libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_MOVED_TO | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_ONLYDIR | libc::IN_DONT_FOLLOW;
        // SAFETY: inotify_add_watch on our descriptor with a NUL-terminated path.
        let wd = unsafe { libc::inotify_add_watch(self.ino.as_raw_fd(), c.as_ptr(), mask) };
        if wd < 0 {
            return false;
        }
        if self.wds.insert(wd, (l.path.clone(), l.depth)).is_none() {
            *watches += 1;
        }
        true
    }

    /// A walk of the whole root (the first one, or after everything was forgotten, or after one
    /// that stopped): the records from disk are each looked at, as in a process, and watched.
    fn whole(&mut self, dir: &Path, budget: usize, watches: &mut usize) -> NestedWalk {
        let names = self.names.clone();
        let n: Vec<&str> = names.iter().map(String::as_str).collect();
        // Every record is looked at here, as in a process; with none in memory (the first walk,
        // or after everything was forgotten), those on disk: what a walk after a run recorded
        // keeps the budget for what no walk read (a flood a run made, then a lost event, must
        // not push the next launch walk out of its reach).
        let mut cache = std::mem::take(&mut self.cache);
        if cache.is_empty() {
            cache = super::nested::load(dir, &self.root, &n).unwrap_or_default();
        }
        let mut walk = walk_nested(&self.root, &n, budget, Known::Launch(Some(&mut cache)));
        // What the walk did not reach is forgotten: only what it read (or held) and watches now
        // is a record (a record of a path that is another directory now would hide it).
        drop(cache);
        self.pending.clear();
        self.volatile.clear();
        let mut facts = Facts::default();
        for l in std::mem::take(&mut walk.listings) {
            facts.add(&l, &n);
            self.keep(l, &n, watches);
        }
        self.facts = walk.stopped.is_none().then_some(facts);
        walk
    }

    /// Reads again the directories reported changed, the volatile ones and `also` (and whole,
    /// the directories new in them), keeping the facts up to date: what was read.
    fn refresh(&mut self, also: &[(PathBuf, usize)], watches: &mut usize) -> NestedWalk {
        let names = self.names.clone();
        let n: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut dirs: Vec<(PathBuf, usize)> = also.to_vec();
        dirs.extend(self.pending.iter().map(|(p, d)| (p.clone(), *d)));
        dirs.extend(self.volatile.values().map(|l| (l.path.clone(), l.depth)));
        dirs.sort();
        dirs.dedup_by(|a, b| a.0 == b.0);
        // Only those still there below the root (a removed one was forgotten with its parent's
        // report; a volatile one has none).
        let (there, vanished): (Vec<_>, Vec<_>) = dirs.into_iter().filter(|(p, _)| p.starts_with(&self.root)).partition(|(p, _)| dir_id(p).is_some());
        for (p, _) in vanished {
            self.drop_below(&p);
        }
        let mut walk = walk_nested(&self.root, &n, usize::MAX, Known::Changed(&there, &self.cache));
        for l in std::mem::take(&mut walk.listings) {
            // A subdirectory the last read of a volatile directory had and this one has not:
            // forgotten with what it gave (a watched one's removal was reported).
            if let Some(old) = self.volatile.get(&l.path) {
                let now: std::collections::HashSet<PathBuf> = subdirs(&l).collect();
                let gone: Vec<PathBuf> = subdirs(old).filter(|s| !now.contains(s)).collect();
                for g in gone {
                    self.drop_below(&g);
                }
            }
            if let Some(f) = &mut self.facts {
                f.remove_of(&l.path);
                f.add(&l, &n);
            }
            self.keep(l, &n, watches);
        }
        walk
    }

    /// Writes its records to disk (what a walk in a process starts from when there is no
    /// service), when a walk read something since the last time.
    fn save(&mut self, dir: &Path) {
        if self.unsaved {
            let n: Vec<&str> = self.names.iter().map(String::as_str).collect();
            let _ = super::nested::save(dir, &self.root, &n, self.cache.iter().chain(self.volatile.values()));
            self.unsaved = false;
        }
    }

    fn answer(walk: &NestedWalk, token: u64) -> Answer {
        Answer { token, found: walk.found.clone(), repos: walk.repos.clone(), stopped: walk.stopped.clone(), from_records: walk.from_records as u64, looked_at: walk.listings.len() as u64 }
    }
}

impl Service {
    fn root(&mut self, root: &Path, names: &[String]) -> Option<usize> {
        let id = dir_id(root)?;
        if let Some(i) = self.roots.iter().position(|r| r.root == root && r.names == names) {
            if self.roots[i].id == id {
                return Some(i);
            }
            // Another directory at the root's path.
            self.roots.remove(i);
        }
        if self.roots.len() == MAX_ROOTS {
            let oldest = self.roots.iter().enumerate().min_by_key(|(_, r)| r.used).map(|(i, _)| i)?;
            let mut r = self.roots.remove(oldest);
            r.save(&self.dir);
        }
        // (Its records on disk are read by its first walk, [`Root::whole`].)
        self.roots.push(Root::new(root, names)?);
        Some(self.roots.len() - 1)
    }

    /// What git lists in `root` for `names` ([`Request::List`]).
    fn list(&mut self, root: &Path, names: &[String]) -> Option<Answer> {
        let i = match self.lists.iter().position(|l| l.worktree == root && l.names == names) {
            Some(i) => i,
            None => {
                if self.lists.len() == MAX_LISTS {
                    let oldest = self.lists.iter().enumerate().min_by_key(|(_, l)| l.used).map(|(i, _)| i)?;
                    self.lists.remove(oldest);
                }
                self.lists.push(Lister::new(root, names));
                self.lists.len() - 1
            }
        };
        // The watches the walks and the other listings hold count against the same bound.
        let others = self.roots.iter().map(|r| r.wds.len()).sum::<usize>() + self.lists.iter().enumerate().filter(|(k, _)| *k != i).map(|(_, l)| l.watched()).sum::<usize>();
        let files = self.lists[i].list(MAX_WATCHES.saturating_sub(others)).ok()?;
        Some(Answer { found: files.into_iter().map(|f| (f, false)).collect(), ..Answer::default() })
    }

    fn handle(&mut self, req: &Request) -> Option<Answer> {
        let (root, names) = match req {
            Request::Walk { root, names, .. } | Request::After { root, names, .. } => (root, names),
            Request::List { root, names } => return self.list(root, names),
        };
        let i = self.root(root, names)?;
        self.watches = self.roots.iter().map(|r| r.wds.len()).sum::<usize>() + self.lists.iter().map(Lister::watched).sum::<usize>();
        let seq = &mut self.seq;
        let r = &mut self.roots[i];
        r.used = Instant::now();
        r.drain(seq);
        // A directory the last walk could not read is tried again (one open each): while one
        // stays so, nothing is answered for the root; once none does, the root is walked whole
        // (nothing below them was read or watched).
        if !r.unreadable.is_empty() {
            if r.unreadable.iter().any(|(d, _)| std::fs::read_dir(d).is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)) {
                return None;
            }
            r.unreadable.clear();
            r.facts = None;
            if matches!(req, Request::After { .. }) {
                return None;
            }
        }
        // A walk that met one: not answered (the client walks the root itself).
        let answerable = |r: &mut Root, walk: NestedWalk| -> Option<NestedWalk> {
            if walk.unreadable.is_empty() {
                return Some(walk);
            }
            r.unreadable = walk.unreadable;
            r.facts = None;
            None
        };
        match req {
            Request::Walk { budget, .. } => {
                let token = *seq;
                if r.facts.is_none() {
                    let walk = r.whole(&self.dir, usize::try_from(*budget).unwrap_or(usize::MAX), &mut self.watches);
                    return answerable(r, walk).map(|walk| Root::answer(&walk, token));
                }
                let walk = r.refresh(&[], &mut self.watches);
                answerable(r, walk)?;
                let f = r.facts.as_ref()?;
                let looked_at = (r.cache.len() + r.volatile.len()) as u64;
                Some(Answer { token, found: f.found.iter().map(|(p, d)| (p.clone(), *d)).collect(), repos: f.repos.iter().cloned().collect(), stopped: None, from_records: r.cache.len() as u64, looked_at })
            }
            Request::After { token, .. } => {
                if *token < r.floor || *token > *seq {
                    return None;
                }
                let mut since: Vec<(PathBuf, usize)> = Vec::new();
                for (s, p, d) in r.log.iter().rev() {
                    if *s <= *token {
                        break;
                    }
                    since.push((p.clone(), *d));
                }
                let walk = r.refresh(&since, &mut self.watches);
                answerable(r, walk).map(|walk| Root::answer(&walk, *token))
            }
            Request::List { .. } => None,
        }
    }
}

/// Runs the service for the records' directory `dir`, after the walks `warm`, until it has had no
/// request for [`IDLE`] (or another one serves there already).
///
/// # Errors
/// Why it cannot serve (`dir` not a private directory of this user, the socket not made).
pub fn serve(dir: &Path, warm: &[Request]) -> Result<(), String> {
    let _ = std::fs::DirBuilder::new().recursive(true).create(dir);
    let _ = std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700));
    if !super::records::usable(dir) {
        return Err(format!("{} is not a private directory of this user", dir.display()));
    }
    let sock = socket_path(dir);
    // One service per socket: the one holding the lock.
    let _lock = match crate::host::lock_file(&sock.with_extension("lock"), false) {
        Ok(l) => l,
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => return Ok(()),
        Err(e) => return Err(format!("lock: {e}")),
    };
    // The roots it was asked to walk first, before it listens: meanwhile runs walk in their
    // process.
    let mut svc = Service { dir: dir.to_path_buf(), roots: Vec::new(), lists: Vec::new(), seq: 0, watches: 0 };
    for r in warm {
        let _ = svc.handle(r);
    }
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock).map_err(|e| format!("bind {}: {e}", sock.display()))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mounts = std::fs::File::open("/proc/self/mountinfo").ok();
    let mut last = Instant::now();
    let idle = idle();
    loop {
        let mut fds = vec![libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        if let Some(m) = &mounts {
            fds.push(libc::pollfd { fd: m.as_raw_fd(), events: libc::POLLPRI, revents: 0 });
        }
        // The kernel's reports are read as they come (its queue is bounded: an overflow forgets).
        let first_root = fds.len();
        fds.extend(svc.roots.iter().map(|r| libc::pollfd { fd: r.ino.as_raw_fd(), events: libc::POLLIN, revents: 0 }));
        let first_list = fds.len();
        let listed: Vec<usize> = svc.lists.iter().enumerate().filter_map(|(k, l)| l.fd().map(|fd| (k, fd))).map(|(k, fd)| {
            fds.push(libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
            k
        }).collect();
        // SAFETY: poll over our descriptors.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 2000) };
        if n < 0 {
            continue;
        }
        if fds.get(1).is_some_and(|f| f.revents & (libc::POLLPRI | libc::POLLERR) != 0) {
            // The mount table changed: what a path shows may have too.
            svc.seq += 1;
            let seq = svc.seq;
            for r in &mut svc.roots {
                r.forget(seq);
            }
            for l in &mut svc.lists {
                l.forget();
            }
            if let Some(mut m) = mounts.as_ref() {
                let _ = std::io::Seek::seek(&mut m, std::io::SeekFrom::Start(0));
                let _ = std::io::copy(&mut m, &mut std::io::sink());
            }
        }
        for (k, f) in fds[first_root..first_list].iter().enumerate() {
            if f.revents & libc::POLLIN != 0 {
                if let Some(r) = svc.roots.get_mut(k) {
                    r.drain(&mut svc.seq);
                }
            }
        }
        for (k, f) in listed.iter().zip(&fds[first_list..]) {
            if f.revents & libc::POLLIN != 0 {
                if let Some(l) = svc.lists.get_mut(*k) {
                    l.drain();
                }
            }
        }
        while let Ok((mut s, _)) = listener.accept() {
            last = Instant::now();
            let _ = s.set_nonblocking(false);
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
            let mut b = Vec::new();
            if (&mut s).take(1 << 20).read_to_end(&mut b).is_err() {
                continue;
            }
            let a = Request::decode(&b).and_then(|req| svc.handle(&req));
            let _ = s.write_all(&Answer::encode(a.as_ref()));
        }
        if n == 0 {
            // Quiet: what changed goes to disk (the walk in a process, when there is no
            // service, starts from it).
            for r in &mut svc.roots {
                if r.unsaved && r.used.elapsed() > Duration::from_secs(2) {
                    // (A lost event forgets: then nothing is written over what is on disk.)
                    r.drain(&mut svc.seq);
                    r.save(&svc.dir);
                }
            }
        }
        // No request for a while, or no client can reach it any more (its socket was removed,
        // with the records' directory: a test's home removed after its run).
        if last.elapsed() > idle || (n == 0 && std::fs::symlink_metadata(&sock).is_err()) {
            break;
        }
    }
    for r in &mut svc.roots {
        r.save(&svc.dir);
    }
    let _ = std::fs::remove_file(&sock);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The service against the walk in a process, on a real tree: after each change (made
    /// between requests, as the host or a run makes them), its launch answer finds what a
    /// walk from scratch finds, and its answer after a run finds what was made.
    #[test]
    fn the_service_finds_what_a_walk_from_scratch_finds() {
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap().join("ws");
        for i in 0..40 {
            std::fs::create_dir_all(root.join(format!("a{i}/b/c"))).unwrap();
        }
        let names = vec![".git".to_string(), ".vscode".to_string()];
        let n: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut svc = Service { dir: d.path().join("records"), roots: Vec::new(), lists: Vec::new(), seq: 0, watches: 0 };
        let walk = |svc: &mut Service| svc.handle(&Request::Walk { root: root.clone(), names: names.clone(), budget: 1_000_000 }).expect("an answer");
        let scratch = || walk_nested(&root, &n, 1_000_000, Known::Launch(None));
        let same = |a: &Answer, why: &str| {
            let w = scratch();
            assert_eq!(a.found, w.found, "{why}");
            assert_eq!(a.repos, w.repos, "{why}");
        };
        same(&walk(&mut svc), "first walk");
        same(&walk(&mut svc), "unchanged");
        assert!(svc.roots[0].cache.len() >= 100, "the directories are recorded and watched");
        let steps: &[(&str, &dyn Fn(&Path))] = &[
            ("a repository deep in the tree", &|r| std::fs::create_dir_all(r.join("a3/b/c/.git")).unwrap()),
            ("a .vscode file", &|r| std::fs::write(r.join("a4/b/.vscode"), "").unwrap()),
            ("a subtree moved", &|r| std::fs::rename(r.join("a3"), r.join("z3")).unwrap()),
            ("a subtree removed and another made at its path", &|r| {
                std::fs::remove_dir_all(r.join("a5")).unwrap();
                std::fs::create_dir_all(r.join("a5/b/.git")).unwrap();
            }),
            ("a directory git discovers as a repository", &|r| {
                for x in ["objects", "refs"] {
                    std::fs::create_dir_all(r.join("a6/b/bare").join(x)).unwrap();
                }
                std::fs::write(r.join("a6/b/bare/HEAD"), "ref: refs/heads/main\n").unwrap();
            }),
            ("a repository removed", &|r| std::fs::remove_dir_all(r.join("z3/b/c/.git")).unwrap()),
        ];
        for (why, change) in steps {
            change(&root);
            same(&walk(&mut svc), why);
        }
        // After a run: what the run made since the launch's token.
        let token = walk(&mut svc).token;
        std::fs::create_dir_all(root.join("a7/b/new/.git")).unwrap();
        std::fs::create_dir_all(root.join("fresh/x/.vscode")).unwrap();
        let after = svc.handle(&Request::After { root: root.clone(), names: names.clone(), token }).expect("an answer");
        for made in [root.join("a7/b/new/.git"), root.join("fresh/x/.vscode")] {
            assert!(after.found.iter().any(|(p, _)| *p == made), "{} made during the run: {:?}", made.display(), after.found);
        }
        same(&walk(&mut svc), "after the run");
        // A token from before what the service forgot is refused.
        let seq = svc.seq + 1;
        svc.roots[0].forget(seq);
        assert_eq!(svc.handle(&Request::After { root: root.clone(), names, token }), None);
    }

    #[test]
    fn requests_and_answers_read_back_and_nothing_else_reads() {
        let reqs = [
            Request::Walk { root: "/w/ws".into(), names: vec![".git".into(), ".vscode".into()], budget: 50_000 },
            Request::After { root: "/w/a b\nc".into(), names: vec![".git".into()], token: 7 },
            Request::List { root: "/w/ws".into(), names: vec!["package.json".into(), ".lintstagedrc".into()] },
        ];
        for r in &reqs {
            let b = r.encode();
            assert_eq!(Request::decode(&b).as_ref(), Some(r));
            assert_eq!(unhex(&hex(&b)), Some(b.clone()), "hex round trip");
            for cut in 0..b.len() {
                assert_eq!(Request::decode(&b[..cut]), None, "cut at {cut}");
            }
            let mut longer = b.clone();
            longer.push(0);
            assert_eq!(Request::decode(&longer), None);
        }
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("zz"), None);
        // A relative root, a name with a slash: no request.
        assert_eq!(Request::decode(&Request::Walk { root: "w".into(), names: vec![], budget: 1 }.encode()), None);
        assert_eq!(Request::decode(&Request::Walk { root: "/w".into(), names: vec!["a/b".into()], budget: 1 }.encode()), None);
        let a = Answer { token: 9, found: vec![("/w/ws/a/.git".into(), true), ("/w/ws/.vscode".into(), false)], repos: vec!["/w/ws/r".into()], stopped: Some("/w/ws/big".into()), from_records: 3, looked_at: 5 };
        for x in [Some(&a), None] {
            let b = Answer::encode(x);
            assert_eq!(Answer::decode(&b), Some(x.cloned()));
            for cut in 0..b.len() {
                assert_eq!(Answer::decode(&b[..cut]), None, "cut at {cut}");
            }
        }
    }
}
