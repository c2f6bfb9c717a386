//! One error model: each provider answer of the table in `docs/outcomes.md` ("Provider answers"),
//! served by a canned server on loopback, ends a run the same way on the three transports
//! (OpenAI-compatible chat completions, the OpenAI Responses API, the Anthropic Messages API),
//! on each call path the answer applies to.

use std::time::Duration;

use loopbound::transport::{BoxTransport, TransportErrorKind};
use loopbound::{RunError, RunErrorKind, Status};
use loopbound_anthropic::AnthropicTransport;
use loopbound_openai::{OpenAiTransport, ResponsesTransport};
use loopbound_testkit::Composition;
use loopbound_testkit::canned::{Answer, Canned, event_stream, json, response};
use loopbound_testkit::scenarios::{Scenario, run};

/// The three transports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    Chat,
    Responses,
    Messages,
}

const APIS: [Api; 3] = [Api::Chat, Api::Responses, Api::Messages];

impl Api {
    /// A transport to `base` whose requests time out after one second.
    fn transport(self, base: &str) -> BoxTransport {
        let timeout = Duration::from_secs(1);
        match self {
            Self::Chat => BoxTransport::new(
                OpenAiTransport::new(loopbound_openai::Config::new(base, "m").unwrap().with_timeout(timeout))
                    .unwrap(),
            ),
            Self::Responses => BoxTransport::new(
                ResponsesTransport::new(
                    loopbound_openai::Config::new(base, "m").unwrap().with_timeout(timeout),
                )
                .unwrap(),
            ),
            Self::Messages => BoxTransport::new(
                AnthropicTransport::new(
                    loopbound_anthropic::Config::new(base, "m").unwrap().with_timeout(timeout),
                )
                .unwrap(),
            ),
        }
    }

    /// The path below the base URL the transport posts to.
    fn path(self) -> &'static str {
        match self {
            Self::Chat => "chat/completions",
            Self::Responses => "responses",
            Self::Messages => "messages",
        }
    }

    /// A server failure inside a stream, in the API's own words.
    fn failure_event(self) -> &'static str {
        match self {
            Self::Chat => LLAMA_FAILURE,
            Self::Responses => {
                "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n"
            }
            Self::Messages => {
                "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"boom\"}}\n\n"
            }
        }
    }

    /// A refused request inside a stream, in the API's own words.
    fn refusal_event(self) -> &'static str {
        match self {
            Self::Chat => {
                "data: {\"error\":{\"code\":400,\"message\":\"bad\",\"type\":\"invalid_request_error\"}}\n\n"
            }
            Self::Responses => {
                "event: error\ndata: {\"type\":\"error\",\"code\":\"invalid_prompt\",\"message\":\"bad\"}\n\n"
            }
            Self::Messages => {
                "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad\"}}\n\n"
            }
        }
    }

    /// The start of a stream, which the connection's close then cuts before its end event.
    fn stream_start(self) -> &'static str {
        match self {
            Self::Chat => "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
            Self::Responses => "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n",
            Self::Messages => {
                "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"Hi\"}}\n\n"
            }
        }
    }

    /// How the transport words the provider's error `type` (the Messages transport names it).
    fn reported(self, kind: &str, message: &str) -> String {
        match self {
            Self::Messages => format!("the provider reported an error ({kind}): {message}"),
            Self::Chat | Self::Responses => format!("the provider reported an error: {message}"),
        }
    }
}

/// llama.cpp's failed generation: an OpenAI-style error object, which it sends in a stream on
/// whichever API it serves.
const LLAMA_FAILURE: &str =
    "data: {\"error\":{\"code\":500,\"message\":\"boom\",\"type\":\"server_error\"}}\n\n";

/// The error body of every failure status below.
const ERROR_BODY: &str = r#"{"type":"error","error":{"type":"x","message":"nope"}}"#;

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ends {
    /// With the status `ProviderUnavailable`, its detail starting with this message (a client
    /// failure's own words follow it).
    Unavailable(String),
    /// With a run error of this kind, from a transport error of this kind, saying this.
    Error(RunErrorKind, TransportErrorKind, String),
}

/// Runs the complete review over `api` against a server giving `answer`, and says how it ended.
async fn ends(api: Api, answer: Answer, streaming: bool) -> (Ends, String) {
    let server = Canned::start(vec![answer]).await;
    let base = server.base_url();
    let live = run(Scenario::Complete, Composition::Harness, streaming, api.transport(&base)).await;
    let ended = match live.result {
        Ok(outcome) => {
            assert_eq!(outcome.status(), Status::ProviderUnavailable, "{api:?} streaming={streaming}");
            Ends::Unavailable(outcome.detail().unwrap_or_default().to_owned())
        }
        Err(RunError::Provider(error)) => {
            let kind = RunError::Provider(error.clone()).kind();
            Ends::Error(kind, error.kind(), error.to_string())
        }
        Err(other) => panic!("{api:?} streaming={streaming}: an unexpected error {other:?}"),
    };
    assert_eq!(server.requests().len(), 1, "one call, one request, no retry: {api:?}");
    (ended, base)
}

/// Checks that `ended` is `expected`: the same, or for an unavailable provider the same message
/// followed by the client's words.
fn check(ended: &Ends, expected: &Ends, context: &str) {
    match (ended, expected) {
        (Ends::Unavailable(detail), Ends::Unavailable(message)) => {
            let head = detail.strip_prefix(message.as_str());
            assert!(
                matches!(head, Some(rest) if rest.is_empty() || rest.starts_with(": ")),
                "{context}: {detail}"
            );
        }
        _ => assert_eq!(ended, expected, "{context}"),
    }
}

fn unavailable(message: &str) -> Ends {
    Ends::Unavailable(message.to_owned())
}

fn provider(kind: TransportErrorKind, message: String) -> Ends {
    let run_kind = if kind == TransportErrorKind::Authentication {
        RunErrorKind::ProviderAuthentication
    } else {
        RunErrorKind::Provider
    };
    Ends::Error(run_kind, kind, message)
}

#[tokio::test]
async fn every_http_status_ends_a_run_the_same_way_on_every_transport_and_path() {
    use TransportErrorKind::{Authentication, Other};
    let rows: [(u16, &str, Ends); 13] = [
        (400, "Bad Request", provider(Other, "provider error: HTTP 400: nope".to_owned())),
        (
            401,
            "Unauthorized",
            provider(Authentication, "provider refused authentication: HTTP 401: nope".to_owned()),
        ),
        (
            403,
            "Forbidden",
            provider(Authentication, "provider refused authentication: HTTP 403: nope".to_owned()),
        ),
        // The 404's message names the URL requested: filled in below, per transport.
        (404, "Not Found", provider(Other, String::new())),
        (408, "Request Timeout", unavailable("HTTP 408: nope")),
        (409, "Conflict", provider(Other, "provider error: HTTP 409: nope".to_owned())),
        (413, "Payload Too Large", provider(Other, "provider error: HTTP 413: nope".to_owned())),
        (422, "Unprocessable Content", provider(Other, "provider error: HTTP 422: nope".to_owned())),
        (429, "Too Many Requests", unavailable("HTTP 429 (rate limited; retry after 3 s): nope")),
        (500, "Internal Server Error", unavailable("HTTP 500: nope")),
        (502, "Bad Gateway", unavailable("HTTP 502: nope")),
        (503, "Service Unavailable", unavailable("HTTP 503: nope")),
        (529, "Overloaded", unavailable("HTTP 529: nope")),
    ];
    for (status, reason, expected) in rows {
        for api in APIS {
            for streaming in [false, true] {
                let answer = Answer::Bytes(response(
                    &format!("{status} {reason}"),
                    &[("Content-Type", "application/json"), ("Retry-After", "3")],
                    ERROR_BODY.as_bytes(),
                ));
                let (ended, base) = ends(api, answer, streaming).await;
                let expected = if status == 404 {
                    provider(Other, format!("provider error: HTTP 404 at {base}/{}: nope", api.path()))
                } else {
                    expected.clone()
                };
                check(&ended, &expected, &format!("HTTP {status} {api:?} streaming={streaming}"));
            }
        }
    }
}

#[tokio::test]
async fn errors_inside_a_stream_end_a_run_the_same_way_on_every_transport() {
    for api in APIS {
        let rows = [
            ("a server failure in the API's words", api.failure_event(), {
                let kind = if api == Api::Messages { "overloaded_error" } else { "server_error" };
                unavailable(&api.reported(kind, "boom"))
            }),
            (
                "llama.cpp's failed generation",
                LLAMA_FAILURE,
                unavailable(&api.reported("server_error", "boom")),
            ),
            ("a refused request in the API's words", api.refusal_event(), {
                let kind = if api == Api::Messages { "invalid_request_error" } else { "invalid_prompt" };
                provider(TransportErrorKind::Other, format!("provider error: {}", api.reported(kind, "bad")))
            }),
        ];
        for (row, events, expected) in rows {
            let (ended, _) =
                ends(api, Answer::Bytes(event_stream(&format!("{}{events}", api.stream_start()))), true)
                    .await;
            check(&ended, &expected, &format!("{row} {api:?}"));
        }
    }
}

#[tokio::test]
async fn malformed_and_cut_replies_end_a_run_as_a_provider_error_on_every_transport() {
    use TransportErrorKind::Malformed;
    for api in APIS {
        let not_a_reply = match api {
            Api::Chat => {
                "malformed provider response: the reply is not a chat completion: expected value at line 1 column 1"
            }
            Api::Responses => {
                "malformed provider response: the reply is not a Responses API response: expected value at line 1 column 1"
            }
            Api::Messages => {
                "malformed provider response: the reply is not a Messages API reply: expected value at line 1 column 1"
            }
        };
        let (ended, _) = ends(api, Answer::Bytes(json("<html>oops</html>")), false).await;
        check(&ended, &provider(Malformed, not_a_reply.to_owned()), &format!("a malformed body {api:?}"));

        let cut = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{\"choi"
            .to_vec();
        let (ended, _) = ends(api, Answer::Bytes(cut), false).await;
        let expected =
            provider(Malformed, "malformed provider response: the response body was cut off".to_owned());
        check(&ended, &expected, &format!("a body cut short {api:?}"));

        let (ended, _) = ends(api, Answer::Bytes(event_stream(api.stream_start())), true).await;
        let end = match api {
            Api::Chat => "data: [DONE]",
            Api::Responses => "response.completed",
            Api::Messages => "message_stop",
        };
        let expected = provider(
            Malformed,
            format!(
                "malformed provider response: the stream ended before {end}; the reply may be incomplete"
            ),
        );
        check(&ended, &expected, &format!("a stream cut short {api:?}"));
    }
}

#[tokio::test]
async fn a_cut_connection_and_a_timeout_leave_the_provider_unavailable_on_every_transport_and_path() {
    for api in APIS {
        for streaming in [false, true] {
            let context = format!("{api:?} streaming={streaming}");
            let (ended, _) = ends(api, Answer::Bytes(Vec::new()), streaming).await;
            check(
                &ended,
                &unavailable("the request failed"),
                &format!("a connection closed unanswered {context}"),
            );
            let (ended, _) = ends(api, Answer::ThenHang(Vec::new()), streaming).await;
            check(&ended, &unavailable("the request timed out"), &format!("a silent server {context}"));
        }
        // A reply that stops half-way and stays silent until the timeout.
        let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{\"choi"
            .to_vec();
        let (ended, _) = ends(api, Answer::ThenHang(head), false).await;
        check(&ended, &unavailable("the response timed out"), &format!("a body stalled {api:?}"));
        let (ended, _) = ends(api, Answer::ThenHang(event_stream(api.stream_start())), true).await;
        check(&ended, &unavailable("the response timed out"), &format!("a stream stalled {api:?}"));
    }
}
