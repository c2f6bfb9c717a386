//! Approvals that expire: a proposal made under `Policy::AskWithin` keeps its expiry in every
//! backend; an approval presented after it is refused and writes nothing; a host that asks
//! again gives the proposal a new expiry (one audited commit), after which the approval is
//! taken and the resumed run runs its effect once; asking again is refused with a typed error
//! for a wrong digest, a zero window, a decided proposal, and while an attempt holds the run.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use loopbound::journal::{self, Journal, JournalError};
use loopbound::tool::Policy;
use loopbound::{Outcome, Runner, Scope, Status};

use super::{Backend, LONG, fresh_row, run, run_named, two};
use crate::refund::{self, EffectSink, MemorySink};

pub(crate) async fn check_all<B: Backend>(backend: &B) {
    let (a, b) = two(backend, LONG).await;
    an_expired_approval_is_refused_until_the_host_asks_again(&a, &b).await;
    let (a, _) = two(backend, LONG).await;
    asking_again_is_refused_for_bad_input_and_writes_nothing(&a).await;
}

/// One attempt of the refund task (short script) on `run`, the refund asking for approval
/// within `expiry`.
async fn attempt(journal: &impl Journal, sink: &Arc<MemorySink>, expiry: Duration) -> Outcome {
    let tools = refund::tools(Arc::clone(sink) as Arc<dyn EffectSink>, Policy::AskWithin(expiry)).set;
    let scope = Scope::builder().grants(refund::CAPABILITIES).build().expect("valid limits");
    let runtime = Runner::new(&tools, refund::model(refund::short_script(), |_| {}));
    runtime
        .run_journaled(journal, &run(), &scope, &mut refund::conversation(), |ended| {
            ended.has_succeeded("refund")
        })
        .await
        .expect("an attempt")
}

async fn an_expired_approval_is_refused_until_the_host_asks_again(a: &impl Journal, b: &impl Journal) {
    let sink = Arc::new(MemorySink::default());
    let made = SystemTime::now();
    let first = attempt(a, &sink, Duration::from_millis(200)).await;
    assert_eq!(first.status(), Status::AwaitingApproval, "the refund awaits approval");
    let pending = first.pending().expect("the refund waits").clone();
    let expires = pending.expires_at().expect("an expiry");
    assert!(expires > made && expires <= SystemTime::now() + Duration::from_millis(200), "{expires:?}");
    let stored = journal::inspect(b, &run()).await.expect("another process reads it");
    let kept = stored.pending().map(|proposal| proposal.expires_at());
    assert_eq!(kept, Some(Some(expires)), "the backend keeps the expiry to the millisecond");

    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = b.load(&run()).await.expect("load");
    assert_eq!(journal::approve(b, &pending, "alice").await.err(), Some(JournalError::ApprovalExpired));
    assert_eq!(b.load(&run()).await.expect("load"), before, "the late approval wrote nothing");

    let asked = SystemTime::now();
    let renewed =
        journal::ask_again(b, &pending, Duration::from_secs(3600), "ops-bot").await.expect("asked again");
    assert_eq!(
        (renewed.operation(), renewed.digest()),
        (pending.operation(), pending.digest()),
        "the same proposal"
    );
    let until = renewed.expires_at().expect("a new expiry");
    assert!(until >= asked + Duration::from_secs(3599), "the new expiry an hour on: {until:?}");
    assert!(!renewed.is_expired(), "the proposal asked again is not expired");
    let record = journal::inspect(a, &run()).await.expect("inspect");
    assert_eq!(
        record.events().last().map(ToString::to_string),
        Some("AskedAgain refund 2 conformance-1/op/2 by ops-bot".to_owned()),
        "audited"
    );
    assert_eq!(
        record.pending().map(|proposal| proposal.expires_at()),
        Some(Some(until)),
        "asking again stores the proposal's new expiry"
    );
    journal::approve(b, &renewed, "alice").await.expect("approved in the new window");
    let done = attempt(a, &sink, Duration::from_millis(200)).await;
    assert_eq!(done.status(), Status::Completed, "the run approved in the new window completes");
    assert_eq!(sink.count("refund"), 1, "the refund ran once");
}

async fn asking_again_is_refused_for_bad_input_and_writes_nothing(a: &impl Journal) {
    let sink = Arc::new(MemorySink::default());
    let first = attempt(a, &sink, Duration::from_secs(60)).await;
    let pending = first.pending().expect("the refund waits").clone();
    let before = a.load(&run()).await.expect("load");
    let hour = Duration::from_secs(3600);
    let wrong = journal::ProposalKey::new(pending.operation(), &journal::Digest::of("another proposal"));
    assert_eq!(journal::ask_again(a, wrong, hour, "ops").await.err(), Some(JournalError::SignatureMismatch));
    assert_eq!(
        journal::ask_again(a, &pending, Duration::ZERO, "ops").await.err(),
        Some(JournalError::InvalidExpiry)
    );
    assert_eq!(journal::ask_again(a, &pending, hour, "").await.err(), Some(JournalError::InvalidActor));
    assert_eq!(a.load(&run()).await.expect("load"), before, "the refusals wrote nothing");

    // While an attempt holds the run, its proposal is not asked about again.
    let held = a.acquire(&run(), fresh_row()).await.expect("the run's lease is free");
    match journal::ask_again(a, &pending, hour, "ops").await {
        Err(JournalError::LeaseHeld { holder, .. }) => assert_eq!(holder, "attempt-a"),
        other => panic!("expected LeaseHeld, got {other:?}"),
    }
    let release =
        loopbound::journal::backend::Batch { entries: vec![loopbound::journal::backend::Entry::Release] };
    a.commit(&run(), loopbound::journal::backend::Fence::Epoch(held.run.epoch), release)
        .await
        .expect("released");
    journal::deny(a, &pending, "alice").await.expect("denied");
    assert_eq!(journal::ask_again(a, &pending, hour, "ops").await.err(), Some(JournalError::AlreadyDecided));
    let elsewhere =
        journal::OperationId::parse(&format!("{}/op/7", run_named("conformance-none"))).expect("an id");
    let unknown = journal::ProposalKey::new(&elsewhere, &pending.digest());
    assert_eq!(journal::ask_again(a, unknown, hour, "ops").await.err(), Some(JournalError::UnknownRun));
}
