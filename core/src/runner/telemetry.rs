//! The runner's tracing spans, named and attributed after the OpenTelemetry semantic
//! conventions for generative AI, version 1.41.0 (the last release of the
//! `open-telemetry/semantic-conventions` repository that holds them; they are at "development"
//! status there):
//!
//! | span | name (`otel.name`) | kind | attributes |
//! |---|---|---|---|
//! | the run | `invoke_agent` | internal | `gen_ai.operation.name` = `invoke_agent`, `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.conversation.id` and `loopbound.run.id` (a journaled run's id), and when it ends `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`, `loopbound.run.status` (the status, or `error`), `error.type` (a [`RunErrorKind`](crate::RunErrorKind)) |
//! | each model call | `chat {gen_ai.request.model}` (`chat` when the transport names no model) | client | `gen_ai.operation.name` = `chat`, `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.request.max_tokens`, `gen_ai.request.stream`, and when it returns `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`, `gen_ai.usage.cache_read.input_tokens`, or `error.type` |
//! | each tool call | `execute_tool {gen_ai.tool.name}` | internal | `gen_ai.operation.name` = `execute_tool`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type` = `function`, and `error.type` = `tool_error` when the model gets an error |
//!
//! Tracing's span names are fixed strings, so each span's name is its operation (`chat`), and
//! the full name goes in `otel.name`, which `tracing-opentelemetry` exports as the span's name
//! (and `otel.kind` as its kind).
//!
//! # Invariants
//!
//! - No span carries an argument's value, a tool's result or the model's text: the conventions'
//!   opt-in content attributes (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`,
//!   `gen_ai.input.messages`, `gen_ai.output.messages`) are never set.
//! - Spans are emitted unless the host turned them off ([`Runner::spans`]); without them every
//!   function here returns a disabled span, which costs nothing.

use tracing::Span;
use tracing::field::Empty;

use super::Runner;
use crate::RunId;
use crate::outcome::{Outcome, RunError};
use crate::transport::{ToolCall, Transport, Usage};

impl<T: Transport, S> Runner<T, S> {
    /// The run's `invoke_agent` span.
    pub(crate) fn agent_span(&self, run: Option<&RunId>) -> Span {
        if !self.spans {
            return Span::none();
        }
        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = "invoke_agent",
            otel.kind = "internal",
            gen_ai.operation.name = "invoke_agent",
            gen_ai.provider.name = self.transport.provider_name(),
            gen_ai.request.model = Empty,
            gen_ai.conversation.id = Empty,
            loopbound.run.id = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            loopbound.run.status = Empty,
            error.type = Empty,
        );
        if let Some(model) = self.transport.model() {
            span.record("gen_ai.request.model", model);
        }
        if let Some(run) = run {
            span.record("gen_ai.conversation.id", run.as_str());
            span.record("loopbound.run.id", run.as_str());
        }
        span
    }

    /// One model call's `chat` span.
    pub(crate) fn chat_span(&self) -> Span {
        if !self.spans {
            return Span::none();
        }
        let model = self.transport.model();
        let name = model.map_or_else(|| "chat".to_owned(), |model| format!("chat {model}"));
        let span = tracing::info_span!(
            "chat",
            otel.name = name.as_str(),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = self.transport.provider_name(),
            gen_ai.request.model = Empty,
            gen_ai.request.max_tokens = Empty,
            gen_ai.request.stream = self.streaming,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.usage.cache_read.input_tokens = Empty,
            error.type = Empty,
        );
        if let Some(model) = model {
            span.record("gen_ai.request.model", model);
        }
        if let Some(tokens) = self.options.max_output_tokens {
            span.record("gen_ai.request.max_tokens", tokens);
        }
        span
    }

    /// One tool call's `execute_tool` span: the tool's name as the model wrote it and the
    /// provider's call id, never the arguments.
    pub(crate) fn tool_span(&self, call: &ToolCall) -> Span {
        if !self.spans {
            return Span::none();
        }
        let name = format!("execute_tool {}", call.name);
        tracing::info_span!(
            "execute_tool",
            otel.name = name.as_str(),
            otel.kind = "internal",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = call.name.as_str(),
            gen_ai.tool.call.id = call.id.as_str(),
            gen_ai.tool.type = "function",
            error.type = Empty,
        )
    }
}

/// Records a model call's reported usage on its span.
pub(crate) fn record_usage(span: &Span, usage: Usage) {
    span.record("gen_ai.usage.input_tokens", usage.input_tokens);
    span.record("gen_ai.usage.output_tokens", usage.output_tokens);
    span.record("gen_ai.usage.cache_read.input_tokens", usage.cached_input_tokens);
}

/// Records how the run ended on its span.
pub(crate) fn record_end(span: &Span, result: &Result<Outcome, RunError>) {
    match result {
        Ok(outcome) => {
            span.record("loopbound.run.status", outcome.status().as_str());
            if let Some(usage) = outcome.usage() {
                span.record("gen_ai.usage.input_tokens", usage.input_tokens);
                span.record("gen_ai.usage.output_tokens", usage.output_tokens);
            }
        }
        Err(error) => {
            span.record("loopbound.run.status", "error");
            span.record("error.type", error.kind().as_str());
        }
    }
}
