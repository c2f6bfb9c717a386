//! A tree of agents: a child scope opened from a call is bounded by its own limits and by every
//! ancestor's at once, whatever the fan-out and the concurrency; a parent's stop stops its
//! children; a child's own halt ends the child only.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::Slow;
use loopbound::scripted::{Scripted, Step, sequence};
use loopbound::transport::{ChatRequest, ModelReply, Usage};
use loopbound::{
    CancellationToken, HaltReason, Limits, LimitsError, Message, RunError, Runner, Scope, Status, SubAgent,
    ToolBuilder, ToolContext, ToolSet,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize, JsonSchema)]
struct Page {
    n: u32,
}

/// A `fetch` tool counting its bodies.
fn fetch(bodies: &Arc<AtomicU32>) -> ToolSet {
    let ran = Arc::clone(bodies);
    let fetch = ToolBuilder::new("fetch", "web.read")
        .build(move |page: Page, _call: ToolContext| {
            ran.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, String>(format!("page {}", page.n)) }
        })
        .unwrap();
    ToolSet::builder().add(&fetch).build().unwrap()
}

/// A model that fetches page n on its n-th call forever, an honest provider: it reads 10
/// tokens and writes at most 50, within the request's cap.
fn runaway() -> Scripted<impl Fn(u32, &ChatRequest<'_>) -> Step + Send + Sync> {
    Scripted::new(|n, request| {
        let output = request.options.max_output_tokens.map_or(50, |cap| cap.min(50));
        let usage = Usage::new(10, u64::from(output));
        Step::Reply(ModelReply::call(format!("c{n}"), "fetch", format!(r#"{{"n":{n}}}"#)).with_usage(usage))
    })
}

#[test]
fn a_child_is_granted_only_what_its_parent_has_and_takes_no_caller_of_its_own() {
    let parent = Scope::builder().grant("web.read").build().unwrap();
    assert_eq!(parent.child().grant("payments.refund").build().err(), Some(LimitsError::GrantsBeyondParent));
    assert_eq!(parent.child().caller(CancellationToken::new()).build().err(), Some(LimitsError::ChildCaller));
    assert!(parent.child().grant("web.read").build().is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_childs_deadline_is_within_its_parents_and_the_parents_stop_stops_it() {
    let caller = CancellationToken::new();
    let parent = Scope::builder()
        .caller(caller.clone())
        .limits(Limits::default().with_deadline(Duration::from_secs(10)))
        .build()
        .unwrap();
    let child =
        parent.child().limits(Limits::default().with_deadline(Duration::from_secs(60))).build().unwrap();
    assert_eq!(child.deadline(), parent.deadline());
    caller.cancel();
    assert!(child.token().is_cancelled(), "the parent's caller stops the child at once");
    assert_eq!(child.admit_model(), Err(loopbound::Stop::Cancelled));
}

#[tokio::test]
async fn a_child_that_exhausts_a_budget_of_its_parent_halts_both() {
    let bodies = Arc::new(AtomicU32::new(0));
    let parent =
        Scope::builder().grant("web.read").limits(Limits::default().with_tool_calls(2)).build().unwrap();
    let child = parent
        .child()
        .grant("web.read")
        .limits(Limits::default().with_tool_calls(10).with_model_calls(10))
        .build()
        .unwrap();
    let outcome =
        Runner::new(&fetch(&bodies), runaway()).run(&child, &mut Vec::new(), |_| false).await.unwrap();
    assert_eq!(outcome.status(), Status::ToolBudget);
    assert_eq!(bodies.load(Ordering::SeqCst), 2, "the parent's two tool calls");
    assert_eq!(parent.stop_reason(), Some(HaltReason::ToolBudget));
    assert_eq!(parent.tool_calls(), 0, "the parent's own counter counts its own calls");
    assert_eq!((parent.tree_tool_calls(), parent.tree_model_calls()), (2, child.model_calls()));
    assert_eq!((child.tree_tool_calls(), child.tool_calls()), (2, 2), "a leaf's tree is itself");
}

#[tokio::test]
async fn a_parents_tree_totals_count_its_own_calls_and_every_childs() {
    let bodies = Arc::new(AtomicU32::new(0));
    let parent = Scope::builder()
        .grant("web.read")
        .limits(Limits::default().with_model_calls(20).with_tool_calls(20))
        .build()
        .unwrap();
    assert_eq!(parent.admit_model(), Ok(1));
    let child = |model_calls| {
        parent
            .child()
            .grant("web.read")
            .limits(Limits::default().with_model_calls(model_calls))
            .build()
            .unwrap()
    };
    let (first, second) = (child(3), child(2));
    let runtime = Runner::new(&fetch(&bodies), runaway());
    // Each child's model calls for one fetch per call until its own model budget halts it.
    let ends = [
        runtime.run(&first, &mut Vec::new(), |_| false).await.map(|o| o.status()),
        runtime.run(&second, &mut Vec::new(), |_| false).await.map(|o| o.status()),
    ];
    assert_eq!(ends, [Ok(Status::ModelBudget), Ok(Status::ModelBudget)]);
    assert_eq!((first.model_calls(), first.tool_calls()), (3, 3));
    assert_eq!((second.model_calls(), second.tool_calls()), (2, 2));
    assert_eq!((first.tree_model_calls(), first.tree_tool_calls()), (3, 3), "a leaf's tree is itself");
    assert_eq!((parent.model_calls(), parent.tool_calls()), (1, 0), "the parent's own calls");
    assert_eq!((parent.tree_model_calls(), parent.tree_tool_calls()), (6, 5), "its own and its children's");
    assert_eq!(bodies.load(Ordering::SeqCst), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_children_in_parallel_never_spend_past_their_parents_budgets() {
    const TOKENS: u64 = 3_700;
    const TOOLS: u32 = 13;
    for round in 0..1_000 {
        let bodies = Arc::new(AtomicU32::new(0));
        let parent = Scope::builder()
            .grant("web.read")
            .limits(
                Limits::default().with_total_tokens(TOKENS).with_tool_calls(TOOLS).with_model_calls(1_000),
            )
            .build()
            .unwrap();
        let tools = fetch(&bodies);
        let children: Vec<_> = (0..8)
            .map(|_| {
                let child = parent
                    .child()
                    .grant("web.read")
                    .limits(
                        Limits::default().with_model_calls(100).with_tool_calls(100).with_repetitions(100),
                    )
                    .build()
                    .unwrap();
                let runtime = Runner::new(&tools, runaway());
                tokio::spawn(async move { runtime.run(&child, &mut Vec::new(), |_| false).await })
            })
            .collect();
        let mut ends = Vec::with_capacity(8);
        for child in children {
            ends.push(child.await.unwrap().map(|outcome| outcome.status()));
        }
        // A spent shared budget is a halt for every child, the parent's, never a cancellation.
        let parents = parent.stop_reason().map(Status::from);
        assert!(
            matches!(parents, Some(Status::TokenBudget | Status::ToolBudget)),
            "round {round}: {parents:?}"
        );
        assert!(ends.iter().all(|end| end.as_ref().ok() == parents.as_ref()), "round {round}: {ends:?}");
        let spend = parent.spend();
        assert!(spend.settled.total_tokens() <= TOKENS, "round {round}: {spend:?}");
        assert_eq!((spend.overshoot_tokens, spend.calls_over_reservation), (0, 0), "round {round}");
        assert!(
            bodies.load(Ordering::SeqCst) <= TOOLS,
            "round {round}: {} bodies",
            bodies.load(Ordering::SeqCst)
        );
    }
}

#[tokio::test]
async fn a_sub_agents_own_halt_is_an_error_result_and_the_parent_goes_on() {
    // The sub-agent repeats itself and halts RepeatedCall; the parent then answers.
    let bodies = Arc::new(AtomicU32::new(0));
    let looping = Scripted::new(|n, _| Step::Reply(ModelReply::call(format!("c{n}"), "fetch", r#"{"n":1}"#)));
    let researcher = SubAgent::new(Runner::new(&fetch(&bodies), looping));
    let research = ToolBuilder::new("research", "agents.research")
        .build(move |_: Page, call: ToolContext| {
            let researcher = researcher.clone();
            async move {
                researcher
                    .run(&call, |child| child.grant("web.read"), vec![Message::user("Go.")], |_| true)
                    .await
            }
        })
        .unwrap();
    let model = sequence(vec![
        Step::Reply(ModelReply::call("p1", "research", r#"{"n":0}"#)),
        Step::Reply(ModelReply::text("The researcher looped; here is what I know.")),
    ]);
    let scope = Scope::builder().grants(["agents.research", "web.read"]).build().unwrap();
    let mut conversation = vec![Message::user("Research.")];
    let outcome = Runner::new(&ToolSet::builder().add(&research).build().unwrap(), model)
        .run(&scope, &mut conversation, |_| true)
        .await
        .unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(bodies.load(Ordering::SeqCst), 1);
    let result = conversation.iter().find_map(|message| match message {
        Message::Tool { content, is_error: true, .. } => Some(content.clone()),
        _ => None,
    });
    assert_eq!(result.as_deref(), Some("Error: tool research failed: the sub-agent ended with RepeatedCall"));
    // Parent: its two model calls and the child's two; its tool call and the child's one.
    assert_eq!((scope.model_calls(), scope.tool_calls()), (2, 1));
}

#[tokio::test]
async fn a_child_under_its_parents_budget_is_reserved_and_capped_though_it_has_no_budget_of_its_own() {
    let bodies = Arc::new(AtomicU32::new(0));
    let parent = Scope::builder()
        .grant("web.read")
        .limits(Limits::default().with_output_tokens(120).with_model_calls(100))
        .build()
        .unwrap();
    let child = parent
        .child()
        .grant("web.read")
        .limits(Limits::default().with_model_calls(100).with_tool_calls(100))
        .build()
        .unwrap();
    let caps = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&caps);
    // A provider that writes 50 tokens whatever cap it is sent.
    let careless = Scripted::new(move |n, request| {
        seen.lock().unwrap().push(request.options.max_output_tokens);
        let usage = Usage::new(10, 50);
        Step::Reply(ModelReply::call(format!("c{n}"), "fetch", format!(r#"{{"n":{n}}}"#)).with_usage(usage))
    });
    let outcome =
        Runner::new(&fetch(&bodies), careless).run(&child, &mut Vec::new(), |_| false).await.unwrap();
    assert_eq!(outcome.status(), Status::TokenBudget);
    // Each call goes out capped at what the parent's budget leaves: 120, 70, 20; then 20 are
    // left, at least the minimum output of 16, and the careless 50 crosses the budget.
    assert_eq!(*caps.lock().unwrap(), [Some(120), Some(70), Some(20)]);
    let spend = parent.spend();
    assert_eq!(spend.settled.output_tokens, 150);
    assert_eq!((spend.overshoot_tokens, spend.calls_over_reservation), (30, 1));
    // The child has no budget of its own: its outcome states the parent's budget it crossed.
    let own = outcome.spend();
    assert_eq!(
        (own.overshoot_tokens, own.calls_over_reservation, own.ancestor_overshoot_tokens),
        (0, 1, 30),
        "the child's call took its parent 30 tokens past its budget"
    );
    let shown = serde_json::to_value(&outcome).unwrap();
    assert_eq!(shown["spend"]["ancestor_overshoot_tokens"], 30);
    assert!(shown["spend"].get("ancestor_overshoot_cost").is_none(), "no cost crossed: not serialised");
}

#[tokio::test]
async fn a_child_under_its_parents_cost_budget_needs_a_priced_model() {
    let parent = Scope::builder()
        .grant("web.read")
        .limits(Limits::default().with_cost(loopbound::spend::Micros(1_000)))
        .prices(loopbound::spend::Prices::new().other_tools(loopbound::spend::Micros(0)).shared())
        .build()
        .unwrap();
    let child = parent.child().grant("web.read").build().unwrap();
    let bodies = Arc::new(AtomicU32::new(0));
    let ended = Runner::new(&fetch(&bodies), runaway().with_model("unlisted"))
        .run(&child, &mut Vec::new(), |_| false)
        .await;
    assert!(matches!(&ended, Err(RunError::Unpriced(what)) if what == "the model unlisted"), "{ended:?}");
    assert_eq!(bodies.load(Ordering::SeqCst), 0, "nothing ran");
}

/// The journaled tree's child: an `apply` effect counted in `applied`, asked for by the child's
/// first reply; the child's second call hangs once (while `hang` is set), telling `asked`.
#[cfg(feature = "journal")]
fn journaled_child(
    applied: &Arc<AtomicU32>,
    hang: &Arc<std::sync::atomic::AtomicBool>,
    asked: &Arc<tokio::sync::Notify>,
) -> SubAgent<impl loopbound::transport::Transport + use<>> {
    let ran = Arc::clone(applied);
    let apply = ToolBuilder::new("apply", "child.apply")
        .effect(loopbound::tool::EffectKind::Effect)
        .build(move |page: Page, _call: ToolContext| {
            ran.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, String>(format!("applied {}", page.n)) }
        })
        .unwrap();
    let (hang, asked) = (Arc::clone(hang), Arc::clone(asked));
    let model = Scripted::new(move |_, request| {
        let usage = Usage::new(20, 10);
        match loopbound::scripted::turn(request) {
            1 => Step::Reply(ModelReply::call("k1", "apply", r#"{"n":1}"#).with_usage(usage)),
            _ if hang.swap(false, Ordering::SeqCst) => {
                asked.notify_one();
                Step::Hang
            }
            _ => Step::Reply(ModelReply::text("applied").with_usage(usage)),
        }
    });
    let options = loopbound::transport::ChatOptions::default().with_max_output_tokens(50);
    SubAgent::new(Runner::new(&ToolSet::builder().add(&apply).build().unwrap(), model).options(options))
}

/// One attempt of the journaled parent: its `delegate` tool (idempotent) runs `child` as a
/// journaled sub-agent in `journal`; its model delegates, then says so.
#[cfg(feature = "journal")]
async fn journaled_parent(
    journal: &loopbound::journal::MemoryJournal,
    child: &SubAgent<impl loopbound::transport::Transport + 'static>,
) -> Result<loopbound::Outcome, RunError> {
    let (child, in_body) = (child.clone(), journal.clone());
    let delegate = ToolBuilder::new("delegate", "agents.delegate")
        .effect(loopbound::tool::EffectKind::Idempotent)
        .build(move |_page: Page, call: ToolContext| {
            let (child, journal) = (child.clone(), in_body.clone());
            async move {
                let start = vec![Message::user("Apply page 1.")];
                child
                    .run_journaled(&journal, &call, |builder| builder.grant("child.apply"), start, |_| true)
                    .await
            }
        })
        .unwrap();
    let usage = Usage::new(20, 10);
    let model = sequence(vec![
        Step::Reply(ModelReply::call("p1", "delegate", r#"{"n":1}"#).with_usage(usage)),
        Step::Reply(ModelReply::text("delegated").with_usage(usage)),
    ]);
    let options = loopbound::transport::ChatOptions::default().with_max_output_tokens(50);
    let runtime = Runner::new(&ToolSet::builder().add(&delegate).build().unwrap(), model).options(options);
    let scope = Scope::builder()
        .grants(["agents.delegate", "child.apply"])
        .limits(Limits::default().with_output_tokens(1_000))
        .build()
        .unwrap();
    let run = loopbound::journal::RunId::new("tree-1").unwrap();
    runtime.run_journaled(journal, &run, &scope, &mut vec![Message::user("Delegate.")], |_| true).await
}

#[cfg(feature = "journal")]
#[tokio::test]
async fn a_journaled_child_resumed_by_its_parent_replays_its_effect_and_charges_the_tree_once() {
    use loopbound::journal::{self, MemoryJournal, OperationId, RunId, RunState};
    let journal = MemoryJournal::default().with_lease(Duration::from_millis(300)).unwrap();
    let applied = Arc::new(AtomicU32::new(0));
    let (hang, asked) =
        (Arc::new(std::sync::atomic::AtomicBool::new(true)), Arc::new(tokio::sync::Notify::new()));
    let child = journaled_child(&applied, &hang, &asked);

    // The parent's process dies while the child's second request is out, after the child's
    // effect was committed: the attempt's future is dropped, nothing more of it is written.
    tokio::select! {
        ended = journaled_parent(&journal, &child) => panic!("the first attempt was to hang: {ended:?}"),
        () = asked.notified() => {}
    }
    let child_run = RunId::new("tree-1").unwrap().operation(1).child_run().unwrap();
    assert_eq!(child_run.as_str(), "tree-1:op:1");
    let record = journal::inspect(&journal, &child_run).await.unwrap();
    assert_eq!(record.model_calls(), 2);
    let effect = record.operation(1).unwrap();
    assert_eq!(effect.proposal().operation(), &OperationId::parse("tree-1:op:1/op/1").unwrap());
    assert_eq!(
        effect.result().map(|result| result.text()),
        Some("applied 1"),
        "the child's effect is recorded"
    );
    let lost = record.spend().reserved;
    assert_eq!(lost.output_tokens, 50, "the child's call in flight is reserved in its journal");
    assert_eq!(applied.load(Ordering::SeqCst), 1);

    tokio::time::sleep(Duration::from_millis(400)).await;
    let resumed = journaled_parent(&journal, &child).await.unwrap();
    assert_eq!((resumed.status(), resumed.text()), (Status::Completed, Some("delegated")));
    assert_eq!(applied.load(Ordering::SeqCst), 1, "the resumed child replayed its effect: one body in all");
    let record = journal::inspect(&journal, &child_run).await.unwrap();
    assert_eq!(record.state(), RunState::Finished(Status::Completed));
    assert_eq!(record.model_calls(), 3, "the child's two calls, the lost one, and its second asked again");
    // The child: its first reply, its lost call charged whole (input `lost`, output 50), its
    // second reply. The tree's root: that and its own two replies, each charged once.
    let child_spend = Usage::new(20 + lost.input_tokens + 20, 10 + 50 + 10);
    assert_eq!(record.spend().settled, child_spend);
    let tree = Usage::new(child_spend.input_tokens + 40, child_spend.output_tokens + 20);
    assert_eq!(resumed.spend().settled, tree);
    let parent = journal::inspect(&journal, &RunId::new("tree-1").unwrap()).await.unwrap();
    assert_eq!(
        (parent.model_calls(), parent.spend().settled),
        (2, tree),
        "the parent's journal holds the tree's spend"
    );
}

/// A child of `parent` that may call `fetch` often: only the parent's budgets bound it.
fn busy_child(parent: &Scope) -> Scope {
    parent
        .child()
        .grant("web.read")
        .limits(Limits::default().with_model_calls(1_000).with_tool_calls(1_000).with_repetitions(1_000))
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_childs_call_asks_for_the_default_output_cap_when_its_request_sets_none() {
    let parent = Scope::builder()
        .grant("web.read")
        .limits(Limits::default().with_total_tokens(100_000).with_model_calls(10))
        .build()
        .unwrap();
    let caps = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&caps);
    let model = Scripted::new(move |_, request| {
        seen.lock().unwrap().push(request.options.max_output_tokens);
        Step::Reply(ModelReply::text("done").with_usage(Usage::new(10, 5)))
    });
    let bodies = Arc::new(AtomicU32::new(0));
    let child = busy_child(&parent);
    let outcome = Runner::new(&fetch(&bodies), &model)
        .run(&child, &mut vec![Message::user("Go.")], |_| true)
        .await
        .unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    let root = Runner::new(&fetch(&bodies), &model)
        .run(&parent, &mut vec![Message::user("Go.")], |_| true)
        .await
        .unwrap();
    assert_eq!(root.status(), Status::Completed);
    // The child's call is capped at 4,096 output tokens although its parent has 100,000 left;
    // the root's own call (no sibling can run beside it) is capped by what its budget leaves:
    // the child's 15 tokens and the request's input (157 by the byte counter) taken off.
    let caps = caps.lock().unwrap().clone();
    assert_eq!(caps, [Some(4_096), Some(100_000 - 15 - 157)], "{caps:?}");
    #[cfg(feature = "pools")]
    assert_eq!(loopbound::pool::DEFAULT_OUTPUT_CAP, 4_096, "a child's cap is the pools' default cap");
}

#[tokio::test(start_paused = true)]
async fn siblings_whose_calls_do_not_fit_beside_each_other_take_turns_instead_of_halting_the_tree() {
    // Each child's call holds its input (about 160 tokens by the byte counter) and 4,096 output
    // tokens while it is in flight: a second call finds less room than its input and the
    // smallest output, so two do not fit in 4,400 at once; one after the other they do.
    let parent = Scope::builder()
        .grant("web.read")
        .limits(Limits::default().with_total_tokens(4_400).with_model_calls(100))
        .build()
        .unwrap();
    let model = Slow::new(
        Scripted::new(|n, _| {
            let reply = if n % 2 == 1 {
                ModelReply::call(format!("c{n}"), "fetch", format!(r#"{{"n":{n}}}"#))
            } else {
                ModelReply::text("done")
            };
            Step::Reply(reply.with_usage(Usage::new(100, 50)))
        }),
        Duration::from_millis(100),
    );
    let bodies = Arc::new(AtomicU32::new(0));
    let tools = fetch(&bodies);
    let runtime = Runner::new(&tools, &model);
    let (first, second) = (busy_child(&parent), busy_child(&parent));
    let (mut one, mut two) = (vec![Message::user("Go.")], vec![Message::user("Go.")]);
    let (a, b) =
        tokio::join!(runtime.run(&first, &mut one, |_| true), runtime.run(&second, &mut two, |_| true));
    assert_eq!((a.unwrap().status(), b.unwrap().status()), (Status::Completed, Status::Completed));
    assert_eq!(parent.stop_reason(), None, "a refusal by holds in flight halts nothing");
    assert_eq!(model.most.load(Ordering::SeqCst), 1, "one call in flight at a time");
    assert_eq!(model.inner.calls(), 4);
    let spend = parent.spend();
    assert_eq!((spend.settled.total_tokens(), spend.overshoot_tokens), (600, 0), "{spend:?}");
}

#[tokio::test(start_paused = true)]
async fn siblings_that_wait_for_room_take_turns_with_the_one_that_freed_it() {
    // Each call holds what the whole budget leaves: one call in flight at a time, until the
    // budget is spent. The child whose call settles asks again after the siblings it woke.
    let parent = Scope::builder()
        .grant("web.read")
        .limits(Limits::default().with_total_tokens(3_000).with_model_calls(1_000).with_tool_calls(1_000))
        .build()
        .unwrap();
    let runaway = || {
        Slow::new(
            Scripted::new(|n, _| {
                let reply = ModelReply::call(format!("c{n}"), "fetch", format!(r#"{{"n":{n}}}"#));
                Step::Reply(reply.with_usage(Usage::new(100, 50)))
            }),
            Duration::from_millis(100),
        )
    };
    let (one, two, three) = (runaway(), runaway(), runaway());
    let bodies = Arc::new(AtomicU32::new(0));
    let tools = fetch(&bodies);
    let (a, b, c) = (busy_child(&parent), busy_child(&parent), busy_child(&parent));
    let (mut first, mut second, mut third) =
        (vec![Message::user("Go.")], vec![Message::user("Go.")], vec![Message::user("Go.")]);
    let runtimes = [Runner::new(&tools, &one), Runner::new(&tools, &two), Runner::new(&tools, &three)];
    let ends = tokio::join!(
        runtimes[0].run(&a, &mut first, |_| false),
        runtimes[1].run(&b, &mut second, |_| false),
        runtimes[2].run(&c, &mut third, |_| false),
    );
    let statuses = [ends.0.unwrap().status(), ends.1.unwrap().status(), ends.2.unwrap().status()];
    assert_eq!(statuses, [Status::TokenBudget; 3]);
    let sent = [&one, &two, &three].map(|model| model.sent.load(Ordering::SeqCst));
    // Without the turn, the first child took all 19 calls and the others none.
    assert_eq!(sent, [6, 7, 6], "turns in order, not one child taking every one");
    assert_eq!(parent.spend().settled.total_tokens(), 19 * 150);
}

#[tokio::test(start_paused = true)]
async fn a_child_waiting_for_its_siblings_holds_ends_at_its_deadline() {
    let parent = Scope::builder()
        .grant("web.read")
        .limits(Limits::default().with_total_tokens(4_400).with_model_calls(100))
        .build()
        .unwrap();
    let patient = busy_child(&parent);
    let hurried = parent
        .child()
        .grant("web.read")
        .limits(Limits::default().with_deadline(Duration::from_secs(1)))
        .build()
        .unwrap();
    // The first call holds for 10 s; the second waits for it and runs out of time first: its
    // deadline is 1 s after it was opened.
    let model = Slow::new(
        Scripted::new(|_, _| Step::Reply(ModelReply::text("done").with_usage(Usage::new(100, 50)))),
        Duration::from_secs(10),
    );
    let bodies = Arc::new(AtomicU32::new(0));
    let tools = fetch(&bodies);
    let runtime = Runner::new(&tools, &model);
    let started = tokio::time::Instant::now();
    let (mut one, mut two) = (vec![Message::user("Go.")], vec![Message::user("Go.")]);
    let (a, b) = tokio::join!(runtime.run(&patient, &mut one, |_| true), async {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let outcome = runtime.run(&hurried, &mut two, |_| true).await;
        (outcome, started.elapsed())
    });
    assert_eq!(a.unwrap().status(), Status::Completed);
    let (hurried, waited) = b;
    assert_eq!(hurried.unwrap().status(), Status::DeadlineExceeded);
    assert_eq!(waited, Duration::from_secs(1), "ended at its deadline, not at the hold's end");
    assert_eq!(model.sent.load(Ordering::SeqCst), 1, "the waiting call was never sent");
    assert_eq!(parent.stop_reason(), None);
}

/// A runaway child's provider: a new fetch each call, billing an honest count of the request
/// (an eighth of its messages' debug text, and ten: under the byte counter's count) and 200
/// output tokens, within the request's cap.
fn runaway_billing_honestly() -> Scripted<impl Fn(u32, &ChatRequest<'_>) -> Step + Send + Sync> {
    Scripted::new(|n, request| {
        let bytes: usize = request.messages.iter().map(|message| format!("{message:?}").len()).sum();
        let output = request.options.max_output_tokens.map_or(200, |cap| cap.min(200));
        let usage = Usage::new(10 + (bytes as u64).div_ceil(8), u64::from(output));
        Step::Reply(ModelReply::call(format!("c{n}"), "fetch", format!(r#"{{"n":{n}}}"#)).with_usage(usage))
    })
}

/// Eight runaway children of a parent of `tokens`, each call 100 ms: the most calls in flight
/// at once, the calls sent, and the parent's settled spend.
async fn eight_runaways(tokens: u64, calibrate: bool) -> (u32, u32, u64) {
    let parent = Scope::builder()
        .grant("web.read")
        .limits(Limits::default().with_total_tokens(tokens).with_model_calls(10_000).with_tool_calls(10_000))
        .build()
        .unwrap();
    let model = Arc::new(Slow::new(runaway_billing_honestly(), Duration::from_millis(100)));
    let bodies = Arc::new(AtomicU32::new(0));
    let tools = fetch(&bodies);
    let mut runs = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let child = busy_child(&parent);
        let runtime = Runner::new(&tools, Arc::clone(&model)).calibrate_reservations(calibrate);
        runs.spawn(async move {
            let mut conversation = vec![Message::user("Fetch every page.")];
            runtime.run(&child, &mut conversation, |_| false).await.unwrap().status()
        });
    }
    let ends = runs.join_all().await;
    assert!(ends.iter().all(|end| *end == Status::TokenBudget), "{ends:?}");
    assert_eq!(parent.stop_reason(), Some(HaltReason::TokenBudget));
    let spend = parent.spend();
    assert_eq!((spend.overshoot_tokens, spend.calls_over_reservation), (0, 0), "{spend:?}");
    assert!(spend.settled.total_tokens() <= tokens);
    (model.most.load(Ordering::SeqCst), model.sent.load(Ordering::SeqCst), spend.settled.total_tokens())
}

#[tokio::test(start_paused = true)]
async fn eight_runaway_children_spend_nearly_all_of_their_parents_budget_with_the_defaults() {
    // Without a default cap and the wait, the first child's call held all 40,000 and the tree
    // halted on the second child's refusal, 0.00 of it spent. Now eight calls run at once while
    // there is room for eight, fewer as it runs out: 0.98 of the budget is spent counting every
    // request with the byte counter, 0.999 calibrated (the default).
    assert_eq!(eight_runaways(40_000, false).await, (8, 113, 39_275));
    assert_eq!(eight_runaways(40_000, true).await, (8, 114, 39_967));
}
