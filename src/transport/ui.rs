//! The debugging page: `/` (and `/ui/`) serves a page that shows a world's
//! brush geometry, its inline models and a scene, runs traces and draws
//! their answers, and shows the recent traces the server answered. Its
//! files are compiled into the binary (no build step, nothing fetched at
//! run time) and it calls only this server's public routes (never an admin
//! route: the page has no token).

use super::http::{ApiError, HttpState};
use crate::service::ServiceError;
use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

/// The page's files: name, content type, bytes.
const ASSETS: [(&str, &str, &[u8]); 4] = [
    (
        "index.html",
        "text/html; charset=utf-8",
        include_bytes!("ui/index.html"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("ui/app.js"),
    ),
    (
        "gl.js",
        "text/javascript; charset=utf-8",
        include_bytes!("ui/gl.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_bytes!("ui/style.css"),
    ),
];

/// The browser may load nothing but these files and may connect to nothing
/// but this server.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// The page's routes.
pub fn routes() -> Router<HttpState> {
    Router::new()
        .route("/", get(|| async { asset("index.html") }))
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(|| async { asset("index.html") }))
        .route(
            "/ui/{file}",
            get(|Path(file): Path<String>| async move { asset(&file) }),
        )
}

fn asset(name: &str) -> Response {
    let Some((_, content_type, bytes)) = ASSETS.iter().find(|(n, _, _)| *n == name) else {
        return ApiError(ServiceError::NoSuchRoute(format!("/ui/{name}"))).into_response();
    };
    let mut response = (StatusCode::OK, *bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    // A new binary may bring new files under the same names.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_small_and_complete() {
        let total: usize = ASSETS.iter().map(|(_, _, b)| b.len()).sum();
        assert!(total < 200_000, "the page's files take {total} bytes");
        // Every file the page names is served.
        let index = String::from_utf8_lossy(ASSETS[0].2);
        for name in index.split("/ui/").skip(1) {
            let name = name.split('"').next().unwrap_or("");
            assert!(ASSETS.iter().any(|(n, _, _)| *n == name), "{name}");
        }
    }
}
