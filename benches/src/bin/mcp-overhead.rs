//! `mcp-overhead`: the MCP adapter's own cost per call, measured in one process, side by side.
//!
//! ```text
//! cargo run --release -p loopbound-benches --bin mcp-overhead [-- ROUNDS CALLS]
//! ```
//!
//! Each round times CALLS calls of each path in turn (direct guarded tool, the SDK's
//! unguarded `tools/call`, the same call through loopbound-mcp) against an in-process server;
//! the table shows each path's median over the rounds, and the adapter's overhead
//! (`guarded - sdk`) in microseconds and as a share of the SDK's call.

use std::hint::black_box;
use std::time::Instant;

use loopbound_benches::mcp::{ANSWER, McpBench};

fn main() {
    let mut args = std::env::args().skip(1).map(|arg| arg.parse::<usize>());
    let rounds = args.next().and_then(Result::ok).unwrap_or(15);
    let calls = args.next().and_then(Result::ok).unwrap_or(2000);
    let bench = McpBench::new();
    assert_eq!((bench.direct(), bench.raw(), bench.guarded()), (ANSWER.into(), ANSWER.into(), ANSWER.into()));
    let paths: [(&str, &dyn Fn() -> String); 3] = [
        ("direct guarded tool (no MCP)", &|| bench.direct()),
        ("SDK tools/call, unguarded", &|| bench.raw()),
        ("loopbound-mcp guarded call", &|| bench.guarded()),
    ];
    let mut samples = vec![Vec::with_capacity(rounds); paths.len()];
    for _ in 0..rounds {
        for ((_, call), times) in paths.iter().zip(&mut samples) {
            let start = Instant::now();
            for _ in 0..calls {
                black_box(call());
            }
            times.push(start.elapsed().as_secs_f64() * 1e6 / calls as f64);
        }
    }
    let medians: Vec<f64> = samples.iter_mut().map(|times| median(times)).collect();
    println!("MCP adapter overhead per call: {rounds} rounds x {calls} calls, in-process server, medians");
    println!("{:<32} {:>12} {:>10}", "path", "us/call", "x direct");
    for ((name, _), median) in paths.iter().zip(&medians) {
        println!("{name:<32} {median:>12.2} {:>10.1}", median / medians[0]);
    }
    let overhead = medians[2] - medians[1];
    println!(
        "adapter overhead (guarded - SDK): {overhead:.2} us/call, {:.0}% of the SDK's own call",
        100.0 * overhead / medians[1]
    );
}

fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    let middle = times.len() / 2;
    if times.len().is_multiple_of(2) {
        f64::midpoint(times[middle - 1], times[middle])
    } else {
        times[middle]
    }
}
