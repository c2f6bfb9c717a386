//! The journal protocol (SPEC §15) as a state machine: attempts of a journaled run that die
//! before or after any commit or inside an effect's body, resumes, approvals and denials (with
//! the right digest or another), and reconciliations, driven through the public API on the
//! in-memory journal under tokio's paused clock, against the reference
//! [`Model`](loopbound_proptests::journal_model::Model).
//!
//! After every step: the step's report equals the model's; the journal holds exactly what the
//! model says was committed (each operation's proposal, decision, starts, result and
//! reconciliations, the recorded replies, the run's state, attempts and counters); each effect
//! body ran as often as the model says, which is at most once per start that a reconciliation
//! did not declare unrun, and always with its operation id as key; no reply recorded before an
//! attempt was asked for by it.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loopbound::journal::backend::{Batch, Fence, ListedRow, RunRow, StoredRun};
use loopbound::journal::{
    self, Digest, Journal, JournalError, MemoryJournal, OperationId, Resolution, RunId, RunQuery, RunState,
};
use loopbound::tool::{EffectKind, Policy as ToolPolicy};
use loopbound::{Limits, RunError, Runner, Scope, ToolBuilder, ToolContext, ToolSet};
use loopbound_proptests::config::with_cases;
use loopbound_proptests::harness;
use loopbound_proptests::journal_model::{Crash, Model, Policy, Reported, RunState as ModelState, Settled};
use loopbound_proptests::regressions;
use loopbound_testkit::refund::{self, OrderInput, RefundInput};
use proptest::prelude::*;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};

#[derive(Clone, Debug)]
enum Transition {
    Attempt(Crash),
    Decide { op: usize, allow: bool, right_digest: bool },
    Reconcile { op: usize, ran: bool },
}

#[derive(Clone, Debug)]
struct Reference {
    model: Model,
    last: Reported,
}

fn crash() -> impl Strategy<Value = Crash> {
    prop_oneof![
        3 => Just(Crash::Never),
        2 => (1u8..=5).prop_map(Crash::BeforeCommit),
        2 => (1u8..=5).prop_map(Crash::AfterCommit),
        2 => (1u8..=3).prop_map(Crash::InBody),
    ]
}

struct ProtocolMachine;

impl ReferenceStateMachine for ProtocolMachine {
    type State = Reference;
    type Transition = Transition;

    fn init_state() -> BoxedStrategy<Reference> {
        prop::sample::select(vec![Policy::Allow, Policy::Ask, Policy::Deny])
            .prop_map(|policy| Reference { model: Model::new(policy), last: Reported::Done })
            .boxed()
    }

    fn transitions(_: &Reference) -> BoxedStrategy<Transition> {
        prop_oneof![
            6 => crash().prop_map(Transition::Attempt),
            2 => (1usize..=4, any::<bool>(), prop::bool::weighted(0.85))
                .prop_map(|(op, allow, right_digest)| Transition::Decide { op, allow, right_digest }),
            2 => (1usize..=4, any::<bool>()).prop_map(|(op, ran)| Transition::Reconcile { op, ran }),
        ]
        .boxed()
    }

    fn apply(mut state: Reference, transition: &Transition) -> Reference {
        state.last = match *transition {
            Transition::Attempt(crash) => state.model.attempt(crash),
            Transition::Decide { op, allow, right_digest } => state.model.decide(op, allow, right_digest),
            Transition::Reconcile { op, ran } => {
                state.model.reconcile(op, if ran { Settled::Ran } else { Settled::NotRun })
            }
        };
        state
    }
}

/// The crash plan of the current attempt, shared by the journal wrapper and the bodies.
#[derive(Default)]
struct Plan {
    crash: Mutex<Option<Crash>>,
    commits: AtomicU8,
    bodies: AtomicU8,
    dead: AtomicBool,
}

impl Plan {
    fn arm(&self, crash: Crash) {
        *self.crash.lock().unwrap() = Some(crash);
        self.commits.store(0, Ordering::SeqCst);
        self.bodies.store(0, Ordering::SeqCst);
        self.dead.store(false, Ordering::SeqCst);
    }

    fn crash(&self) -> Crash {
        self.crash.lock().unwrap().unwrap_or(Crash::Never)
    }

    /// An effect body started: whether it dies in it (the process dies with it).
    fn dies_in_body(&self) -> bool {
        let n = self.bodies.fetch_add(1, Ordering::SeqCst) + 1;
        let dies = self.crash() == Crash::InBody(n);
        if dies {
            self.dead.store(true, Ordering::SeqCst);
        }
        dies
    }
}

/// The in-memory journal, with the process's death injected around its commits.
struct Dying {
    inner: MemoryJournal,
    plan: Arc<Plan>,
}

fn died() -> JournalError {
    JournalError::storage("the process died")
}

impl Journal for Dying {
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
        if fence == Fence::Host {
            return self.inner.commit(run, fence, batch).await;
        }
        if self.plan.dead.load(Ordering::SeqCst) {
            return Err(died());
        }
        let n = self.plan.commits.fetch_add(1, Ordering::SeqCst) + 1;
        if self.plan.crash() == Crash::BeforeCommit(n) {
            self.plan.dead.store(true, Ordering::SeqCst);
            return Err(died());
        }
        self.inner.commit(run, fence, batch).await?;
        if self.plan.crash() == Crash::AfterCommit(n) {
            self.plan.dead.store(true, Ordering::SeqCst);
            return Err(died());
        }
        Ok(())
    }
}

struct Sut {
    runtime: tokio::runtime::Runtime,
    journal: Dying,
    plan: Arc<Plan>,
    tools: ToolSet,
    /// Effect bodies that ran: (op ordinal, key).
    effects: Arc<Mutex<Vec<(u32, String)>>>,
    asked: Arc<Mutex<Vec<usize>>>,
}

fn run_id() -> RunId {
    RunId::new("prop-run").unwrap()
}

fn tools(policy: Policy, plan: &Arc<Plan>, effects: &Arc<Mutex<Vec<(u32, String)>>>) -> ToolSet {
    let policy = match policy {
        Policy::Allow => ToolPolicy::Allow,
        Policy::Ask => ToolPolicy::Ask,
        Policy::Deny => ToolPolicy::Deny,
    };
    let body = |plan: Arc<Plan>, effects: Arc<Mutex<Vec<(u32, String)>>>| {
        move |call: &ToolContext| {
            let key = call.idempotency_key().unwrap_or_default().to_owned();
            let ordinal = OperationId::parse(&key).map_or(0, |id| id.ordinal());
            effects.lock().unwrap().push((ordinal, key));
            plan.dies_in_body()
        }
    };
    let lookup_order = ToolBuilder::new("lookup_order", refund::READ_CAPABILITY)
        .effect(EffectKind::Read)
        .build(|input: OrderInput, _call: ToolContext| async move {
            Ok::<_, String>(format!("order {}", input.order))
        })
        .unwrap();
    let refund_body = body(Arc::clone(plan), Arc::clone(effects));
    let refund = ToolBuilder::new("refund", refund::REFUND_CAPABILITY)
        .effect(EffectKind::Effect)
        .policy(policy)
        .build(move |input: RefundInput, call: ToolContext| {
            let dies = refund_body(&call);
            async move {
                if dies {
                    std::future::pending::<()>().await;
                }
                Ok::<_, String>(format!("refunded {}", input.amount_cents))
            }
        })
        .unwrap();
    let receipt_body = body(Arc::clone(plan), Arc::clone(effects));
    let send_receipt = ToolBuilder::new("send_receipt", refund::MAIL_CAPABILITY)
        .effect(EffectKind::Idempotent)
        .build(move |input: OrderInput, call: ToolContext| {
            let dies = receipt_body(&call);
            async move {
                if dies {
                    std::future::pending::<()>().await;
                }
                Ok::<_, String>(format!("receipt {}", input.order))
            }
        })
        .unwrap();
    ToolSet::builder().add(&lookup_order).add(&refund).add(&send_receipt).build().unwrap()
}

fn refused(error: &JournalError) -> &'static str {
    match error {
        JournalError::UnknownRun => "UnknownRun",
        JournalError::UnknownOperation => "UnknownOperation",
        JournalError::SignatureMismatch => "SignatureMismatch",
        JournalError::AlreadyDecided => "AlreadyDecided",
        JournalError::NotAnEffect => "NotAnEffect",
        JournalError::NotAmbiguous => "NotAmbiguous",
        other => panic!("an unexpected refusal: {other}"),
    }
}

fn status_name(status: loopbound::Status) -> &'static str {
    loopbound::Status::ALL.iter().copied().find(|s| *s == status).map_or("?", |s| match s.as_str() {
        "Completed" => "Completed",
        "AwaitingApproval" => "AwaitingApproval",
        "Denied" => "Denied",
        "Ambiguous" => "Ambiguous",
        other => panic!("an unexpected status {other}"),
    })
}

impl Sut {
    fn attempt(&self, crash: Crash) -> Reported {
        self.plan.arm(crash);
        self.runtime.block_on(async {
            let recorded = match journal::inspect(&self.journal, &run_id()).await {
                Ok(record) => record.replies(),
                Err(_) => 0,
            };
            let asked_before = self.asked.lock().unwrap().len();
            let asked = Arc::clone(&self.asked);
            let model = refund::model(refund::long_script(), move |step| asked.lock().unwrap().push(step));
            let runtime = Runner::new(&self.tools, model);
            let limits = Limits::default().with_deadline(Duration::from_secs(10));
            let scope = Scope::builder().grants(refund::CAPABILITIES).limits(limits).build().unwrap();
            let result = runtime
                .run_journaled(&self.journal, &run_id(), &scope, &mut refund::conversation(), |_| true)
                .await;
            let asked_now = self.asked.lock().unwrap()[asked_before..].to_vec();
            assert!(
                asked_now.iter().all(|step| *step > recorded),
                "a recorded reply was asked again: {asked_now:?}"
            );
            match result {
                Ok(outcome) => {
                    let op = outcome.operation().map(|id| OperationId::parse(id).unwrap().ordinal() as usize);
                    Reported::Outcome(status_name(outcome.status()), op)
                }
                Err(RunError::Journal(JournalError::Finished(status))) => {
                    Reported::Finished(status_name(status))
                }
                Err(RunError::Journal(JournalError::Storage(_))) if self.plan.dead.load(Ordering::SeqCst) => {
                    // The dead process's lease runs out before anything else happens.
                    self.journal.inner.expire(&run_id());
                    Reported::Crashed
                }
                Err(other) => panic!("an attempt failed: {other}"),
            }
        })
    }

    fn decide(&self, op: usize, allow: bool, right_digest: bool) -> Reported {
        self.runtime.block_on(async {
            let operation = run_id().operation(u32::try_from(op).unwrap());
            let record = journal::inspect(&self.journal, &run_id()).await.ok();
            let proposal =
                record.as_ref().and_then(|r| r.operation(operation.ordinal())).map(|o| o.proposal().clone());
            let digest = match (&proposal, right_digest) {
                (Some(proposal), true) => proposal.digest(),
                _ => Digest::of("refund:{\"amount_cents\":1,\"order\":1}"),
            };
            let result = if allow {
                journal::approve(&self.journal, journal::ProposalKey::new(&operation, &digest), "alice").await
            } else {
                journal::deny(&self.journal, journal::ProposalKey::new(&operation, &digest), "bob").await
            };
            result.map_or_else(|error| Reported::Refused(refused(&error)), |_| Reported::Done)
        })
    }

    fn reconcile(&self, op: usize, ran: bool) -> Reported {
        self.runtime.block_on(async {
            let operation = run_id().operation(u32::try_from(op).unwrap());
            let resolution =
                if ran { Resolution::Ran { result: "ran".to_owned() } } else { Resolution::NotRun };
            journal::reconcile(&self.journal, &operation, resolution, "ops")
                .await
                .map_or_else(|error| Reported::Refused(refused(&error)), |()| Reported::Done)
        })
    }
}

impl StateMachineTest for ProtocolMachine {
    type SystemUnderTest = Sut;
    type Reference = Self;

    fn init_test(state: &Reference) -> Sut {
        let plan = Arc::new(Plan::default());
        let effects = Arc::new(Mutex::new(Vec::new()));
        let tools = tools(state.model.policy, &plan, &effects);
        let journal = Dying { inner: MemoryJournal::default(), plan: Arc::clone(&plan) };
        Sut {
            runtime: harness::paused_runtime(),
            journal,
            plan,
            tools,
            effects,
            asked: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn apply(sut: Sut, state: &Reference, transition: Transition) -> Sut {
        let described = format!("{transition:?}");
        let reported = match transition {
            Transition::Attempt(crash) => sut.attempt(crash),
            Transition::Decide { op, allow, right_digest } => sut.decide(op, allow, right_digest),
            Transition::Reconcile { op, ran } => sut.reconcile(op, ran),
        };
        assert_eq!(reported, state.last, "report of {described}");
        sut
    }

    fn check_invariants(sut: &Sut, state: &Reference) {
        let durable = &state.model.durable;
        let record = sut.runtime.block_on(journal::inspect(&sut.journal, &run_id()));
        let Ok(record) = record else {
            assert_eq!(durable.attempts, 0, "the run exists: {record:?}");
            return;
        };
        assert_eq!(record.attempts(), durable.attempts, "attempts");
        assert_eq!(record.replies(), durable.replies, "recorded replies");
        assert_eq!(
            (record.model_calls(), record.tool_calls()),
            (durable.model_calls, durable.tool_calls),
            "counters"
        );
        let state_now = match record.state() {
            RunState::Open => ModelState::Open,
            RunState::AwaitingApproval(op) => ModelState::Awaiting(op as usize),
            RunState::Ambiguous(op) => ModelState::Ambiguous(op as usize),
            RunState::Finished(status) => ModelState::Finished(status_name(status)),
            other => panic!("an unexpected state {other:?}"),
        };
        assert_eq!(state_now, durable.state, "the run's state");
        for (index, expected) in durable.ops.iter().enumerate() {
            let ordinal = u32::try_from(index + 1).unwrap();
            let found = record.operation(ordinal);
            assert_eq!(found.is_some(), expected.proposed, "op {ordinal} proposed");
            let Some(found) = found else { continue };
            let decision = found.decision().map(|d| {
                (d.verdict() == journal::Verdict::Allow, matches!(d.by(), journal::Decider::Approver(_)))
            });
            assert_eq!(decision, expected.decision, "op {ordinal} decision");
            assert_eq!(found.starts(), expected.starts, "op {ordinal} starts");
            assert_eq!(found.result().is_some(), expected.result, "op {ordinal} result");
            assert_eq!(
                found.reconciliations().len(),
                expected.reconciled.len(),
                "op {ordinal} reconciliations"
            );
        }
        let effects = sut.effects.lock().unwrap().clone();
        for (index, expected) in state.model.effects.iter().enumerate() {
            let ordinal = u32::try_from(index + 1).unwrap();
            let ran = effects.iter().filter(|(o, _)| *o == ordinal).count();
            assert_eq!(ran, *expected as usize, "op {ordinal} body runs");
        }
        for (ordinal, key) in &effects {
            assert_eq!(*key, run_id().operation(*ordinal).to_string(), "a body's key is its operation id");
        }
        // At most once: an effect's body runs once, plus once per start declared unrun.
        for ordinal in [2, 3] {
            let unrun = record.operation(ordinal).map_or(0, |o| {
                o.reconciliations().iter().filter(|r| *r.resolution() == Resolution::NotRun).count()
            });
            let ran = effects.iter().filter(|(o, _)| *o == ordinal).count();
            assert!(ran <= 1 + unrun, "op {ordinal} ran {ran} times with {unrun} starts declared unrun");
        }
    }
}

prop_state_machine! {
    #![proptest_config(with_cases(128, regressions!("journal_protocol")))]

    #[test]
    fn the_journal_protocol_matches_its_reference_through_crashes_resumes_and_decisions(
        sequential 1..20 => ProtocolMachine
    );
}
