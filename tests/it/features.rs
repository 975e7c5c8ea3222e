//! The kernel builds without the service: `--no-default-features` leaves
//! out tokio, tonic, axum and the rest, for people who embed it.

use std::process::Command;

/// `cargo check --no-default-features` of the library, in a target folder
/// of its own (the suite's is in use), and its dependency tree holds none
/// of the service's crates.
#[test]
fn the_kernel_builds_without_the_server() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = env!("CARGO_MANIFEST_DIR");
    let target = std::path::Path::new(root).join("target/tmp/kernel-only");
    let run = |args: &[&str]| {
        let out = Command::new(&cargo)
            .args(args)
            .args(["--no-default-features", "--offline", "--locked"])
            .current_dir(root)
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .expect("cargo runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "cargo {args:?}:\n{text}");
        text
    };
    run(&["check", "--lib", "--quiet"]);
    let tree = run(&["tree", "--edges", "normal", "--prefix", "none"]);
    for server_crate in [
        "tokio ",
        "tonic ",
        "axum ",
        "prometheus ",
        "notify ",
        "clap ",
        "ureq ",
    ] {
        assert!(
            !tree.lines().any(|l| l.starts_with(server_crate)),
            "{server_crate}in the kernel's dependencies:\n{tree}"
        );
    }
}
