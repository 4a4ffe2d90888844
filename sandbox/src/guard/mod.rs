//! The workspace guard: everything about the workspace paths that make programs run later,
//! outside the sandbox (a repository's `.git`, the `core.hooksPath` directory, `.vscode`,
//! `.idea`, the agent's `.localgpt`), in one room.
//!
//! The model, in the order a run meets it:
//!
//! 1. **Survey** before the run ([`protected`], [`nested`]): which of those paths exist in the
//!    writable roots, the workspace's own and nested ones (a repository in a subdirectory, the
//!    `.git` of every submodule the index registers, read by [`gitindex`]). What the survey
//!    remembers across runs is in the user's private record store ([`records`]). Each path found
//!    becomes a private copy for the run (Full level) or a denied write (Standard); the planner
//!    turns the survey into the plan's protected paths.
//! 2. **Review** after the run (`review`): every change the command made to a private copy is
//!    classified. Only what is proven harmless (git's own data: objects, refs, the index, …; a
//!    config change whose keys are all on the safe list, read by [`gitconfig`] and checked against
//!    the host's `git` as the oracle, `gitoracle`; a `package.json` change that leaves the keys a
//!    hook reads as they were, [`jsonkeys`]) is applied to the real files.
//! 3. **Pending** changes (`pending`): everything else is kept aside in a store private to the
//!    user, listed, applied or dropped by `localgpt sandbox pending`; nothing is lost.
//! 4. **Denied** paths follow their file across renames (`denied`): each run records the inode
//!    of every denied path inside a writable root, and the next one finds a moved file again.
//!
//! What is here is pure, or reads and writes only the user's private stores, through one seam
//! for what differs between platforms (`fsmeta`: a private directory, links, modes, a file's
//! identity): the guard compiles, and its unit tests run, on Linux, macOS and Windows. The part that walks
//! an overlay's upper layer and applies the review's verdicts to the real files is the Linux
//! runner's (`linux::protect`).

pub mod gitconfig;
pub mod gitindex;
pub mod jsonkeys;
pub mod nested;
pub mod protected;
pub mod records;
#[cfg(target_os = "linux")]
pub mod walkd;
#[cfg(target_os = "linux")]
mod listing;
internal_mod!(review);
internal_mod!(gitoracle);
internal_mod!(pending);
internal_mod!(denied);
internal_mod!(fsmeta);
