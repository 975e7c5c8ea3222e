//! `POST /v1/worlds/{name}/floor`: a floor grid, streamed as NDJSON (a
//! header line, then one line per band of rows with the progress so far).
//! The grid is checked before the answer starts, so a bad request gets an
//! error status; the bands are made on the blocking pool, one band's
//! traces counted against the server's in-flight budget until the end. A
//! reader that goes away stops the work (no band is made after it).

use super::{body_bytes, ApiError, HttpState, WorldName, TRANSPORT};
use crate::query::floor::FloorRequest;
use crate::service::ServiceError;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use tokio_stream::wrappers::ReceiverStream;

/// Bands made ahead of a slow reader.
const BANDS_AHEAD: usize = 2;

pub(super) async fn post_floor(
    State(state): State<HttpState>,
    WorldName(name): WorldName,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body_bytes(body, state.service.limits.max_body_bytes)?;
    let request: FloorRequest = serde_json::from_slice(&body)
        .map_err(|e| ServiceError::Malformed(format!("invalid floor request: {e}")))?;
    let job = state.service.floor_job(&name, &request)?;
    let admitted = state.service.admission.admit(job.held_traces())?;
    state
        .metrics
        .count_request(&job.version.name, "floor", TRANSPORT);
    // Cells count as queries as their bands are made.
    let cells = state
        .metrics
        .queries
        .with_label_values(&[&job.version.name, "floor", TRANSPORT]);
    let (sender, receiver) =
        tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(BANDS_AHEAD);
    tokio::task::spawn_blocking(move || {
        let _admitted = admitted;
        let result = job.run(|line, count| {
            cells.inc_by(count as u64);
            sender.blocking_send(Ok(line)).is_ok()
        });
        if let Err(e) = result {
            // The status is sent: the error ends the stream as its last line.
            let _ = sender.blocking_send(Ok(format!("{}\n", e.to_json()).into_bytes()));
        }
    });
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(ReceiverStream::new(receiver)),
    )
        .into_response())
}
