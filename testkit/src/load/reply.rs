//! The bytes of a reply: one chat-completion JSON object, or the server-sent events of a stream.
//!
//! # Invariants
//!
//! - A whole reply and the concatenated events of a stream carry the same message: the same
//!   tool call (id, name, arguments) or the same text, and the same finish reason.
//! - Usage is deterministic, not a tokenizer's: prompt tokens are the request body's bytes
//!   divided by four (rounded up), completion tokens 12 for a tool call and 4 for the text. A
//!   whole reply always reports it; a stream reports it in one last chunk with empty `choices`,
//!   only when the request asked (`stream_options.include_usage`).
//! - A stream ends with `data: [DONE]`.
//! - Everything the client sent that is echoed (the model's name) is JSON-escaped.

use serde_json::{Value, json};

use super::script::Step;

/// Completion tokens reported for a tool call.
pub const CALL_TOKENS: u64 = 12;
/// Completion tokens reported for the closing text.
pub const TEXT_TOKENS: u64 = 4;

/// The usage figures of one reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt: u64,
    /// Completion tokens.
    pub completion: u64,
}

impl Usage {
    /// The usage of `step` answering a request of `body_bytes` bytes.
    #[must_use]
    pub fn of(step: Step, body_bytes: usize) -> Self {
        let prompt = u64::try_from(body_bytes.div_ceil(4)).unwrap_or(u64::MAX);
        let completion = if step.tool().is_some() { CALL_TOKENS } else { TEXT_TOKENS };
        Self { prompt, completion }
    }

    fn json(self) -> Value {
        json!({
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt.saturating_add(self.completion),
        })
    }
}

/// What one reply says, and to whom.
#[derive(Clone, Debug)]
pub struct Reply<'a> {
    /// The step of the script.
    pub step: Step,
    /// The id of the tool call, when the step calls a tool.
    pub call_id: &'a str,
    /// The model named in the request, echoed.
    pub model: &'a str,
    /// The usage figures.
    pub usage: Usage,
}

impl Reply<'_> {
    fn finish_reason(&self) -> &'static str {
        if self.step.tool().is_some() { "tool_calls" } else { "stop" }
    }

    fn tool_calls(&self, arguments: &str) -> Value {
        let name = self.step.tool().unwrap_or_default();
        json!([{
            "index": 0,
            "id": self.call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }])
    }

    /// The whole reply: one `chat.completion` object.
    #[must_use]
    pub fn whole(&self) -> Vec<u8> {
        let message = match self.step.text() {
            Some(text) => json!({"role": "assistant", "content": text}),
            None => {
                json!({"role": "assistant", "content": null, "tool_calls": self.tool_calls(&Step::arguments())})
            }
        };
        let body = json!({
            "id": "chatcmpl-load",
            "object": "chat.completion",
            "created": 0,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason()}],
            "usage": self.usage.json(),
        });
        body.to_string().into_bytes()
    }

    /// The events of a streamed reply, one `data:` line each, the last one `data: [DONE]`.
    #[must_use]
    pub fn events(&self, include_usage: bool) -> Vec<Vec<u8>> {
        let deltas = match self.step.text() {
            Some(text) => vec![json!({"role": "assistant", "content": text})],
            None => vec![
                json!({"role": "assistant", "content": null, "tool_calls": self.tool_calls("")}),
                json!({"tool_calls": [{"index": 0, "function": {"arguments": Step::arguments()}}]}),
            ],
        };
        let chunk = |choices: Value, usage: Value| {
            let mut chunk = json!({
                "id": "chatcmpl-load",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": self.model,
                "choices": choices,
            });
            if include_usage {
                chunk["usage"] = usage;
            }
            event(&chunk.to_string())
        };
        let mut events: Vec<Vec<u8>> = deltas
            .into_iter()
            .map(|delta| chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]), Value::Null))
            .collect();
        events.push(chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": self.finish_reason()}]),
            Value::Null,
        ));
        if include_usage {
            events.push(chunk(json!([]), self.usage.json()));
        }
        events.push(event("[DONE]"));
        events
    }
}

fn event(data: &str) -> Vec<u8> {
    format!("data: {data}\n\n").into_bytes()
}

#[cfg(test)]
mod tests {
    use loopbound::transport::{ModelReply, ReplyAssembler, ReplyBounds, ToolCall, Usage as CoreUsage};
    use loopbound_openai::Redactor;
    use loopbound_openai::chunks::ChatCompletions;
    use loopbound_openai::parse::parse_completion;
    use loopbound_provider::events::decode_stream;

    use super::*;

    fn reply(step: Step) -> Reply<'static> {
        Reply { step, call_id: "call_7_0", model: "m\"odel", usage: Usage::of(step, 401) }
    }

    fn expected(step: Step, usage: bool) -> ModelReply {
        let reply = match step.tool() {
            Some(name) => ModelReply::calls(vec![ToolCall::new("call_7_0", name, r#"{"input":42}"#)]),
            None => ModelReply::text("Review finished."),
        };
        if !usage {
            return reply;
        }
        let completion = if step.tool().is_some() { CALL_TOKENS } else { TEXT_TOKENS };
        reply.with_usage(CoreUsage::new(101, completion))
    }

    fn assembled(events: &[Vec<u8>]) -> ModelReply {
        let mut assembler = ReplyAssembler::default();
        for chunk in decode_stream::<ChatCompletions>(events.iter().map(Vec::as_slice)).unwrap() {
            assembler.push(chunk).unwrap();
        }
        assembler.finish()
    }

    #[test]
    fn a_whole_reply_reads_back_as_the_steps_message_with_usage() {
        for step in [Step::ReadTicket, Step::FinishReview, Step::Close] {
            let parsed = parse_completion(&reply(step).whole(), ReplyBounds::default(), &Redactor::default());
            assert_eq!(parsed.unwrap(), expected(step, true), "{step:?}");
        }
    }

    #[test]
    fn a_stream_reads_back_as_the_same_message_with_usage_only_when_asked() {
        for step in [Step::ReadTicket, Step::FinishReview, Step::Close] {
            let with = reply(step).events(true);
            assert_eq!(with.last().map(Vec::as_slice), Some(&b"data: [DONE]\n\n"[..]));
            assert_eq!(assembled(&with), expected(step, true), "{step:?}");
            assert_eq!(assembled(&reply(step).events(false)), expected(step, false), "{step:?}");
        }
    }

    #[test]
    fn usage_counts_the_body_and_the_step() {
        assert_eq!(Usage::of(Step::ReadTicket, 8), Usage { prompt: 2, completion: CALL_TOKENS });
        assert_eq!(Usage::of(Step::Close, 9), Usage { prompt: 3, completion: TEXT_TOKENS });
    }
}
