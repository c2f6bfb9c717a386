//! A whole Responses API reply (a `response` object), and the usage both paths read.
//!
//! # Invariants
//!
//! - Bytes in, typed result out: any input gives a [`ModelReply`] or a [`TransportError`], never
//!   a panic. Invalid JSON, a wrong JSON type, a response without `output` and a response still
//!   `queued`, `in_progress` or `cancelled` are `Malformed`; an `error` object, or a `failed`
//!   status, is the provider's error, mapped by its code as the chat transport maps it.
//! - An `incomplete` response (its output cap reached) is a reply, as a chat completion cut by
//!   `length` is: what was produced is kept.
//! - The reply's text is the text of its `message` items (`output_text` and `refusal` parts), in
//!   order; each `function_call` item is one call, its `call_id` the call's id (`call_{n}` when
//!   absent), its arguments JSON text as sent. Other items (reasoning, searches) are skipped.
//! - Nothing is kept that is not used: calls are counted before any is kept and a reply with
//!   more than the bound is refused; items and content parts are folded into the reply one at a
//!   time, never held as a list or a `serde_json::Value` tree, so the memory is that of the
//!   reply's text and calls, whatever the number of items.

use std::fmt;
use std::marker::PhantomData;

use loopbound::transport::{ModelReply, ReplyBounds, ToolCall, TransportError, Usage};
use loopbound_provider::Redactor;
use loopbound_provider::json::{Count, Counted};
use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::errors::{malformed_as, provider_error};
use crate::parse::arguments_text;
use crate::wire::WirePromptDetails;

/// Token counts as the Responses API reports them.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    /// Where the provider says how many input tokens it read from its cache.
    input_tokens_details: Option<WirePromptDetails>,
}

impl WireUsage {
    pub(crate) fn usage(&self) -> Usage {
        let cached =
            self.input_tokens_details.as_ref().and_then(|details| details.cached_tokens).unwrap_or(0);
        Usage::new(self.input_tokens.unwrap_or(0), self.output_tokens.unwrap_or(0)).with_cached_input(cached)
    }
}

/// What a response says besides its output: its status, usage and error. The stream's last
/// event carries one (its `output` is skipped unread there).
#[derive(Debug, Deserialize)]
pub(crate) struct Summary<'a> {
    #[serde(borrow)]
    pub(crate) status: Option<std::borrow::Cow<'a, str>>,
    pub(crate) usage: Option<WireUsage>,
    #[serde(borrow)]
    pub(crate) error: Option<&'a RawValue>,
}

impl Summary<'_> {
    /// The provider's error, if the response carries one or says it failed.
    pub(crate) fn failure(&self, redactor: &Redactor) -> Option<TransportError> {
        if let Some(error) = self.error.filter(|error| error.get() != "null") {
            return Some(provider_error(error, redactor));
        }
        match self.status.as_deref() {
            None | Some("completed" | "incomplete") => None,
            Some("failed") => {
                Some(TransportError::other("the provider reported an error: the response failed"))
            }
            Some(other) => Some(TransportError::malformed(format!(
                "the response is {}, not completed",
                loopbound_provider::errors::clean(other, redactor)
            ))),
        }
    }
}

/// A whole response: its summary's fields and its output, folded. (Not a flattened [`Summary`]:
/// serde would buffer every other field of the response to fill it.)
#[derive(Debug, Deserialize)]
struct ResponseBody<'a> {
    #[serde(borrow)]
    status: Option<std::borrow::Cow<'a, str>>,
    usage: Option<WireUsage>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
    #[serde(borrow)]
    output: Option<Output<'a>>,
}

/// The number of `function_call` items of a response, read without keeping any of them.
#[derive(Debug, Deserialize)]
struct CallCount {
    #[serde(default)]
    output: Count<CallMarker>,
}

/// An output item, read for its type only.
#[derive(Debug, Deserialize)]
struct CallMarker {
    #[serde(rename = "type")]
    kind: Option<String>,
}

impl Counted<'_> for CallMarker {
    fn counts(&self) -> bool {
        self.kind.as_deref() == Some("function_call")
    }
}

/// The output items, folded into the reply's text and its calls.
#[derive(Debug, Default)]
struct Output<'a> {
    text: String,
    calls: Vec<CallItem<'a>>,
}

/// A `function_call` item, its arguments not yet decoded.
#[derive(Debug)]
struct CallItem<'a> {
    call_id: Option<String>,
    name: String,
    arguments: Option<&'a RawValue>,
}

/// One output item: the fields of a `message` and of a `function_call`.
#[derive(Debug, Deserialize)]
struct Item<'a> {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    content: Joined,
    call_id: Option<String>,
    name: Option<String>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

/// The text of a message's content parts, joined: `output_text` parts' `text` and `refusal`
/// parts' `refusal` (a plain string is its own text).
#[derive(Debug, Default)]
struct Joined(String);

#[derive(Debug, Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
    refusal: Option<String>,
}

impl<'de> Deserialize<'de> for Joined {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Parts;
        impl<'de> Visitor<'de> for Parts {
            type Value = Joined;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of content parts")
            }

            fn visit_unit<E: de::Error>(self) -> Result<Joined, E> {
                Ok(Joined::default())
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Joined, E> {
                Ok(Joined(text.to_owned()))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Joined, A::Error> {
                let mut text = String::new();
                while let Some(part) = seq.next_element::<Part>()? {
                    match part.kind.as_deref() {
                        Some("output_text") => text.push_str(part.text.as_deref().unwrap_or_default()),
                        Some("refusal") => text.push_str(part.refusal.as_deref().unwrap_or_default()),
                        _ => {}
                    }
                }
                Ok(Joined(text))
            }
        }
        deserializer.deserialize_any(Parts)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Output<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Items<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Items<'a> {
            type Value = Output<'a>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of output items")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Output<'a>, A::Error> {
                let mut output = Output::default();
                while let Some(item) = seq.next_element::<Item<'de>>()? {
                    match item.kind.as_deref() {
                        Some("message") => output.text.push_str(&item.content.0),
                        Some("function_call") => {
                            let name = item.name.ok_or_else(|| de::Error::missing_field("name"))?;
                            output.calls.push(CallItem {
                                call_id: item.call_id,
                                name,
                                arguments: item.arguments,
                            });
                        }
                        _ => {}
                    }
                }
                Ok(output)
            }
        }
        deserializer.deserialize_seq(Items(PhantomData))
    }
}

/// The description of a body or event that does not parse.
pub(crate) const NOT_A_RESPONSE: &str = "the reply is not a Responses API response";

/// Parses a whole (non-streamed) Responses API reply, within `bounds`, with every text the
/// provider sent back redacted by `redactor`.
///
/// ```
/// use loopbound::transport::{ReplyBounds, TransportError};
/// use loopbound_openai::Redactor;
/// use loopbound_openai::responses::reply::parse_response;
///
/// let body = br#"{"status":"completed","output":[
///     {"type":"function_call","call_id":"c1","name":"read_ticket","arguments":"{\"input\":42}"}],
///     "usage":{"input_tokens":12,"output_tokens":5,"input_tokens_details":{"cached_tokens":8}}}"#;
/// let reply = parse_response(body, ReplyBounds::default(), &Redactor::default())?;
/// assert_eq!(reply.tool_calls[0].arguments, r#"{"input":42}"#);
/// assert_eq!(reply.usage.map(|u| (u.output_tokens, u.cached_input_tokens)), Some((5, 8)));
///
/// let refused = parse_response(body, ReplyBounds::new(0, 1024), &Redactor::default());
/// assert_eq!(refused, Err(TransportError::too_many_calls(0)));
/// # Ok::<(), TransportError>(())
/// ```
///
/// # Errors
///
/// `TooManyCalls` past the bound; `Malformed` for a body that is not a finished response; the
/// mapped error when the body is, or carries, the provider's error.
pub fn parse_response(
    body: &[u8],
    bounds: ReplyBounds,
    redactor: &Redactor,
) -> Result<ModelReply, TransportError> {
    // A body that does not even count is reported by the full parse below, with its reason.
    if let Ok(count) = serde_json::from_slice::<CallCount>(body)
        && bounds.too_many(count.output.get())
    {
        return Err(bounds.too_many_calls());
    }
    let parsed: ResponseBody<'_> =
        serde_json::from_slice(body).map_err(|error| malformed_as(NOT_A_RESPONSE, &error, redactor))?;
    let summary = Summary { status: parsed.status, usage: parsed.usage, error: parsed.error };
    if let Some(error) = summary.failure(redactor) {
        return Err(error);
    }
    let output = parsed.output.ok_or_else(|| TransportError::malformed("the response has no output"))?;
    let tool_calls = output
        .calls
        .into_iter()
        .zip(0u32..)
        .map(|(call, index)| {
            Ok(ToolCall::new(
                call.call_id.filter(|id| !id.is_empty()).unwrap_or_else(|| format!("call_{index}")),
                call.name,
                arguments_text(call.arguments, redactor)?,
            ))
        })
        .collect::<Result<_, TransportError>>()?;
    let text = Some(output.text).filter(|text| !text.is_empty());
    let mut reply = ModelReply::new(text, tool_calls);
    reply.usage = summary.usage.as_ref().map(WireUsage::usage);
    redactor.redact_reply(&mut reply);
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use loopbound::transport::TransportErrorKind;
    use loopbound_provider::ApiKey;

    use super::*;

    fn parse(body: &str) -> Result<ModelReply, TransportError> {
        parse_response(body.as_bytes(), ReplyBounds::default(), &Redactor::default())
    }

    #[test]
    fn text_calls_and_usage_with_cached_tokens_are_read_in_order() {
        let reply = parse(
            r#"{"id":"resp_1","object":"response","status":"completed","output":[
                {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"thinking"}]},
                {"type":"message","id":"msg_1","role":"assistant","content":[
                    {"type":"output_text","text":"Réading ✓ ","annotations":[]},
                    {"type":"refusal","refusal":"not that."}]},
                {"type":"function_call","id":"fc_1","call_id":"c1","name":"read_ticket","arguments":"{\"input\":42}"},
                {"type":"function_call","name":"finish_review","arguments":{"input":42}},
                {"type":"function_call","call_id":"","name":"x","arguments":null}
            ],"usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":20},"output_tokens":12,
                "output_tokens_details":{"reasoning_tokens":4},"total_tokens":42}}"#,
        )
        .unwrap();
        assert_eq!(
            reply,
            ModelReply::new(
                Some("Réading ✓ not that.".into()),
                vec![
                    ToolCall::new("c1", "read_ticket", r#"{"input":42}"#),
                    ToolCall::new("call_1", "finish_review", r#"{"input":42}"#),
                    ToolCall::new("call_2", "x", ""),
                ]
            )
            .with_usage(Usage::new(30, 12).with_cached_input(20))
        );
    }

    #[test]
    fn an_incomplete_response_keeps_what_was_produced() {
        let reply = parse(
            r#"{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},
                "output":[{"type":"message","content":[{"type":"output_text","text":"Cut"}]}],
                "usage":{"input_tokens":3,"output_tokens":16}}"#,
        );
        assert_eq!(reply, Ok(ModelReply::text("Cut").with_usage(Usage::new(3, 16))));
        assert_eq!(parse(r#"{"output":[]}"#), Ok(ModelReply::new(None, vec![])));
    }

    #[test]
    fn errors_and_failed_responses_are_the_providers_errors() {
        assert_eq!(
            parse(r#"{"status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}"#),
            Err(TransportError::unavailable("the provider reported an error: boom"))
        );
        assert_eq!(
            parse(r#"{"error":{"code":500,"message":"bad format","type":"server_error"}}"#),
            Err(TransportError::unavailable("the provider reported an error: bad format"))
        );
        assert_eq!(
            parse(r#"{"status":"failed","error":null,"output":[]}"#),
            Err(TransportError::other("the provider reported an error: the response failed"))
        );
        assert_eq!(
            parse(r#"{"status":"in_progress","output":[]}"#),
            Err(TransportError::malformed("the response is in_progress, not completed"))
        );
    }

    #[test]
    fn malformed_bodies_are_malformed_errors() {
        for body in [
            "",
            "not json",
            "[]",
            "{}",
            r#"{"output":"many"}"#,
            r#"{"output":[{"type":"message","content":[{"type":"output_text","text":"cut"#,
            r#"{"output":[{"type":"message","content":7}]}"#,
            r#"{"output":[{"type":"message","content":[{"type":"output_text","text":7}]}]}"#,
            r#"{"output":[{"type":"function_call","call_id":"a"}]}"#,
            r#"{"output":[{"type":7}]}"#,
            r#"{"output":[],"usage":{"input_tokens":-1}}"#,
            r#"{"output":[],"status":7}"#,
        ] {
            let result = parse(body);
            assert!(
                matches!(result, Err(ref e) if e.kind() == TransportErrorKind::Malformed),
                "{body:?} -> {result:?}"
            );
        }
        assert_eq!(
            parse("{oops"),
            Err(TransportError::malformed(
                "the reply is not a Responses API response: key must be a string at line 1 column 2"
            ))
        );
    }

    /// A response of `calls` function calls after a message.
    fn flood(calls: usize) -> String {
        let call = r#"{"type":"function_call","call_id":"c","name":"t","arguments":"{}"}"#;
        format!(
            r#"{{"output":[{{"type":"message","content":[{{"type":"output_text","text":"x"}}]}},{}]}}"#,
            vec![call; calls].join(",")
        )
    }

    #[test]
    fn calls_are_counted_before_any_is_kept() {
        let none = Redactor::default();
        assert_eq!(
            parse_response(flood(3).as_bytes(), ReplyBounds::new(3, 1 << 20), &none)
                .unwrap()
                .tool_calls
                .len(),
            3
        );
        assert_eq!(
            parse_response(flood(4).as_bytes(), ReplyBounds::new(3, 1 << 20), &none),
            Err(TransportError::too_many_calls(3))
        );
        assert_eq!(
            parse_response(flood(100_000).as_bytes(), ReplyBounds::default(), &none),
            Err(TransportError::too_many_calls(16))
        );
    }

    #[test]
    fn every_field_of_a_whole_reply_is_redacted() {
        let key = "sk-abcdefghijklmnopqrstuvwxyz0123";
        let redactor = Redactor::new(Some(ApiKey::new(key).unwrap()));
        let body = serde_json::json!({"output": [
            {"type": "message", "content": [{"type": "output_text", "text": format!("{} {key}", ".".repeat(300))}]},
            {"type": "function_call", "call_id": format!("call_{key}"), "name": format!("key_{key}"), "arguments": format!("{{\"input\":\"{key}\"}}")}
        ]})
        .to_string();
        let reply = parse_response(body.as_bytes(), ReplyBounds::default(), &redactor).unwrap();
        assert_eq!(reply.content, Some(format!("{} [redacted]", ".".repeat(300))));
        assert_eq!(
            reply.tool_calls[0],
            ToolCall::new("call_[redacted]", "key_[redacted]", r#"{"input":"[redacted]"}"#)
        );
        let wrong = format!(r#"{{"output":"{key}"}}"#);
        let error = parse_response(wrong.as_bytes(), ReplyBounds::default(), &redactor).unwrap_err();
        assert!(!error.to_string().contains(&key[3..11]), "{error}");
    }
}
