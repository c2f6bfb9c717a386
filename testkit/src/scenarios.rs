//! The review scenarios as the aimock fixtures script them (a `[scenario:…]` tag in the user's
//! request selects them), the scripted model each is compared with, and one run over any
//! transport: what every provider transport's HTTP tests play.
//!
//! # Invariants
//!
//! - [`Scenario::scripted_reply`] is what the fixtures (`testkit/fixtures/aimock-review.json`)
//!   answer, call by call, so a run over HTTP and a scripted run must agree on every event, the
//!   status, the text and the conversation.
//! - Each run gets a fresh scope and conversation; nothing carries over.

use crate::Composition;
use futures_util::StreamExt;
use loopbound::scripted::{Scripted, Step};
use loopbound::spend::Prices;
use loopbound::transport::{ChatOptions, ChatRequest, ModelReply, ReplyAssembler, Transport, TransportError};
use loopbound::{Limits, Message, Outcome, RunError, Scope, Status};
use tokio_util::sync::CancellationToken;

use crate::review::{self, BOTH_CAPABILITIES, COMPLETE_EVENTS, FINISH_CAPABILITY, Review};

/// A scenario of the review task, as the fixtures script it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Tag `complete`: calls `call_read_42` and `call_finish_42`, then the closing sentence.
    Complete,
    /// Tag `incomplete`: the closing sentence, and no call.
    Incomplete,
    /// Tag `forbidden`: call `call_forbidden` to a tool the scope does not grant.
    Forbidden,
    /// Tag `repeat`: calls `call_repeat_n`, all with the same arguments.
    Repeat,
    /// Tag `changing`: calls `call_changing_n`, each for ticket n.
    Changing,
    /// Tag `badargs`: call `call_bad` with a string for the integer, then a sentence.
    BadArguments,
}

impl Scenario {
    /// The user's request; its `[scenario:…]` tag selects the fixtures.
    pub fn request(self) -> String {
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
    pub fn grants(self) -> &'static [&'static str] {
        match self {
            Self::Forbidden => &[FINISH_CAPABILITY],
            _ => &BOTH_CAPABILITIES,
        }
    }

    /// What the scripted model answers on call `n` (1-based): the replies the fixtures hold.
    pub fn scripted_reply(self, n: u32) -> ModelReply {
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

    /// The status a run of this scenario ends with (SPEC §11), over any transport.
    pub fn status(self) -> Status {
        match self {
            Self::Complete => Status::Completed,
            Self::Incomplete | Self::BadArguments => Status::Incomplete,
            Self::Forbidden => Status::PermissionDenied,
            Self::Repeat => Status::RepeatedCall,
            Self::Changing => Status::ToolBudget,
        }
    }

    /// The events a run of this scenario records, as `Kind name count` lines, over any transport.
    pub fn events(self) -> Vec<String> {
        let lines: Vec<String> = match self {
            Self::Complete => COMPLETE_EVENTS.iter().map(|line| (*line).to_owned()).collect(),
            Self::Incomplete => vec!["ModelCall model 1".to_owned()],
            Self::Forbidden => {
                ["ModelCall model 1", "Middleware read_ticket 1", "PermissionDenied read_ticket 0"]
                    .map(str::to_owned)
                    .to_vec()
            }
            Self::Repeat => [
                "ModelCall model 1",
                "Middleware read_ticket 1",
                "ToolCall read_ticket 1",
                "ModelCall model 2",
                "Middleware read_ticket 2",
                "RepeatedCall read_ticket 1",
            ]
            .map(str::to_owned)
            .to_vec(),
            Self::Changing => (1..=4)
                .flat_map(|n| {
                    [
                        format!("ModelCall model {n}"),
                        format!("Middleware read_ticket {n}"),
                        format!("ToolCall read_ticket {n}"),
                    ]
                })
                .chain(["ModelCall model 5".to_owned(), "Middleware read_ticket 5".to_owned()])
                .chain(["ToolBudget read_ticket 4".to_owned()])
                .collect(),
            Self::BadArguments => ["ModelCall model 1", "Middleware read_ticket 1", "ModelCall model 2"]
                .map(str::to_owned)
                .to_vec(),
        };
        lines
    }

    /// The scripted transport playing this scenario.
    pub fn scripted(self) -> impl Transport {
        Scripted::new(move |n, _: &ChatRequest<'_>| Step::Reply(self.scripted_reply(n)))
    }
}

/// What one run produced.
#[derive(Debug)]
pub struct Run {
    /// The run's outcome, or why it had none.
    pub result: Result<Outcome, RunError>,
    /// The conversation as the run left it.
    pub conversation: Vec<Message>,
    /// Model calls the scope admitted.
    pub model_calls: u32,
    /// Tool calls the scope admitted.
    pub tool_calls: u32,
}

impl Run {
    /// The outcome, which the run must have produced.
    pub fn outcome(&self) -> &Outcome {
        self.result.as_ref().unwrap_or_else(|error| panic!("the run failed: {error}"))
    }

    /// The events, as `"ModelCall model 1"` strings.
    pub fn events(&self) -> Vec<String> {
        self.outcome().events().iter().map(ToString::to_string).collect()
    }
}

/// Runs `scenario` in a fresh scope over `transport`.
pub async fn run<T: Transport>(
    scenario: Scenario,
    composition: Composition,
    streaming: bool,
    transport: T,
) -> Run {
    run_with(scenario, composition, streaming, Limits::default(), transport).await
}

/// As [`run`], with the per-call `options` in place of the review's (a test of how a transport
/// sends or refuses them).
pub async fn run_with_options<T: Transport>(
    scenario: Scenario,
    composition: Composition,
    streaming: bool,
    options: ChatOptions,
    transport: T,
) -> Run {
    let scope = review::scope(scenario.grants().iter().copied(), Limits::default()).expect("limits");
    play(scenario, composition, streaming, &scope, options, transport).await
}

/// As [`run`], with explicit limits.
pub async fn run_with<T: Transport>(
    scenario: Scenario,
    composition: Composition,
    streaming: bool,
    limits: Limits,
    transport: T,
) -> Run {
    let scope = review::scope(scenario.grants().iter().copied(), limits).expect("limits");
    play(scenario, composition, streaming, &scope, review::options(), transport).await
}

/// As [`run_with`], the scope pricing calls with `prices` (the tools free unless `prices`
/// names them): how a transport's [`model`](Transport::model) is checked to price its calls
/// under a cost budget.
pub async fn run_priced<T: Transport>(
    scenario: Scenario,
    composition: Composition,
    streaming: bool,
    limits: Limits,
    prices: Prices,
    transport: T,
) -> Run {
    let scope = Scope::builder()
        .grants(scenario.grants().iter().copied())
        .limits(limits)
        .prices(prices.other_tools(loopbound::spend::Micros::ZERO).shared())
        .state(Review::default())
        .build()
        .expect("limits");
    play(scenario, composition, streaming, &scope, review::options(), transport).await
}

/// Runs `scenario` in `scope` over `transport`, with the per-call `options`.
async fn play<T: Transport>(
    scenario: Scenario,
    composition: Composition,
    streaming: bool,
    scope: &Scope<Review>,
    options: ChatOptions,
    transport: T,
) -> Run {
    let mut conversation = vec![Message::user(scenario.request())];
    let result = composition
        .runner(&review::tools().set, transport)
        .options(options)
        .streaming(streaming)
        .run(scope, &mut conversation, |ended| ended.state().completed())
        .await;
    Run { result, conversation, model_calls: scope.model_calls(), tool_calls: scope.tool_calls() }
}

/// Runs `scenario` over a fresh `transport()` on each of `paths` and checks the run against the
/// scenario's status and events and against the scripted run: the same events, status, text,
/// conversation and counts. `log` is printed when the status differs (the server's log).
///
/// # Panics
///
/// When the run over `transport` differs, naming the scenario, composition and path.
pub async fn compare<T: Transport>(
    scenario: Scenario,
    paths: &[(Composition, bool)],
    transport: impl Fn() -> T,
    log: impl Fn() -> String,
) {
    for &(composition, streaming) in paths {
        let context = format!("{scenario:?} {composition} streaming={streaming}");
        let live = run(scenario, composition, streaming, transport()).await;
        let scripted = run(scenario, composition, streaming, scenario.scripted()).await;
        assert_eq!(live.outcome().status(), scenario.status(), "{context}\n{}", log());
        assert_eq!(live.events(), scenario.events(), "{context}");
        assert_eq!(
            live.events(),
            scripted.events(),
            "{context}: the transport's and the scripted events differ"
        );
        assert_eq!(live.outcome().status(), scripted.outcome().status(), "{context}");
        assert_eq!(live.outcome().text(), scripted.outcome().text(), "{context}");
        assert_eq!(live.conversation, scripted.conversation, "{context}: conversations differ");
        assert_eq!(
            (live.model_calls, live.tool_calls),
            (scripted.model_calls, scripted.tool_calls),
            "{context}"
        );
    }
}

/// Checks that `transport()` refuses `options` with the error `refused` (of kind
/// `Unsupported`) before anything is sent: a run of the complete review ends with
/// [`RunError::Unsupported`] before any call, in both compositions and on both paths, and a host
/// that calls the transport itself gets the same error from `check_options`, `complete` and
/// `stream`. The caller checks that its server received nothing.
///
/// # Panics
///
/// When any of them differs, naming the path.
pub async fn assert_refused<T: Transport>(
    transport: impl Fn() -> T,
    options: &ChatOptions,
    refused: &TransportError,
) {
    for (composition, streaming) in PATHS {
        let run =
            run_with_options(Scenario::Complete, composition, streaming, options.clone(), transport()).await;
        let context = format!("{composition} streaming={streaming}");
        assert_eq!(run.result, Err(RunError::Unsupported(refused.clone())), "{context}");
        assert_eq!((run.model_calls, run.tool_calls), (0, 0), "nothing ran: {context}");
    }
    let transport = transport();
    let messages = [Message::user("Hello")];
    let cancel = CancellationToken::new();
    assert_eq!(transport.check_options(options).as_ref(), Err(refused));
    let whole = transport.complete(ChatRequest::new(&messages, &[], options, &cancel)).await;
    assert_eq!(whole.as_ref(), Err(refused), "a direct whole call");
    let streamed = transport.stream(ChatRequest::new(&messages, &[], options, &cancel)).await;
    assert_eq!(streamed.err().as_ref(), Some(refused), "a direct streamed call");
}

/// Calls `transport` once, directly, with the request `Hello` and no tool, on the whole or the
/// streaming path (the stream assembled within the default bounds), with `cancel`: how a
/// transport's failures are tested without a run around them.
///
/// # Errors
///
/// The transport's error, or the assembler's.
pub async fn call(
    transport: &impl Transport,
    streaming: bool,
    cancel: &CancellationToken,
) -> Result<ModelReply, TransportError> {
    let messages = [Message::user("Hello")];
    let options = ChatOptions::default();
    let request = ChatRequest::new(&messages, &[], &options, cancel);
    if !streaming {
        return transport.complete(request).await;
    }
    let mut chunks = std::pin::pin!(transport.stream(request).await?);
    let mut reply = ReplyAssembler::default();
    while let Some(chunk) = chunks.next().await {
        reply.push(chunk?)?;
    }
    Ok(reply.finish())
}

/// Every composition and call path.
pub const PATHS: [(Composition, bool); 4] = [
    (Composition::Harness, false),
    (Composition::Harness, true),
    (Composition::Simple, false),
    (Composition::Simple, true),
];
