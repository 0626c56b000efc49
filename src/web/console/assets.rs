//! The console's page, script and style sheet, compiled into the binary,
//! and the headers every console answer carries: a Content-Security-Policy
//! that lets the page load and fetch from this origin only, run no inline
//! script and be framed by nobody.

use hyper::header::{
    HeaderMap, HeaderValue, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use hyper::{Method, Response, StatusCode};

use super::{error, full, method_is, Body};

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/console.js");
const OVERVIEW: &str = include_str!("assets/overview.js");
const TREE_FILTER: &str = include_str!("assets/tree_filter.js");
const REPLAYS: &str = include_str!("assets/replays.js");
const STYLE: &str = include_str!("assets/console.css");

const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// The asset at `path`, or 404.
pub fn answer(method: &Method, path: &str) -> Response<Body> {
    let (body, content_type) = match path {
        "/" => (INDEX, "text/html; charset=utf-8"),
        "/console/console.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "/console/overview.js" => (OVERVIEW, "text/javascript; charset=utf-8"),
        "/console/tree_filter.js" => (TREE_FILTER, "text/javascript; charset=utf-8"),
        "/console/replays.js" => (REPLAYS, "text/javascript; charset=utf-8"),
        "/console/console.css" => (STYLE, "text/css; charset=utf-8"),
        _ => return error(StatusCode::NOT_FOUND, "no such page"),
    };
    if !method_is(method, &Method::GET) {
        return error(StatusCode::METHOD_NOT_ALLOWED, "use GET");
    }
    let mut answer = Response::new(full(body));
    let headers = answer.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The assets change only with the binary; a restart may bring new ones.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    harden(headers);
    answer
}

/// The security headers of every console answer.
pub fn harden(headers: &mut HeaderMap) {
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
}
