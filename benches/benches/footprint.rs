//! Memory per scope: bytes allocated and retained by a scope at the default limits, its tools,
//! and a whole `complete` run; and evidence that a scope's footprint grows only with the calls it
//! admits, never with refused calls, binding failures or loop iterations beyond the admitted ones.
//!
//! Allocations are counted by dhat's heap profiler in testing mode (no file is written), the
//! process's global allocator here. dhat is a well-kept crate that gives exactly the three
//! figures needed (bytes allocated in total, bytes live now, peak bytes live) without any
//! `unsafe` in this crate. Its bookkeeping is slow, so this binary times nothing.
//!
//! Run with `cargo bench -p loopbound-benches --bench footprint`; `cargo test --benches` runs it
//! too, as a smoke test. It prints a table and asserts nothing about sizes.

use loopbound::scripted::{Step, sequence};
use loopbound::transport::{ModelReply, ToolCall};
use loopbound::{Limits, Message, Runner, Scope};
use loopbound_benches::fixtures::{ARGUMENTS, Fixture, admit};
use loopbound_benches::runs;
use loopbound_demos::scenario::Scenario;
use loopbound_testkit::Composition;
use loopbound_testkit::review::{FINISH_CAPABILITY, READ_CAPABILITY, TicketInput};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Heap allocations and bytes allocated in total, and bytes live now, since the profiler started.
#[derive(Clone, Copy)]
struct Heap {
    blocks: u64,
    total: u64,
    live: u64,
}

fn heap() -> Heap {
    let stats = dhat::HeapStats::get();
    Heap { blocks: stats.total_blocks, total: stats.total_bytes, live: stats.curr_bytes as u64 }
}

/// One line of the table: what, allocations and bytes allocated while doing it, bytes still
/// live afterwards. Callers read `after` before formatting `what`, so that the label's own
/// allocation is never counted.
fn line(what: &str, before: Heap, after: Heap) {
    println!(
        "| {what} | {} | {} | {} |",
        after.blocks - before.blocks,
        after.total - before.total,
        after.live.cast_signed() - before.live.cast_signed()
    );
}

/// Runs a model that first asks for `calls` calls of `read_ticket` with arguments that do not
/// bind, then answers with text; returns the number of events the scope recorded. The reply
/// and the conversation are dropped before returning, so what stays is the scope's.
async fn unbindable_calls(fixture: &Fixture, calls: usize) -> usize {
    let bad: Vec<ToolCall> =
        (0..calls).map(|n| ToolCall::new(format!("c{n}"), "read_ticket", r#"{"input":"x"}"#)).collect();
    let model = sequence(vec![Step::Reply(ModelReply::calls(bad)), Step::Reply(ModelReply::text("done"))]);
    let mut conversation = vec![Message::user("Review ticket 42.")];
    let outcome =
        Runner::new(&fixture.tools.set, model).run(&fixture.scope, &mut conversation, |_| false).await;
    drop((outcome, conversation));
    fixture.scope.events().len()
}

fn main() {
    // The runtime is built before the profiler starts, so only the run's own bytes are counted.
    let runtime = runs::runtime();
    let profiler = dhat::Profiler::builder().testing().build();

    println!("| what | allocations | bytes allocated | bytes retained |\n|---|---:|---:|---:|");

    // 1. Once per process: the JSON schema of each tool input type, generated on its first
    // registration and shared by every later scope.
    let before = heap();
    drop(Fixture::default_limits());
    line(
        "first registration of the review's tools on this thread: the thread's per-type schema cache",
        before,
        heap(),
    );

    // 2. A whole `complete` request, with its peak while it runs.
    let before = heap();
    let peak_before = dhat::HeapStats::get().max_bytes as u64;
    let outcome = runtime.block_on(runs::request(Scenario::Complete, Composition::Harness));
    let during = heap();
    let peak = dhat::HeapStats::get().max_bytes as u64;
    line("complete request (scope + tools + run), outcome kept", before, during);
    drop(outcome);
    line("complete request, after dropping the outcome and the scope", before, heap());
    if peak > peak_before {
        println!("| complete request, peak bytes live during the run | - | - | {} |", peak - before.live);
    } else {
        println!("| complete request, peak bytes live during the run | - | - | ≤ {} |", peak - before.live);
    }

    // 3. A scope at the default limits, then its tools.
    let before = heap();
    let scope =
        Scope::builder().grant(READ_CAPABILITY).grant(FINISH_CAPABILITY).limits(Limits::default()).build();
    let scoped = heap();
    line("scope at the default limits, two capabilities", before, scoped);
    drop(scope);
    let before = heap();
    let fixture = Fixture::default_limits();
    line("scope + the review's two tools (names, descriptions, shared schemas)", before, heap());

    // 4. Growth per admitted call, up to the tool budget (4), each with its own signature.
    for id in 1..=Limits::DEFAULT_TOOL_CALLS {
        let before = heap();
        let reservation = fixture.read_ticket().reserve(TicketInput { input: i64::from(id) });
        let admitted = reservation.is_ok();
        drop(reservation);
        let after = heap();
        assert!(admitted, "call {id} is within the default budget");
        line(&format!("admitted call {id} (one event + one signature entry)"), before, after);
    }

    // 5. Refused calls after the budget is spent: the first records the halt, the rest nothing.
    let spent = heap();
    for refused in [1_u32, 10, 100, 1000, 10_000] {
        let before = heap();
        for _ in 0..refused {
            let attempt = admit(fixture.read_ticket());
            assert!(attempt.is_err(), "the budget is spent");
        }
        let after = heap();
        line(&format!("{refused} more refused calls"), before, after);
    }
    line("scope after 11111 refused calls, compared with after its 4th admitted call", spent, heap());

    // 6. Binding failures count nothing and keep nothing.
    let fresh = Fixture::default_limits();
    let before = heap();
    for _ in 0..1000 {
        let failed = fresh.read_ticket().bind(r#"{"input":"forty-two"}"#);
        assert!(failed.is_err(), "a string does not bind to an integer");
    }
    line("1000 binding failures on a fresh scope", before, heap());
    let before = heap();
    let admitted = admit(fresh.read_ticket());
    let after = heap();
    line(&format!("then one admitted call of {ARGUMENTS} ({admitted:?})"), before, after);

    // 7. Model calls: at most the model budget (6) are recorded; refusals after it add nothing.
    let models = Fixture::default_limits();
    let before = heap();
    let mut admitted_models = 0;
    for _ in 0..1000 {
        admitted_models += u32::from(models.scope.admit_model().is_ok());
    }
    let after = heap();
    line(&format!("1000 model-call attempts on a fresh scope ({admitted_models} admitted)"), before, after);

    // 8. Loop iterations the model asks for beyond the admitted ones: the `repeat`, `changing`
    // and `budget` runs stop at the first refusal, whatever the iteration cap.
    for (scenario, composition) in [
        (Scenario::Repeat, Composition::Harness),
        (Scenario::Repeat, Composition::Simple),
        (Scenario::Changing, Composition::Harness),
        (Scenario::Changing, Composition::Simple),
    ] {
        let before = heap();
        let outcome = runtime.block_on(runs::request(scenario, composition));
        let events = outcome.as_ref().map_or(0, |outcome| outcome.events().len());
        let after = heap();
        line(
            &format!("{scenario} request ({composition}), outcome with {events} events kept"),
            before,
            after,
        );
        drop(outcome);
    }

    // 9. One model reply carrying many tool calls whose arguments do not bind: binding failures
    // count nothing (SPEC §4), so nothing stops them before the guard, and each one still leaves a
    // Middleware event in the scope and an error result in the conversation.
    for calls in [10_usize, 1000] {
        let bad = Fixture::default_limits();
        let before = heap();
        let events = runtime.block_on(unbindable_calls(&bad, calls));
        let after = heap();
        line(
            &format!("reply with {calls} unbindable tool calls, then text: scope keeps {events} events"),
            before,
            after,
        );
    }

    drop((fixture, fresh, models));
    drop(profiler);
}
