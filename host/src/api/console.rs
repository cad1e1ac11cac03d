//! The web console at `/ui`: static files compiled into the binary (`host/console/`), served
//! with a strict content security policy. The console uses only the public HTTP API, from the
//! browser, with the tab's key; serving it needs no key, as it holds no one's data.
//!
//! `GET /` sends a browser (one that accepts `text/html`) to `/ui`; any other client gets the
//! usual 404, so scripts probing `/` see what they saw before.

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use wasmrpc_proto::Code;

use super::error::ApiError;
use super::routes::Routes;

/// Every file of the console: its name under `/ui/`, its media type and its bytes.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../../console/index.html"),
    ),
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("../../console/console.css"),
    ),
    ("main.js", JS, include_str!("../../console/main.js")),
    ("api.js", JS, include_str!("../../console/api.js")),
    ("dom.js", JS, include_str!("../../console/dom.js")),
    ("methods.js", JS, include_str!("../../console/methods.js")),
    ("tryit.js", JS, include_str!("../../console/tryit.js")),
    ("tensors.js", JS, include_str!("../../console/tensors.js")),
    ("result.js", JS, include_str!("../../console/result.js")),
    ("charts.js", JS, include_str!("../../console/charts.js")),
    ("upload.js", JS, include_str!("../../console/upload.js")),
    ("activity.js", JS, include_str!("../../console/activity.js")),
    ("cluster.js", JS, include_str!("../../console/cluster.js")),
    ("tenants.js", JS, include_str!("../../console/tenants.js")),
];

const JS: &str = "text/javascript; charset=utf-8";

/// Scripts, styles and requests from this server only; no inline script, no framing (so no
/// click-jacking of the delete button), no plug-ins. `data:` images are the empty favicon.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// The console's routes: `/ui`, `/ui/{asset}` and the browser's `/`.
pub fn routes() -> Routes {
    Routes::new()
        .get("/", root)
        .get("/ui", index)
        .get("/ui/{asset}", asset)
}

async fn root(headers: HeaderMap) -> Response {
    let browser = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"));
    if browser {
        Redirect::to("/ui").into_response()
    } else {
        ApiError::new(
            Code::NotFound,
            "no route for GET /; the web console is at /ui",
        )
        .into_response()
    }
}

async fn index() -> Response {
    serve("index.html").unwrap_or_else(|e| e.into_response())
}

async fn asset(Path(name): Path<String>) -> Response {
    serve(&name).unwrap_or_else(|e| e.into_response())
}

fn serve(name: &str) -> Result<Response, ApiError> {
    let (_, media_type, body) = ASSETS
        .iter()
        .find(|(asset, _, _)| *asset == name)
        .ok_or_else(|| {
            ApiError::new(Code::NotFound, format!("the console has no file `{name}`"))
        })?;
    let mut response = (StatusCode::OK, *body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // The files change with the binary: revalidate rather than keep an old console.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file the page loads (a `src`/`href` under /ui/, an `import … from "./x.js"`) is
    /// served, so a file added to host/console/ but not to [`ASSETS`] fails here, not in a browser.
    #[test]
    fn every_file_the_console_loads_is_served() {
        let referenced = ASSETS.iter().flat_map(|(_, _, body)| {
            body.split(['"', '\''])
                .filter_map(|piece| {
                    piece
                        .strip_prefix("/ui/")
                        .or_else(|| piece.strip_prefix("./"))
                })
                .filter(|name| name.ends_with(".js") || name.ends_with(".css"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        });
        for name in referenced {
            assert!(
                serve(&name).is_ok(),
                "the console loads `{name}`, which is not served"
            );
        }
        let on_disk = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/console"))
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| e.file_name().into_string().unwrap())
            .filter(|n| !n.starts_with('.') && !n.ends_with(".md"));
        for name in on_disk {
            assert!(serve(&name).is_ok(), "host/console/{name} is not served");
        }
    }

    #[test]
    fn an_unknown_file_is_not_found() {
        assert!(serve("../Cargo.toml").is_err());
        assert!(serve("secret.js").is_err());
    }
}
