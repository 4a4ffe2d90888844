//! The workspace guard's vocabulary: the kinds of protected path (how each is made private and
//! reviewed) and the bounds of the walk that finds nested ones. The guard itself is
//! [`crate::guard::protected`], [`crate::guard::nested`], `review` and `pending`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What kind of protected path, and so how it is made private.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ProtectedKind {
    /// The workspace's `.git` directory: git's own state is applied after the run, config keys
    /// by key, hooks and redirection files are pending.
    GitDir,
    /// A directory whose every change is pending (`.vscode`, `.idea`, the hooks directory).
    Dir,
    /// A file (a `.git` file of a worktree or submodule checkout): a change is pending.
    File,
}

/// One protected path of a run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ProtectedPath {
    /// Its path (the workspace joined with the configured name; the workspace is canonical).
    pub path: PathBuf,
    /// How it is made private.
    pub kind: ProtectedKind,
    /// Absent at launch.
    pub absent: bool,
    /// Made private for the run (Full level, present at launch, overlay mounts available);
    /// otherwise the real path is reviewed in place after the run.
    #[serde(default)]
    pub private: bool,
    /// Why it is protected (`configured`, `core.hooksPath = …`).
    pub reason: String,
    /// A JSON file of which only these top-level keys are protected (a `package.json` whose
    /// `lint-staged` or `husky` key a hook runs; [`crate::guard::jsonkeys`]): a change that
    /// leaves each of them as it was, in a file read strictly (no duplicate keys), is applied;
    /// any other change is pending. Empty: the whole file (or directory) is protected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
}

/// A protected name that cannot be protected, and why (reported as a degradation).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Unprotectable {
    /// The path.
    pub path: PathBuf,
    /// Why.
    pub why: String,
}

/// How deep below the workspace nested protected names are looked for (`a/b/c/.git` is depth 3).
pub const NESTED_DEPTH: usize = 4;

/// How many directory entries the launch walk reads at most in directories no earlier walk
/// recorded (its cost is one `getdents` per directory, names only).
pub const NESTED_ENTRIES: usize = 50_000;

/// Directories the nested walk does not enter: dependency and build trees (their own `.git` or
/// `.vscode` are not the user's).
pub const NESTED_SKIP: &[&str] = &["node_modules", "target", "vendor", ".venv", "venv", "__pycache__", "dist", "build", ".cache", ".tox", ".mypy_cache", ".gradle", ".next"];
