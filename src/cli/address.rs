//! Server addresses, read the same way by every subcommand that talks to a
//! server (`trace --server`, `load --url`, `health --grpc`).

const FORMS: &str = "give HOST:PORT or http://HOST:PORT";

/// `HOST:PORT`, or a URL `http://HOST[:PORT]` or `https://HOST[:PORT]` (a
/// trailing `/` allowed): the URL to connect to, with `http://` added to a
/// bare address. A clap value parser, so that a bad address is a usage
/// error naming its flag before anything starts.
pub fn server_url(text: &str) -> Result<String, String> {
    let bare = !text.contains("://");
    let url = if bare {
        format!("http://{text}")
    } else {
        text.to_owned()
    };
    let uri: ureq::http::Uri = url.parse().map_err(|e| format!("{e}: {FORMS}"))?;
    let scheme = uri.scheme_str().unwrap_or_default();
    if !matches!(scheme, "http" | "https") {
        return Err(format!("the scheme is not http or https: {FORMS}"));
    }
    let authority = match uri.authority() {
        Some(a) if !a.host().is_empty() => a,
        _ => return Err(format!("no host: {FORMS}")),
    };
    if authority.as_str().contains('@') {
        return Err(format!("credentials do not go in the address: {FORMS}"));
    }
    // A bare name has no scheme to imply a port.
    if bare && authority.port().is_none() {
        return Err(format!("no port: {FORMS}"));
    }
    // Every route (HTTP) and method (gRPC) has its own path: one given here
    // would be dropped or doubled.
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(format!("a server address has no path or query: {FORMS}"));
    }
    Ok(format!("{scheme}://{authority}"))
}

#[cfg(test)]
mod tests {
    use super::server_url;

    #[test]
    fn bare_addresses_and_urls() {
        for (text, url) in [
            ("127.0.0.1:50051", "http://127.0.0.1:50051"),
            ("localhost:8080", "http://localhost:8080"),
            ("[::1]:50051", "http://[::1]:50051"),
            ("http://127.0.0.1:50051", "http://127.0.0.1:50051"),
            ("http://127.0.0.1:50051/", "http://127.0.0.1:50051"),
            ("https://bspq.example:443", "https://bspq.example:443"),
            ("http://bspq.example", "http://bspq.example"),
        ] {
            assert_eq!(server_url(text).as_deref(), Ok(url), "{text}");
        }
        for text in [
            "",
            "127.0.0.1",
            "ftp://127.0.0.1:21",
            "http://",
            "http://127.0.0.1:8080/v1",
            "http://127.0.0.1:8080?x=1",
            "http://user:pw@127.0.0.1:8080",
            "127.0.0.1:port",
            "not an address",
        ] {
            let err = server_url(text).expect_err(text);
            assert!(err.contains("HOST:PORT"), "{text}: {err}");
        }
    }
}
