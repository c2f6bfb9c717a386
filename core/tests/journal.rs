//! Journaled runs (SPEC §15) on the in-memory journal: proposals, decisions, at-most-once
//! effects, resumes, reconciliations, the commit budget, and failing closed.

#![cfg(all(feature = "journal", feature = "pools"))]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loopbound::journal::backend::{Batch, Fence, ListedRow, RunRow, StoredRun};
use loopbound::journal::{
    self, Digest, Journal, JournalError, MemoryJournal, OperationId, Resolution, RunId, RunQuery, RunState,
    Widening,
};
use loopbound::tool::Policy;
use loopbound::transport::{ModelReply, Usage};
use loopbound::{Limits, Message, Outcome, RunError, Runner, Scope, Status, ToolBuilder};
use loopbound_test::refund::{self, EffectSink, MemorySink};

fn scope(limits: Limits) -> Scope {
    Scope::builder().grants(refund::CAPABILITIES).limits(limits).build().unwrap()
}

fn run_id() -> RunId {
    RunId::new("refund-42").unwrap()
}

fn lines(outcome: &Outcome) -> Vec<String> {
    outcome.events().iter().map(ToString::to_string).collect()
}

/// One attempt of the refund task: fresh tools over `sink`, a fresh scope, a scripted model
/// that counts the steps it serves in `asked`.
async fn attempt(
    journal: &impl Journal,
    sink: &Arc<MemorySink>,
    policy: Policy,
    script: Vec<ModelReply>,
    limits: Limits,
    asked: &Arc<Mutex<Vec<usize>>>,
) -> Result<Outcome, RunError> {
    let tools = refund::tools(Arc::clone(sink) as Arc<dyn EffectSink>, policy);
    let log = Arc::clone(asked);
    let model = refund::model(script, move |step| log.lock().unwrap().push(step));
    let runtime = Runner::new(&tools.set, model);
    let mut conversation = refund::conversation();
    runtime.run_journaled(journal, &run_id(), &scope(limits), &mut conversation, |_| true).await
}

fn asked() -> Arc<Mutex<Vec<usize>>> {
    Arc::new(Mutex::new(Vec::new()))
}

#[tokio::test]
async fn an_allowed_effect_costs_two_commits_and_a_read_none_of_its_own() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let outcome =
        attempt(&journal, &sink, Policy::Allow, refund::short_script(), Limits::default(), &asked())
            .await
            .unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 1);
    // One to take the run, two for the refund, one at the end; the read rode along.
    assert_eq!(journal.commits(), 4);
    assert_eq!(
        lines(&outcome),
        [
            "ModelCall model 1",
            "ToolCall lookup_order 1",
            "Proposed lookup_order 1 refund-42/op/1",
            "Allowed lookup_order 1 refund-42/op/1 by policy",
            "ModelCall model 2",
            "ToolCall refund 2",
            "Proposed refund 2 refund-42/op/2",
            "Allowed refund 2 refund-42/op/2 by policy",
            "EffectStarted refund 2 refund-42/op/2",
            "EffectRecorded refund 2 refund-42/op/2",
            "ModelCall model 3",
        ]
    );
    let record = journal::inspect(&journal, &run_id()).await.unwrap();
    assert_eq!(record.state(), RunState::Finished(Status::Completed));
    let journal_lines: Vec<String> = record.events().iter().map(ToString::to_string).collect();
    assert_eq!(journal_lines, lines(&outcome), "the journal holds the same audit log");
    assert_eq!(sink.applied(), [("refund".to_owned(), Some("refund-42/op/2".to_owned()))]);
}

#[tokio::test]
async fn reads_alone_cost_only_the_runs_own_two_commits() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let script = vec![refund::short_script()[0].clone(), ModelReply::text("Looked up.")];
    let outcome = attempt(&journal, &sink, Policy::Allow, script, Limits::default(), &asked()).await.unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(journal.commits(), 2);
}

#[tokio::test]
async fn under_a_token_budget_each_model_call_adds_one_commit_that_carries_its_reservation() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let tools = refund::tools(Arc::clone(&sink) as Arc<dyn EffectSink>, Policy::Allow);
    let model = refund::model(refund::metered_script(), |_| {});
    let runtime = Runner::new(&tools.set, model).options(refund::metered_options());
    let mut conversation = refund::conversation();
    let metered = scope(refund::metered_limits());
    let outcome =
        runtime.run_journaled(&journal, &run_id(), &metered, &mut conversation, |_| true).await.unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    // Without the crash of the conformance suite's spend check, the five replies settle 10
    // output tokens each.
    assert_eq!(outcome.spend().settled, Usage::new(5 * 20, 5 * 10));
    // One to take the run, one per model call (5), two per effect (3), one at the end: the
    // read's records and each reply ride on the next one. Without a budget: 8.
    assert_eq!(journal.commits(), 1 + 5 + 2 * 3 + 1);
    let record = journal::inspect(&journal, &run_id()).await.unwrap();
    assert_eq!((record.replies(), record.model_calls()), (5, 5));
    assert_eq!(record.spend().settled, outcome.spend().settled);
    assert_eq!(record.spend().reserved, loopbound::spend::Reserved::default());

    let plain = MemoryJournal::default();
    let tools = refund::tools(Arc::clone(&sink) as Arc<dyn EffectSink>, Policy::Allow);
    let runtime = Runner::new(&tools.set, refund::model(refund::long_script(), |_| {}));
    let mut conversation = refund::conversation();
    let unbudgeted = scope(Limits::default());
    runtime.run_journaled(&plain, &run_id(), &unbudgeted, &mut conversation, |_| true).await.unwrap();
    assert_eq!(plain.commits(), 8, "a model call adds no commit without a budget or a pool");
}

#[tokio::test]
async fn an_approval_bound_to_the_exact_call_resumes_the_run_and_the_refund_runs_once() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let asked = asked();
    let first = attempt(&journal, &sink, Policy::Ask, refund::short_script(), Limits::default(), &asked)
        .await
        .unwrap();
    assert_eq!(first.status(), Status::AwaitingApproval);
    assert_eq!(first.operation(), Some("refund-42/op/2"));
    assert_eq!(first.text(), None);
    assert_eq!(sink.count("refund"), 0, "nothing ran before the decision");
    assert_eq!(journal.commits(), 2);

    let operation = OperationId::parse("refund-42/op/2").unwrap();
    let other = Digest::of(r#"refund:{"amount_cents":150000,"order":42}"#);
    assert_eq!(
        journal::approve(&journal, journal::ProposalKey::new(&operation, &other), "alice").await.err(),
        Some(JournalError::SignatureMismatch)
    );
    let record = journal::inspect(&journal, &run_id()).await.unwrap();
    let proposal = first.pending().expect("the outcome hands out its proposal").clone();
    assert_eq!(record.operation(2).map(|o| o.proposal()), Some(&proposal), "the journal's proposal");
    assert_eq!(
        (proposal.tool(), proposal.capability(), proposal.arguments()),
        ("refund", "payments.refund", r#"{"amount_cents":1500,"order":42}"#)
    );
    let approved = journal::approve(&journal, &proposal, "alice").await.unwrap();
    assert_eq!(approved, proposal);
    assert_eq!(
        journal::approve(&journal, journal::ProposalKey::new(&operation, &proposal.digest()), "bob")
            .await
            .err(),
        Some(JournalError::AlreadyDecided)
    );

    let second = attempt(&journal, &sink, Policy::Ask, refund::short_script(), Limits::default(), &asked)
        .await
        .unwrap();
    assert_eq!(second.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 1);
    assert_eq!(*asked.lock().unwrap(), [1, 2, 3], "replies 1 and 2 were replayed, not asked again");
    let tail: Vec<String> = lines(&second).split_off(7);
    assert_eq!(
        tail,
        [
            "AwaitingApproval refund 2 refund-42/op/2",
            "Resumed run 2",
            "Allowed refund 2 refund-42/op/2 by approver alice",
            "EffectStarted refund 2 refund-42/op/2",
            "EffectRecorded refund 2 refund-42/op/2",
            "ModelCall model 3",
        ]
    );
}

#[tokio::test]
async fn a_denial_halts_the_run_naming_the_operation_and_who_denied() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let first = attempt(&journal, &sink, Policy::Ask, refund::short_script(), Limits::default(), &asked())
        .await
        .unwrap();
    let operation = OperationId::parse(first.operation().unwrap()).unwrap();
    let record = journal::inspect(&journal, &run_id()).await.unwrap();
    let digest = record.operation(2).unwrap().proposal().digest();
    journal::deny(&journal, journal::ProposalKey::new(&operation, &digest), "bob").await.unwrap();
    let second = attempt(&journal, &sink, Policy::Ask, refund::short_script(), Limits::default(), &asked())
        .await
        .unwrap();
    assert_eq!(second.status(), Status::Denied);
    assert_eq!(second.operation(), Some("refund-42/op/2"));
    assert_eq!(
        lines(&second).last().map(String::as_str),
        Some("Denied refund 2 refund-42/op/2 by approver bob")
    );
    assert_eq!(sink.count("refund"), 0);
    let again =
        attempt(&journal, &sink, Policy::Ask, refund::short_script(), Limits::default(), &asked()).await;
    assert_eq!(again, Err(RunError::Journal(JournalError::Finished(Status::Denied))));
}

#[tokio::test]
async fn a_deny_policy_halts_before_anything_runs() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let outcome = attempt(&journal, &sink, Policy::Deny, refund::short_script(), Limits::default(), &asked())
        .await
        .unwrap();
    assert_eq!(outcome.status(), Status::Denied);
    assert_eq!(outcome.operation(), Some("refund-42/op/2"));
    assert_eq!(lines(&outcome).last().map(String::as_str), Some("Denied refund 2 refund-42/op/2 by policy"));
    assert_eq!(sink.count("refund"), 0);
}

/// A refund tool whose body applies its effect, then hangs: a deadline in the window between
/// `started` and the result stands for a crash there.
fn hanging_refund(sink: &Arc<MemorySink>, idempotent: bool, hang: Arc<AtomicU32>) -> loopbound::ToolSet {
    let applied = Arc::clone(sink);
    let kind = if idempotent {
        loopbound::tool::EffectKind::Idempotent
    } else {
        loopbound::tool::EffectKind::Effect
    };
    let refund = ToolBuilder::new("refund", refund::REFUND_CAPABILITY)
        .effect(kind)
        .build(move |input: refund::RefundInput, call: loopbound::ToolContext| {
            applied.apply("refund", call.idempotency_key());
            let hang = hang.fetch_sub(1, Ordering::SeqCst) > 0;
            async move {
                if hang {
                    std::future::pending::<()>().await;
                }
                Ok::<_, String>(format!("Refunded {} cents.", input.amount_cents))
            }
        })
        .unwrap();
    loopbound::ToolSet::builder().add(&refund).build().unwrap()
}

async fn hanging_attempt(journal: &MemoryJournal, tools: &loopbound::ToolSet) -> Result<Outcome, RunError> {
    let script = vec![refund::short_script()[1].clone(), ModelReply::text(refund::CLOSING)];
    let runtime = Runner::new(tools, refund::model(script, |_| {}));
    let limits = Limits::default().with_deadline(Duration::from_secs(5));
    runtime.run_journaled(journal, &run_id(), &scope(limits), &mut refund::conversation(), |_| true).await
}

#[tokio::test(start_paused = true)]
async fn an_effect_cut_between_started_and_its_result_is_ambiguous_until_reconciled() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let tools = hanging_refund(&sink, false, Arc::new(AtomicU32::new(1)));
    let first = hanging_attempt(&journal, &tools).await.unwrap();
    assert_eq!(first.status(), Status::DeadlineExceeded);
    assert_eq!(sink.count("refund"), 1);

    let operation = OperationId::parse("refund-42/op/1").unwrap();
    let record = journal::inspect(&journal, &run_id()).await.unwrap();
    assert_eq!(
        (record.state(), record.is_running()),
        (RunState::Ambiguous(1), false),
        "an attempt that ended inside the body leaves its effect ambiguous, for the host to reconcile"
    );
    let second = hanging_attempt(&journal, &tools).await.unwrap();
    assert_eq!(second.status(), Status::Ambiguous);
    assert_eq!(second.operation(), Some("refund-42/op/1"));
    assert_eq!(sink.count("refund"), 1, "never run again by itself");
    let third = hanging_attempt(&journal, &tools).await.unwrap();
    assert_eq!(third.status(), Status::Ambiguous, "until the host reconciles it");

    let ran = Resolution::Ran { result: "Refunded 1500 cents (checked by ops).".to_owned() };
    journal::reconcile(&journal, &operation, ran.clone(), "ops").await.unwrap();
    assert_eq!(journal::reconcile(&journal, &operation, ran, "ops").await, Err(JournalError::NotAmbiguous));
    let mut conversation = Vec::new();
    let runtime = Runner::new(
        &tools,
        refund::model(vec![refund::short_script()[1].clone(), ModelReply::text("ok")], |_| {}),
    );
    let fourth = runtime
        .run_journaled(&journal, &run_id(), &scope(Limits::default()), &mut conversation, |_| true)
        .await
        .unwrap();
    assert_eq!(fourth.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 1);
    assert_eq!(conversation[2], Message::tool_result("call-b", "Refunded 1500 cents (checked by ops)."));
    let tail: Vec<String> = lines(&fourth).split_off(lines(&fourth).len() - 3);
    assert_eq!(tail, ["Resumed run 4", "Reconciled refund 1 refund-42/op/1 by ops", "ModelCall model 2"]);
}

#[tokio::test(start_paused = true)]
async fn an_effect_reconciled_as_not_run_runs_again_once() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let tools = hanging_refund(&sink, false, Arc::new(AtomicU32::new(1)));
    assert_eq!(hanging_attempt(&journal, &tools).await.unwrap().status(), Status::DeadlineExceeded);
    assert_eq!(hanging_attempt(&journal, &tools).await.unwrap().status(), Status::Ambiguous);
    let operation = OperationId::parse("refund-42/op/1").unwrap();
    journal::reconcile(&journal, &operation, Resolution::NotRun, "ops").await.unwrap();
    let outcome = hanging_attempt(&journal, &tools).await.unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 2, "the host said the first did not happen");
    let record = journal::inspect(&journal, &run_id()).await.unwrap();
    assert_eq!(record.operation(1).unwrap().starts(), 2);
}

#[tokio::test(start_paused = true)]
async fn an_idempotent_call_cut_in_the_window_is_driven_again_with_the_same_key() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let tools = hanging_refund(&sink, true, Arc::new(AtomicU32::new(1)));
    assert_eq!(hanging_attempt(&journal, &tools).await.unwrap().status(), Status::DeadlineExceeded);
    let outcome = hanging_attempt(&journal, &tools).await.unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    let keys: Vec<Option<String>> = sink.applied().into_iter().map(|(_, key)| key).collect();
    assert_eq!(keys, [Some("refund-42/op/1".to_owned()), Some("refund-42/op/1".to_owned())]);
}

#[tokio::test]
async fn budgets_are_the_logical_runs_across_resumes() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    // Two model calls in all: the lookup reply, then the refund reply, which is proposed and
    // waits; the resume replays both and its next call is refused.
    let limits = Limits::default().with_model_calls(2);
    let first = attempt(&journal, &sink, Policy::Ask, refund::short_script(), limits.clone(), &asked())
        .await
        .unwrap();
    assert_eq!(first.status(), Status::AwaitingApproval);
    let record = journal::inspect(&journal, &run_id()).await.unwrap();
    assert_eq!((record.model_calls(), record.tool_calls()), (2, 2));
    let digest = record.operation(2).unwrap().proposal().digest();
    journal::approve(
        &journal,
        journal::ProposalKey::new(&OperationId::parse("refund-42/op/2").unwrap(), &digest),
        "alice",
    )
    .await
    .unwrap();
    let asked = asked();
    let second = attempt(&journal, &sink, Policy::Ask, refund::short_script(), limits, &asked).await.unwrap();
    assert_eq!(second.status(), Status::ModelBudget);
    assert_eq!(sink.count("refund"), 1);
    assert!(asked.lock().unwrap().is_empty(), "no reply was asked for");
    assert_eq!(lines(&second).last().map(String::as_str), Some("ModelBudget model 2"));
}

#[tokio::test]
async fn a_journaled_run_needs_a_fresh_scope_and_a_finished_run_is_not_resumed() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let tools = refund::tools(Arc::clone(&sink) as Arc<dyn EffectSink>, Policy::Allow);
    let used = scope(Limits::default());
    used.admit_model().unwrap();
    let runtime = Runner::new(&tools.set, refund::model(refund::short_script(), |_| {}));
    let refused = runtime.run_journaled(&journal, &run_id(), &used, &mut Vec::new(), |_| true).await;
    assert_eq!(refused, Err(RunError::Journal(JournalError::ScopeInUse)));
    assert_eq!(journal.commits(), 0, "nothing was written");

    let done =
        attempt(&journal, &sink, Policy::Allow, refund::short_script(), Limits::default(), &asked()).await;
    assert_eq!(done.map(|o| o.status()), Ok(Status::Completed));
    let again =
        attempt(&journal, &sink, Policy::Allow, refund::short_script(), Limits::default(), &asked()).await;
    assert_eq!(again, Err(RunError::Journal(JournalError::Finished(Status::Completed))));
    assert_eq!(sink.count("refund"), 1);
}

/// A journal whose commits fail from the `n`-th on.
struct Failing {
    inner: MemoryJournal,
    fail_from: u64,
    commits: AtomicU32,
}

impl Journal for Failing {
    fn lease(&self) -> Duration {
        self.inner.lease()
    }

    async fn renew(&self, run: &RunId, epoch: u64) -> Result<(), JournalError> {
        self.inner.renew(run, epoch).await
    }

    async fn list_rows(&self, query: &RunQuery) -> Result<Vec<ListedRow>, JournalError> {
        self.inner.list_rows(query).await
    }

    async fn acquire(&self, run: &RunId, fresh: RunRow) -> Result<StoredRun, JournalError> {
        self.inner.acquire(run, fresh).await
    }

    async fn load(&self, run: &RunId) -> Result<Option<StoredRun>, JournalError> {
        self.inner.load(run).await
    }

    async fn commit(&self, run: &RunId, fence: Fence, batch: Batch) -> Result<(), JournalError> {
        let n = u64::from(self.commits.fetch_add(1, Ordering::SeqCst)) + 1;
        if n >= self.fail_from {
            return Err(JournalError::storage("disk full"));
        }
        self.inner.commit(run, fence, batch).await
    }
}

#[tokio::test]
async fn a_start_that_cannot_be_recorded_never_runs_the_effect() {
    let journal = Failing { inner: MemoryJournal::default(), fail_from: 1, commits: AtomicU32::new(0) };
    let sink = Arc::new(MemorySink::default());
    let outcome =
        attempt(&journal, &sink, Policy::Allow, refund::short_script(), Limits::default(), &asked()).await;
    assert_eq!(outcome, Err(RunError::Journal(JournalError::storage("disk full"))));
    assert_eq!(sink.count("refund"), 0);
}

#[tokio::test]
async fn a_live_attempt_refuses_another_and_once_its_lease_is_gone_a_newer_one_fences_it_out() {
    let journal = MemoryJournal::default().with_holder("first").unwrap();
    let other = journal.clone().with_holder("second").unwrap();
    let run = run_id();
    let fresh = RunRow {
        epoch: 1,
        attempts: 1,
        conversation: "[]".into(),
        ledger: String::new(),
        state: RunState::Open,
        definition: String::new(),
        labels: Vec::new(),
    };
    let first = journal.acquire(&run, fresh.clone()).await.unwrap();
    let refused = other.acquire(&run, fresh.clone()).await;
    assert!(
        matches!(&refused, Err(JournalError::LeaseHeld { holder, .. }) if holder == "first"),
        "{refused:?}"
    );
    journal.expire(&run);
    let second = other.acquire(&run, fresh).await.unwrap();
    assert_eq!((first.run.epoch, second.run.epoch), (1, 2));
    let batch = Batch::default();
    assert_eq!(journal.commit(&run, Fence::Epoch(1), batch.clone()).await, Err(JournalError::LeaseLost));
    assert_eq!(journal.renew(&run, 1).await, Err(JournalError::LeaseLost));
    assert_eq!(other.commit(&run, Fence::Epoch(2), batch).await, Ok(()));
    assert_eq!(other.renewals(), 0, "a commit renews without counting a renewal");
}

/// A journal whose renewals are refused from the first: another attempt took the run, or the
/// storage is down (`lost` says which).
struct Refusing {
    inner: MemoryJournal,
    lost: bool,
}

impl Journal for Refusing {
    fn lease(&self) -> std::time::Duration {
        self.inner.lease()
    }

    async fn acquire(&self, run: &RunId, fresh: RunRow) -> Result<StoredRun, JournalError> {
        self.inner.acquire(run, fresh).await
    }

    async fn renew(&self, _run: &RunId, _epoch: u64) -> Result<(), JournalError> {
        Err(if self.lost { JournalError::LeaseLost } else { JournalError::storage("down") })
    }

    async fn list_rows(&self, query: &RunQuery) -> Result<Vec<ListedRow>, JournalError> {
        self.inner.list_rows(query).await
    }

    async fn load(&self, run: &RunId) -> Result<Option<StoredRun>, JournalError> {
        self.inner.load(run).await
    }

    async fn commit(&self, run: &RunId, fence: Fence, batch: Batch) -> Result<(), JournalError> {
        self.inner.commit(run, fence, batch).await
    }
}

/// A refund whose body takes an hour, then applies the refund.
fn hour_long_refund(sink: &Arc<MemorySink>) -> loopbound::ToolSet {
    let applied = Arc::clone(sink);
    let refund = ToolBuilder::new("refund", refund::REFUND_CAPABILITY)
        .effect(loopbound::tool::EffectKind::Effect)
        .build(move |input: refund::RefundInput, call: loopbound::ToolContext| {
            let applied = Arc::clone(&applied);
            let key = call.idempotency_key().map(str::to_owned);
            async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                applied.apply("refund", key.as_deref());
                Ok::<_, String>(format!("Refunded {} cents.", input.amount_cents))
            }
        })
        .unwrap();
    loopbound::ToolSet::builder().add(&refund).build().unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_body_whose_lease_cannot_be_renewed_is_dropped_and_the_attempt_stops_lease_lost() {
    for lost in [true, false] {
        let journal = Refusing { inner: MemoryJournal::default(), lost };
        let sink = Arc::new(MemorySink::default());
        let tools = hour_long_refund(&sink);
        let script = vec![refund::short_script()[1].clone(), ModelReply::text(refund::CLOSING)];
        let runtime = Runner::new(&tools, refund::model(script, |_| {}));
        let limits = Limits::default().with_deadline(Duration::from_secs(7200));
        let started = tokio::time::Instant::now();
        let result = runtime
            .run_journaled(&journal, &run_id(), &scope(limits), &mut refund::conversation(), |_| true)
            .await;
        assert_eq!(result, Err(RunError::Journal(JournalError::LeaseLost)), "lost {lost}");
        assert_eq!(sink.count("refund"), 0, "the body was dropped before it applied anything");
        // A refusal stops at the first renewal (a third of the 30 s lease); a failing storage
        // once the lease would have expired.
        let expected = if lost { Duration::from_secs(10) } else { Duration::from_secs(30) };
        let elapsed = started.elapsed();
        assert!(
            elapsed >= expected && elapsed < expected + Duration::from_secs(10),
            "lost {lost}: {elapsed:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_hour_long_body_keeps_its_run_by_renewing_the_lease() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let tools = hour_long_refund(&sink);
    let script = vec![refund::short_script()[1].clone(), ModelReply::text(refund::CLOSING)];
    let runtime = Runner::new(&tools, refund::model(script, |_| {}));
    let limits = Limits::default().with_deadline(Duration::from_secs(7200));
    let outcome = runtime
        .run_journaled(&journal, &run_id(), &scope(limits), &mut refund::conversation(), |_| true)
        .await
        .unwrap();
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 1);
    // A renewal every third of the 30 s lease, at 10 s, 20 s, … 3590 s; at 3600 s the finished
    // body comes first.
    assert_eq!(journal.renewals(), 359);
}

#[tokio::test(start_paused = true)]
async fn a_body_sees_its_attempts_fencing_token_and_a_later_attempt_has_a_greater_one() {
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let hangs = Arc::new(AtomicU32::new(1));
    let seen = Arc::clone(&tokens);
    let refund = ToolBuilder::new("refund", refund::REFUND_CAPABILITY)
        .effect(loopbound::tool::EffectKind::Effect)
        .build(move |input: refund::RefundInput, call: loopbound::ToolContext| {
            seen.lock().unwrap().push(call.fencing_token().map(|token| token.to_string()));
            let hang = hangs.fetch_sub(1, Ordering::SeqCst) > 0;
            async move {
                if hang {
                    std::future::pending::<()>().await;
                }
                Ok::<_, String>(format!("Refunded {} cents.", input.amount_cents))
            }
        })
        .unwrap();
    let tools = loopbound::ToolSet::builder().add(&refund).build().unwrap();
    let journal = MemoryJournal::default();
    assert_eq!(hanging_attempt(&journal, &tools).await.unwrap().status(), Status::DeadlineExceeded);
    let operation = OperationId::parse("refund-42/op/1").unwrap();
    journal::reconcile(&journal, &operation, Resolution::NotRun, "ops").await.unwrap();
    assert_eq!(hanging_attempt(&journal, &tools).await.unwrap().status(), Status::Completed);

    let plain = Runner::new(&tools, refund::model(vec![refund::short_script()[1].clone()], |_| {}));
    let _ = plain.run(&scope(Limits::default()), &mut refund::conversation(), |_| true).await;
    assert_eq!(
        *tokens.lock().unwrap(),
        [Some("refund-42/op/1@1".to_owned()), Some("refund-42/op/1@2".to_owned()), None],
        "each attempt's epoch, and none without a journal"
    );
}

#[tokio::test]
async fn a_resume_rebuilds_the_runs_scope_from_the_journal_and_may_narrow_it_never_widen_it() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let labels = journal::Labels::new().with("tenant", "acme").unwrap().with("user", "u-7").unwrap();
    let limits = Limits::default().with_model_calls(5).with_tool_calls(3);
    let first_scope = Scope::builder()
        .grants(refund::CAPABILITIES)
        .limits(limits.clone())
        .labels(labels.clone())
        .build()
        .unwrap();
    let tools = refund::tools(Arc::clone(&sink) as Arc<dyn EffectSink>, Policy::Ask);
    let runtime = Runner::new(&tools.set, refund::model(refund::short_script(), |_| {}));
    let first = runtime
        .run_journaled(&journal, &run_id(), &first_scope, &mut refund::conversation(), |_| true)
        .await
        .unwrap();
    assert_eq!(first.status(), Status::AwaitingApproval);
    journal::approve(&journal, first.pending().unwrap(), "alice").await.unwrap();

    // What another process rebuilds from the run id alone.
    let rebuilt = journal::scope_of(&journal, &run_id()).await.unwrap().build().unwrap();
    assert_eq!(rebuilt.capabilities().collect::<Vec<_>>(), ["mail.send", "orders.read", "payments.refund"]);
    assert_eq!(rebuilt.limits(), &limits);
    assert_eq!(rebuilt.labels(), &labels);
    let listed =
        journal::list(&journal, &journal::RunQuery::new().label("user", "u-7").unwrap()).await.unwrap();
    assert_eq!(listed.runs().len(), 1, "listed by its label");

    // Wider than the definition: refused before anything runs, and the run is free again.
    let commits = journal.commits();
    for wider in [
        Scope::builder()
            .grants(refund::CAPABILITIES)
            .grant("payments.void")
            .limits(limits.clone())
            .build()
            .unwrap(),
        Scope::builder()
            .grants(refund::CAPABILITIES)
            .limits(limits.clone().with_tool_calls(4))
            .build()
            .unwrap(),
    ] {
        let refused =
            runtime.run_journaled(&journal, &run_id(), &wider, &mut refund::conversation(), |_| true).await;
        assert_eq!(refused, Err(RunError::Journal(JournalError::Widened)));
    }
    assert_eq!(sink.count("refund"), 0, "nothing ran");
    assert_eq!(journal.commits(), commits + 4, "each refusal took the run and released it at once");

    // Narrower: fine. The refund's capability is kept, the mail's dropped; a shorter deadline.
    let narrower = journal::scope_of(&journal, &run_id())
        .await
        .unwrap()
        .limits(limits.with_deadline(Duration::from_secs(30)))
        .build()
        .unwrap();
    let done = runtime
        .run_journaled(&journal, &run_id(), &narrower, &mut refund::conversation(), |_| true)
        .await
        .unwrap();
    assert_eq!(done.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 1);
    let record = journal::inspect(&journal, &run_id()).await.unwrap();
    let succeeded: Vec<(&str, &str)> = record.succeeded().collect();
    assert_eq!(
        succeeded,
        [
            ("lookup_order", "Order 42: 15.00 EUR, paid, delivered damaged."),
            ("refund", "Refunded 1500 cents on order 42."),
        ],
        "every call that succeeded, across both attempts"
    );
}

#[tokio::test]
async fn a_resumed_run_draws_from_the_pools_it_started_with_and_a_resume_outside_them_is_refused() {
    use loopbound::LimitsError;
    use loopbound::pool::{DEFAULT_LEASE, MemoryPools, PoolBudget, PoolDraw, PoolName, PoolStore, PoolTerms};

    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let tenant = PoolName::new("tenant:acme").unwrap();
    let store = Arc::new(MemoryPools::new());
    store.define(tenant.as_str(), PoolBudget::default().with_tokens(100_000)).await.unwrap();
    let draw = || Scope::builder().pools(store.clone(), [tenant.as_str()]).pool_output_cap(200);
    let first_scope = draw().grants(refund::CAPABILITIES).build().unwrap();
    let tools = refund::tools(Arc::clone(&sink) as Arc<dyn EffectSink>, Policy::Ask);
    let script: Vec<ModelReply> =
        refund::short_script().into_iter().map(|reply| reply.with_usage(Usage::new(20, 10))).collect();
    let sent = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&sent);
    let runtime = Runner::new(
        &tools.set,
        refund::model(script, move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        }),
    );
    let first = runtime
        .run_journaled(&journal, &run_id(), &first_scope, &mut refund::conversation(), |_| true)
        .await
        .unwrap();
    assert_eq!(first.status(), Status::AwaitingApproval);
    journal::approve(&journal, first.pending().unwrap(), "alice").await.unwrap();
    let terms = PoolTerms::new([tenant.clone()], DEFAULT_LEASE, 200);
    let record = journal::inspect(&journal, &run_id()).await.unwrap();
    assert_eq!(record.definition().unwrap().pools(), Some(&terms), "the definition keeps the draw");

    // From the run id alone, the builder will not build without the pools' store.
    let bare = journal::scope_of(&journal, &run_id()).await.unwrap().build();
    assert_eq!(bare.err(), Some(LimitsError::PoolStoreMissing));
    // A scope of the host's own that drops the pool or raises the output cap is wider.
    let wider_cap = draw().pool_output_cap(201);
    for wider in [
        Scope::builder().grants(refund::CAPABILITIES).build().unwrap(),
        wider_cap.grants(refund::CAPABILITIES).build().unwrap(),
    ] {
        let refused =
            runtime.run_journaled(&journal, &run_id(), &wider, &mut refund::conversation(), |_| true).await;
        assert_eq!(refused, Err(RunError::Journal(JournalError::Widened)));
    }
    assert_eq!(sent.load(Ordering::SeqCst), 2, "the refusals sent nothing");

    let resumed =
        journal::scope_of(&journal, &run_id()).await.unwrap().pool_store(store.clone()).build().unwrap();
    assert_eq!(resumed.pools().map(PoolDraw::terms), Some(terms));
    let done = runtime
        .run_journaled(&journal, &run_id(), &resumed, &mut refund::conversation(), |_| true)
        .await
        .unwrap();
    assert_eq!(done.status(), Status::Completed);
    assert_eq!(sink.count("refund"), 1);
    let state = store.state(tenant.as_str()).await.unwrap();
    assert_eq!(sent.load(Ordering::SeqCst), 3, "two model calls before the approval, one after");
    assert_eq!(
        (state.settled.calls, state.settled.tokens),
        (3, 90),
        "every model call of the logical run reserved and charged in the pool"
    );

    // An explicit, audited widening may drop the pools; the next attempts then need none.
    let other = MemoryJournal::default();
    let fresh = draw().grants(refund::CAPABILITIES).build().unwrap();
    let first = runtime
        .run_journaled(&other, &run_id(), &fresh, &mut refund::conversation(), |_| true)
        .await
        .unwrap();
    assert_eq!(first.status(), Status::AwaitingApproval);
    let widened = journal::widen(&other, &run_id(), &Widening::new().drop_pools(), "ops-lead").await.unwrap();
    assert_eq!(widened.pools(), None);
    let unpooled = journal::scope_of(&other, &run_id()).await.unwrap().build().unwrap();
    assert!(unpooled.pools().is_none());
    let audit = journal::inspect(&other, &run_id()).await.unwrap();
    assert_eq!(audit.events().last().map(ToString::to_string), Some("Widened run 1 by ops-lead".to_owned()));
}

/// A journal holding the refund task approved by alice and not resumed yet.
async fn approved_refund() -> MemoryJournal {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let tools = refund::tools(sink as Arc<dyn EffectSink>, Policy::Ask);
    let runtime = Runner::new(&tools.set, refund::model(refund::short_script(), |_| {}));
    let first = runtime
        .run_journaled(&journal, &run_id(), &scope(Limits::default()), &mut refund::conversation(), |_| true)
        .await
        .unwrap();
    assert_eq!(first.status(), Status::AwaitingApproval);
    journal::approve(&journal, first.pending().unwrap(), "alice").await.unwrap();
    journal
}

/// The refund task's tools with a refund that `policy` governs and whose input check allows
/// at most `most` cents.
fn checked_tools(sink: &Arc<MemorySink>, policy: Policy, most: i64) -> loopbound::ToolSet {
    let lookup_order = ToolBuilder::new("lookup_order", refund::READ_CAPABILITY)
        .effect(loopbound::tool::EffectKind::Read)
        .build(|input: refund::OrderInput, _call: loopbound::ToolContext| async move {
            Ok::<_, String>(format!("Order {}: 15.00 EUR, paid, delivered damaged.", input.order))
        })
        .unwrap();
    let refunds = Arc::clone(sink);
    let refund = ToolBuilder::new("refund", refund::REFUND_CAPABILITY)
        .effect(loopbound::tool::EffectKind::Effect)
        .policy(policy)
        .validate(move |input: &refund::RefundInput| {
            if input.amount_cents <= most { Ok(()) } else { Err(format!("at /amount_cents: at most {most}")) }
        })
        .build(move |input: refund::RefundInput, call: loopbound::ToolContext| {
            refunds.apply("refund", call.idempotency_key());
            async move { Ok::<_, String>(format!("Refunded {} cents.", input.amount_cents)) }
        })
        .unwrap();
    loopbound::ToolSet::builder().add(&lookup_order).add(&refund).build().unwrap()
}

#[tokio::test]
async fn an_approved_proposal_is_rechecked_on_resume_and_a_stale_one_never_runs() {
    let sink = Arc::new(MemorySink::default());
    let narrowed = Scope::builder().grant(refund::READ_CAPABILITY).build().unwrap();
    let cases = [
        // What changed since the approval, the resume's tools and scope, and what it ends with.
        ("nothing", checked_tools(&sink, Policy::Ask, 5000), scope(Limits::default()), None),
        (
            "the grant",
            checked_tools(&sink, Policy::Ask, 5000),
            narrowed,
            Some((
                Status::PermissionDenied,
                "PermissionDenied refund 2 refund-42/op/2 by recheck: capability not granted",
            )),
        ),
        (
            "the policy",
            checked_tools(&sink, Policy::Deny, 5000),
            scope(Limits::default()),
            Some((Status::Denied, "Denied refund 2 refund-42/op/2 by recheck: policy deny")),
        ),
        (
            "the input check",
            checked_tools(&sink, Policy::Ask, 1000),
            scope(Limits::default()),
            Some((Status::Denied, "Denied refund 2 refund-42/op/2 by recheck: input check")),
        ),
    ];
    for (changed, tools, resume_scope, stale) in cases {
        let journal = approved_refund().await;
        let runtime = Runner::new(&tools, refund::model(refund::short_script(), |_| {}));
        let before = sink.count("refund");
        let outcome = runtime
            .run_journaled(&journal, &run_id(), &resume_scope, &mut refund::conversation(), |_| true)
            .await
            .unwrap();
        let record = journal::inspect(&journal, &run_id()).await.unwrap();
        let last = record.events().last().map(ToString::to_string).unwrap();
        match stale {
            None => {
                assert_eq!(outcome.status(), Status::Completed, "{changed}");
                assert_eq!(sink.count("refund"), before + 1, "{changed}: the approved refund ran");
            }
            Some((status, event)) => {
                assert_eq!(outcome.status(), status, "{changed}");
                assert_eq!(last, event, "{changed}: the audit log says why");
                assert_eq!(sink.count("refund"), before, "{changed}: the refund never ran");
                assert_eq!(record.state(), RunState::Finished(status), "{changed}");
                assert_eq!(outcome.operation(), Some("refund-42/op/2"), "{changed}");
            }
        }
    }
}

/// One attempt of the refund task's short script with `tools`, under the default scope.
async fn refund_attempt(journal: &MemoryJournal, tools: &loopbound::ToolSet) -> Outcome {
    let runtime = Runner::new(tools, refund::model(refund::short_script(), |_| {}));
    let scope = scope(Limits::default());
    runtime.run_journaled(journal, &run_id(), &scope, &mut refund::conversation(), |_| true).await.unwrap()
}

#[tokio::test]
async fn a_proposal_that_expires_refuses_a_late_approval_and_a_late_resume_never_starts_its_effect() {
    let sink = Arc::new(MemorySink::default());
    let suspend = |expiry: Duration| {
        let sink = Arc::clone(&sink);
        async move {
            let journal = MemoryJournal::default();
            let tools = checked_tools(&sink, Policy::AskWithin(expiry), 5000);
            let outcome = refund_attempt(&journal, &tools).await;
            (journal, tools, outcome)
        }
    };
    let resume = |journal: MemoryJournal, tools: loopbound::ToolSet| async move {
        let outcome = refund_attempt(&journal, &tools).await;
        let record = journal::inspect(&journal, &run_id()).await.unwrap();
        (outcome.status(), record.events().last().map(ToString::to_string).unwrap())
    };
    let expired = "Denied refund 2 refund-42/op/2 by recheck: approval expired".to_owned();

    // ProposalKey after the expiry: refused, nothing written; the resume ends the run.
    let (journal, tools, waiting) = suspend(Duration::from_millis(1)).await;
    let pending = waiting.pending().unwrap();
    let expires = pending.expires_at().unwrap();
    let shown = serde_json::to_value(&waiting).unwrap();
    let millis = expires.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    assert_eq!(shown["pending"]["expires_at_ms"].as_u64().map(u128::from), Some(millis));
    tokio::time::sleep(Duration::from_millis(5)).await;
    let commits = journal.commits();
    assert_eq!(journal::approve(&journal, pending, "alice").await.err(), Some(JournalError::ApprovalExpired));
    assert_eq!(journal.commits(), commits, "nothing written");
    assert_eq!(resume(journal, tools).await, (Status::Denied, expired.clone()));

    // Approved in time, resumed after the expiry: the effect never starts.
    let (journal, tools, waiting) = suspend(Duration::from_millis(300)).await;
    journal::approve(&journal, waiting.pending().unwrap(), "alice").await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(resume(journal, tools).await, (Status::Denied, expired));
    assert_eq!(sink.count("refund"), 0);

    // Approved and resumed in time: it runs.
    let (journal, tools, waiting) = suspend(Duration::from_secs(3600)).await;
    journal::approve(&journal, waiting.pending().unwrap(), "alice").await.unwrap();
    assert_eq!(resume(journal, tools).await.0, Status::Completed);
    assert_eq!(sink.count("refund"), 1);
}

#[tokio::test]
async fn widening_a_run_is_an_explicit_audited_command_and_the_next_attempt_may_use_it() {
    let journal = MemoryJournal::default();
    let sink = Arc::new(MemorySink::default());
    let narrow = Scope::builder().grant(refund::READ_CAPABILITY).build().unwrap();
    let tools = refund::tools(Arc::clone(&sink) as Arc<dyn EffectSink>, Policy::Ask);
    let runtime = Runner::new(&tools.set, refund::model(refund::short_script(), |_| {}));
    let first = runtime
        .run_journaled(&journal, &run_id(), &narrow, &mut refund::conversation(), |_| true)
        .await
        .unwrap();
    assert_eq!(first.status(), Status::PermissionDenied, "the refund was not granted");

    let journal = MemoryJournal::default();
    let script = vec![refund::short_script()[0].clone(), ModelReply::text("Looked up.")];
    let runtime = Runner::new(&tools.set, refund::model(script, |_| {}));
    let limits = Limits::default().with_deadline(Duration::from_millis(1));
    let cut = Scope::builder().grant(refund::READ_CAPABILITY).limits(limits).build().unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let stopped = runtime
        .run_journaled(&journal, &run_id(), &cut, &mut refund::conversation(), |_| true)
        .await
        .unwrap();
    assert_eq!(stopped.status(), Status::DeadlineExceeded, "an open run, to widen");
    assert_eq!(
        journal::widen(&journal, &run_id(), &Widening::new().grant(refund::REFUND_CAPABILITY), "")
            .await
            .err(),
        Some(JournalError::InvalidActor)
    );
    let widening = Widening::new().grant(refund::REFUND_CAPABILITY);
    let widened = journal::widen(&journal, &run_id(), &widening, "ops-lead").await.unwrap();
    assert!(widened.is_granted(refund::REFUND_CAPABILITY) && widened.is_granted(refund::READ_CAPABILITY));
    let scope = journal::scope_of(&journal, &run_id()).await.unwrap().build().unwrap();
    assert!(scope.is_granted(refund::REFUND_CAPABILITY), "the next attempt's scope has it");
    let record = journal::inspect(&journal, &run_id()).await.unwrap();
    let audit: Vec<String> = record.events().iter().map(ToString::to_string).collect();
    assert_eq!(audit.last().map(String::as_str), Some("Widened run 1 by ops-lead"));
    let resumed =
        runtime.run_journaled(&journal, &run_id(), &scope, &mut refund::conversation(), |_| true).await;
    assert_eq!(resumed.map(|o| o.status()), Ok(Status::Completed));
}
