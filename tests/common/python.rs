//! Python tools some tests drive (an independent gRPC client, the deploy
//! linters). The system's are used when present; otherwise each set is
//! installed once with pip into the test target directory
//! (`target/tmp/python/NAME`), so `cargo test` on a fresh machine needs no
//! set-up step of its own and never changes the system's Python.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where a set of tools was found: the system, or a pip `--target`
/// directory that must go on `PYTHONPATH` (modules) and `PATH` (its `bin/`).
pub struct PythonTools {
    dir: Option<PathBuf>,
}

impl PythonTools {
    /// `python3`, able to import the tools.
    pub fn python(&self) -> Command {
        self.python_with(&[])
    }

    /// `python3`, able to import modules from `dirs` (first) and the tools.
    pub fn python_with(&self, dirs: &[&Path]) -> Command {
        let mut command = Command::new("python3");
        let mut paths: Vec<PathBuf> = dirs.iter().map(|d| d.to_path_buf()).collect();
        paths.extend(self.dir.clone());
        if !paths.is_empty() {
            command.env("PYTHONPATH", prepend(paths, "PYTHONPATH"));
        }
        if let Some(bin) = self.bin_dir() {
            command.env("PATH", prepend(vec![bin], "PATH"));
        }
        command
    }

    /// The directory of the tools' executables, when not the system's.
    pub fn bin_dir(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|dir| dir.join("bin"))
    }

    /// The directory of the tools' modules, when not the system's (their
    /// executables may be Python scripts that import them).
    pub fn module_dir(&self) -> Option<PathBuf> {
        self.dir.clone()
    }
}

/// `first`, then the directories of the environment variable `variable`
/// (for `PATH` or `PYTHONPATH`).
pub fn prepend(mut first: Vec<PathBuf>, variable: &str) -> std::ffi::OsString {
    first.extend(
        std::env::var_os(variable)
            .iter()
            .flat_map(std::env::split_paths),
    );
    std::env::join_paths(first).expect("no path holds the separator")
}

/// Whether `python3` runs at all.
pub fn python3_available() -> bool {
    Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// What a set of tools must provide.
pub enum Needs<'a> {
    /// Python modules to import.
    Modules(&'a [&'a str]),
    /// Executables to find on `PATH`.
    Commands(&'a [&'a str]),
}

impl Needs<'_> {
    fn met(&self, tools: &PythonTools) -> bool {
        match self {
            Needs::Modules(modules) => tools
                .python()
                .args(["-c", &format!("import {}", modules.join(", "))])
                .output()
                .is_ok_and(|o| o.status.success()),
            Needs::Commands(commands) => commands.iter().all(|name| match &tools.dir {
                Some(dir) => dir.join("bin").join(name).is_file(),
                None => on_path(name),
            }),
        }
    }
}

/// Whether an executable `name` is on `PATH`.
pub fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .any(|dir| dir.join(name).is_file())
}

/// The tools `needs` asks for: the system's, or those of `packages`
/// installed (once, shared by later runs) under the set's `name`. Err says
/// why they could not be had (no python3, pip failed: offline, say).
pub fn ensure(name: &str, needs: Needs, packages: &[&str]) -> Result<PythonTools, String> {
    if !python3_available() {
        return Err("python3 is not installed".into());
    }
    let system = PythonTools { dir: None };
    if needs.met(&system) {
        return Ok(system);
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("python")
        .join(name);
    let installed = PythonTools {
        dir: Some(dir.clone()),
    };
    if needs.met(&installed) {
        return Ok(installed);
    }
    // Installed beside the final place and renamed into it, so that an
    // interrupted install is never taken for a finished one.
    let staging = dir.with_extension(format!("partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let pip = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg("--target")
        .arg(&staging)
        .args(packages)
        .output()
        .map_err(|e| format!("cannot run python3 -m pip: {e}"))?;
    if !pip.status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(format!(
            "pip install {} failed: {}",
            packages.join(" "),
            String::from_utf8_lossy(&pip.stderr)
        ));
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&staging, &dir).map_err(|e| format!("cannot move {staging:?}: {e}"))?;
    if needs.met(&installed) {
        Ok(installed)
    } else {
        Err(format!(
            "pip installed {} into {dir:?}, but they do not provide what the test needs",
            packages.join(" ")
        ))
    }
}
