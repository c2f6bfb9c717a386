//! A service-shaped use of loopbound: the tools and the runtime are built once at start-up and
//! shared; every request opens its own scope, with its own grants, limits, deadline, counters,
//! events and state, and is bounded independently of the others.
//!
//! Run it with `cargo run -p loopbound --example service`; `cargo test -p loopbound --example
//! service` asserts every request's status, events and state.
//!
//! The "model" is a pure function of the conversation, so one transport serves every request:
//! what it asks for depends on the request's own text. Four kinds of request are mixed:
//!
//! | request | grants | the model | ends with |
//! |---|---|---|---|
//! | polite | read + refund | looks the order up, refunds it, says so | `Completed` |
//! | looping | read + refund | looks the same order up forever | `RepeatedCall` |
//! | greedy | read + refund | refunds order 1, 2, 3, … | `ToolBudget` |
//! | forbidden | read only | looks the order up, then tries to refund it | `PermissionDenied` |

use std::sync::Arc;
use std::sync::Mutex;

use loopbound::scripted::{Scripted, Step};
use loopbound::transport::ChatRequest;
use loopbound::{Limits, Message, Outcome, Runner, Scope, ToolBuilder, ToolContext, ToolSet};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The state of one request: what its tools did, in host memory.
#[derive(Debug, Default)]
struct Desk {
    lookups: Mutex<Vec<u64>>,
    refunds: Mutex<Vec<u64>>,
}

impl Desk {
    fn refunds(&self) -> Vec<u64> {
        self.refunds.lock().map(|refunds| refunds.clone()).unwrap_or_default()
    }
}

/// The input of both tools.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Order {
    /// The order's id.
    order_id: u64,
}

/// The tools, defined once: each body reaches its own request's state through its call.
fn tools() -> Result<ToolSet<Desk>, loopbound::RegistrationError> {
    let lookup_order = ToolBuilder::new("lookup_order", "orders.read")
        .description("Look an order up by its id.")
        .build(|order: Order, call: ToolContext<Desk>| {
            if let Ok(mut lookups) = call.state().lookups.lock() {
                lookups.push(order.order_id);
            }
            async move { Ok::<_, String>(format!("Order {}: delivered, 12.50 EUR.", order.order_id)) }
        })?;
    let refund_order = ToolBuilder::new("refund_order", "orders.refund")
        .description("Refund an order in full.")
        .build(|order: Order, call: ToolContext<Desk>| {
            if let Ok(mut refunds) = call.state().refunds.lock() {
                refunds.push(order.order_id);
            }
            async move { Ok::<_, String>(format!("Order {} refunded.", order.order_id)) }
        })?;
    ToolSet::builder().add(&lookup_order).add(&refund_order).build()
}

/// The kinds of request this service receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Polite,
    Looping,
    Greedy,
    Forbidden,
}

impl Kind {
    fn of(request: usize) -> Self {
        [Self::Polite, Self::Looping, Self::Greedy, Self::Forbidden][request % 4]
    }

    fn name(self) -> &'static str {
        match self {
            Self::Polite => "polite",
            Self::Looping => "looping",
            Self::Greedy => "greedy",
            Self::Forbidden => "forbidden",
        }
    }
}

/// The model: reads the request's kind and order from the user's message and counts the tool
/// results so far, then answers accordingly.
fn model(_call: u32, request: &ChatRequest<'_>) -> Step {
    let Some(Message::User { content, .. }) = request.messages.first() else {
        return Scripted::reply("I did not understand.");
    };
    let mut words = content.split_whitespace();
    let (kind, order) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
    let done = request.messages.iter().filter(|message| matches!(message, Message::Tool { .. })).count();
    let call = |name: &str, id: &str| Scripted::call(name, format!(r#"{{"order_id":{id}}}"#));
    match (kind, done) {
        ("looping", _) => call("lookup_order", order),
        ("greedy", _) => call("refund_order", &(done + 1).to_string()),
        (_, 0) => call("lookup_order", order),
        (_, 1) => call("refund_order", order),
        _ => Scripted::reply(format!("Order {order} is refunded.")),
    }
}

/// What one request ended with.
#[derive(Debug)]
struct Served {
    kind: Kind,
    #[cfg_attr(not(test), allow(dead_code, reason = "read by the test"))]
    order: u64,
    outcome: Outcome,
    refunds: Vec<u64>,
}

/// Serves `requests` concurrent requests with one set of tools and one runtime.
async fn serve(requests: usize) -> Result<Vec<Served>, Box<dyn std::error::Error + Send + Sync>> {
    let runtime = Arc::new(Runner::new(&tools()?, Scripted::new(model)));
    let mut handles = Vec::with_capacity(requests);
    for request in 0..requests {
        let runtime = Arc::clone(&runtime);
        handles.push(tokio::spawn(async move {
            let kind = Kind::of(request);
            let order = 1000 + request as u64;
            let mut scope = Scope::builder().grant("orders.read").limits(Limits::default());
            if kind != Kind::Forbidden {
                scope = scope.grant("orders.refund");
            }
            let scope = scope.state(Desk::default()).build()?;
            let mut conversation = vec![Message::user(format!("{} {order}", kind.name()))];
            // The host's completion condition: exactly this order was refunded, once.
            let outcome =
                runtime.run(&scope, &mut conversation, |ended| ended.state().refunds() == [order]).await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(Served {
                kind,
                order,
                outcome,
                refunds: scope.state().refunds(),
            })
        }));
    }
    let mut served = Vec::with_capacity(requests);
    for handle in handles {
        served.push(handle.await??);
    }
    Ok(served)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let served = serve(64).await?;
    println!("64 concurrent requests, one set of tools, one runtime:");
    for kind in [Kind::Polite, Kind::Looping, Kind::Greedy, Kind::Forbidden] {
        let of_kind: Vec<&Served> = served.iter().filter(|s| s.kind == kind).collect();
        let mut statuses: Vec<&str> = of_kind.iter().map(|s| s.outcome.status().as_str()).collect();
        statuses.dedup();
        let refunds: usize = of_kind.iter().map(|s| s.refunds.len()).sum();
        println!(
            "  {:<10} {:>2} requests, status {}, {refunds} refunds in all",
            kind.name(),
            of_kind.len(),
            statuses.join(" / "),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopbound::Status;

    fn lines(outcome: &Outcome) -> Vec<String> {
        outcome.events().iter().map(ToString::to_string).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sixty_four_concurrent_requests_are_each_bounded_on_their_own() {
        let served = serve(64).await.expect("every request runs");
        assert_eq!(served.len(), 64);
        for s in &served {
            let (events, order) = (lines(&s.outcome), s.order);
            match s.kind {
                Kind::Polite => {
                    assert_eq!(s.outcome.status(), Status::Completed, "{order}");
                    assert_eq!(s.outcome.text(), Some(format!("Order {order} is refunded.").as_str()));
                    assert_eq!(s.refunds, [order]);
                    assert_eq!(
                        events,
                        [
                            "ModelCall model 1",
                            "ToolCall lookup_order 1",
                            "ModelCall model 2",
                            "ToolCall refund_order 2",
                            "ModelCall model 3",
                        ]
                    );
                }
                Kind::Looping => {
                    assert_eq!(s.outcome.status(), Status::RepeatedCall, "{order}");
                    assert_eq!(s.refunds, [] as [u64; 0]);
                    assert_eq!(
                        events,
                        [
                            "ModelCall model 1",
                            "ToolCall lookup_order 1",
                            "ModelCall model 2",
                            "RepeatedCall lookup_order 1",
                        ]
                    );
                }
                Kind::Greedy => {
                    assert_eq!(s.outcome.status(), Status::ToolBudget, "{order}");
                    assert_eq!(s.refunds, [1, 2, 3, 4], "the budget of 4 held for request {order}");
                    assert_eq!(events.last().map(String::as_str), Some("ToolBudget refund_order 4"));
                    assert_eq!(events.len(), 10);
                }
                Kind::Forbidden => {
                    assert_eq!(s.outcome.status(), Status::PermissionDenied, "{order}");
                    assert_eq!(s.refunds, [] as [u64; 0]);
                    assert_eq!(events.last().map(String::as_str), Some("PermissionDenied refund_order 1"));
                }
            }
        }
    }
}
