//! What the load server answers, decided from the conversation of each request alone.
//!
//! A run of the review task sends three requests; the server tells them apart by the number of
//! tool results in the conversation it receives: none asks for `read_ticket(42)`, one for
//! `finish_review(42)`, two or more for the closing text. A run names itself in its user message
//! (`Review ticket 42. run=<id>`, see [`prompt`]), so the server can follow each run without any
//! state of its own deciding the answer.
//!
//! # Invariants
//!
//! - The answer is a pure function of the request: thousands of concurrent runs, retried
//!   requests and runs in any order each get their right script.
//! - A request is refused only for what makes it unanswerable (not JSON, no messages); an absent
//!   or malformed run id only leaves the request unfollowed.
//! - The newest tool result is checked against the text the previous step's tool returns, so a
//!   client that does not feed results back shows up as a mismatch, not as a finished run.

use serde::Deserialize;
use serde_json::Value;

use crate::review::{CLOSING, PROMPT, REVIEW_DONE, TICKET_ID, TICKET_TEXT};

/// What precedes the run id in the user message.
pub const RUN_MARKER: &str = "run=";
/// The longest run id followed, in bytes.
pub const MAX_RUN_ID: usize = 64;

/// The user message of run `run`: the review's request followed by the run id.
#[must_use]
pub fn prompt(run: impl std::fmt::Display) -> String {
    format!("{PROMPT} {RUN_MARKER}{run}")
}

/// One step of the review's script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Call `read_ticket` with 42.
    ReadTicket,
    /// Call `finish_review` with 42.
    FinishReview,
    /// Answer with the closing text.
    Close,
}

impl Step {
    /// The step for a conversation holding `tool_results` tool results.
    #[must_use]
    pub fn after(tool_results: u32) -> Self {
        match tool_results {
            0 => Self::ReadTicket,
            1 => Self::FinishReview,
            _ => Self::Close,
        }
    }

    /// The tool this step calls, if it calls one.
    #[must_use]
    pub fn tool(self) -> Option<&'static str> {
        match self {
            Self::ReadTicket => Some("read_ticket"),
            Self::FinishReview => Some("finish_review"),
            Self::Close => None,
        }
    }

    /// The arguments of the call, as JSON text.
    #[must_use]
    pub fn arguments() -> String {
        format!(r#"{{"input":{TICKET_ID}}}"#)
    }

    /// The closing text, for the last step.
    #[must_use]
    pub fn text(self) -> Option<&'static str> {
        matches!(self, Self::Close).then_some(CLOSING)
    }
}

/// What the server reads from one chat-completions request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatRequest {
    /// The run id of the newest user message that carries one.
    pub run: Option<String>,
    /// How many tool results the conversation holds.
    pub tool_results: u32,
    /// Whether the newest tool result holds the text the previous step's tool returns (true
    /// when there is no tool result).
    pub feedback_ok: bool,
    /// Whether the client asked for a stream.
    pub stream: bool,
    /// Whether the client asked for usage figures in the stream.
    pub include_usage: bool,
    /// The model named by the request.
    pub model: String,
}

impl ChatRequest {
    /// The step this request asks for.
    #[must_use]
    pub fn step(&self) -> Step {
        Step::after(self.tool_results)
    }
}

/// Why a request cannot be answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadRequest {
    /// The body is not a chat-completions request.
    Malformed(String),
    /// The request has no messages.
    NoMessages,
}

impl std::fmt::Display for BadRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Malformed(reason) => write!(f, "the body is not a chat-completions request: {reason}"),
            Self::NoMessages => f.write_str("the request has no messages"),
        }
    }
}

impl std::error::Error for BadRequest {}

#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    model: Option<String>,
    messages: Vec<WireMessage>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Deserialize)]
struct WireMessage {
    role: String,
    #[serde(default)]
    content: Option<Value>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

/// Reads one request body.
///
/// # Errors
///
/// [`BadRequest`] for a body that is not a chat-completions request or has no messages.
pub fn parse(body: &[u8]) -> Result<ChatRequest, BadRequest> {
    let body: Body =
        serde_json::from_slice(body).map_err(|error| BadRequest::Malformed(error.to_string()))?;
    if body.messages.is_empty() {
        return Err(BadRequest::NoMessages);
    }
    let mut run = None;
    let mut tool_results = 0_u32;
    let mut last_result = None;
    for message in &body.messages {
        match message.role.as_str() {
            "user" => {
                if let Some(id) = message.content.as_ref().and_then(|content| run_id(&text_of(content))) {
                    run = Some(id);
                }
            }
            "tool" => {
                tool_results = tool_results.saturating_add(1);
                last_result = message.content.as_ref().map(text_of);
            }
            _ => {}
        }
    }
    let feedback_ok = match (tool_results, last_result) {
        (0, _) => true,
        (1, Some(text)) => text.contains(TICKET_TEXT),
        (_, Some(text)) => text.contains(REVIEW_DONE),
        (_, None) => false,
    };
    let stream = body.stream.unwrap_or(false);
    Ok(ChatRequest {
        run,
        tool_results,
        feedback_ok,
        stream,
        include_usage: stream
            && body.stream_options.and_then(|options| options.include_usage).unwrap_or(false),
        model: body.model.unwrap_or_default(),
    })
}

/// The text of a message's content: a string, or the `text` of each part of a list of parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The run id after the last [`RUN_MARKER`] in `text`: 1 to [`MAX_RUN_ID`] ASCII letters,
/// digits, `-` or `_`.
fn run_id(text: &str) -> Option<String> {
    let start = text.rfind(RUN_MARKER)? + RUN_MARKER.len();
    let id: &str =
        text[start..].split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')).next()?;
    (!id.is_empty() && id.len() <= MAX_RUN_ID).then(|| id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(messages: &str, extra: &str) -> Result<ChatRequest, BadRequest> {
        parse(format!(r#"{{"model":"m","messages":[{messages}]{extra}}}"#).as_bytes())
    }

    const USER: &str =
        r#"{"role":"system","content":"Be brief."},{"role":"user","content":"Review ticket 42. run=17"}"#;

    #[test]
    fn the_step_follows_the_number_of_tool_results() {
        let first = request(USER, "").unwrap();
        assert_eq!(
            (first.run.as_deref(), first.tool_results, first.step()),
            (Some("17"), 0, Step::ReadTicket)
        );
        assert!(first.feedback_ok);
        let read = format!(
            r#"{USER},{{"role":"assistant","tool_calls":[]}},{{"role":"tool","tool_call_id":"a","content":"{TICKET_TEXT}"}}"#
        );
        let second = request(&read, "").unwrap();
        assert_eq!((second.tool_results, second.step(), second.feedback_ok), (1, Step::FinishReview, true));
        let done = format!(r#"{read},{{"role":"tool","tool_call_id":"b","content":"{REVIEW_DONE}"}}"#);
        let third = request(&done, "").unwrap();
        assert_eq!((third.tool_results, third.step(), third.feedback_ok), (2, Step::Close, true));
        assert_eq!(Step::Close.text(), Some("Review finished."));
        assert_eq!(Step::ReadTicket.tool(), Some("read_ticket"));
        assert_eq!(Step::arguments(), r#"{"input":42}"#);
    }

    #[test]
    fn a_result_that_is_not_the_previous_tools_text_is_a_mismatch() {
        let wrong = format!(r#"{USER},{{"role":"tool","tool_call_id":"a","content":"{REVIEW_DONE}"}}"#);
        assert!(!request(&wrong, "").unwrap().feedback_ok);
        let parts = format!(
            r#"{USER},{{"role":"tool","tool_call_id":"a","content":[{{"type":"text","text":"{TICKET_TEXT}"}}]}}"#
        );
        assert!(request(&parts, "").unwrap().feedback_ok, "content given as parts is read too");
        let empty = format!(r#"{USER},{{"role":"tool","tool_call_id":"a"}}"#);
        assert!(!request(&empty, "").unwrap().feedback_ok);
    }

    #[test]
    fn streams_and_their_usage_are_read_from_the_request() {
        let plain = request(USER, "").unwrap();
        assert_eq!((plain.stream, plain.include_usage, plain.model.as_str()), (false, false, "m"));
        let stream = request(USER, r#","stream":true"#).unwrap();
        assert_eq!((stream.stream, stream.include_usage), (true, false));
        let usage = request(USER, r#","stream":true,"stream_options":{"include_usage":true}"#).unwrap();
        assert_eq!((usage.stream, usage.include_usage), (true, true));
        let not_streamed = request(USER, r#","stream_options":{"include_usage":true}"#).unwrap();
        assert!(!not_streamed.include_usage, "usage in a stream is asked only with a stream");
    }

    #[test]
    fn run_ids_are_the_last_marker_of_the_newest_user_message_and_bounded() {
        let two = r#"{"role":"user","content":"run=a"},{"role":"user","content":"again run=b-2_c. thanks"}"#;
        assert_eq!(request(two, "").unwrap().run.as_deref(), Some("b-2_c"));
        assert_eq!(request(r#"{"role":"user","content":"Review ticket 42."}"#, "").unwrap().run, None);
        assert_eq!(request(r#"{"role":"user","content":"run= 7"}"#, "").unwrap().run, None);
        let long = format!(r#"{{"role":"user","content":"run={}"}}"#, "x".repeat(MAX_RUN_ID + 1));
        assert_eq!(request(&long, "").unwrap().run, None);
        let exact = format!(r#"{{"role":"user","content":"run={}"}}"#, "x".repeat(MAX_RUN_ID));
        assert_eq!(request(&exact, "").unwrap().run.map(|id| id.len()), Some(MAX_RUN_ID));
        assert_eq!(prompt(9), "Review ticket 42. run=9");
    }

    #[test]
    fn unanswerable_bodies_are_refused_with_their_reason() {
        assert_eq!(request("", ""), Err(BadRequest::NoMessages));
        assert!(matches!(parse(b"not json"), Err(BadRequest::Malformed(_))));
        assert!(matches!(parse(br#"{"messages":"no"}"#), Err(BadRequest::Malformed(_))));
        assert_eq!(BadRequest::NoMessages.to_string(), "the request has no messages");
    }
}
