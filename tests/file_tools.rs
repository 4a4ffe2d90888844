//! The file-tool API (`open_read`, `open_write`, `check_*`) against the red-team findings of
//! hole 8, as the user running the tests (root and, in CI, an unprivileged user): the host's own
//! `/proc` entries, protected workspace paths, and a check-then-open race. Each attack is shown
//! to work bare (plain `std::fs`) before the API is shown to refuse it.

use std::io::Read;
use std::path::PathBuf;

use localgpt_sandbox::paths::{open_no_symlinks, WriteMode};
use localgpt_sandbox::{build_sandbox_policy, SandboxPolicy, SandboxSettings};

fn world() -> (tempfile::TempDir, PathBuf, PathBuf, SandboxPolicy) {
    let base = std::env::var_os("LOCALGPT_TEST_DIR").filter(|v| !v.is_empty()).map_or_else(|| PathBuf::from("/var/tmp"), PathBuf::from);
    let d = tempfile::tempdir_in(base).unwrap();
    let root = std::fs::canonicalize(d.path()).unwrap();
    let home = root.join("home");
    let ws = root.join("ws");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "k").unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}").unwrap();
    let s = SandboxSettings { home: Some(home.clone()), ..Default::default() };
    let p = build_sandbox_policy(&ws, &s).unwrap();
    (d, home, ws, p)
}

/// Red-team hole 8: the host process's own environment and memory are readable bare.
#[test]
fn proc_and_sys_are_refused_but_global_info_files() {
    let (_d, _home, _ws, p) = world();
    assert!(std::fs::read("/proc/self/environ").is_ok(), "bare read works: the check means something");
    for path in ["/proc/self/environ", "/proc/self/cmdline", "/proc/self/mem", "/proc/1/environ", "/proc/thread-self/environ", "/sys/kernel/mm/transparent_hugepage/enabled"] {
        let e = p.check_read(path.as_ref()).unwrap_err().to_string();
        assert!(e.contains("/proc and /sys"), "{path}: {e}");
        assert!(p.open_read(path.as_ref()).is_err(), "{path}");
    }
    let mut s = String::new();
    p.open_read("/proc/cpuinfo".as_ref()).unwrap().read_to_string(&mut s).unwrap();
    assert!(!s.is_empty());
    assert!(p.check_write("/proc/self/attr/current".as_ref()).is_err());
}

/// Red-team hole 8: writes into protected workspace paths are refused, present or not.
#[test]
fn protected_workspace_paths_are_not_writable() {
    let (_d, _home, ws, p) = world();
    for rel in [".git/hooks/pre-commit", ".git/config", ".git/commondir", ".git", ".vscode/tasks.json", ".idea/workspace.xml", ".localgpt/config.toml"] {
        let e = p.check_write(rel.as_ref()).unwrap_err().to_string();
        assert!(e.contains("protected workspace path"), "{rel}: {e}");
        assert!(p.open_write(rel.as_ref(), WriteMode::Truncate).is_err(), "{rel}");
    }
    assert!(!ws.join(".git/hooks/pre-commit").exists() && !ws.join(".vscode").exists());
    // Reading them is fine; so is writing next to them.
    assert!(p.check_read(".git/config".as_ref()).is_ok());
    assert!(p.check_write(".gitignore".as_ref()).is_ok());
    assert!(p.check_write("src/.git-notes".as_ref()).is_ok());
}

/// Red-team hole 8: a check-then-open race. The path is checked, then a component is swapped
/// for a symlink to a credential before the open: the open refuses it.
#[test]
fn a_symlink_swapped_in_after_the_check_is_not_followed() {
    let (_d, home, ws, _p) = world();
    std::fs::create_dir_all(ws.join("dir")).unwrap();
    std::fs::write(ws.join("dir/id_rsa"), "harmless").unwrap();
    let checked = ws.join("dir/id_rsa");
    // The swap: dir → symlink to ~/.ssh.
    std::fs::rename(ws.join("dir"), ws.join("dir.old")).unwrap();
    std::os::unix::fs::symlink(home.join(".ssh"), ws.join("dir")).unwrap();
    assert_eq!(std::fs::read_to_string(&checked).unwrap(), "k", "bare open follows the swapped link");
    let e = open_no_symlinks(&checked, libc::O_RDONLY, 0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
    // And a final component swapped for a symlink.
    std::fs::remove_file(ws.join("dir")).unwrap();
    std::fs::create_dir(ws.join("dir")).unwrap();
    std::os::unix::fs::symlink(home.join(".ssh/id_rsa"), ws.join("dir/id_rsa")).unwrap();
    assert_eq!(open_no_symlinks(&checked, libc::O_RDONLY, 0).unwrap_err().raw_os_error(), Some(libc::ELOOP));
}
