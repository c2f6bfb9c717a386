//! The operator's page: one HTML file, one style sheet and one script, shipped in the binary
//! (no build step, no framework), served at `/`, `/page.css` and `/page.js`.
//!
//! The page reads what the API gives anyone (`GET /runs`, `GET /runs/{id}`, its event stream,
//! `GET /tenants`) and sends the five commands of a run through the same routes as curl does,
//! so the [`approver`](super::approver) seam decides who commands, never the page.
//!
//! # Invariants
//!
//! - Every answer here carries a Content-Security-Policy that allows scripts, styles and
//!   connections from the service's own origin only: no inline script, no inline style
//!   attribute, no plugin, no frame around the page, no form sent anywhere.
//! - The script writes what a model, a tool, an argument or a label wrote into the page as text
//!   only (`textContent`, never markup); a test checks that the script holds no API that parses
//!   markup.
//! - The page never names the approver: with a development token, it presents the token the
//!   link it was opened with carried (`#token=…`, which never reaches a server); behind a proxy,
//!   the proxy adds the approver.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

/// The page's policy: everything from the service's own origin, nothing inline, nothing framed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const HTML: &str = include_str!("page/index.html");
const CSS: &str = include_str!("page/page.css");
const SCRIPT: &str = include_str!("page/page.js");

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// `GET /`: the page.
pub async fn index() -> Response {
    asset(HTML, "text/html; charset=utf-8")
}

/// `GET /page.css`.
pub async fn style() -> Response {
    asset(CSS, "text/css; charset=utf-8")
}

/// `GET /page.js`.
pub async fn script() -> Response {
    asset(SCRIPT, "text/javascript; charset=utf-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_never_parses_markup_and_the_page_has_no_inline_code() {
        for api in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "setAttribute(\"on",
            "srcdoc",
        ] {
            assert!(!SCRIPT.contains(api), "page.js uses {api}");
        }
        assert!(!HTML.contains("<script>") && !HTML.contains("style=") && !HTML.contains("javascript:"));
        // No event handler attribute (` onclick=`, ` onload=`, …).
        let handlers = HTML.match_indices(" on").filter(|(at, _)| {
            let rest = &HTML[at + 3..];
            let name = rest.bytes().take_while(u8::is_ascii_lowercase).count();
            name > 0 && rest.as_bytes().get(name) == Some(&b'=')
        });
        assert_eq!(handlers.count(), 0, "an inline handler in index.html");
        assert_eq!(HTML.matches("<script").count(), 1, "one script, page.js");
        assert!(HTML.contains(r#"<script src="/page.js" defer></script>"#));
    }
}
