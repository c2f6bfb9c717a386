//! A journaled run's spend across a crash: the reservation of a model call in flight when its
//! attempt died is in the journal, and the resume charges it whole; recorded replies are
//! replayed and not charged again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use loopbound::journal::{self, Journal};
use loopbound::scripted::{Scripted, Step};
use loopbound::spend::Reserved;
use loopbound::tool::Policy;
use loopbound::transport::{TransportError, Usage};
use loopbound::{Outcome, RunError, Runner, Scope, Status};
use tokio::sync::Notify;

use super::{Backend, PAST_SHORT, SHORT, run, two};
use crate::refund::{self, EffectSink, MemorySink};

pub(crate) async fn check_all<B: Backend>(backend: &B) {
    let (a, b) = two(backend, SHORT).await;
    a_reservation_in_flight_at_a_crash_is_charged_whole_on_resume(&a, &b).await;
}

/// The metered refund task on `journal`: a fresh scope under the task's output budget; the
/// model asks `hang`'s first request for step 2 to wait forever, and tells `asked` when it
/// does.
async fn attempt(
    journal: &impl Journal,
    sink: &Arc<MemorySink>,
    hang: &Arc<AtomicBool>,
    asked: &Arc<Notify>,
) -> Result<Outcome, RunError> {
    let tools = refund::tools(Arc::clone(sink) as Arc<dyn EffectSink>, Policy::Allow);
    let script = refund::metered_script();
    let (hang, asked) = (Arc::clone(hang), Arc::clone(asked));
    let model = Scripted::new(move |_, request| {
        let step = refund::step_of(request);
        if step == 2 && hang.swap(false, Ordering::SeqCst) {
            asked.notify_one();
            return Step::Hang;
        }
        script
            .get(step - 1)
            .cloned()
            .map_or_else(|| Step::Fail(TransportError::other("no such step")), Step::Reply)
    });
    let runtime = Runner::new(&tools.set, model).options(refund::metered_options());
    let scope = Scope::builder()
        .grants(refund::CAPABILITIES)
        .limits(refund::metered_limits())
        .build()
        .expect("limits");
    runtime.run_journaled(journal, &run(), &scope, &mut refund::conversation(), |_| true).await
}

async fn a_reservation_in_flight_at_a_crash_is_charged_whole_on_resume<J: Journal>(a: &J, b: &J) {
    let sink = Arc::new(MemorySink::default());
    let (hang, asked) = (Arc::new(AtomicBool::new(true)), Arc::new(Notify::new()));
    // The first attempt dies while its second request is with the provider: its future is
    // dropped, so nothing more of it is written, as when its process is killed.
    tokio::select! {
        ended = attempt(a, &sink, &hang, &asked) => panic!("the first attempt was to hang: {ended:?}"),
        () = asked.notified() => {}
    }
    let record = journal::inspect(b, &run()).await.expect("inspect after the crash");
    let spend = record.spend();
    assert_eq!(record.model_calls(), 2, "the call in flight was counted before it was sent");
    assert_eq!(spend.settled, refund::METERED_USAGE, "the first reply is settled");
    assert_eq!(spend.reserved.output_tokens, u64::from(refund::METERED_CAP), "the second call's reservation");
    let lost = spend.reserved.input_tokens;
    assert!(lost > refund::METERED_USAGE.input_tokens, "the byte counter's bound of the request: {lost}");

    tokio::time::sleep(PAST_SHORT).await;
    let resumed = attempt(b, &sink, &hang, &asked).await.expect("the resume");
    // Settled output: 10 (reply 1, replayed, not charged again) + 50 (the lost call, charged
    // its whole reservation) + 10 + 10 + 10 (replies 2, 3 and 4 asked again) = 90; the closing
    // call would need 16 and 10 are left, so the run halts. Without the crash it completes at
    // 50 (`journal.rs` in the core's tests).
    assert_eq!(resumed.status(), Status::TokenBudget);
    let per_reply = refund::METERED_USAGE;
    let expected = Usage::new(lost + 4 * per_reply.input_tokens, 50 + 4 * per_reply.output_tokens);
    assert_eq!(resumed.spend().settled, expected);
    assert_eq!(resumed.spend().reserved, Reserved::default(), "nothing is left in flight");
    assert!(resumed.spend().settled.output_tokens <= refund::METERED_OUTPUT_BUDGET, "the budget held");
    assert_eq!(resumed.spend().overshoot_tokens, 0);
    assert_eq!((sink.count("refund"), sink.count("send_receipt")), (2, 1), "each effect once");
    let record = journal::inspect(b, &run()).await.expect("inspect after the resume");
    assert_eq!(record.model_calls(), 5, "four replies and the lost call");
    assert_eq!(record.spend().settled, expected, "the journal holds the logical run's spend");
}
