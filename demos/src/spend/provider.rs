//! The scripted provider of the spend scenarios: it answers as its script says and reports the
//! usage an honest provider would, and it keeps its own record of what it was sent and billed.
//!
//! # Invariants
//!
//! - It is honest: the input it reports is a quarter of the bytes of the request's messages and
//!   tool definitions as JSON (about what a real tokenizer reads of English), never more than
//!   the console's default counter reserved for them (UTF-8 bytes plus a per-message overhead);
//!   the output it reports is a quarter of the reply's bytes, rounded up, and never more than the
//!   output cap the request was sent with.
//! - Its record ([`Bills`]) is the provider's side of the ledger, kept apart from the run: one
//!   entry per call it received, in order, with the cap it was sent and the usage it reported.

use std::sync::{Arc, Mutex, PoisonError};

use loopbound::scripted::{Scripted, Step};
use loopbound::transport::{ChatRequest, ModelReply, Usage};
use serde::Serialize;

/// One call the provider received: who sent it, the output cap it came with, what it reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Bill {
    /// The agent that sent it (`reviewer`, `planner`, `reviewer 2`, …).
    pub agent: &'static str,
    /// The output cap the request was sent with.
    pub output_cap: Option<u32>,
    /// The usage the provider reported for it.
    pub usage: Usage,
}

/// The provider's record of every call, shared by the providers of one run's agents.
#[derive(Clone, Debug, Default)]
pub struct Bills(Arc<Mutex<Vec<Bill>>>);

impl Bills {
    /// Every call so far, in the order received.
    #[must_use]
    pub fn all(&self) -> Vec<Bill> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The usage reported over every call.
    #[must_use]
    pub fn total(&self) -> Usage {
        self.all().iter().fold(Usage::default(), |mut sum, bill| {
            sum += bill.usage;
            sum
        })
    }

    fn push(&self, bill: Bill) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(bill);
    }
}

/// A scripted transport naming `model`, for `agent`: `script` gives its n-th reply (1-based),
/// which goes out with the usage an honest provider reports, recorded in `bills`.
pub fn honest<F>(
    model: &'static str,
    agent: &'static str,
    bills: &Bills,
    script: F,
) -> Scripted<impl Fn(u32, &ChatRequest<'_>) -> Step + Send + Sync + use<F>>
where
    F: Fn(u32) -> ModelReply + Send + Sync,
{
    let bills = bills.clone();
    Scripted::new(move |call, request: &ChatRequest<'_>| {
        let reply = script(call);
        let usage = usage(request, &reply);
        bills.push(Bill { agent, output_cap: request.options.max_output_tokens, usage });
        Step::Reply(reply.with_usage(usage))
    })
    .with_model(model)
}

/// What an honest provider reports for `reply` to `request`.
fn usage(request: &ChatRequest<'_>, reply: &ModelReply) -> Usage {
    let input = (json_len(request.messages) + json_len(request.tools)) / 4;
    let written = reply.content.as_ref().map_or(0, String::len)
        + reply.tool_calls.iter().map(|call| call.name.len() + call.arguments.len()).sum::<usize>();
    let output = (written as u64).div_ceil(4);
    let cap = request.options.max_output_tokens.map_or(u64::MAX, u64::from);
    Usage::new(input as u64, output.min(cap))
}

/// The length of `value`'s JSON text.
fn json_len<T: Serialize + ?Sized>(value: &T) -> usize {
    serde_json::to_vec(value).map_or(0, |bytes| bytes.len())
}

#[cfg(test)]
mod tests {
    use loopbound::transport::{ChatOptions, Message};
    use loopbound::{CancellationToken, Runner, Scope};

    use super::*;

    #[test]
    fn the_reported_output_stays_within_the_cap() {
        let messages = [Message::user("x".repeat(400))];
        let options = ChatOptions::default().with_max_output_tokens(3);
        let cancel = CancellationToken::new();
        let request = ChatRequest::new(&messages, &[], &options, &cancel);
        let usage = usage(&request, &ModelReply::text("y".repeat(40)));
        assert_eq!(usage.output_tokens, 3, "10 written, capped at 3");
        // The messages' JSON and the empty list of tools, `[]`.
        assert_eq!(usage.input_tokens, (r#"[{"role":"user","content":""}]"#.len() as u64 + 400 + 2) / 4);
        let uncapped = ChatOptions::default();
        let request = ChatRequest::new(&messages, &[], &uncapped, &cancel);
        assert_eq!(usage_of(&request, "y".repeat(41)).output_tokens, 11);
    }

    fn usage_of(request: &ChatRequest<'_>, text: String) -> Usage {
        usage(request, &ModelReply::text(text))
    }

    #[tokio::test]
    async fn its_reports_never_exceed_the_default_counters_reservation() {
        let bills = Bills::default();
        let review = loopbound_fixtures::review::tools();
        let model = honest("m", "reviewer", &bills, |n| {
            ModelReply::call(format!("c{n}"), "read_ticket", format!(r#"{{"input":{n}}}"#))
        });
        let scope = Scope::builder()
            .grants(loopbound_fixtures::review::BOTH_CAPABILITIES)
            .limits(
                loopbound::Limits::default()
                    .with_total_tokens(20_000)
                    .with_tool_calls(20)
                    .with_model_calls(8),
            )
            .state(loopbound_fixtures::review::Review::default())
            .build()
            .unwrap();
        let outcome = Runner::new(&review.set, &model)
            .observe(loopbound::Middleware)
            .run(&scope, &mut loopbound_fixtures::review::conversation(), |_| false)
            .await
            .unwrap();
        assert_eq!(outcome.status(), loopbound::Status::ModelBudget);
        assert_eq!(outcome.spend().calls_over_reservation, 0, "every report within its reservation");
        assert_eq!(outcome.spend().settled, bills.total());
        assert_eq!(bills.all().len(), 8);
    }
}
