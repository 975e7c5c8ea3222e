//! Servers for the end-to-end tests: the real server in process on free
//! loopback ports ([`TestServer`]), or the real binary ([`BinaryServer`]).

use bspq::compile::CompileOptions;
use bspq::metrics::Metrics;
use bspq::registry::Registry;
use bspq::server::{load_initial_worlds, run, ServerOptions};
use bspq::service::{Limits, Service};
use std::io::BufRead;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// The admin token every test server accepts.
pub const TOKEN: &str = "test-token";

/// `bspq::server::run` on its own runtime thread, HTTP and gRPC on free
/// ports; started once it answers.
pub struct TestServer {
    /// `http://ADDR` of the HTTP listener.
    pub base: String,
    pub http: SocketAddr,
    pub grpc: SocketAddr,
    pub registry: Arc<Registry>,
    pub metrics: Arc<Metrics>,
    pub service: Arc<Service>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

impl TestServer {
    /// Serves `worlds_dir` (rescanned every 20 ms) or the bundled world.
    pub fn start(worlds_dir: Option<PathBuf>, limits: Limits) -> TestServer {
        let options = ServerOptions {
            worlds_dir,
            rescan_interval: Duration::from_millis(20),
            drain_timeout: Duration::from_secs(20),
            ..Default::default()
        };
        Self::start_with(options, limits)
    }

    /// Serves with the given options.
    pub fn start_with(options: ServerOptions, limits: Limits) -> TestServer {
        Self::start_with_admin_token(options, limits, Some(TOKEN))
    }

    /// Serves with the given options and admin token (`None`: admin off).
    pub fn start_with_admin_token(
        options: ServerOptions,
        limits: Limits,
        admin_token: Option<&str>,
    ) -> TestServer {
        let registry = Arc::new(Registry::new(CompileOptions::default()));
        load_initial_worlds(&registry, &options).expect("initial worlds");
        let service = Arc::new(Service::new(
            Arc::clone(&registry),
            limits,
            admin_token.map(str::to_owned),
        ));
        let metrics = Arc::new(Metrics::new().expect("metrics"));
        let server_metrics = Arc::clone(&metrics);
        let server_service = Arc::clone(&service);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let http = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                addr_tx.send((http.local_addr()?, grpc.local_addr()?))?;
                run(
                    server_service,
                    server_metrics,
                    options,
                    http,
                    Some(grpc),
                    async move {
                        let _ = stop_rx.await;
                    },
                )
                .await
            })
        });
        let (http, grpc) = addr_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("server address");
        let server = TestServer {
            base: format!("http://{http}"),
            http,
            grpc,
            registry,
            metrics,
            service,
            stop: Some(stop_tx),
            thread: Some(thread),
        };
        server.wait_until_answering();
        server
    }

    /// Waits (at most 10 s) for the server's first answer. `run` answers
    /// only once the worlds-directory watcher is armed, so from here on a
    /// change to the directory is seen without waiting for a rescan.
    fn wait_until_answering(&self) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into();
        if let Err(e) = agent.get(&format!("{}/healthz", self.base)).call() {
            panic!("the test server did not answer within 10 s: {e}");
        }
    }

    /// `http://ADDR` of the gRPC listener.
    pub fn grpc_url(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// `bspq trace` over `input` (query lines), once offline on the
    /// committed map `world` and once with `--server` against this server's
    /// world of that name: each run's exit status and standard output.
    pub fn trace_offline_and_remote(
        &self,
        world: &str,
        input: &str,
    ) -> ((Option<i32>, String), (Option<i32>, String)) {
        let trace = |args: &[&str]| {
            let out = super::bspq_with_input(
                std::iter::once("trace").chain(args.iter().copied()),
                input.as_bytes(),
            );
            (
                out.status.code(),
                String::from_utf8(out.stdout).expect("utf-8"),
            )
        };
        let map = super::map_path(world);
        let offline = trace(&["--world", map.to_str().expect("utf-8")]);
        let remote = trace(&["--server", &self.grpc_url(), "--world", world]);
        (offline, remote)
    }

    pub async fn channel(&self) -> tonic::transport::Channel {
        tonic::transport::Channel::from_shared(self.grpc_url())
            .expect("url")
            .connect()
            .await
            .expect("connects")
    }

    pub async fn collision(
        &self,
    ) -> bspq::proto::v1::collision_client::CollisionClient<tonic::transport::Channel> {
        bspq::proto::v1::collision_client::CollisionClient::new(self.channel().await)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX)
    }

    /// Starts the graceful shutdown without waiting for it.
    pub fn begin_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Shuts down and waits: the server's own result.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        self.begin_stop();
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| anyhow::anyhow!("server thread panicked"))?,
            None => Ok(()),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The real `bspq serve` binary on free loopback ports; killed when dropped
/// unless [`BinaryServer::terminate`] stopped it first.
pub struct BinaryServer {
    child: Option<Child>,
    pub http: String,
    pub grpc: String,
}

impl BinaryServer {
    /// `bspq serve --http-addr 127.0.0.1:0 --grpc-addr 127.0.0.1:0 ARGS…`,
    /// waiting until both listeners are logged.
    pub fn start(args: &[&str]) -> BinaryServer {
        Self::start_logging(args, true)
    }

    /// [`BinaryServer::start`] without worlds, with reads on both ports
    /// timing out after a second (`--http-read-timeout-seconds 1`).
    pub fn start_with_read_timeout_of_a_second() -> BinaryServer {
        Self::start(&[
            "--worlds",
            "/nonexistent-bspq-worlds",
            "--http-read-timeout-seconds",
            "1",
        ])
    }

    /// [`BinaryServer::start`], then the read end of the server's log pipe
    /// closed (as when a log collector goes away).
    pub fn start_then_close_log(args: &[&str]) -> BinaryServer {
        Self::start_logging(args, false)
    }

    fn start_logging(args: &[&str], keep_reading: bool) -> BinaryServer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bspq"))
            .args([
                "serve",
                "--http-addr",
                "127.0.0.1:0",
                "--grpc-addr",
                "127.0.0.1:0",
            ])
            .args(args)
            .env_remove("BSPQ_WORLDS")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bspq serve starts");
        let stderr = child.stderr.take().expect("stderr");
        let mut server = BinaryServer {
            child: Some(child),
            http: String::new(),
            grpc: String::new(),
        };
        let mut lines = std::io::BufReader::new(stderr).lines();
        while server.http.is_empty() || server.grpc.is_empty() {
            let line = lines.next().expect("server logs").expect("utf-8 log");
            if let Some(rest) = line.split("HTTP listening addr=").nth(1) {
                server.http = rest.trim().to_owned();
            }
            if let Some(rest) = line.split("gRPC listening addr=").nth(1) {
                server.grpc = rest.trim().to_owned();
            }
        }
        if keep_reading {
            // Keep draining the log so the server never blocks on a full pipe.
            std::thread::spawn(move || lines.for_each(drop));
        }
        server
    }

    pub fn http_url(&self) -> String {
        format!("http://{}", self.http)
    }

    pub fn grpc_url(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("server still running");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM failed");
        child.wait().expect("server exits")
    }
}

impl Drop for BinaryServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Reads what the server sends on `stream` until it closes the connection;
/// `None` when it stays open past the test's own read timeout.
pub fn read_until_closed(stream: &mut std::net::TcpStream) -> Option<Vec<u8>> {
    use std::io::{ErrorKind, Read};
    let mut received = Vec::new();
    match stream.read_to_end(&mut received) {
        Ok(_) => Some(received),
        Err(e) if e.kind() == ErrorKind::ConnectionReset => Some(received),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => None,
        Err(e) => panic!("reading from the server: {e}"),
    }
}

/// A raw connection to `addr` whose reads give up after 15 s (well past the
/// server timeouts the tests set), for clients that stall on purpose.
pub fn connect_slowly_read(addr: &str) -> std::net::TcpStream {
    let stream = std::net::TcpStream::connect(addr).expect("connects");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(15)))
        .expect("read timeout");
    stream
}

/// An HTTP client for tests: every status is an answer (not an error), and
/// no call waits longer than 30 s.
pub fn http_agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}
