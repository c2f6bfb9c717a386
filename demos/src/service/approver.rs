//! Who commands a run: the one place where the service learns the person behind a decision, a
//! closing, a cancel or a resume, and where a page of another site is turned away.
//!
//! The approver comes from one source, chosen at start-up:
//!
//! - **a trusted proxy** (the default): a proxy in front of the service authenticates the person
//!   (single sign-on, mutual TLS, an API gateway) and sets their name in one header
//!   (`--approver-header`, `x-approver` by default). The service believes that header, so it must
//!   be reachable only through that proxy, and the proxy must replace any such header a client
//!   sent;
//! - **a development token**: `--approver-token` (or `LOOPBOUND_APPROVER_TOKEN`) stands for one
//!   fixed name (`--approver-name`); a request presents it as `Authorization: Bearer …`. The
//!   header above is not read then.
//!
//! # Invariants
//!
//! - A command's approver comes from [`Gate::check`] only, never from a request's body.
//! - A request whose `Origin` header is present and is not one of the service's own origins is
//!   refused ([`Refusal::ForeignOrigin`], 403) before its approver is looked at: a browser page of
//!   another site cannot drive the service with a person's cookies or credentials.
//! - A request without exactly one approver that the journal accepts as a name (1 to 64 bytes, no
//!   control character) is refused (401), and so is a token that differs from the configured one;
//!   the token is compared in a time that does not depend on where it differs.
//! - Neither the token nor a refused header's value appears in an answer or in `Debug`.

use std::fmt;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, ORIGIN, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use loopbound::journal::valid_actor;

use super::api::ApiError;

/// The header a trusted proxy sets unless `--approver-header` names another.
pub const DEFAULT_HEADER: &str = "x-approver";
/// The fewest bytes a development token may have.
pub const MIN_TOKEN_LEN: usize = 16;

/// An authenticated approver's name, as the journal records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Approver(String);

impl Approver {
    /// The name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.0
    }
}

/// Where the approver comes from.
#[derive(Clone)]
enum Source {
    Header(HeaderName),
    Token { token: String, name: String },
}

/// The check every command passes: its origin, then its approver.
#[derive(Clone)]
pub struct Gate {
    source: Source,
    origins: Vec<String>,
}

impl fmt::Debug for Gate {
    /// Without the token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &self.source {
            Source::Header(header) => format!("header {header}"),
            Source::Token { name, .. } => format!("token for {name}"),
        };
        f.debug_struct("Gate").field("source", &source).field("origins", &self.origins).finish()
    }
}

/// Why a gate could not be configured.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GateError {
    /// The approver header's name is not a valid header name.
    Header,
    /// The development token is shorter than [`MIN_TOKEN_LEN`] bytes, or not visible ASCII.
    Token,
    /// The name a token stands for is not a name the journal accepts.
    Name,
    /// An origin is not `http://host[:port]` or `https://host[:port]`.
    Origin(String),
}

impl fmt::Display for GateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Header => f.write_str("--approver-header is not a valid header name"),
            Self::Token => {
                write!(f, "--approver-token needs at least {MIN_TOKEN_LEN} visible ASCII characters")
            }
            Self::Name => f.write_str("--approver-name needs 1 to 64 bytes without control characters"),
            Self::Origin(origin) => write!(f, "the origin {origin:?} is not scheme://host[:port]"),
        }
    }
}

impl std::error::Error for GateError {}

/// Why a command was refused before it reached its run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The request came from a page of another origin (403).
    ForeignOrigin,
    /// No approver was presented (401).
    Missing,
    /// The approver presented is not one (several headers, not a valid name, a wrong token) (401).
    Invalid,
}

impl Refusal {
    /// The answer's code.
    #[must_use]
    pub fn code(self) -> StatusCode {
        match self {
            Self::ForeignOrigin => StatusCode::FORBIDDEN,
            Self::Missing | Self::Invalid => StatusCode::UNAUTHORIZED,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ForeignOrigin => "a page of another origin may not command this service",
            Self::Missing => "this command needs an authenticated approver",
            Self::Invalid => "the approver presented is not valid",
        })
    }
}

impl std::error::Error for Refusal {}

/// `origin` in the form compared: lower case, without a trailing `/`; `None` unless it is
/// `http://host[:port]` or `https://host[:port]`.
fn normalize(origin: &str) -> Option<String> {
    let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"))?;
    let plain = !authority.is_empty()
        && authority
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    plain.then_some(origin)
}

/// Whether `a` and `b` are equal, in a time that depends on their lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |differ, (x, y)| differ | (x ^ y)) == 0
}

/// The one value of header `name`: `None` if absent, [`Refusal::Invalid`] if repeated.
fn single<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Result<Option<&'a HeaderValue>, Refusal> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(value), None) => Ok(Some(value)),
        (Some(_), Some(_)) => Err(Refusal::Invalid),
    }
}

impl Gate {
    /// Approvers named by the header `header`, which a trusted proxy sets; commands accepted from
    /// pages of `origins` only (and from clients that send no `Origin`).
    ///
    /// # Errors
    ///
    /// [`GateError::Header`] or [`GateError::Origin`].
    pub fn proxy(header: &str, origins: &[String]) -> Result<Self, GateError> {
        let header = HeaderName::try_from(header).map_err(|_| GateError::Header)?;
        Self::new(Source::Header(header), origins)
    }

    /// One approver, `name`, who presents `token` as `Authorization: Bearer <token>`.
    ///
    /// # Errors
    ///
    /// [`GateError::Token`], [`GateError::Name`] or [`GateError::Origin`].
    pub fn token(token: &str, name: &str, origins: &[String]) -> Result<Self, GateError> {
        if token.len() < MIN_TOKEN_LEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(GateError::Token);
        }
        if !valid_actor(name) {
            return Err(GateError::Name);
        }
        Self::new(Source::Token { token: token.to_owned(), name: name.to_owned() }, origins)
    }

    fn new(source: Source, origins: &[String]) -> Result<Self, GateError> {
        let origins = origins
            .iter()
            .map(|origin| normalize(origin).ok_or_else(|| GateError::Origin(origin.clone())))
            .collect::<Result<_, _>>()?;
        Ok(Self { source, origins })
    }

    /// The approver of a request with `headers`.
    ///
    /// # Errors
    ///
    /// [`Refusal`]: a foreign origin, or no valid approver.
    pub fn check(&self, headers: &HeaderMap) -> Result<Approver, Refusal> {
        if let Some(origin) = single(headers, &ORIGIN).map_err(|_| Refusal::ForeignOrigin)? {
            let own =
                origin.to_str().ok().and_then(normalize).is_some_and(|origin| self.origins.contains(&origin));
            if !own {
                return Err(Refusal::ForeignOrigin);
            }
        }
        match &self.source {
            Source::Header(header) => {
                let value = single(headers, header)?.ok_or(Refusal::Missing)?;
                let name = value.to_str().map_err(|_| Refusal::Invalid)?.trim();
                if valid_actor(name) { Ok(Approver(name.to_owned())) } else { Err(Refusal::Invalid) }
            }
            Source::Token { token, name } => {
                let value = single(headers, &AUTHORIZATION)?.ok_or(Refusal::Missing)?;
                let presented = value.to_str().ok().and_then(|text| text.strip_prefix("Bearer "));
                match presented {
                    Some(presented) if same(presented.as_bytes(), token.as_bytes()) => {
                        Ok(Approver(name.clone()))
                    }
                    _ => Err(Refusal::Invalid),
                }
            }
        }
    }

    fn refuse(&self, refusal: Refusal) -> Response {
        let kind = if refusal == Refusal::ForeignOrigin { "foreign_origin" } else { "unauthenticated" };
        let mut response = ApiError::new(refusal.code(), kind, refusal.to_string()).into_response();
        if refusal.code() == StatusCode::UNAUTHORIZED && matches!(self.source, Source::Token { .. }) {
            response.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// The middleware of the command routes: passes the request on with its [`Approver`] in its
/// extensions, or answers the [`Refusal`] with the API's JSON error body.
pub async fn require(State(gate): State<Arc<Gate>>, mut request: Request, next: Next) -> Response {
    match gate.check(request.headers()) {
        Ok(approver) => {
            request.extensions_mut().insert(approver);
            next.run(request).await
        }
        Err(refusal) => gate.refuse(refusal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: &str = "http://127.0.0.1:8330";

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            let name = HeaderName::try_from(*name).expect("a header name");
            headers.append(name, HeaderValue::from_str(value).expect("a header value"));
        }
        headers
    }

    fn proxy() -> Gate {
        Gate::proxy(DEFAULT_HEADER, &[OWN.to_owned()]).expect("a gate")
    }

    #[test]
    fn the_proxy_header_names_the_approver_once_and_validly() {
        let gate = proxy();
        assert_eq!(gate.check(&headers(&[("x-approver", "alice")])), Ok(Approver("alice".to_owned())));
        assert_eq!(gate.check(&headers(&[])), Err(Refusal::Missing));
        assert_eq!(gate.check(&headers(&[("x-approver", "a"), ("x-approver", "b")])), Err(Refusal::Invalid));
        assert_eq!(gate.check(&headers(&[("x-approver", "")])), Err(Refusal::Invalid));
        assert_eq!(gate.check(&headers(&[("x-approver", &"a".repeat(65))])), Err(Refusal::Invalid));
        assert_eq!(gate.check(&headers(&[("x-approver", "tab\there")])), Err(Refusal::Invalid));
        let token = headers(&[("authorization", "Bearer 0123456789abcdef")]);
        assert_eq!(gate.check(&token), Err(Refusal::Missing), "a proxy gate reads no token");
    }

    #[test]
    fn a_token_stands_for_its_name_and_the_header_is_not_read() {
        let gate = Gate::token("0123456789abcdef", "dev", &[OWN.to_owned()]).expect("a gate");
        let bearer = headers(&[("authorization", "Bearer 0123456789abcdef")]);
        assert_eq!(gate.check(&bearer), Ok(Approver("dev".to_owned())));
        assert_eq!(gate.check(&headers(&[("x-approver", "alice")])), Err(Refusal::Missing));
        for wrong in ["Bearer 0123456789abcdeg", "Bearer 0123456789abcde", "0123456789abcdef", "Basic x"] {
            assert_eq!(gate.check(&headers(&[("authorization", wrong)])), Err(Refusal::Invalid), "{wrong}");
        }
        assert_eq!(Gate::token("short", "dev", &[]).err(), Some(GateError::Token));
        assert_eq!(Gate::token("0123456789abcdef", "", &[]).err(), Some(GateError::Name));
        assert!(!format!("{gate:?}").contains("0123456789abcdef"), "Debug hides the token");
    }

    #[test]
    fn only_the_services_own_origin_or_none_passes() {
        let gate = proxy();
        let alice = ("x-approver", "alice");
        assert!(gate.check(&headers(&[alice, ("origin", "http://127.0.0.1:8330")])).is_ok());
        assert!(gate.check(&headers(&[alice, ("origin", "HTTP://127.0.0.1:8330/")])).is_ok());
        for foreign in ["http://evil.example", "http://127.0.0.1:8331", "https://127.0.0.1:8330", "null", ""]
        {
            let refused = gate.check(&headers(&[alice, ("origin", foreign)]));
            assert_eq!(refused, Err(Refusal::ForeignOrigin), "{foreign:?}");
        }
        let without = headers(&[("origin", "http://evil.example")]);
        assert_eq!(gate.check(&without), Err(Refusal::ForeignOrigin), "the origin is checked first");
        assert_eq!(
            Gate::proxy(DEFAULT_HEADER, &["http://host/path".to_owned()]).err(),
            Some(GateError::Origin("http://host/path".to_owned()))
        );
        assert_eq!(Gate::proxy("bad header", &[]).err(), Some(GateError::Header));
    }
}
