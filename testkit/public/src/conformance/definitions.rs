//! A run's definition as every backend stores it: the grants, limits, per-tool limits, price
//! table and labels of its first attempt, rebuilt in another process from the run id alone; a
//! wider resume refused; a widening that is the host's explicit command.

use std::sync::Arc;

use loopbound::journal::{self, Journal, JournalError, Labels, Widening};
use loopbound::spend::{Micros, Price, Prices};
use loopbound::tool::Policy;
use loopbound::{Ended, Limits, Outcome, RunError, Runner, Scope, Status, ToolSet};

use super::{Backend, LONG, run, two};
use crate::refund::{self, EffectSink, MemorySink};

pub(crate) async fn check_all<B: Backend>(backend: &B) {
    let (a, b) = two(backend, LONG).await;
    per_tool_limits_and_prices_are_rebuilt_elsewhere_and_only_an_explicit_widening_raises_them(&a, &b).await;
}

const MODEL: &str = "scripted-model";

fn prices() -> Prices {
    Prices::new()
        .model(MODEL, Price::per_million(Micros(1), Micros(2)))
        .tool("refund", Micros(20_000))
        .other_tools(Micros::ZERO)
}

async fn attempt(journal: &impl Journal, tools: &ToolSet, scope: &Scope) -> Result<Outcome, RunError> {
    let model = refund::model(refund::short_script(), |_| {}).with_model(MODEL);
    let runtime = Runner::new(tools, model);
    let refunded = |ended: Ended<'_, ()>| ended.has_succeeded("refund");
    runtime.run_journaled(journal, &run(), scope, &mut refund::conversation(), refunded).await
}

async fn per_tool_limits_and_prices_are_rebuilt_elsewhere_and_only_an_explicit_widening_raises_them<
    J: Journal,
>(
    a: &J,
    b: &J,
) {
    let sink = Arc::new(MemorySink::default());
    let tools = refund::tools(Arc::clone(&sink) as Arc<dyn EffectSink>, Policy::Ask).set;
    let limits = Limits::default().with_model_calls(5);
    let labels = Labels::new().with("tenant", "acme").expect("a valid label");
    let first_scope = Scope::builder()
        .grants(refund::CAPABILITIES)
        .limits(limits.clone().with_tool_calls_of("refund", 1))
        .prices(prices().shared())
        .labels(labels.clone())
        .build()
        .expect("a valid scope");
    let first = attempt(a, &tools, &first_scope).await.expect("the first attempt runs");
    assert_eq!(first.status(), Status::AwaitingApproval, "the refund waits for a decision");

    // Another process, from the run id alone.
    let rebuilt = journal::scope_of(b, &run()).await.expect("a definition").build().expect("it builds");
    assert_eq!(
        (rebuilt.limits(), rebuilt.limits().per_tool_calls().collect::<Vec<_>>(), rebuilt.labels()),
        (&limits.clone().with_tool_calls_of("refund", 1), vec![("refund", 1)], &labels),
        "the limits, the per-tool limits and the labels are the first attempt's"
    );
    assert_eq!(rebuilt.prices().map(|p| &**p), Some(&prices()), "the price table is the first attempt's");

    let epoch_before = journal::inspect(b, &run()).await.expect("inspect").epoch();
    let cheaper = prices().tool("refund", Micros(19_999)).shared();
    let base = |refunds: Option<u32>| {
        let limits =
            refunds.into_iter().fold(limits.clone(), |l, calls| l.with_tool_calls_of("refund", calls));
        Scope::builder().grants(refund::CAPABILITIES).limits(limits)
    };
    for (what, wider) in [
        ("a raised per-tool limit", base(Some(2)).prices(prices().shared())),
        ("a dropped per-tool limit", base(None).prices(prices().shared())),
        ("a cheaper tool", base(Some(1)).prices(cheaper)),
    ] {
        let wider = wider.build().expect("a valid scope");
        let refused = attempt(b, &tools, &wider).await;
        assert_eq!(refused.err(), Some(RunError::Journal(JournalError::Widened)), "{what} is wider");
    }
    assert_eq!(sink.count("refund"), 0, "nothing ran");
    let record = journal::inspect(b, &run()).await.expect("inspect");
    assert_eq!(record.epoch(), epoch_before + 3, "each refusal took the run and released it");
    let definition = record.definition().expect("a definition");
    assert_eq!(definition.limits().tool_calls_of("refund"), Some(1), "a refusal changes no definition");

    let widening = Widening::new().tool_limit("refund", 2).drop_tool_limit("send_receipt");
    let widened = journal::widen(b, &run(), &widening, "ops-lead").await.expect("widened");
    assert_eq!(widened.limits().per_tool_calls().collect::<Vec<_>>(), [("refund", 2)]);
    journal::approve(b, first.pending().expect("a proposal waits"), "alice").await.expect("approved");
    let scope = journal::scope_of(b, &run()).await.expect("a definition").build().expect("it builds");
    assert_eq!(
        scope.limits().tool_calls_of("refund"),
        Some(2),
        "the next attempt's scope has the widened limit"
    );
    let done = attempt(b, &tools, &scope).await.expect("the resume runs");
    assert_eq!(done.status(), Status::Completed, "completed by the record-based condition");
    assert_eq!(sink.count("refund"), 1);
    let audit: Vec<String> = journal::inspect(a, &run())
        .await
        .expect("inspect")
        .events()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(audit.iter().any(|line| line == "Widened run 1 by ops-lead"), "{audit:?}");
}
