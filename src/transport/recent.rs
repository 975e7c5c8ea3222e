//! `GET /v1/worlds/{name}/recent[?kind=K&mask=M&after=SEQ]`: the traces the
//! world answered lately, over any transport, when the server records them
//! (`bspq serve --record-queries N`; see [`crate::recording`]).

use super::http::{ApiError, HttpState, WorldName};
use crate::recording::{Recent, RecentFilter};
use crate::service::ServiceError;
use axum::extract::{RawQuery, State};
use axum::routing::get;
use axum::{Json, Router};

pub fn routes() -> Router<HttpState> {
    Router::new().route("/v1/worlds/{name}/recent", get(recent))
}

async fn recent(
    State(state): State<HttpState>,
    WorldName(name): WorldName,
    RawQuery(raw): RawQuery,
) -> Result<Json<Recent>, ApiError> {
    let filter = filter_from_url(raw.as_deref().unwrap_or("")).map_err(ApiError)?;
    // The world must be serving: its name is checked like any other route's.
    state.service.world(&name)?;
    Ok(Json(state.service.recorder.recent(&name, &filter)))
}

fn filter_from_url(raw: &str) -> Result<RecentFilter, ServiceError> {
    let mut filter = RecentFilter::default();
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        let bad =
            |what: &str| ServiceError::Malformed(format!("`{key}` must be {what}, got {value:?}"));
        match &*key {
            "kind" => match &*value {
                "ray" | "box" | "shape" | "hull" => filter.kind = Some(value.to_string()),
                _ => return Err(bad("ray, box, shape or hull")),
            },
            "mask" => {
                filter.mask =
                    Some(super::http::parse_mask(&value).ok_or_else(|| bad("an integer"))?)
            }
            "after" => filter.after = Some(value.parse().map_err(|_| bad("a sequence number"))?),
            other => {
                return Err(ServiceError::Malformed(format!(
                    "unknown parameter `{other}` (kind, mask, after)"
                )))
            }
        }
    }
    Ok(filter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_from_urls() {
        let f = filter_from_url("kind=box&mask=0x2010001&after=7").expect("parses");
        assert_eq!(f.kind.as_deref(), Some("box"));
        assert_eq!(f.mask, Some(0x2010001));
        assert_eq!(f.after, Some(7));
        for bad in ["kind=cube", "mask=x", "after=-1", "limit=3"] {
            assert!(filter_from_url(bad).is_err(), "{bad}");
        }
    }
}
