//! The MCP adapter's cost per call, beside a direct guarded tool and the SDK's own call to the
//! same in-process server (see `loopbound_benches::mcp`). The ratios come from
//! `cargo run --release -p loopbound-benches --bin mcp-overhead`. Nothing here asserts a time.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use loopbound_benches::mcp::{ANSWER, McpBench};

fn per_call(c: &mut Criterion) {
    let bench = McpBench::new();
    assert_eq!((bench.direct(), bench.raw(), bench.guarded()), (ANSWER.into(), ANSWER.into(), ANSWER.into()));
    let mut group = c.benchmark_group("mcp_call");
    group.bench_function("direct_guarded_tool", |b| b.iter(|| black_box(bench.direct())));
    group.bench_function("sdk_tools_call_unguarded", |b| b.iter(|| black_box(bench.raw())));
    group.bench_function("loopbound_mcp_guarded", |b| b.iter(|| black_box(bench.guarded())));
    group.finish();
}

criterion_group!(benches, per_call);
criterion_main!(benches);
