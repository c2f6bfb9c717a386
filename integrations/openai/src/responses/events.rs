//! What each streamed Responses API event means.
//!
//! The byte and call bounds, the first error, stream redaction and incremental decoding are the
//! shared [`StreamDecoder`]'s (see `loopbound_provider::events`); this module says what each
//! event means. An event's type is its data's `type` (the `event:` name when the data has none).
//!
//! # Invariants
//!
//! - A stream is complete only when `response.completed` (or `response.incomplete`, the output
//!   cap reached) arrives, also without its closing blank line; its response's usage is the
//!   reply's last chunk. Input after it is ignored; an end of input before it is
//!   [`Malformed`](loopbound::transport::TransportErrorKind::Malformed).
//! - `response.failed` and `error` end the stream with the provider's error, mapped by its code
//!   as the chat transport maps it (a `server_error` or `rate_limit_exceeded` is `Unavailable`);
//!   an event whose data is not JSON, or one of a type read here whose fields are not the API's,
//!   is `Malformed`; event types this transport does not read (created, in progress, content
//!   parts, reasoning, the `done` of a text, types added later) are skipped on their type alone,
//!   whatever else they carry.
//! - Text is `response.output_text.delta` and `response.refusal.delta` fragments, in order.
//! - A `function_call` output item is one call whose index in the reply is its `output_index`:
//!   `response.output_item.added` brings its `call_id` and name, and each
//!   `response.function_call_arguments.delta` a fragment of its arguments. A server that sends
//!   no `output_index` (llama.cpp's) names the item by its `id` and each event by its `item_id`:
//!   such a call takes the next index after the calls added so far. A server that sends
//!   no fragment has the arguments of the call's `done` event (of its arguments or of its item)
//!   taken whole, once; fragments for a call never opened are `Malformed`. The calls remembered
//!   are those handed on, which the decoder bounds.

use std::borrow::Cow;
use std::collections::BTreeMap;

use loopbound::transport::{ModelReply, ReplyBounds, ReplyChunk, ToolCallDelta, TransportError};
use loopbound_provider::sse::SseEvent;
use loopbound_provider::{Protocol, Redactor, Step, StreamDecoder};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::errors::{event_error, malformed_as};
use crate::parse::arguments_text;
use crate::responses::reply::{Summary, parse_response};

/// One event's data: the fields of every event type this transport reads (its type is read
/// first, alone: [`Kind`]).
#[derive(Debug, Deserialize)]
struct Event<'a> {
    output_index: Option<u32>,
    item_id: Option<String>,
    delta: Option<String>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow)]
    item: Option<StreamItem<'a>>,
    #[serde(borrow)]
    response: Option<Summary<'a>>,
}

/// The item of `response.output_item.added` and `.done`: what a `function_call` carries.
#[derive(Debug, Deserialize)]
struct StreamItem<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    id: Option<String>,
    call_id: Option<String>,
    name: Option<String>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

/// The type of an event, read alone: events of the types this transport does not read are
/// skipped on it, whatever else they carry.
#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    /// Whether the event carries an `error` object (its value left unread here).
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

/// The Responses API's stream as the shared HTTP machinery reads it; one value decodes one
/// streamed reply. Whole replies read as one `response` object.
#[derive(Debug, Default)]
pub struct ResponsesApi {
    /// The calls handed on, by output index: whether their arguments have come.
    calls: BTreeMap<u32, bool>,
    /// The index given to each call whose server sent no `output_index`, by its item id (as
    /// many as the calls handed on).
    ids: BTreeMap<String, u32>,
}

/// Decodes a streamed Responses API reply into [`ReplyChunk`](loopbound::transport::ReplyChunk)s.
///
/// ```
/// use loopbound_openai::responses::events::ResponseDecoder;
///
/// let mut decoder = ResponseDecoder::default();
/// let mut chunks = Vec::new();
/// decoder.feed(b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\nda", &mut chunks);
/// decoder.feed(b"ta: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}\n\n", &mut chunks);
/// decoder.finish(&mut chunks);
/// assert_eq!(chunks.len(), 1);
/// assert_eq!(chunks[0].as_ref().unwrap().content.as_deref(), Some("Hi"));
/// ```
pub type ResponseDecoder = StreamDecoder<ResponsesApi>;

/// A stream event this transport cannot read.
fn malformed(what: &str) -> Step {
    Step::Fail(TransportError::malformed(format!("the stream is not a Responses API stream: {what}")))
}

/// The event types this transport reads (besides `error`); every other type is skipped unread.
const READ: [&str; 9] = [
    "response.output_text.delta",
    "response.refusal.delta",
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.failed",
    "response.completed",
    "response.incomplete",
];

/// Whether an event of type `kind` completes the reply.
fn completes(kind: &str) -> bool {
    matches!(kind, "response.completed" | "response.incomplete")
}

impl ResponsesApi {
    /// `response.output_item.added`: a `function_call` opens a call.
    fn added(&mut self, index: Option<u32>, item: Option<StreamItem<'_>>, redactor: &Redactor) -> Step {
        let Some(item) = item.filter(|item| item.kind.as_deref() == Some("function_call")) else {
            return Step::Skip;
        };
        let index = match (index, item.id.as_deref().filter(|id| !id.is_empty())) {
            (Some(index), _) => index,
            (None, Some(id)) if self.ids.contains_key(id) => return malformed("a function_call added twice"),
            (None, Some(id)) => {
                let index = self.calls.keys().next_back().map_or(0, |last| last.saturating_add(1));
                self.ids.insert(id.to_owned(), index);
                index
            }
            (None, None) => return malformed("a function_call without its output_index or its id"),
        };
        if self.calls.contains_key(&index) {
            return malformed("a function_call added twice");
        }
        let Some(name) = item.name else { return malformed("a function_call without a name") };
        let arguments = match arguments_text(item.arguments, redactor) {
            Ok(arguments) => arguments,
            Err(error) => return Step::Fail(error),
        };
        self.calls.insert(index, !arguments.is_empty());
        let mut delta = ToolCallDelta::new(index).with_name(name);
        delta.id = item.call_id.filter(|id| !id.is_empty());
        delta.arguments = Some(arguments).filter(|text| !text.is_empty());
        Step::Chunk(ReplyChunk::calls(vec![delta]))
    }

    /// The index of an event's call: its `output_index`, or the index its item id was given.
    fn index(&self, index: Option<u32>, item_id: Option<&str>) -> Option<u32> {
        index.or_else(|| item_id.and_then(|id| self.ids.get(id).copied()))
    }

    /// `response.function_call_arguments.delta`: a fragment of an open call's arguments.
    fn fragment(&mut self, index: Option<u32>, delta: Option<String>) -> Step {
        let Some((index, seen)) = index.and_then(|index| Some(index).zip(self.calls.get_mut(&index))) else {
            return malformed("arguments for a call that was not added");
        };
        match delta.filter(|fragment| !fragment.is_empty()) {
            Some(fragment) => {
                *seen = true;
                Step::Chunk(ReplyChunk::calls(vec![ToolCallDelta::new(index).with_arguments(fragment)]))
            }
            None => Step::Skip,
        }
    }

    /// The `done` of a call's arguments or of its item: its whole arguments, taken when no
    /// fragment came. A call done without being added is added here, whole.
    fn done(
        &mut self,
        index: Option<u32>,
        item_id: Option<&str>,
        item: Option<StreamItem<'_>>,
        arguments: Option<&RawValue>,
        redactor: &Redactor,
    ) -> Step {
        if let Some(item) = item {
            if item.kind.as_deref() != Some("function_call") {
                return Step::Skip;
            }
            return match self.index(index, item.id.as_deref()) {
                Some(index) if self.calls.contains_key(&index) => {
                    self.whole_arguments(index, item.arguments, redactor)
                }
                // Named by neither: nothing says which call it ends.
                None if item.id.is_none() => Step::Skip,
                _ => self.added(index, Some(item), redactor),
            };
        }
        let Some(index) = self.index(index, item_id) else { return Step::Skip };
        self.whole_arguments(index, arguments, redactor)
    }

    fn whole_arguments(&mut self, index: u32, arguments: Option<&RawValue>, redactor: &Redactor) -> Step {
        let Some(seen) = self.calls.get_mut(&index) else {
            return malformed("arguments for a call that was not added");
        };
        if *seen {
            return Step::Skip;
        }
        match arguments_text(arguments, redactor) {
            Ok(text) if text.is_empty() => Step::Skip,
            Ok(text) => {
                *seen = true;
                Step::Chunk(ReplyChunk::calls(vec![ToolCallDelta::new(index).with_arguments(text)]))
            }
            Err(error) => Step::Fail(error),
        }
    }
}

impl Protocol for ResponsesApi {
    const END: &'static str = "response.completed";

    fn event(&mut self, event: &SseEvent, redactor: &Redactor) -> Step {
        let data = event.data.trim();
        if event.event.as_deref() == Some("error") {
            return Step::Fail(event_error(data, redactor));
        }
        if data.is_empty() {
            return Step::Skip;
        }
        let not_an_event = |error| {
            Step::Fail(malformed_as("the stream event is not a Responses API event", &error, redactor))
        };
        let head: Kind<'_> = match serde_json::from_str(data) {
            Ok(head) => head,
            Err(error) => return not_an_event(error),
        };
        let kind = head.kind.as_deref().or(event.event.as_deref()).unwrap_or_default();
        // An `error` event, or an error object without an event type: what a server that speaks
        // the chat API's words on this one sends (llama.cpp, for one).
        if kind == "error" || (kind.is_empty() && head.error.is_some()) {
            return Step::Fail(event_error(data, redactor));
        }
        if !READ.contains(&kind) {
            return Step::Skip;
        }
        let parsed: Event<'_> = match serde_json::from_str(data) {
            Ok(parsed) => parsed,
            Err(error) => return not_an_event(error),
        };
        match kind {
            "response.output_text.delta" | "response.refusal.delta" => parsed
                .delta
                .filter(|text| !text.is_empty())
                .map_or(Step::Skip, |text| Step::Chunk(ReplyChunk::text(text))),
            "response.output_item.added" => self.added(parsed.output_index, parsed.item, redactor),
            "response.function_call_arguments.delta" => {
                self.fragment(self.index(parsed.output_index, parsed.item_id.as_deref()), parsed.delta)
            }
            "response.function_call_arguments.done" | "response.output_item.done" => self.done(
                parsed.output_index,
                parsed.item_id.as_deref(),
                parsed.item,
                parsed.arguments,
                redactor,
            ),
            "response.failed" => {
                Step::Fail(parsed.response.and_then(|response| response.failure(redactor)).unwrap_or_else(
                    || TransportError::other("the provider reported an error: the response failed"),
                ))
            }
            kind if completes(kind) => match parsed.response {
                Some(response) => match response.usage {
                    Some(usage) => Step::Final(ReplyChunk::usage(usage.usage())),
                    None => Step::Done,
                },
                None => malformed("a completed event without its response"),
            },
            _ => Step::Skip,
        }
    }

    /// Only a whole end event counts: its data must parse (a cut one is a cut stream).
    fn ends(&self, event: &SseEvent) -> bool {
        serde_json::from_str::<Kind<'_>>(&event.data)
            .is_ok_and(|only| only.kind.as_deref().is_some_and(completes))
    }

    fn whole(body: &[u8], bounds: ReplyBounds, redactor: &Redactor) -> Result<ModelReply, TransportError> {
        parse_response(body, bounds, redactor)
    }
}

#[cfg(test)]
mod tests {
    use loopbound::transport::{ToolCall, TransportErrorKind, Usage};
    use loopbound_provider::events::{assemble, decode_stream};

    use super::*;

    /// A stream as aimock and OpenAI send it: the preamble, a reasoning item, text in two
    /// deltas, two calls whose arguments arrive in fragments, a call whose arguments come only
    /// with its `done`, and the completed response with its usage.
    const STREAM: &str = concat!(
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n",
        "event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":{\"status\":\"in_progress\"}}\n\n",
        "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]}}\n\n",
        "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":1,\"item\":{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"content\":[]}}\n\n",
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"delta\":\"Réading \"}\r\n\r\n",
        ": keep-alive\n\n",
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":1,\"delta\":\"✓\"}\n\n",
        "event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"output_index\":1,\"text\":\"Réading ✓\"}\n\n",
        "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":2,\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"c1\",\"name\":\"read_ticket\",\"arguments\":\"\"}}\n\n",
        "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_1\",\"output_index\":2,\"delta\":\"{\\\"in\"}\n\n",
        "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":3,\"item\":{\"type\":\"function_call\",\"call_id\":\"c2\",\"name\":\"finish_review\",\"arguments\":\"\"}}\n\n",
        "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":3,\"delta\":\"{\\\"input\\\":42}\"}\n\n",
        "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":2,\"delta\":\"put\\\":42}\"}\n\n",
        "event: response.function_call_arguments.done\ndata: {\"type\":\"response.function_call_arguments.done\",\"output_index\":2,\"arguments\":\"{\\\"input\\\":42}\"}\n\n",
        "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":2,\"item\":{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"read_ticket\",\"arguments\":\"{\\\"input\\\":42}\"}}\n\n",
        "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":4,\"item\":{\"type\":\"function_call\",\"call_id\":\"c3\",\"name\":\"note\",\"arguments\":\"\"}}\n\n",
        "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":4,\"item\":{\"type\":\"function_call\",\"call_id\":\"c3\",\"name\":\"note\",\"arguments\":\"{}\"}}\n\n",
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[{\"type\":\"message\"}],",
        "\"usage\":{\"input_tokens\":30,\"input_tokens_details\":{\"cached_tokens\":24},\"output_tokens\":12}}}\n\n",
    );

    fn expected_reply() -> ModelReply {
        ModelReply::new(
            Some("Réading ✓".into()),
            vec![
                ToolCall::new("c1", "read_ticket", r#"{"input":42}"#),
                ToolCall::new("c2", "finish_review", r#"{"input":42}"#),
                ToolCall::new("c3", "note", "{}"),
            ],
        )
        .with_usage(Usage::new(30, 12).with_cached_input(24))
    }

    #[test]
    fn a_stream_assembles_to_the_reply_at_every_split_point() {
        let bytes = STREAM.as_bytes();
        let whole = decode_stream::<ResponsesApi>([bytes]).unwrap();
        assert_eq!(assemble(whole.clone(), ReplyBounds::default()).unwrap(), expected_reply());
        for cut in 0..=bytes.len() {
            let split = decode_stream::<ResponsesApi>([&bytes[..cut], &bytes[cut..]]).unwrap();
            assert_eq!(split, whole, "cut at {cut}");
        }
        assert_eq!(decode_stream::<ResponsesApi>(bytes.chunks(1)).unwrap(), whole);
    }

    #[test]
    fn a_stream_cut_anywhere_before_its_completed_event_is_malformed() {
        let bytes = STREAM.as_bytes();
        let end = STREAM.len() - "\n\n".len();
        for cut in 0..end {
            let result = decode_stream::<ResponsesApi>([&bytes[..cut]]);
            assert!(
                matches!(&result, Err(m) if m.kind() == TransportErrorKind::Malformed && m.message().starts_with("the stream ended before response.completed")),
                "cut at {cut}: {result:?}"
            );
        }
        // The completed event counts, with its usage, even when the server closes before the
        // blank line.
        let whole = decode_stream::<ResponsesApi>([bytes]).unwrap();
        assert_eq!(decode_stream::<ResponsesApi>([&bytes[..end]]), Ok(whole.clone()));
        assert_eq!(decode_stream::<ResponsesApi>([&bytes[..=end]]), Ok(whole));
    }

    #[test]
    fn an_incomplete_response_ends_the_stream_and_input_after_the_end_is_ignored() {
        let stream = concat!(
            "data: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\n",
            "data: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}}\n\n",
            "data: not json\n\ndata: [DONE]\n\n",
        );
        let chunks = decode_stream::<ResponsesApi>([stream.as_bytes()]).unwrap();
        assert_eq!(
            assemble(chunks, ReplyBounds::default()).unwrap(),
            ModelReply::text("a").with_usage(Usage::new(1, 2))
        );
        let quiet = "data: {\"type\":\"response.completed\",\"response\":{}}\n\n";
        assert_eq!(decode_stream::<ResponsesApi>([quiet.as_bytes()]), Ok(vec![]));
    }

    #[test]
    fn provider_errors_inside_the_stream_are_mapped() {
        let failed = "data: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\nevent: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"The model failed\"}}}\n\n";
        let mut decoder = ResponseDecoder::default();
        assert_eq!(
            decoder.decode_all([failed.as_bytes()]),
            vec![
                Ok(ReplyChunk::text("a")),
                Err(TransportError::unavailable("the provider reported an error: The model failed"))
            ]
        );
        for (stream, expected) in [
            (
                "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"Slow down\",\"param\":null}\n\n",
                TransportError::unavailable("the provider reported an error: Slow down"),
            ),
            (
                "data: {\"type\":\"error\",\"code\":\"invalid_prompt\",\"message\":\"No\"}\n\n",
                TransportError::other("the provider reported an error: No"),
            ),
            (
                "event: error\ndata: {\"error\":{\"code\":500,\"message\":\"The model produced output that does not match the expected format\",\"type\":\"server_error\"}}\n\n",
                TransportError::unavailable(
                    "the provider reported an error: The model produced output that does not match the expected format",
                ),
            ),
            (
                "data: {\"error\":{\"code\":500,\"message\":\"failed to parse\",\"type\":\"server_error\"}}\n\n",
                TransportError::unavailable("the provider reported an error: failed to parse"),
            ),
            (
                "event: error\ndata: overloaded\n\n",
                TransportError::other("the provider reported an error: overloaded"),
            ),
            (
                "data: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\"}}\n\n",
                TransportError::other("the provider reported an error: the response failed"),
            ),
        ] {
            assert_eq!(decode_stream::<ResponsesApi>([stream.as_bytes()]), Err(expected), "{stream}");
        }
    }

    #[test]
    fn a_stream_that_names_its_items_by_id_alone_gives_each_call_the_next_index() {
        // llama.cpp's server: no `output_index`, every event named by its item's id.
        let stream = concat!(
            "data: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"fc_a\",\"arguments\":\"\",\"call_id\":\"call_a\",\"name\":\"read_ticket\",\"type\":\"function_call\",\"status\":\"in_progress\"}}\n\n",
            "data: {\"type\":\"response.function_call_arguments.delta\",\"delta\":\"{\\\"input\\\":\",\"item_id\":\"fc_a\"}\n\n",
            "data: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"fc_b\",\"arguments\":\"\",\"call_id\":\"call_b\",\"name\":\"finish_review\",\"type\":\"function_call\"}}\n\n",
            "data: {\"type\":\"response.function_call_arguments.delta\",\"delta\":\" 42}\",\"item_id\":\"fc_a\"}\n\n",
            "data: {\"type\":\"response.output_item.done\",\"item\":{\"id\":\"fc_a\",\"type\":\"function_call\",\"arguments\":\"{\\\"input\\\": 42}\",\"call_id\":\"call_a\",\"name\":\"read_ticket\"}}\n\n",
            "data: {\"type\":\"response.output_item.done\",\"item\":{\"id\":\"fc_b\",\"type\":\"function_call\",\"arguments\":\"{}\",\"call_id\":\"call_b\",\"name\":\"finish_review\"}}\n\n",
            "data: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}\n\n",
        );
        let chunks = decode_stream::<ResponsesApi>([stream.as_bytes()]).unwrap();
        let reply = assemble(chunks, ReplyBounds::default()).unwrap();
        let calls: Vec<(&str, &str, &str)> = reply
            .tool_calls
            .iter()
            .map(|call| (call.id.as_str(), call.name.as_str(), call.arguments.as_str()))
            .collect();
        assert_eq!(calls, [("call_a", "read_ticket", "{\"input\": 42}"), ("call_b", "finish_review", "{}")]);
        let twice = concat!(
            "data: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"fc_a\",\"call_id\":\"c\",\"name\":\"t\",\"type\":\"function_call\"}}\n\n",
            "data: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"fc_a\",\"call_id\":\"c\",\"name\":\"t\",\"type\":\"function_call\"}}\n\n",
        );
        assert_eq!(
            decode_stream::<ResponsesApi>([twice.as_bytes()]).err().map(|error| error.to_string()),
            Some("malformed provider response: the stream is not a Responses API stream: a function_call added twice".to_owned())
        );
    }

    #[test]
    fn events_that_are_not_the_apis_are_malformed_and_unknown_types_are_skipped() {
        for (stream, message) in [
            (
                "data: {oops\n\n",
                "the stream event is not a Responses API event: key must be a string at line 1 column 2",
            ),
            (
                "data: [DONE]\n\n",
                "the stream event is not a Responses API event: expected value at line 1 column 2",
            ),
            (
                "data: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":0,\"delta\":\"{}\"}\n\n",
                "the stream is not a Responses API stream: arguments for a call that was not added",
            ),
            (
                "data: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"function_call\",\"name\":\"t\"}}\n\n",
                "the stream is not a Responses API stream: a function_call without its output_index or its id",
            ),
            (
                "data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\"}}\n\n",
                "the stream is not a Responses API stream: a function_call without a name",
            ),
            (
                "data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"name\":\"t\"}}\n\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"name\":\"t\"}}\n\n",
                "the stream is not a Responses API stream: a function_call added twice",
            ),
            (
                "data: {\"type\":\"response.completed\"}\n\n",
                "the stream is not a Responses API stream: a completed event without its response",
            ),
            (
                "data: {\"type\":\"response.output_text.delta\",\"delta\":7}\n\n",
                "the stream event is not a Responses API event: invalid type: integer `7`, expected a string at line 1 column 46",
            ),
        ] {
            let result = decode_stream::<ResponsesApi>([stream.as_bytes()]);
            assert_eq!(result, Err(TransportError::malformed(message)), "{stream}");
        }
        let skipped = concat!(
            "event: ping\ndata: {}\n\n",
            "data: {\"type\":\"response.reasoning_summary_text.delta\",\"delta\":\"x\"}\n\n",
            "data: {\"type\":\"response.mcp_call_arguments.delta\",\"delta\":{\"a\":1},\"output_index\":\"0\"}\n\n",
            "data: {\"type\":\"response.completed\",\"response\":{}}\n\n",
        );
        assert_eq!(decode_stream::<ResponsesApi>([skipped.as_bytes()]), Ok(vec![]));
    }

    fn call_event(index: u32) -> String {
        format!(
            "data: {{\"type\":\"response.output_item.added\",\"output_index\":{index},\"item\":{{\"type\":\"function_call\",\"call_id\":\"c{index}\",\"name\":\"t\",\"arguments\":\"{{}}\"}}}}\n\n"
        )
    }

    #[test]
    fn one_call_too_many_ends_the_stream_before_it_is_handed_on() {
        let events: String = (0..5).map(call_event).collect();
        let mut decoder = ResponseDecoder::new(ReplyBounds::new(3, 1 << 20), Redactor::default());
        let out = decoder.decode_all([events.as_bytes()]);
        assert_eq!(out.len(), 4);
        assert!(out[..3].iter().all(Result::is_ok));
        assert_eq!(out[3], Err(TransportError::too_many_calls(3)));
    }
}
