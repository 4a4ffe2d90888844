//! The compatibility corpus schema: one YAML file per group in `compat-commands/`, and the
//! fixture projects in `compat-commands/fixtures/<name>/`.
//!
//! ```yaml
//! group: coreutils                 # unique; equals the file stem
//! title: Coreutils and text tools
//! defaults:                        # optional: fixture, requires, normalise, timeout and replace
//!                                  # (requires, normalise and replace add to each command's)
//!   fixture: empty
//!   normalise: [paths]
//! commands:
//!   - name: ls-one-per-line        # unique across the corpus
//!     run: ls -1                   # bash -c text
//!     fixture: git                 # empty | git | cargo | python | node | c
//!     expect: succeed              # succeed (default) | denied
//!     exit_code: 0                 # the exit code the bare run must have (default 0)
//!     requires: [ls]               # programs that must be on PATH, else the command is skipped
//!     normalise: [paths, hashes]   # declared normalisations, applied to both runs alike
//!     replace: [{re: 'took \d+', with: 'took N'}]   # extra declared normalisations
//!     compare: output              # output (stdout + stderr, default) | stdout | exit
//!     why: "..."                   # required when compare is narrower than output
//!     timeout: 60                  # seconds, per run
//!     check: 'test ! -e {{OUTSIDE}}/f'  # denied only: run outside after each run; must fail
//!                                       # after the bare run and succeed after the sandboxed one
//! ```
//!
//! Placeholders, substituted in `run` and `check` before either runs: `{{OUTSIDE}}` (a directory
//! outside the workspace, fresh per run, writable by the runner's user, holding `canary.txt`
//! = "canary\n", mode 644), `{{TCP_PORT}}` and `{{UDP_PORT}}` (listeners in the runner on
//! 127.0.0.1) and `{{UNIX_SOCK}}` (a pathname unix socket listener outside the workspace, like
//! docker.sock), which record everything they receive and answer HTTP 404; `{{TOKEN}}` (unique
//! per run: when the command also names a listener, the runner checks whether it received
//! the token).

use serde::{Deserialize, Serialize};

/// One group file as written.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct GroupFile {
    /// Group id; must equal the file stem.
    pub group: String,
    /// Human title.
    pub title: String,
    /// Field defaults for every command of the group.
    #[serde(default)]
    pub defaults: Defaults,
    /// The commands.
    pub commands: Vec<CommandSpec>,
}

/// Group-level defaults.
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// Default fixture.
    pub fixture: Option<String>,
    /// Default required programs (added to each command's).
    #[serde(default)]
    pub requires: Vec<String>,
    /// Default normalisations (added to each command's).
    #[serde(default)]
    pub normalise: Vec<Normalisation>,
    /// Default timeout.
    pub timeout: Option<u64>,
    /// Replacements applied to every command's output before its own (environmental lines the
    /// group's tool prints under contention, such as cargo's lock waits).
    #[serde(default)]
    pub replace: Vec<Replace>,
}

/// One command as written.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    /// Unique name.
    pub name: String,
    /// Shell text, run with `bash -c`.
    pub run: String,
    /// Fixture (else the group default).
    pub fixture: Option<String>,
    /// Expectation.
    #[serde(default)]
    pub expect: Expect,
    /// Exit code the bare run must have.
    #[serde(default)]
    pub exit_code: i32,
    /// Programs that must be on `PATH`.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Declared normalisations.
    #[serde(default)]
    pub normalise: Vec<Normalisation>,
    /// Extra declared regex replacements.
    #[serde(default)]
    pub replace: Vec<Replace>,
    /// What is compared.
    #[serde(default)]
    pub compare: Compare,
    /// Why the comparison is narrower than `output`.
    pub why: Option<String>,
    /// Seconds per run.
    pub timeout: Option<u64>,
    /// Denied commands: the outside check.
    pub check: Option<String>,
    /// Denied commands: levels at which the protection is documented as degraded (the effect
    /// is then reported as "known degraded", not as a denial failure); `why` says which
    /// documented limitation.
    #[serde(default)]
    pub degraded_levels: Vec<String>,
    /// The workspace: this subdirectory of the fixture (relative; it must exist there) instead of
    /// its root, for both runs (a workspace inside a repository or a Cargo workspace).
    pub workspace: Option<String>,
    /// Extra `localgpt sandbox run` options for the sandboxed runs (the bare run has none).
    #[serde(default)]
    pub flags: Vec<String>,
    /// Paths (patterns relative to the fixture's copy: `**`, `*`) the command writes with content
    /// or names that differ from one run to the next whatever runs it (times, inode numbers,
    /// random names): left out of the workspace comparison; `why` says which.
    #[serde(default)]
    pub unstable: Vec<String>,
}

/// A command's expectation.
#[derive(Deserialize, Serialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// Same exit code as bare and equivalent output after the declared normalisations.
    #[default]
    Succeed,
    /// Works bare; sandboxed it fails and its effect is absent (checked from outside).
    Denied,
}

/// What the comparison covers.
#[derive(Deserialize, Serialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Compare {
    /// Exit code, stdout and stderr.
    #[default]
    Output,
    /// Exit code and stdout (stderr is still reported).
    Stdout,
    /// Exit code only.
    Exit,
}

/// A named normalisation, applied identically to the bare and the sandboxed output.
#[derive(Deserialize, Serialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Normalisation {
    /// The run's own directories: workspace → `<WS>`, outside dir → `<OUTSIDE>`, cache scratch
    /// (the runner's, the sandbox's `/tmp/.localgpt-cache` or `/tmp/localgpt-sandbox-XXXXXX`) →
    /// `<CACHE>`, `$HOME` → `<HOME>`. Always applied.
    Paths,
    /// Random temporary names (`mktemp`'s `tmp.XXXXXXXXXX`, Python's `tmpXXXXXXXX`) → `<TMPNAME>`.
    Tmpnames,
    /// Dates and times (ISO 8601, `date`, `ls -l`, git's default format, epoch seconds) → `<TIME>`.
    Timestamps,
    /// Durations (`0.01s`, `12ms`, `real 0m0.003s`, `duration_ms: 1.2`) → `<DUR>`.
    Durations,
    /// Process ids after `pid`/`PID`, in `[1] 1234` job lines and in `/proc/NNN` → `<PID>`.
    Pids,
    /// Hex object ids of 7 to 64 digits (git hashes, checksums of time-dependent data) → `<HASH>`.
    Hashes,
    /// Lines sorted (for output whose order is unspecified, e.g. a directory listing on tmpfs vs
    /// ext4, or concurrent writers).
    Sort,
}

impl Normalisation {
    /// All normalisations, for documentation and validation messages.
    pub const ALL: &'static [Normalisation] = &[
        Normalisation::Paths,
        Normalisation::Tmpnames,
        Normalisation::Timestamps,
        Normalisation::Durations,
        Normalisation::Pids,
        Normalisation::Hashes,
        Normalisation::Sort,
    ];
}

/// A declared regex replacement.
#[derive(Deserialize, Serialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Replace {
    /// Regex (Rust `regex` syntax, applied per whole text, multi-line mode).
    pub re: String,
    /// Replacement (`$1` refers to groups).
    pub with: String,
}

/// A fully resolved command (defaults applied), as the runner uses it.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Unique name.
    pub name: String,
    /// Group id.
    pub group: String,
    /// Shell text.
    pub run: String,
    /// Fixture.
    pub fixture: String,
    /// Expectation.
    pub expect: Expect,
    /// Exit code the bare run must have.
    pub exit_code: i32,
    /// Programs that must be on `PATH`.
    pub requires: Vec<String>,
    /// Normalisations (sorted, deduplicated, always containing `paths`).
    pub normalise: Vec<Normalisation>,
    /// Extra replacements.
    pub replace: Vec<Replace>,
    /// Comparison.
    pub compare: Compare,
    /// Why narrower.
    pub why: Option<String>,
    /// Seconds per run.
    pub timeout: u64,
    /// Denied: the outside check.
    pub check: Option<String>,
    /// Denied: levels where the protection is documented as degraded.
    pub degraded_levels: Vec<String>,
    /// The workspace's subdirectory of the fixture (`None`: its root).
    pub workspace: Option<String>,
    /// Extra `localgpt sandbox run` options.
    pub flags: Vec<String>,
    /// Paths left out of the workspace comparison (see the spec's field).
    pub unstable: Vec<String>,
}

/// A group with its resolved commands.
#[derive(Serialize, Debug, Clone)]
pub struct Group {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Commands.
    pub commands: Vec<Command>,
}

/// The whole corpus.
#[derive(Serialize, Debug, Clone)]
pub struct Corpus {
    /// Groups, in file-name order.
    pub groups: Vec<Group>,
    /// Fixture names found under `fixtures/`.
    pub fixtures: Vec<String>,
}

impl Corpus {
    /// Every command, in group order.
    pub fn commands(&self) -> impl Iterator<Item = &Command> {
        self.groups.iter().flat_map(|g| g.commands.iter())
    }
}

/// Placeholders a command may use.
pub const PLACEHOLDERS: &[&str] = &["{{OUTSIDE}}", "{{TCP_PORT}}", "{{UDP_PORT}}", "{{UNIX_SOCK}}", "{{TOKEN}}"];

/// The fixtures every corpus must provide (the issue's list).
pub const REQUIRED_FIXTURES: &[&str] = &["empty", "git", "cargo", "python", "node", "c"];

/// Default per-run timeout in seconds.
pub const DEFAULT_TIMEOUT: u64 = 60;
/// Largest per-run timeout accepted.
pub const MAX_TIMEOUT: u64 = 300;
