//! What each streamed Messages API event means: `message_start`, `content_block_start`,
//! `content_block_delta`, `content_block_stop`, `message_delta`, `message_stop`, `ping` and
//! `error`.
//!
//! The byte and call bounds, the first error, stream redaction and incremental decoding are the
//! shared [`StreamDecoder`]'s (see `loopbound_provider::events`).
//!
//! # Invariants
//!
//! - A stream is complete only when `message_stop` arrives (also without its closing blank line);
//!   input after it is ignored, and an end of input before it is
//!   [`Malformed`](loopbound::transport::TransportErrorKind::Malformed).
//! - An `error` event ends the stream with the provider's error, mapped by its type (an overload
//!   is `Unavailable`); an event that is not JSON, or not the API's, is `Malformed`; `ping` and
//!   event types this transport does not know are skipped.
//! - Content blocks come one at a time, in increasing index order: a block starts, gets deltas
//!   for its own index, and stops before the next starts. Anything else is `Malformed`. So only
//!   the open block is remembered, whatever the stream's length.
//! - A `tool_use` block is one call: its index in the reply is the block's index, its id and name
//!   come with its start, its arguments are its `input_json_delta` fragments, joined in order.
//!   Text deltas of `text` blocks are the reply's text. Blocks and deltas of other kinds
//!   (thinking, signatures, citations) are skipped.
//! - Usage is cumulative: `message_start` brings the input counts, each `message_delta` the counts
//!   so far (each field it carries replaces the one before); every report hands on the reply's
//!   whole usage so far, which replaces the previous report.

use std::borrow::Cow;

use loopbound::transport::{ModelReply, ReplyBounds, ReplyChunk, ToolCallDelta, TransportError};
use loopbound_provider::errors::clean;
use loopbound_provider::sse::SseEvent;
use loopbound_provider::{Protocol, Redactor, Step, StreamDecoder};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::errors::{error_object, provider_error};
use crate::parse::parse_message;
use crate::wire::{WireBlock, WireUsage};

/// One event's data: the fields of every event type this transport reads.
#[derive(Debug, Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Cow<'a, str>,
    index: Option<u32>,
    message: Option<StartMessage>,
    #[serde(borrow)]
    content_block: Option<WireBlock<'a>>,
    delta: Option<Delta>,
    usage: Option<WireUsage>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

/// The message of `message_start`: its usage only.
#[derive(Debug, Deserialize)]
struct StartMessage {
    usage: Option<WireUsage>,
}

/// The delta of `content_block_delta` (or of `message_delta`, which has no type).
#[derive(Debug, Deserialize)]
struct Delta {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
    partial_json: Option<String>,
}

/// What kind of block is open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Block {
    Text,
    ToolUse,
    /// A kind whose deltas are skipped.
    Other,
}

/// The Messages API as the shared HTTP machinery reads it: one value decodes one streamed reply.
#[derive(Debug, Default)]
pub struct MessagesApi {
    /// The reply's counts so far.
    usage: WireUsage,
    /// The block started and not yet stopped.
    open: Option<(u32, Block)>,
    /// The index of the last block started.
    last: Option<u32>,
}

/// Decodes a streamed Messages API reply into [`ReplyChunk`]s.
///
/// ```
/// use loopbound_anthropic::events::MessageDecoder;
///
/// let mut decoder = MessageDecoder::default();
/// let mut chunks = Vec::new();
/// decoder.feed(b"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n", &mut chunks);
/// decoder.feed(b"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\nda", &mut chunks);
/// decoder.feed(b"ta: {\"type\":\"content_block_stop\",\"index\":0}\n\ndata: {\"type\":\"message_stop\"}\n\n", &mut chunks);
/// decoder.finish(&mut chunks);
/// assert_eq!(chunks.len(), 1);
/// assert_eq!(chunks[0].as_ref().unwrap().content.as_deref(), Some("Hi"));
/// ```
pub type MessageDecoder = StreamDecoder<MessagesApi>;

/// A stream event this transport cannot read.
fn malformed(what: &str) -> Step {
    Step::Fail(TransportError::malformed(format!("the stream is not a Messages API stream: {what}")))
}

impl MessagesApi {
    fn start_block(&mut self, index: Option<u32>, block: Option<WireBlock<'_>>) -> Step {
        let (Some(index), Some(block)) = (index, block) else {
            return malformed("a content_block_start without its index or block");
        };
        if self.open.is_some() {
            return malformed("a block started before the previous one stopped");
        }
        if self.last.is_some_and(|last| index <= last) {
            return malformed("a block index that does not increase");
        }
        self.last = Some(index);
        match block.kind.as_ref() {
            "text" => {
                self.open = Some((index, Block::Text));
                block
                    .text
                    .filter(|text| !text.is_empty())
                    .map_or(Step::Skip, |text| Step::Chunk(ReplyChunk::text(text)))
            }
            "tool_use" => {
                self.open = Some((index, Block::ToolUse));
                let Some(name) = block.name else { return malformed("a tool_use block without a name") };
                let mut delta = ToolCallDelta::new(index).with_name(name);
                delta.id = block.id;
                // The API starts a call with an empty input and streams it as fragments; a
                // non-empty one is kept as its first fragment.
                delta.arguments =
                    block.input.map(RawValue::get).filter(|raw| !is_empty_input(raw)).map(str::to_owned);
                Step::Chunk(ReplyChunk::calls(vec![delta]))
            }
            _ => {
                self.open = Some((index, Block::Other));
                Step::Skip
            }
        }
    }

    fn delta(&self, index: Option<u32>, delta: Option<Delta>) -> Step {
        let Some((open, block)) = self.open.filter(|(open, _)| Some(*open) == index) else {
            return malformed("a delta for a block that is not open");
        };
        let Some(delta) = delta else { return malformed("a content_block_delta without its delta") };
        match (block, delta.kind.as_deref()) {
            (Block::Text, Some("text_delta")) => delta
                .text
                .filter(|text| !text.is_empty())
                .map_or(Step::Skip, |text| Step::Chunk(ReplyChunk::text(text))),
            (Block::ToolUse, Some("input_json_delta")) => match delta.partial_json {
                Some(fragment) if !fragment.is_empty() => {
                    Step::Chunk(ReplyChunk::calls(vec![ToolCallDelta::new(open).with_arguments(fragment)]))
                }
                _ => Step::Skip,
            },
            (Block::Text, Some("input_json_delta")) | (Block::ToolUse, Some("text_delta")) => {
                malformed("a delta of the wrong kind for its block")
            }
            _ => Step::Skip,
        }
    }

    fn stop_block(&mut self, index: Option<u32>) -> Step {
        match self.open {
            Some((open, _)) if Some(open) == index => {
                self.open = None;
                Step::Skip
            }
            _ => malformed("a content_block_stop for a block that is not open"),
        }
    }

    /// Takes in a usage report and hands on the reply's whole usage so far.
    fn report(&mut self, usage: Option<WireUsage>) -> Step {
        let Some(usage) = usage else { return Step::Skip };
        self.usage = self.usage.updated(usage);
        Step::Chunk(ReplyChunk::usage(self.usage.usage()))
    }
}

/// Whether a block's `input` is the empty object the API starts every call with.
fn is_empty_input(raw: &str) -> bool {
    let inner = raw.trim().strip_prefix('{').and_then(|rest| rest.strip_suffix('}'));
    inner.is_some_and(|inner| inner.trim().is_empty())
}

impl Protocol for MessagesApi {
    const END: &'static str = "message_stop";

    fn event(&mut self, event: &SseEvent, redactor: &Redactor) -> Step {
        let data = event.data.trim();
        if data.is_empty() {
            return Step::Skip;
        }
        let parsed = match serde_json::from_str::<Event<'_>>(data) {
            Ok(parsed) => parsed,
            Err(_) if event.event.as_deref() == Some("error") => {
                return Step::Fail(error_object(&serde_json::Value::String(data.to_owned()), redactor));
            }
            Err(error) => return malformed(&clean(&error.to_string(), redactor)),
        };
        match parsed.kind.as_ref() {
            "message_start" => self.report(parsed.message.and_then(|message| message.usage)),
            "content_block_start" => self.start_block(parsed.index, parsed.content_block),
            "content_block_delta" => self.delta(parsed.index, parsed.delta),
            "content_block_stop" => self.stop_block(parsed.index),
            "message_delta" => self.report(parsed.usage),
            "message_stop" => Step::Done,
            "error" => Step::Fail(match parsed.error {
                Some(error) => provider_error(error, redactor),
                None => error_object(&serde_json::Value::Null, redactor),
            }),
            // An error object without an event type: what a server that speaks OpenAI's words on
            // this API sends (llama.cpp, for one). It ends the stream as an `error` event would.
            "" => match parsed.error {
                Some(error) => Step::Fail(provider_error(error, redactor)),
                None => malformed("an event without a type"),
            },
            // `ping`, and event types added to the API later.
            _ => Step::Skip,
        }
    }

    fn ends(&self, event: &SseEvent) -> bool {
        #[derive(Deserialize)]
        struct Kind<'a> {
            #[serde(rename = "type", borrow)]
            kind: Cow<'a, str>,
        }
        event.event.as_deref() == Some("message_stop")
            || serde_json::from_str::<Kind<'_>>(&event.data).is_ok_and(|only| only.kind == "message_stop")
    }

    fn whole(body: &[u8], bounds: ReplyBounds, redactor: &Redactor) -> Result<ModelReply, TransportError> {
        parse_message(body, bounds, redactor)
    }
}

#[cfg(test)]
mod tests {
    use loopbound::transport::{ToolCall, TransportErrorKind, Usage};
    use loopbound_provider::events::{assemble, decode_stream};

    use super::*;

    /// A stream as the API sends it: usage with cache counts at the start, a text block, two
    /// `tool_use` blocks whose inputs arrive in fragments, a ping, cumulative usage, the end.
    const STREAM: &str = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":1000,\"cache_read_input_tokens\":3000,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Réading ✓ \"}}\r\n\r\n",
        "event: ping\ndata: {\"type\":\"ping\"}\n\n",
        "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read_ticket\",\"input\":{}}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"in\"}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"put\\\":42}\"}}\n\n",
        "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"finish_review\",\"input\":{}}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"input\\\":42}\"}}\n\n",
        "data: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":12}}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{},\"usage\":{\"output_tokens\":15}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    fn expected_reply() -> ModelReply {
        ModelReply::new(
            Some("Réading ✓ ".into()),
            vec![
                ToolCall::new("toolu_1", "read_ticket", r#"{"input":42}"#),
                ToolCall::new("toolu_2", "finish_review", r#"{"input":42}"#),
            ],
        )
        .with_usage(Usage::new(4025, 15).with_cached_input(3000).with_cache_write(1000))
    }

    #[test]
    fn a_stream_assembles_to_the_reply_at_every_split_point() {
        let bytes = STREAM.as_bytes();
        let whole = decode_stream::<MessagesApi>([bytes]).unwrap();
        assert_eq!(assemble(whole.clone(), ReplyBounds::default()).unwrap(), expected_reply());
        for cut in 0..=bytes.len() {
            assert_eq!(
                decode_stream::<MessagesApi>([&bytes[..cut], &bytes[cut..]]).unwrap(),
                whole,
                "cut at {cut}"
            );
        }
        assert_eq!(decode_stream::<MessagesApi>(bytes.chunks(1)).unwrap(), whole);
    }

    #[test]
    fn each_usage_report_carries_the_whole_usage_so_far() {
        let reports: Vec<Usage> = decode_stream::<MessagesApi>([STREAM.as_bytes()])
            .unwrap()
            .into_iter()
            .filter_map(|chunk| chunk.usage)
            .collect();
        let cached = |output| Usage::new(4025, output).with_cached_input(3000).with_cache_write(1000);
        assert_eq!(reports, [cached(1), cached(12), cached(15)]);
    }

    #[test]
    fn a_stream_cut_anywhere_before_message_stop_is_malformed() {
        let bytes = STREAM.as_bytes();
        let stop = STREAM.find("event: message_stop").unwrap();
        for cut in 0..stop {
            let result = decode_stream::<MessagesApi>([&bytes[..cut]]);
            assert!(
                matches!(&result, Err(e) if e.kind() == TransportErrorKind::Malformed && e.message().starts_with("the stream ended before message_stop")),
                "cut at {cut}: {result:?}"
            );
        }
        let whole = decode_stream::<MessagesApi>([bytes]).unwrap();
        let closing = "event: message_stop\ndata: {\"type\":\"message_stop\"}";
        assert_eq!(
            decode_stream::<MessagesApi>([&bytes[..stop + closing.len()]]),
            Ok(whole),
            "an end without its blank line"
        );
    }

    #[test]
    fn an_error_event_ends_the_stream_with_the_mapped_error() {
        let text = "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
        let overloaded = format!(
            "{text}event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}}}\n\ndata: {{\"type\":\"message_stop\"}}\n\n"
        );
        assert_eq!(
            decode_stream::<MessagesApi>([overloaded.as_bytes()]),
            Err(TransportError::unavailable("the provider reported an error (overloaded_error): Overloaded"))
        );
        let invalid = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad\"}}\n\n";
        assert_eq!(
            decode_stream::<MessagesApi>([invalid.as_bytes()]),
            Err(TransportError::other("the provider reported an error (invalid_request_error): bad"))
        );
        assert_eq!(
            decode_stream::<MessagesApi>([&b"event: error\ndata: upstream down\n\n"[..]]),
            Err(TransportError::other("the provider reported an error: upstream down"))
        );
        // llama.cpp's failed generation, in OpenAI's words and without an event type: as on
        // the chat transport, a server failure.
        let llama =
            "data: {\"error\":{\"code\":500,\"message\":\"failed to parse\",\"type\":\"server_error\"}}\n\n";
        assert_eq!(
            decode_stream::<MessagesApi>([llama.as_bytes()]),
            Err(TransportError::unavailable(
                "the provider reported an error (server_error): failed to parse"
            ))
        );
        assert_eq!(
            decode_stream::<MessagesApi>([&b"data: {\"index\":0}\n\n"[..]]),
            Err(TransportError::malformed(
                "the stream is not a Messages API stream: an event without a type"
            ))
        );
    }

    #[test]
    fn blocks_out_of_order_or_deltas_for_another_block_are_malformed() {
        let start = |index: u32, kind: &str| {
            format!(
                "data: {{\"type\":\"content_block_start\",\"index\":{index},\"content_block\":{{\"type\":\"{kind}\",\"name\":\"t\",\"text\":\"\"}}}}\n\n"
            )
        };
        let stop = |index: u32| format!("data: {{\"type\":\"content_block_stop\",\"index\":{index}}}\n\n");
        let delta = |index: u32, kind: &str| {
            format!(
                "data: {{\"type\":\"content_block_delta\",\"index\":{index},\"delta\":{{\"type\":\"{kind}\",\"text\":\"x\",\"partial_json\":\"x\"}}}}\n\n"
            )
        };
        let cases = [
            (format!("{}{}", start(0, "text"), start(1, "text")), "a block started before the previous one stopped"),
            (format!("{}{}{}", start(3, "text"), stop(3), start(3, "tool_use")), "a block index that does not increase"),
            (format!("{}{}", start(0, "text"), delta(1, "text_delta")), "a delta for a block that is not open"),
            (delta(0, "text_delta"), "a delta for a block that is not open"),
            (format!("{}{}", start(0, "text"), delta(0, "input_json_delta")), "a delta of the wrong kind for its block"),
            (format!("{}{}", start(0, "tool_use"), delta(0, "text_delta")), "a delta of the wrong kind for its block"),
            (stop(0), "a content_block_stop for a block that is not open"),
            ("data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"a\"}}\n\n".to_owned(), "a tool_use block without a name"),
        ];
        for (stream, why) in cases {
            assert_eq!(
                decode_stream::<MessagesApi>([stream.as_bytes()]),
                Err(TransportError::malformed(format!("the stream is not a Messages API stream: {why}"))),
                "{stream}"
            );
        }
        let not_json = decode_stream::<MessagesApi>([&b"data: {oops\n\n"[..]]);
        assert!(matches!(&not_json, Err(e) if e.kind() == TransportErrorKind::Malformed), "{not_json:?}");
    }

    #[test]
    fn pings_unknown_events_and_other_blocks_are_skipped() {
        let stream = concat!(
            "event: ping\ndata: {\"type\":\"ping\"}\n\n",
            "data: {\"type\":\"a_future_event\",\"payload\":[1,2]}\n\n",
            "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
            "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n",
            "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"s\"}}\n\n",
            "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"x\",\"input\":{\"a\":1}}}\n\n",
            "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
            "data: {\"type\":\"message_stop\"}\n\n",
        );
        let reply =
            assemble(decode_stream::<MessagesApi>([stream.as_bytes()]).unwrap(), ReplyBounds::default())
                .unwrap();
        assert_eq!(
            reply,
            ModelReply::call("t1", "x", r#"{"a":1}"#),
            "a start's non-empty input is its first fragment"
        );
    }
}
