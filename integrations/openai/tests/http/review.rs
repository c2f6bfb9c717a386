//! The review scenarios for these tests, and the scripted model each scenario is compared with.

use loopbound::scripted::{Scripted, Step};
use loopbound::transport::{ChatRequest, ModelReply, Transport};
use loopbound::{Composition, Limits, Message, Outcome, RunError, Runtime};

use loopbound_testkit::review::{self, BOTH_CAPABILITIES, FINISH_CAPABILITY, Review};

/// A scenario of the review task, as the fixtures script it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scenario {
    Complete,
    Incomplete,
    Forbidden,
    Repeat,
    Changing,
    BadArguments,
}

impl Scenario {
    /// The user's request; its `[scenario:…]` tag selects the fixtures.
    pub(crate) fn request(self) -> String {
        let tag = match self {
            Self::Complete => "complete",
            Self::Incomplete => "incomplete",
            Self::Forbidden => "forbidden",
            Self::Repeat => "repeat",
            Self::Changing => "changing",
            Self::BadArguments => "badargs",
        };
        format!("Review ticket 42, then finish the review. [scenario:{tag}]")
    }

    /// The capabilities the host grants.
    pub(crate) fn grants(self) -> &'static [&'static str] {
        match self {
            Self::Forbidden => &[FINISH_CAPABILITY],
            _ => &BOTH_CAPABILITIES,
        }
    }

    /// What the scripted model answers on call `n` (1-based): the replies the fixtures hold.
    pub(crate) fn scripted_reply(self, n: u32) -> ModelReply {
        let read =
            |id: &str, input: &str| ModelReply::call(id, "read_ticket", format!("{{\"input\":{input}}}"));
        match (self, n) {
            (Self::Complete, 1) => read("call_read_42", "42"),
            (Self::Complete, 2) => ModelReply::call("call_finish_42", "finish_review", r#"{"input":42}"#),
            (Self::Complete | Self::Incomplete, _) => ModelReply::text("Review finished."),
            (Self::Forbidden, _) => read("call_forbidden", "42"),
            (Self::Repeat, n) => read(&format!("call_repeat_{n}"), "42"),
            (Self::Changing, n) => read(&format!("call_changing_{n}"), &n.to_string()),
            (Self::BadArguments, 1) => read("call_bad", "\"forty-two\""),
            (Self::BadArguments, _) => ModelReply::text("I could not read the ticket."),
        }
    }

    /// The scripted transport playing this scenario.
    pub(crate) fn scripted(self) -> impl Transport {
        Scripted::new(move |n, _: &ChatRequest<'_>| Step::Reply(self.scripted_reply(n)))
    }
}

/// What one run produced.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) result: Result<Outcome, RunError>,
    pub(crate) conversation: Vec<Message>,
    pub(crate) model_calls: u32,
    pub(crate) tool_calls: u32,
}

impl Run {
    /// The outcome, which the run must have produced.
    pub(crate) fn outcome(&self) -> &Outcome {
        self.result.as_ref().unwrap_or_else(|error| panic!("the run failed: {error}"))
    }

    /// The events, as `"ModelCall model 1"` strings.
    pub(crate) fn events(&self) -> Vec<String> {
        self.outcome().events().iter().map(ToString::to_string).collect()
    }
}

/// Runs `scenario` in a fresh scope over `transport`.
pub(crate) async fn run<T: Transport>(
    scenario: Scenario,
    composition: Composition,
    streaming: bool,
    transport: T,
) -> Run {
    run_with(scenario, composition, streaming, Limits::default(), transport).await
}

/// As [`run`], with explicit limits.
pub(crate) async fn run_with<T: Transport>(
    scenario: Scenario,
    composition: Composition,
    streaming: bool,
    limits: Limits,
    transport: T,
) -> Run {
    let scope = review::scope(scenario.grants().iter().copied(), limits).expect("limits");
    let mut conversation = vec![Message::user(scenario.request())];
    let result = Runtime::new(composition, &review::tools().set, transport)
        .options(review::options())
        .streaming(streaming)
        .run(&scope, &mut conversation, Review::completed)
        .await;
    Run { result, conversation, model_calls: scope.model_calls(), tool_calls: scope.tool_calls() }
}

/// Every composition and call path.
pub(crate) const PATHS: [(Composition, bool); 4] = [
    (Composition::Harness, false),
    (Composition::Harness, true),
    (Composition::Simple, false),
    (Composition::Simple, true),
];
