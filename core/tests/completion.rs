//! A plain run's completion condition reads the same `Ended` as a journaled run's: the request's
//! state, and the calls that succeeded, answered from the run's own calls.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use loopbound::progress::Progress;
use loopbound::scripted::{Step, sequence};
use loopbound::transport::ModelReply;
use loopbound::{Ended, Message, Outcome, Runner, Scope, Status, ToolBuilder, ToolContext, ToolSet};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize, JsonSchema)]
struct Order {
    order: i64,
}

/// What the bodies of one request did.
#[derive(Default)]
struct Desk {
    refunds_tried: AtomicU32,
}

/// `lookup` answers; `refund` always fails; `notify` answers (when its input binds).
fn tools() -> ToolSet<Desk> {
    let lookup = ToolBuilder::new("lookup", "orders.read")
        .build(|input: Order, _: ToolContext<Desk>| async move {
            Ok::<_, String>(format!("order {} found", input.order))
        })
        .unwrap();
    let refund = ToolBuilder::new("refund", "orders.refund")
        .build(|_: Order, call: ToolContext<Desk>| async move {
            call.state().refunds_tried.fetch_add(1, Ordering::SeqCst);
            Err::<String, _>("card declined".to_owned())
        })
        .unwrap();
    let notify = ToolBuilder::new("notify", "orders.notify")
        .build(|_: Order, _: ToolContext<Desk>| async move { Ok::<_, String>("sent".to_owned()) })
        .unwrap();
    ToolSet::builder().add(&lookup).add(&refund).add(&notify).build().unwrap()
}

/// What a condition saw of the run as it ended.
#[derive(Debug, PartialEq)]
struct Seen {
    lookup: bool,
    refund: bool,
    notify: bool,
    ghost: bool,
    succeeded: Vec<(String, String)>,
    run: Option<String>,
    operations: usize,
    refunds_tried: u32,
}

fn seen(ended: Ended<'_, Desk>) -> Seen {
    Seen {
        lookup: ended.has_succeeded("lookup"),
        refund: ended.has_succeeded("refund"),
        notify: ended.has_succeeded("notify"),
        ghost: ended.has_succeeded("ghost"),
        succeeded: ended.succeeded().map(|(tool, text)| (tool.to_owned(), text.to_owned())).collect(),
        run: ended.run().map(|run| run.as_str().to_owned()),
        #[cfg(feature = "journal")]
        operations: ended.operations().count(),
        #[cfg(not(feature = "journal"))]
        operations: 0,
        refunds_tried: ended.state().refunds_tried.load(Ordering::SeqCst),
    }
}

/// Runs `steps` in `scope`, complete once `tool` succeeded; returns the outcome and what the
/// condition saw.
async fn run_seeing(steps: Vec<Step>, scope: &Scope<Desk>, tool: &str) -> (Outcome, Option<Seen>) {
    let saw = Mutex::new(None);
    let outcome = Runner::new(&tools(), sequence(steps))
        .run(scope, &mut vec![Message::user("Serve order 42.")], |ended| {
            *saw.lock().unwrap() = Some(seen(ended));
            ended.has_succeeded(tool)
        })
        .await
        .unwrap();
    (outcome, saw.into_inner().unwrap())
}

#[tokio::test]
async fn a_plain_runs_condition_counts_only_the_calls_whose_body_answered() {
    let steps = vec![
        Step::Reply(ModelReply::call("c1", "lookup", r#"{"order":42}"#)),
        // The body fails.
        Step::Reply(ModelReply::call("c2", "refund", r#"{"order":42}"#)),
        // The same call again: refused as a repetition (nudged, so the run goes on).
        Step::Reply(ModelReply::call("c3", "refund", r#"{"order":42}"#)),
        // Arguments that do not bind: refused before the body.
        Step::Reply(ModelReply::call("c4", "notify", r#"{"to":"someone"}"#)),
        // No such tool.
        Step::Reply(ModelReply::call("c5", "ghost", "{}")),
        Step::Reply(ModelReply::text("Done.")),
    ];
    let scope = Scope::builder()
        .grants(["orders.read", "orders.refund", "orders.notify"])
        .progress(Progress::exact().nudge(true))
        .state(Desk::default())
        .build()
        .unwrap();
    let (outcome, saw) = run_seeing(steps, &scope, "refund").await;
    assert_eq!(outcome.status(), Status::Incomplete);
    assert_eq!(outcome.text(), Some("Done."));
    assert_eq!(
        saw,
        Some(Seen {
            lookup: true,
            refund: false,
            notify: false,
            ghost: false,
            succeeded: vec![("lookup".to_owned(), "order 42 found".to_owned())],
            run: None,
            operations: 0,
            refunds_tried: 1,
        })
    );
}

#[tokio::test]
async fn a_plain_run_is_completed_once_the_condition_reads_a_successful_call() {
    let steps = vec![
        Step::Reply(ModelReply::call("c1", "lookup", r#"{"order":7}"#)),
        Step::Reply(ModelReply::call("c2", "notify", r#"{"order":7}"#)),
        Step::Reply(ModelReply::text("Notified.")),
    ];
    let scope =
        Scope::builder().grants(["orders.read", "orders.notify"]).state(Desk::default()).build().unwrap();
    let (outcome, saw) = run_seeing(steps, &scope, "notify").await;
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(
        saw,
        Some(Seen {
            lookup: true,
            refund: false,
            notify: true,
            ghost: false,
            succeeded: vec![
                ("lookup".to_owned(), "order 7 found".to_owned()),
                ("notify".to_owned(), "sent".to_owned()),
            ],
            run: None,
            operations: 0,
            refunds_tried: 0,
        })
    );
}

#[tokio::test]
async fn a_denied_call_halts_a_plain_run_before_its_condition_is_asked() {
    let model = sequence(vec![
        Step::Reply(ModelReply::call("c1", "lookup", r#"{"order":42}"#)),
        // No grant for refunds: denied, and a denial halts the run.
        Step::Reply(ModelReply::call("c2", "refund", r#"{"order":42}"#)),
        Step::Reply(ModelReply::text("Done.")),
    ]);
    let scope = Scope::builder().grant("orders.read").state(Desk::default()).build().unwrap();
    let asked = AtomicU32::new(0);
    let outcome = Runner::new(&tools(), model)
        .run(&scope, &mut vec![Message::user("Refund order 42.")], |ended| {
            asked.fetch_add(1, Ordering::SeqCst);
            ended.has_succeeded("refund")
        })
        .await
        .unwrap();
    assert_eq!(outcome.status(), Status::PermissionDenied);
    assert_eq!(asked.load(Ordering::SeqCst), 0);
    assert_eq!(scope.state().refunds_tried.load(Ordering::SeqCst), 0);
}
