//! `bspq serve` configuration: one set of options, four layers.
//!
//! Every option is a clap argument (the single source of names, help and
//! defaults). The TOML file (`--config FILE` / `BSPQ_CONFIG`) uses the same
//! names in snake_case and is applied by turning its values into the
//! arguments' *defaults*, so clap's own order gives the precedence
//! flags > environment > file > built-in defaults, and file values are
//! checked by the same value parsers as flags.

use crate::server::ServerOptions;
use crate::service::Limits;
use crate::transport::grpc::GrpcOptions;
use clap::{ArgAction, Args, Command};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// Directory served when no worlds directory is configured, if it exists.
pub const DEFAULT_WORLDS_DIR: &str = "worlds";

/// Arguments that only make sense on the command line, never in the file.
const NOT_IN_FILE: [&str; 3] = ["config", "print_config", "help"];

/// Every `bspq serve` option. Field names are the TOML keys.
#[derive(Args, Debug, Clone, Serialize)]
pub struct ServeArgs {
    /// TOML file setting any option below by its snake_case name
    /// (flags and environment variables override it).
    #[arg(long, env = "BSPQ_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Print the effective configuration as TOML (admin token left out) and exit.
    #[arg(long)]
    #[serde(skip)]
    pub print_config: bool,
    /// Worlds directory: every world file in it is served under its file stem,
    /// and it is watched for new and replaced files. Default: ./worlds when it
    /// exists; without a directory (or with no world in it) a bundled world is
    /// served.
    #[arg(long, env = "BSPQ_WORLDS", value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worlds: Option<PathBuf>,
    /// HTTP/JSON listen address.
    #[arg(
        long,
        env = "BSPQ_HTTP_ADDR",
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:8080"
    )]
    pub http_addr: String,
    /// gRPC listen address.
    #[arg(
        long,
        env = "BSPQ_GRPC_ADDR",
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:50051"
    )]
    pub grpc_addr: String,
    /// Most gRPC calls (HTTP/2 streams: unary calls and open streams alike)
    /// open at once on one connection; clients hold further calls until one
    /// ends.
    #[arg(
        long,
        env = "BSPQ_GRPC_CONCURRENCY",
        value_name = "N",
        default_value_t = 64
    )]
    pub grpc_concurrency: usize,
    /// Seconds between HTTP/2 keepalive pings on idle gRPC connections.
    #[arg(
        long,
        env = "BSPQ_GRPC_KEEPALIVE_SECONDS",
        value_name = "S",
        default_value_t = 30.0
    )]
    pub grpc_keepalive_seconds: f64,
    /// Seconds to wait for a keepalive ping's ack before closing the connection.
    #[arg(
        long,
        env = "BSPQ_GRPC_KEEPALIVE_TIMEOUT_SECONDS",
        value_name = "S",
        default_value_t = 10.0
    )]
    pub grpc_keepalive_timeout_seconds: f64,
    /// Seconds after which a gRPC connection is closed gracefully (GOAWAY;
    /// requests running finish) so clients reconnect and rebalance over new
    /// replicas (0: never).
    #[arg(
        long,
        env = "BSPQ_GRPC_MAX_CONNECTION_AGE_SECONDS",
        value_name = "S",
        default_value_t = 3600.0
    )]
    pub grpc_max_connection_age_seconds: f64,
    /// Bearer token for admin routes (upload, unload); admin is off without it.
    /// Prefer the environment variable: flags show in `ps`.
    #[arg(
        long,
        env = "BSPQ_ADMIN_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    #[serde(skip)]
    pub admin_token: Option<String>,
    /// Leave patch (curve) collision out of worlds compiled from sources.
    #[arg(long, env = "BSPQ_NO_CURVES")]
    pub no_curves: bool,
    /// Most queries accepted in one request.
    #[arg(
        long,
        env = "BSPQ_MAX_QUERIES",
        value_name = "N",
        default_value_t = 65_536
    )]
    pub max_queries: usize,
    /// Largest request body (and gRPC message) in bytes.
    #[arg(long, env = "BSPQ_MAX_BODY_BYTES", value_name = "N", default_value_t = 32 << 20)]
    pub max_body_bytes: usize,
    /// Most queries held at once over all requests (waiting for a worker or
    /// being answered); a batch that would pass it is refused at once (HTTP
    /// 429, gRPC RESOURCE_EXHAUSTED). A batch alone is always admitted.
    #[arg(
        long,
        env = "BSPQ_MAX_QUERIES_IN_FLIGHT",
        value_name = "N",
        default_value_t = 524_288
    )]
    pub max_queries_in_flight: usize,
    /// Most bytes of query request bodies held at once over all requests,
    /// from a request's head until its answer is sent; a body that would
    /// pass it is refused before it is read (HTTP 429, gRPC
    /// RESOURCE_EXHAUSTED). A body alone is always admitted.
    #[arg(
        long,
        env = "BSPQ_MAX_BODY_BYTES_IN_FLIGHT",
        value_name = "N",
        default_value_t = 64 << 20
    )]
    pub max_body_bytes_in_flight: usize,
    /// Most connections open at once, HTTP and gRPC together; past it a new
    /// connection is answered 503 (HTTP) or closed (gRPC) at once. Keep it
    /// below the process's file-descriptor limit (`ulimit -n`).
    #[arg(
        long,
        env = "BSPQ_MAX_CONNECTIONS",
        value_name = "N",
        default_value_t = 512
    )]
    pub max_connections: usize,
    /// Seconds a whole HTTP request body may take to arrive, however it
    /// is paced (`--http-read-timeout-seconds` bounds each pause).
    #[arg(
        long,
        env = "BSPQ_HTTP_BODY_TIMEOUT_SECONDS",
        value_name = "S",
        default_value_t = 300.0
    )]
    pub http_body_timeout_seconds: f64,
    /// Largest world upload in bytes.
    #[arg(long, env = "BSPQ_MAX_UPLOAD_BYTES", value_name = "N", default_value_t = 256 << 20)]
    pub max_upload_bytes: usize,
    /// Seconds between full rescans of the worlds directory (a fallback: file
    /// system events normally trigger a reload at once).
    #[arg(
        long,
        env = "BSPQ_RESCAN_SECONDS",
        value_name = "S",
        default_value_t = 2.0
    )]
    pub rescan_seconds: f64,
    /// Seconds in-flight requests get to finish after SIGINT/SIGTERM.
    #[arg(
        long,
        env = "BSPQ_DRAIN_SECONDS",
        value_name = "S",
        default_value_t = 10.0
    )]
    pub drain_seconds: f64,
    /// Seconds an HTTP request head may take to arrive (a keep-alive
    /// connection idle that long is closed), the longest pause within a
    /// request body, and how long a new gRPC connection may take to send
    /// its HTTP/2 preface.
    #[arg(
        long,
        env = "BSPQ_HTTP_READ_TIMEOUT_SECONDS",
        value_name = "S",
        default_value_t = 60.0
    )]
    pub http_read_timeout_seconds: f64,
    /// Keep the last N traces each world answered (any transport) for the
    /// debugging page and GET /v1/worlds/{name}/recent (0: off).
    #[arg(
        long,
        env = "BSPQ_RECORD_QUERIES",
        value_name = "N",
        default_value_t = 0
    )]
    pub record_queries: usize,
    /// Log format on stderr (filter with BSPQ_LOG, e.g. BSPQ_LOG=debug).
    #[arg(long, env = "BSPQ_LOG_FORMAT", value_parser = ["text", "json"], default_value = "text")]
    pub log_format: String,
}

/// A configuration that cannot be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("config file {path}: unknown key `{key}` (known keys: {known})")]
    UnknownKey {
        path: PathBuf,
        key: String,
        known: String,
    },
    #[error("config file {path}: key `{key}`: {message}")]
    BadValue {
        path: PathBuf,
        key: String,
        message: String,
    },
    #[error("http_addr and grpc_addr are both {0}: each listener needs its own address")]
    SameAddress(String),
    #[error("{option} must be {rule}, not {value}")]
    OutOfRange {
        option: &'static str,
        rule: &'static str,
        value: String,
    },
}

/// The `serve` command alone (for tests and documentation checks).
pub fn serve_command() -> Command {
    ServeArgs::augment_args(Command::new("serve"))
}

/// The TOML keys a config file may hold, in declaration order.
pub fn file_keys(serve: &Command) -> Vec<String> {
    serve
        .get_arguments()
        .map(|a| a.get_id().as_str())
        .filter(|id| !NOT_IN_FILE.contains(id))
        .map(str::to_owned)
        .collect()
}

/// Reads `path` and makes its values the defaults of `serve`'s arguments.
pub fn apply_file(serve: Command, path: &Path) -> Result<Command, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
        path: path.to_owned(),
        error,
    })?;
    apply_toml(serve, &text, path)
}

/// [`apply_file`] on text already read (`path` only names it in errors).
pub fn apply_toml(mut serve: Command, text: &str, path: &Path) -> Result<Command, ConfigError> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Syntax {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
    let known = file_keys(&serve);
    for (key, value) in table {
        if !known.contains(&key) {
            return Err(ConfigError::UnknownKey {
                path: path.to_owned(),
                key,
                known: known.join(", "),
            });
        }
        let bad = |message: String| ConfigError::BadValue {
            path: path.to_owned(),
            key: key.clone(),
            message,
        };
        let Some(arg) = serve.get_arguments().find(|a| a.get_id() == key.as_str()) else {
            return Err(bad("not an option".into()));
        };
        let is_switch = matches!(arg.get_action(), ArgAction::SetTrue);
        let text = match (&value, is_switch) {
            (toml::Value::Boolean(b), true) => b.to_string(),
            (_, true) => return Err(bad(format!("expected true or false, found {value}"))),
            (toml::Value::String(s), false) => s.clone(),
            (toml::Value::Integer(i), false) => i.to_string(),
            (toml::Value::Float(f), false) => f.to_string(),
            (_, false) => return Err(bad(format!("expected a string or number, found {value}"))),
        };
        // Check the value now, with the flag's own parser, so the error names
        // the key and the file.
        if !is_switch {
            let long = format!("--{}", arg.get_long().unwrap_or(&key));
            Command::new("config")
                .no_binary_name(true)
                .arg(arg.clone())
                .try_get_matches_from([long, text.clone()])
                .map_err(|e| {
                    let rendered = e.render().to_string();
                    let first = rendered.lines().next().unwrap_or_default();
                    bad(first.trim_start_matches("error: ").to_owned())
                })?;
        }
        serve = serve.mut_arg(key.as_str(), |a| a.default_value(text));
    }
    Ok(serve)
}

/// Everything `bspq serve` needs, checked once at start-up.
#[derive(Debug, Clone)]
pub struct Settings {
    pub server: ServerOptions,
    pub limits: Limits,
    pub admin_token: Option<String>,
    pub curves: bool,
    pub http_addr: String,
    pub grpc_addr: String,
    pub json_logs: bool,
    /// Traces recorded per world (0: off).
    pub record_queries: usize,
}

fn seconds(option: &'static str, value: f64) -> Result<Duration, ConfigError> {
    if value.is_finite() && value > 0.0 && value <= 86_400.0 {
        Ok(Duration::from_secs_f64(value))
    } else {
        Err(ConfigError::OutOfRange {
            option,
            rule: "between 0 (exclusive) and 86400 seconds",
            value: value.to_string(),
        })
    }
}

fn at_least(option: &'static str, value: usize, min: usize) -> Result<usize, ConfigError> {
    if value >= min {
        Ok(value)
    } else {
        Err(ConfigError::OutOfRange {
            option,
            rule: if min == 1 {
                "at least 1"
            } else {
                "at least 1024"
            },
            value: value.to_string(),
        })
    }
}

fn at_most(option: &'static str, value: usize, max: usize) -> Result<usize, ConfigError> {
    if value <= max {
        Ok(value)
    } else {
        Err(ConfigError::OutOfRange {
            option,
            rule: "at most 1048576",
            value: value.to_string(),
        })
    }
}

impl ServeArgs {
    /// The worlds directory to serve: the configured one, else `./worlds`
    /// when it exists.
    pub fn worlds_dir(&self) -> Option<PathBuf> {
        self.worlds.clone().or_else(|| {
            let default = PathBuf::from(DEFAULT_WORLDS_DIR);
            default.is_dir().then_some(default)
        })
    }

    /// Checks every value and builds the typed settings.
    pub fn settings(&self) -> Result<Settings, ConfigError> {
        // (Told apart here: binding the second would say only "address in
        // use". Port 0 is any free port, a different one for each.)
        let addr = self.http_addr.trim();
        if addr == self.grpc_addr.trim() && !addr.ends_with(":0") {
            return Err(ConfigError::SameAddress(self.http_addr.clone()));
        }
        let max_connection_age = if self.grpc_max_connection_age_seconds == 0.0 {
            None
        } else {
            Some(seconds(
                "grpc_max_connection_age_seconds",
                self.grpc_max_connection_age_seconds,
            )?)
        };
        let read_timeout = seconds("http_read_timeout_seconds", self.http_read_timeout_seconds)?;
        Ok(Settings {
            server: ServerOptions {
                worlds_dir: self.worlds_dir(),
                rescan_interval: seconds("rescan_seconds", self.rescan_seconds)?,
                drain_timeout: seconds("drain_seconds", self.drain_seconds)?,
                http_read_timeout: read_timeout,
                http_body_timeout: seconds(
                    "http_body_timeout_seconds",
                    self.http_body_timeout_seconds,
                )?,
                max_connections: at_least("max_connections", self.max_connections, 1)?,
                grpc: GrpcOptions {
                    concurrency_per_connection: at_least(
                        "grpc_concurrency",
                        self.grpc_concurrency,
                        1,
                    )?,
                    keepalive_interval: seconds(
                        "grpc_keepalive_seconds",
                        self.grpc_keepalive_seconds,
                    )?,
                    keepalive_timeout: seconds(
                        "grpc_keepalive_timeout_seconds",
                        self.grpc_keepalive_timeout_seconds,
                    )?,
                    max_connection_age,
                    preface_timeout: read_timeout,
                },
            },
            limits: Limits {
                max_queries_per_request: at_least("max_queries", self.max_queries, 1)?,
                max_body_bytes: at_least("max_body_bytes", self.max_body_bytes, 1024)?,
                max_upload_bytes: at_least("max_upload_bytes", self.max_upload_bytes, 1024)?,
                max_queries_in_flight: at_least(
                    "max_queries_in_flight",
                    self.max_queries_in_flight,
                    1,
                )?,
                max_body_bytes_in_flight: at_least(
                    "max_body_bytes_in_flight",
                    self.max_body_bytes_in_flight,
                    1,
                )?,
            },
            admin_token: self.admin_token.clone().filter(|t| !t.is_empty()),
            curves: !self.no_curves,
            http_addr: self.http_addr.clone(),
            grpc_addr: self.grpc_addr.clone(),
            json_logs: self.log_format == "json",
            record_queries: at_most(
                "record_queries",
                self.record_queries,
                crate::recording::MAX_RECORDED_QUERIES,
            )?,
        })
    }

    /// The effective configuration as a TOML file (the admin token is left
    /// out so the output can be shared).
    pub fn to_toml(&self) -> String {
        let mut out = toml::to_string(self).unwrap_or_default();
        if self.admin_token.is_some() {
            out.push_str("# admin_token is set (not shown)\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::FromArgMatches;

    #[test]
    fn one_address_for_both_listeners_is_refused() {
        let args = parse(
            serve_command(),
            &[
                "--http-addr",
                "127.0.0.1:7000",
                "--grpc-addr",
                "127.0.0.1:7000",
            ],
        );
        assert!(matches!(
            args.settings(),
            Err(ConfigError::SameAddress(addr)) if addr == "127.0.0.1:7000"
        ));
        let any_port = ["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"];
        assert!(parse(serve_command(), &any_port).settings().is_ok());
    }

    fn parse(serve: Command, argv: &[&str]) -> ServeArgs {
        let mut argv_full = vec!["serve"];
        argv_full.extend_from_slice(argv);
        let m = serve.try_get_matches_from(argv_full).expect("parses");
        ServeArgs::from_arg_matches(&m).expect("args")
    }

    #[test]
    fn file_values_become_defaults_and_flags_win() {
        let text = "http_addr = \"0.0.0.0:9\"\nmax_queries = 7\nno_curves = true\ndrain_seconds = 3\nworlds = \"/w\"\n";
        let serve = apply_toml(serve_command(), text, Path::new("t.toml")).expect("valid");
        let args = parse(serve.clone(), &[]);
        assert_eq!(args.http_addr, "0.0.0.0:9");
        assert_eq!(args.max_queries, 7);
        assert!(args.no_curves);
        assert_eq!(args.drain_seconds, 3.0);
        assert_eq!(args.worlds, Some(PathBuf::from("/w")));
        assert_eq!(args.grpc_addr, "127.0.0.1:50051", "untouched default");
        let args = parse(serve, &["--http-addr", "1.2.3.4:5", "--max-queries", "9"]);
        assert_eq!(args.http_addr, "1.2.3.4:5");
        assert_eq!(args.max_queries, 9);
    }

    #[test]
    fn bad_files_name_the_key() {
        let err = |text: &str| {
            apply_toml(serve_command(), text, Path::new("t.toml"))
                .expect_err("rejected")
                .to_string()
        };
        assert!(err("http_adr = \"x\"").contains("unknown key `http_adr`"));
        assert!(err("config = \"x\"").contains("unknown key `config`"));
        assert!(err("max_queries = \"lots\"").contains("key `max_queries`"));
        assert!(err("max_queries = -1").contains("key `max_queries`"));
        assert!(err("no_curves = 1").contains("key `no_curves`"));
        assert!(err("log_format = \"xml\"").contains("key `log_format`"));
        assert!(err("worlds = [1]").contains("key `worlds`"));
        assert!(err("worlds = ").contains("t.toml"));
    }

    #[test]
    fn printed_config_round_trips() {
        let args = parse(
            serve_command(),
            &[
                "--worlds",
                "/srv/w",
                "--drain-seconds",
                "1.5",
                "--no-curves",
            ],
        );
        let text = args.to_toml();
        let again = parse(
            apply_toml(serve_command(), &text, Path::new("printed")).expect("valid"),
            &[],
        );
        assert_eq!(again.to_toml(), text);
        assert_eq!(again.worlds, Some(PathBuf::from("/srv/w")));
        assert!(again.no_curves);
        assert_eq!(again.drain_seconds, 1.5);
    }

    #[test]
    fn out_of_range_values_are_rejected() {
        let args = parse(serve_command(), &["--drain-seconds", "0"]);
        assert!(args.settings().is_err());
        let args = parse(serve_command(), &["--grpc-max-connection-age-seconds", "0"]);
        let settings = args.settings().expect("0 means never");
        assert!(settings.server.grpc.max_connection_age.is_none());
        let args = parse(serve_command(), &["--max-queries", "0"]);
        assert!(args.settings().is_err());
        let args = parse(serve_command(), &["--record-queries", "1048577"]);
        assert!(args.settings().is_err());
        let args = parse(serve_command(), &["--record-queries", "1048576"]);
        assert_eq!(args.settings().expect("in range").record_queries, 1 << 20);
    }
}
