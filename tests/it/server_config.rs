//! `bspq serve` configuration: the README's reference table lists exactly the
//! options the code has (flag, environment variable, TOML key, default), the
//! layers take precedence flags > environment > file > defaults in the real
//! binary, and `./worlds` is the default worlds directory.

use crate::common;

use bspq::config::{file_keys, serve_command};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// One row of the README's configuration table.
#[derive(Debug)]
struct Row {
    env: String,
    key: String,
    default: String,
}

/// The `` `x` `` spans of a table cell.
fn code_spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// Rows between the serve-options markers, by long flag name.
fn readme_rows() -> BTreeMap<String, Row> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let start = readme
        .find("<!-- serve-options:start -->")
        .expect("start marker");
    let end = readme
        .find("<!-- serve-options:end -->")
        .expect("end marker");
    let mut rows = BTreeMap::new();
    for line in readme[start..end]
        .lines()
        .filter(|l| l.starts_with("| `--"))
    {
        // Split on unescaped pipes.
        let cells: Vec<String> = line
            .replace("\\|", "\u{0}")
            .split('|')
            .map(|c| c.trim().replace('\u{0}', "|"))
            .collect();
        let flag = code_spans(&cells[1])[0]
            .split_whitespace()
            .next()
            .expect("flag")
            .trim_start_matches("--")
            .to_owned();
        let first = |cell: &str| code_spans(cell).into_iter().next().unwrap_or_default();
        let row = Row {
            env: first(&cells[2]),
            key: first(&cells[3]),
            default: cells[4].clone(),
        };
        assert!(
            rows.insert(flag.clone(), row).is_none(),
            "--{flag} listed twice"
        );
    }
    rows
}

#[test]
fn the_readme_lists_exactly_the_options_the_code_has() {
    let command = serve_command();
    let keys = file_keys(&command);
    let mut rows = readme_rows();
    for arg in command.get_arguments() {
        let long = arg.get_long().expect("every option is a long flag");
        let row = rows
            .remove(long)
            .unwrap_or_else(|| panic!("README's configuration table lacks --{long}"));
        let env = arg
            .get_env()
            .map(|e| e.to_string_lossy().into_owned())
            .unwrap_or_default();
        assert_eq!(row.env, env, "--{long}: environment variable");
        let id = arg.get_id().as_str();
        let key = if keys.iter().any(|k| k == id) { id } else { "" };
        assert_eq!(row.key, key, "--{long}: TOML key");
        for default in arg.get_default_values() {
            let default = default.to_string_lossy();
            assert!(
                code_spans(&row.default).contains(&default.to_string()),
                "--{long}: README default {:?} does not show `{default}`",
                row.default
            );
        }
    }
    assert!(
        rows.is_empty(),
        "README lists options the code does not have: {:?}",
        rows.keys().collect::<Vec<_>>()
    );
}

fn print_config(args: &[&str], env: &[(&str, &str)]) -> toml::Table {
    let mut command = Command::new(env!("CARGO_BIN_EXE_bspq"));
    command.args(["serve", "--print-config"]).args(args);
    for (key, _) in std::env::vars() {
        if key.starts_with("BSPQ_") {
            command.env_remove(key);
        }
    }
    let out = command.envs(env.iter().copied()).output().expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .parse()
        .expect("prints TOML")
}

#[test]
fn flags_beat_environment_beats_file_beats_defaults() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("bspq.toml");
    std::fs::write(
        &file,
        "max_queries = 100\nmax_body_bytes = 4096\ndrain_seconds = 3\nlog_format = \"json\"\n",
    )
    .expect("write");
    let file = file.to_str().expect("utf-8");
    let config = print_config(
        &["--max-queries", "300"],
        &[
            ("BSPQ_CONFIG", file),
            ("BSPQ_MAX_QUERIES", "200"),
            ("BSPQ_MAX_BODY_BYTES", "8192"),
        ],
    );
    assert_eq!(config["max_queries"].as_integer(), Some(300), "flag");
    assert_eq!(config["max_body_bytes"].as_integer(), Some(8192), "env");
    assert_eq!(config["drain_seconds"].as_float(), Some(3.0), "file");
    assert_eq!(config["log_format"].as_str(), Some("json"), "file");
    assert_eq!(
        config["http_addr"].as_str(),
        Some("127.0.0.1:8080"),
        "default"
    );
    // --config on the command line works the same as BSPQ_CONFIG.
    let config = print_config(&["--config", file], &[]);
    assert_eq!(config["max_queries"].as_integer(), Some(100));
}

#[test]
fn a_bad_config_file_stops_start_up_naming_the_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (text, needle) in [
        ("max_querys = 1\n", "unknown key `max_querys`"),
        ("drain_seconds = \"soon\"\n", "key `drain_seconds`"),
        ("drain_seconds = 0\n", "drain_seconds"),
    ] {
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, text).expect("write");
        let out = Command::new(env!("CARGO_BIN_EXE_bspq"))
            .args(["serve", "--print-config", "--config"])
            .arg(&file)
            .env_remove("BSPQ_CONFIG")
            .output()
            .expect("runs");
        assert!(!out.status.success(), "{text} accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{text}: {stderr}");
    }
}

/// The worlds the binary serves when started in `cwd` with no worlds flag.
fn served_worlds(cwd: &Path) -> Vec<(String, String)> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_bspq"));
    for (key, _) in std::env::vars() {
        if key.starts_with("BSPQ_") {
            command.env_remove(key);
        }
    }
    let mut child = command
        .args([
            "serve",
            "--http-addr",
            "127.0.0.1:0",
            "--grpc-addr",
            "127.0.0.1:0",
        ])
        .current_dir(cwd)
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines.next().expect("server logs").expect("utf-8 log");
        if let Some(rest) = line.split("HTTP listening addr=").nth(1) {
            break rest.trim().to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let body = agent
        .get(&format!("http://{addr}/v1/worlds"))
        .call()
        .expect("answers")
        .body_mut()
        .read_to_string()
        .expect("body");
    let _ = child.kill();
    let _ = child.wait();
    let json: serde_json::Value = serde_json::from_str(&body).expect("json");
    json["worlds"]
        .as_array()
        .expect("worlds")
        .iter()
        .map(|w| {
            (
                w["name"].as_str().unwrap_or("").to_owned(),
                w["source"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_default_worlds_directory_is_dot_worlds_when_it_exists() {
    let cwd = tempfile::tempdir().expect("temp dir");
    // No ./worlds: the bundled world.
    assert_eq!(
        served_worlds(cwd.path()),
        [("q3dm6ish".to_owned(), "bundled".to_owned())]
    );
    // An empty ./worlds: still the bundled world.
    std::fs::create_dir(cwd.path().join("worlds")).expect("mkdir");
    assert_eq!(served_worlds(cwd.path())[0].1, "bundled");
    // ./worlds with a world: that world.
    std::fs::copy(
        common::map_path("aggressor"),
        cwd.path().join("worlds/arena.bsp"),
    )
    .expect("copy");
    let served = served_worlds(cwd.path());
    assert_eq!(served.len(), 1);
    assert_eq!(served[0].0, "arena");
    assert!(served[0].1.ends_with("arena.bsp"), "{served:?}");
}

/// A `--worlds` path that is a file is a configuration mistake: start-up
/// fails naming it (it used to serve the bundled world and report ready).
#[test]
fn a_worlds_path_that_is_a_file_stops_start_up() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("worlds");
    std::fs::write(&file, b"not a folder").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args([
            "serve",
            "--http-addr",
            "127.0.0.1:0",
            "--grpc-addr",
            "127.0.0.1:0",
            "--worlds",
        ])
        .arg(&file)
        .env_remove("BSPQ_CONFIG")
        .output()
        .expect("runs");
    assert!(!out.status.success(), "served");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not a directory"), "{stderr}");
}
