//! Criterion benches of the sandbox's pure parts and of one whole sandboxed `/bin/true`.
//!
//! `cargo bench -p localgpt-bench` (add `-- --quick` for a short run). Benchmarks, not timed
//! tests: nothing here asserts on time.
//!
//! * policy construction (`build_sandbox_policy`);
//! * the plan for 10 / 100 / 1000 extra `allow_paths.read` directories (`make_plan`: Landlock
//!   rule resolution with canonicalisation, seccomp table + compilation, environment), at the
//!   best level and at Standard (no namespace plan);
//! * canonicalising the 1000 directories (and the default policy's paths): one
//!   `std::fs::canonicalize` each, and one shared `PathResolver` (what a plan uses);
//! * seccomp table + compilation alone;
//! * the helper plan's JSON encode (runner) and decode (helper);
//! * seccomp filter load in a forked child, next to a bare fork;
//! * Landlock ruleset construction (create + one `add_rule` per path rule; not applied, so the
//!   bench process stays unconfined) for the default rules and for +100 paths, through the
//!   crate's `add_rule` and with raw `landlock_add_rule` calls as the helper makes them;
//! * a whole sandboxed `/bin/true` through the library (`run_argv`, best level), next to a bare
//!   spawn of `/bin/true`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{black_box, BenchmarkId, Criterion};
use localgpt_sandbox::plan::resolve::PathResolver;
use localgpt_sandbox::linux::seccomp;
use localgpt_sandbox::plan::{HelperPlan, RunContext};
use localgpt_sandbox::policy::{LevelSetting, SandboxLevel};
use localgpt_sandbox::{build_sandbox_policy, detect::detect_quick, make_plan, SandboxPolicy, SandboxSettings};

struct Fixture {
    _root: tempfile::TempDir,
    ws: PathBuf,
    extra: Vec<PathBuf>,
}

/// A workspace and 1000 directories under /var/tmp (outside /tmp, which the policy grants).
fn fixture() -> Fixture {
    let root = tempfile::Builder::new().prefix("localgpt-bench-").tempdir_in("/var/tmp").expect("tempdir in /var/tmp");
    let ws = root.path().join("ws");
    std::fs::create_dir_all(&ws).expect("create workspace");
    let extra: Vec<PathBuf> = (0..1000)
        .map(|i| {
            let p = root.path().join("paths").join(format!("p{i:04}"));
            std::fs::create_dir_all(&p).expect("create extra path");
            p
        })
        .collect();
    Fixture { _root: root, ws, extra }
}

fn policy_with(ws: &Path, extra: &[PathBuf]) -> SandboxPolicy {
    let settings = SandboxSettings { extra_read: extra.to_vec(), ..Default::default() };
    build_sandbox_policy(ws, &settings).expect("policy")
}

fn standard_policy_with(ws: &Path, extra: &[PathBuf]) -> SandboxPolicy {
    let settings = SandboxSettings {
        extra_read: extra.to_vec(),
        level: LevelSetting::Exactly(SandboxLevel::Standard),
        ..Default::default()
    };
    build_sandbox_policy(ws, &settings).expect("policy")
}

fn ctx() -> RunContext {
    RunContext { caller_env: localgpt_sandbox::run::caller_env(), scratch: None, uid_tasks: Some(100), ..Default::default() }
}

fn bench_pure(c: &mut Criterion, fx: &Fixture) {
    let caps = detect_quick();
    c.bench_function("detect_quick", |b| b.iter(|| black_box(detect_quick())));
    c.bench_function("policy/build_default", |b| {
        b.iter(|| black_box(build_sandbox_policy(&fx.ws, &SandboxSettings::default()).expect("policy")))
    });
    let mut g = c.benchmark_group("plan/extra_read_paths");
    for n in [0usize, 10, 100, 1000] {
        let policy = policy_with(&fx.ws, &fx.extra[..n]);
        let ctx = ctx();
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| b.iter(|| black_box(make_plan(&policy, &caps, &ctx).expect("plan"))));
    }
    g.finish();
    // Standard level: Landlock rules only, no namespace plan (`--level standard`).
    let mut g = c.benchmark_group("plan_standard/extra_read_paths");
    for n in [0usize, 100, 1000] {
        let policy = standard_policy_with(&fx.ws, &fx.extra[..n]);
        let ctx = ctx();
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| b.iter(|| black_box(make_plan(&policy, &caps, &ctx).expect("plan"))));
    }
    g.finish();
    let default_paths = policy_with(&fx.ws, &[]);
    let mut paths: Vec<PathBuf> = fx.extra.clone();
    paths.extend(default_paths.read_only_paths.iter().chain(&default_paths.deny_paths).cloned());
    let mut g = c.benchmark_group(format!("canonicalize/{}_paths", paths.len()));
    g.bench_function("std::fs::canonicalize", |b| {
        b.iter(|| {
            for p in &paths {
                let _ = black_box(std::fs::canonicalize(p));
            }
        })
    });
    g.bench_function("PathResolver", |b| {
        b.iter(|| {
            let mut r = PathResolver::new();
            for p in &paths {
                let _ = black_box(r.canonicalize(p));
            }
        })
    });
    g.finish();
    c.bench_function("seccomp/table_and_compile", |b| {
        b.iter(|| {
            let t = seccomp::seccomp_table();
            black_box(seccomp::compile(&t).expect("compile"))
        })
    });
    let plan = make_plan(&policy_with(&fx.ws, &[]), &caps, &ctx()).expect("plan");
    let hp = plan.helper_plan(1, Vec::new());
    let json = serde_json::to_vec(&hp).expect("json");
    c.bench_function("helper_plan/encode", |b| b.iter(|| black_box(serde_json::to_vec(&hp).expect("json"))));
    c.bench_function("helper_plan/decode", |b| b.iter(|| black_box(serde_json::from_slice::<HelperPlan>(&json).expect("decode"))));
}

/// Landlock ruleset construction without `restrict_self`: the cost of the helper's rule loop.
fn build_ruleset(hp: &HelperPlan) {
    use landlock::{AccessFs, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr};
    let Some(ll) = &hp.landlock else { return };
    let fs = BitFlags::<AccessFs>::from_bits(ll.fs as _).expect("fs rights");
    let mut created = Ruleset::default().handle_access(fs).expect("handle").create().expect("create");
    for (path, access) in &ll.rules {
        let a = BitFlags::<AccessFs>::from_bits(*access as _).expect("rights");
        let fd = PathFd::new(path).expect("open");
        created = created.add_rule(PathBeneath::new(fd, a)).expect("add_rule");
    }
    black_box(created);
}

/// The same rules added with raw syscalls (`open(O_PATH)` + `landlock_add_rule` + `close`), as
/// the helper does: the crate also `fstat`s every fd to check file rights against its type,
/// which the plan already did.
fn build_ruleset_raw(hp: &HelperPlan) {
    use landlock::{AccessFs, BitFlags, Ruleset, RulesetAttr};
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    let Some(ll) = &hp.landlock else { return };
    let fs = BitFlags::<AccessFs>::from_bits(ll.fs as _).expect("fs rights");
    let created = Ruleset::default().handle_access(fs).expect("handle").create().expect("create");
    let fd: OwnedFd = Option::<OwnedFd>::from(created.try_clone().expect("dup")).expect("ruleset fd");
    for (path, access) in &ll.rules {
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("path");
        // SAFETY: valid C string; the fd is closed below.
        let pfd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        assert!(pfd >= 0, "open {}", path.display());
        let attr = PathBeneathAttr { allowed_access: *access, parent_fd: pfd };
        // SAFETY: a valid rule attribute for the duration of the call.
        let r = unsafe { libc::syscall(libc::SYS_landlock_add_rule, fd.as_raw_fd(), 1, &attr as *const PathBeneathAttr, 0u32) };
        // SAFETY: closing the fd opened above.
        unsafe { libc::close(pfd) };
        assert_eq!(r, 0, "add_rule {}", path.display());
    }
    black_box((created, fd));
}

fn bench_landlock(c: &mut Criterion, fx: &Fixture) {
    let caps = detect_quick();
    if caps.landlock.abi == 0 {
        eprintln!("landlock unavailable: skipping the ruleset benches");
        return;
    }
    let mut g = c.benchmark_group("landlock/ruleset_build");
    for n in [0usize, 100] {
        let plan = make_plan(&policy_with(&fx.ws, &fx.extra[..n]), &caps, &ctx()).expect("plan");
        let hp = plan.helper_plan(1, Vec::new());
        let rules = hp.landlock.as_ref().map_or(0, |l| l.rules.len());
        g.bench_with_input(BenchmarkId::new("extra_paths", format!("{n} ({rules} rules)")), &n, |b, _| b.iter(|| build_ruleset(&hp)));
        g.bench_with_input(BenchmarkId::new("raw_syscalls", format!("{n} ({rules} rules)")), &n, |b, _| b.iter(|| build_ruleset_raw(&hp)));
    }
    g.finish();
}

/// Fork a child that exits at once (baseline), and one that sets `no_new_privs` and loads the
/// sandbox's seccomp program first: the difference is the kernel's cost of loading the filter
/// (copy, check, and the per-syscall action cache the kernel prepares by emulating the filter).
fn bench_seccomp_load(c: &mut Criterion) {
    let prog = seccomp::compile(&seccomp::seccomp_table()).expect("compile");
    let filter: Vec<libc::sock_filter> = prog
        .iter()
        .map(|&i| {
            let (code, jt, jf, k) = seccomp::unpack(i);
            libc::sock_filter { code, jt, jf, k }
        })
        .collect();
    let fprog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut _ };
    // A one-instruction "allow everything" program: the fixed cost of a filter load.
    let allow = [libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: 0x7fff_0000 }]; // BPF_RET|BPF_K, SECCOMP_RET_ALLOW
    let allow_prog = libc::sock_fprog { len: 1, filter: allow.as_ptr() as *mut _ };
    let fork_wait = |load: Option<&libc::sock_fprog>| {
        // SAFETY: the child only makes raw syscalls and _exits; the parent waits for it.
        unsafe {
            let pid = libc::fork();
            if pid == 0 {
                if let Some(p) = load {
                    libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                    let r = libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0u32, p as *const libc::sock_fprog);
                    libc::_exit(if r == 0 { 0 } else { 1 });
                }
                libc::_exit(0);
            }
            let mut st = 0;
            libc::waitpid(pid, &mut st, 0);
            assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0, "seccomp load failed in the child");
        }
    };
    let mut g = c.benchmark_group(format!("seccomp/load_{}_insns", filter.len()));
    g.bench_function("fork+exit (baseline)", |b| b.iter(|| fork_wait(None)));
    g.bench_function("fork+no_new_privs+1-insn allow filter+exit", |b| b.iter(|| fork_wait(Some(&allow_prog))));
    g.bench_function("fork+no_new_privs+seccomp+exit", |b| b.iter(|| fork_wait(Some(&fprog))));
    g.finish();
}

struct Discard;
impl localgpt_sandbox::run::OutputSink for Discard {
    fn output(&mut self, _: localgpt_sandbox::run::Stream, _: &[u8]) {}
}

fn bench_whole(c: &mut Criterion, fx: &Fixture) {
    let mut g = c.benchmark_group("whole_run");
    g.sample_size(30).measurement_time(Duration::from_secs(4)).warm_up_time(Duration::from_millis(500));
    g.bench_function("bare /bin/true", |b| {
        b.iter(|| {
            let st = std::process::Command::new("/bin/true").current_dir(&fx.ws).status().expect("spawn");
            assert!(st.success());
        })
    });
    let policy = policy_with(&fx.ws, &[]);
    let argv = vec!["/bin/true".to_string()];
    g.bench_function("run_argv /bin/true (best level)", |b| {
        b.iter(|| {
            let r = localgpt_sandbox::run_argv(&argv, &policy, &localgpt_sandbox::RunOptions::default(), &mut Discard).expect("run");
            assert_eq!(r.exit_code, 0);
        })
    });
    g.finish();
}

fn main() {
    // run_argv re-executes this binary as the helper.
    localgpt_sandbox::dispatch();
    let fx = fixture();
    let mut c = Criterion::default().measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500)).configure_from_args();
    bench_pure(&mut c, &fx);
    bench_landlock(&mut c, &fx);
    bench_seccomp_load(&mut c);
    bench_whole(&mut c, &fx);
    c.final_summary();
}
