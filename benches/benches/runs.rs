//! Whole scripted runs of the review task through loopbound-demos' scenarios: `complete` (3 model
//! calls, 2 tool calls) in both compositions, and `changing` (5 model calls, 4 tool calls, a
//! `ToolBudget` halt). A request builds its scope and tools; `run_only` builds them outside the
//! timed region; `setup` times only the scope and tools.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use loopbound_benches::runs::{self, RunFailure};
use loopbound_demos::scenario::Scenario;
use loopbound_testkit::Composition;

fn check(scenario: Scenario, composition: Composition, runtime: &tokio::runtime::Runtime) {
    let verified: Result<(), RunFailure> = runtime.block_on(async {
        let outcome = runs::request(scenario, composition).await?;
        runs::verify(scenario, &outcome)
    });
    if let Err(failure) = verified {
        panic!("{scenario} in {composition} does not meet the contract: {failure}");
    }
}

fn whole_runs(c: &mut Criterion) {
    let runtime = runs::runtime();
    let mut group = c.benchmark_group("run");
    for (scenario, composition) in [
        (Scenario::Complete, Composition::Harness),
        (Scenario::Complete, Composition::Simple),
        (Scenario::Changing, Composition::Harness),
    ] {
        check(scenario, composition, &runtime);
        group.bench_function(format!("{scenario}/{composition}/request"), |b| {
            b.to_async(&runtime)
                .iter(|| async move { black_box(runs::request(scenario, composition).await) });
        });
    }
    group.bench_function("complete/harness/run_only", |b| {
        b.to_async(&runtime).iter_batched(
            || runs::session(Scenario::Complete, Composition::Harness),
            |session| async move {
                match session {
                    Ok(session) => black_box(runs::play(session).await),
                    Err(failure) => Err(failure),
                }
            },
            BatchSize::SmallInput,
        );
    });
    group.bench_function("complete/harness/setup", |b| {
        b.iter(|| black_box(runs::session(Scenario::Complete, Composition::Harness)));
    });
    group.finish();
}

criterion_group!(benches, whole_runs);
criterion_main!(benches);
