//! `bspq health`: a probe for container HEALTHCHECKs, Kubernetes exec probes
//! and scripts. Exit status 0 when the server answers SERVING (gRPC health)
//! or 200 (HTTP), 1 otherwise; one line on stdout says what it saw.

use anyhow::Context;
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

#[derive(Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["grpc", "http"])))]
pub struct HealthArgs {
    /// gRPC address (HOST:PORT or http://HOST:PORT): asks grpc.health.v1.Health/Check.
    #[arg(long, value_name = "ADDR", value_parser = super::address::server_url)]
    grpc: Option<String>,
    /// Service name for the gRPC check ("" is the whole server).
    #[arg(long, default_value = "", requires = "grpc")]
    service: String,
    /// HTTP URL: GET it and expect 200 (e.g. http://127.0.0.1:8080/readyz).
    #[arg(long, value_name = "URL")]
    http: Option<String>,
    /// Seconds before giving up.
    #[arg(long, value_name = "S", default_value_t = 3.0)]
    timeout: f64,
}

pub fn run(args: HealthArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.timeout.is_finite() && args.timeout > 0.0 && args.timeout <= 3600.0,
        "--timeout must be between 0 and 3600 seconds"
    );
    let timeout = Duration::from_secs_f64(args.timeout);
    let healthy = match (&args.grpc, &args.http) {
        (Some(addr), _) => check_grpc(addr, &args.service, timeout)?,
        (None, Some(url)) => check_http(url, timeout)?,
        (None, None) => anyhow::bail!("give --grpc ADDR or --http URL"),
    };
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `url`: as [`super::address::server_url`] gives it.
fn check_grpc(url: &str, service: &str, timeout: Duration) -> anyhow::Result<bool> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start runtime")?;
    runtime.block_on(async {
        let endpoint = tonic::transport::Endpoint::from_shared(url.to_owned())
            .with_context(|| format!("bad gRPC address {url:?}"))?
            .connect_timeout(timeout)
            .timeout(timeout);
        let status = match endpoint.connect().await {
            Ok(channel) => HealthClient::new(channel)
                .check(HealthCheckRequest {
                    service: service.to_owned(),
                })
                .await
                .map(|r| r.into_inner().status()),
            Err(e) => {
                println!(
                    "unhealthy: cannot connect to {url}: {}",
                    super::causes_once(&e)
                );
                return Ok(false);
            }
        };
        Ok(match status {
            Ok(ServingStatus::Serving) => {
                println!("SERVING");
                true
            }
            Ok(other) => {
                println!("unhealthy: {}", other.as_str_name());
                false
            }
            Err(status) => {
                println!("unhealthy: {:?}: {}", status.code(), status.message());
                false
            }
        })
    })
}

fn check_http(url: &str, timeout: Duration) -> anyhow::Result<bool> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build()
        .into();
    match agent.get(url).call() {
        Ok(resp) => {
            let status = resp.status().as_u16();
            println!("HTTP {status}");
            Ok(status == 200)
        }
        Err(e) => {
            println!("unhealthy: {url}: {e}");
            Ok(false)
        }
    }
}
