//! The operating systems a plan can be made for. Depends on nothing but the error type, so the
//! default tables, the policy and detection can all name it.

use serde::{Deserialize, Serialize};

/// The operating system a plan is made for (each has its own backend).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// Linux: namespaces, Landlock, seccomp.
    #[default]
    Linux,
    /// macOS: a Seatbelt profile run by `/usr/bin/sandbox-exec`.
    Macos,
    /// Windows: no backend in this build.
    Windows,
}

impl Platform {
    /// The platform this binary was built for.
    #[must_use]
    pub const fn current() -> Platform {
        if cfg!(target_os = "macos") {
            Platform::Macos
        } else if cfg!(windows) {
            Platform::Windows
        } else {
            Platform::Linux
        }
    }

    /// The stable name (`linux`, `macos`, `windows`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Linux => "linux",
            Platform::Macos => "macos",
            Platform::Windows => "windows",
        }
    }

    /// Parses a name.
    ///
    /// # Errors
    /// [`crate::error::SandboxError::Policy`] naming the accepted values.
    pub fn parse(s: &str) -> Result<Platform, crate::error::SandboxError> {
        match s {
            "linux" => Ok(Platform::Linux),
            "macos" | "darwin" => Ok(Platform::Macos),
            "windows" => Ok(Platform::Windows),
            _ => Err(crate::error::SandboxError::Policy(format!("unknown platform {s:?} (linux, macos, windows)"))),
        }
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

