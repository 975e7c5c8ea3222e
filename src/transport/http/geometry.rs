//! `GET /v1/worlds/{name}/geometry[?mask=M&model=K&format=json|glb|obj]`:
//! the world's triangles (see [`crate::service::geometry`]). Without
//! `format`, an `Accept` of `model/gltf-binary` or `model/obj` picks the
//! encoding; JSON otherwise.

use super::{parse_mask, run_work, ApiError, HttpState, WorldName, TRANSPORT};
use crate::service::geometry::{GeometryFormat, GeometryRequest};
use crate::service::ServiceError;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use std::collections::HashSet;

pub(super) async fn get_geometry(
    State(state): State<HttpState>,
    WorldName(name): WorldName,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let mut request = request_from_url(raw.as_deref().unwrap_or(""))?;
    if request.format == GeometryFormat::Json {
        request.format = from_accept(&headers).unwrap_or(GeometryFormat::Json);
    }
    let answer = run_work(&state, "geometry", None, move |s| {
        s.geometry(&name, &request)
    })
    .await?;
    state
        .metrics
        .count_request(&answer.world, "geometry", TRANSPORT);
    Ok((
        [(header::CONTENT_TYPE, answer.format.content_type())],
        answer.bytes,
    )
        .into_response())
}

/// The encoding an `Accept` header names, if one of ours.
fn from_accept(headers: &HeaderMap) -> Option<GeometryFormat> {
    let accept = headers.get(header::ACCEPT)?.to_str().ok()?;
    accept
        .split(',')
        .find_map(|kind| match kind.split(';').next().unwrap_or("").trim() {
            "model/gltf-binary" => Some(GeometryFormat::Glb),
            "model/obj" => Some(GeometryFormat::Obj),
            _ => None,
        })
}

fn request_from_url(raw: &str) -> Result<GeometryRequest, ServiceError> {
    let mut request = GeometryRequest::default();
    let mut given = HashSet::new();
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        if !given.insert(key.clone()) {
            return Err(ServiceError::Malformed(format!(
                "parameter `{key}` is given more than once"
            )));
        }
        match &*key {
            "mask" => {
                request.mask = Some(parse_mask(&value).ok_or_else(|| {
                    ServiceError::Malformed(format!("`mask` must be an integer, got {value:?}"))
                })?)
            }
            "model" => {
                request.model = Some(value.parse().map_err(|_| {
                    ServiceError::Malformed(format!(
                        "`model` must be a model number (0: the world), got {value:?}"
                    ))
                })?)
            }
            "format" => {
                request.format = GeometryFormat::parse(&value).ok_or_else(|| {
                    ServiceError::Malformed(format!(
                        "`format` must be json, glb or obj, got {value:?}"
                    ))
                })?
            }
            other => {
                return Err(ServiceError::Malformed(format!(
                    "unknown parameter `{other}`"
                )))
            }
        }
    }
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_urls() {
        let r = request_from_url("mask=0x10000&model=2&format=glb").expect("parses");
        assert_eq!(r.mask, Some(0x10000));
        assert_eq!(r.model, Some(2));
        assert_eq!(r.format, GeometryFormat::Glb);
        assert_eq!(
            request_from_url("").expect("empty"),
            GeometryRequest::default()
        );
        assert!(request_from_url("format=stl").is_err());
        assert!(request_from_url("model=-1").is_err());
        assert!(request_from_url("mask=1&mask=2").is_err());
        assert!(request_from_url("bogus=1").is_err());
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            "text/html, model/obj;q=0.9".parse().expect("header"),
        );
        assert_eq!(from_accept(&headers), Some(GeometryFormat::Obj));
    }
}
