//! Guard benchmarks: admission of `read_ticket({"input":42})` (bind + signature + check and
//! reserve), its refusal at each check, contention of two threads on one scope, and many
//! independent scopes admitting in parallel.
//!
//! Setup (scopes, tools) is built outside the timed region by `timing::timed`; what an admission
//! returns is dropped after the timer stops. Nothing here asserts a time.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loopbound_benches::fixtures::{Check, Fixture, admit};
use loopbound_benches::parallel::{ROUND_SCOPES, request_rounds, shared_scope};
use loopbound_benches::timing::timed;
use loopbound_testkit::review::TicketInput;

/// Calls served by one roomy scope before a fresh one is built.
const CALLS_PER_SCOPE: u64 = 10_000;
/// Fresh scopes built before each timed group, for first calls and refusals: few enough to stay
/// in cache, as a scope just built for a request is.
const FRESH_GROUP: usize = 20;

fn roomy(calls: u64) -> Fixture {
    Fixture::roomy(u32::try_from(calls).unwrap_or(u32::MAX))
}

fn admission(c: &mut Criterion) {
    let mut group = c.benchmark_group("admission");
    group.bench_function("bind+reserve/roomy_scope", |b| {
        b.iter_custom(|iters| {
            timed(iters, (1, CALLS_PER_SCOPE), roomy, |fixture| admit(fixture.read_ticket()))
        });
    });
    group.bench_function("bind+reserve/first_call_of_default_scope", |b| {
        b.iter_custom(|iters| {
            timed(
                iters,
                (FRESH_GROUP, 1),
                |_| Fixture::default_limits(),
                |fixture| admit(fixture.read_ticket()),
            )
        });
    });
    group.bench_function("reserve_typed/roomy_scope", |b| {
        b.iter_custom(|iters| {
            timed(iters, (1, CALLS_PER_SCOPE), roomy, |fixture| {
                fixture
                    .read_ticket()
                    .reserve(black_box(TicketInput { input: 42 }))
                    .map(|reservation| reservation.tool_count())
            })
        });
    });
    group.finish();
}

fn refusal(c: &mut Criterion) {
    let mut group = c.benchmark_group("refusal");
    for check in Check::ALL {
        group.bench_function(check.name(), |b| {
            b.iter_custom(|iters| {
                if check == Check::Halted {
                    // A halted scope refuses every call without recording more: one scope serves all.
                    timed(iters, (1, iters), |_| check.arm(), |fixture| admit(fixture.read_ticket()))
                } else {
                    timed(iters, (FRESH_GROUP, 1), |_| check.arm(), |fixture| admit(fixture.read_ticket()))
                }
            });
        });
    }
    group.finish();
}

fn contention(c: &mut Criterion) {
    let mut group = c.benchmark_group("contention");
    // Each of `threads` threads admits `iters` calls on one shared scope: the reported time per
    // iteration is the per-call time each thread sees.
    for threads in [1, 2] {
        group.bench_function(format!("one_scope/{threads}_threads"), |b| {
            b.iter_custom(|iters| shared_scope(threads, u32::try_from(iters).unwrap_or(u32::MAX)).wall);
        });
    }
    group.finish();

    // Rounds of 1000 fresh scopes, each admitting the default tool budget (4 calls), as
    // concurrent requests would; the reported time per iteration is wall time per admission.
    let mut group = c.benchmark_group("parallel_scopes");
    group.throughput(Throughput::Elements(1));
    for threads in [1, 2] {
        group.bench_function(format!("{ROUND_SCOPES}_scopes/{threads}_threads"), |b| {
            b.iter_custom(|iters| {
                let seen = request_rounds(threads, iters);
                // Scale the wall time of `seen.calls` admissions to `iters` of them.
                Duration::from_secs_f64(seen.wall.as_secs_f64() * iters as f64 / seen.calls.max(1) as f64)
            });
        });
    }
    group.finish();
}

criterion_group!(benches, admission, refusal, contention);
criterion_main!(benches);
