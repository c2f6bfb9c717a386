//! The MCP adapter's cost per call, beside a direct guarded tool and the SDK's own call to the
//! same in-process server (see `loopbound_benches::mcp`), and the schema check alone on a
//! typical tool input (`mcp_schema_check`). The ratios come from
//! `cargo run --release -p loopbound-benches --bin mcp-overhead`. Nothing here asserts a time.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use loopbound_benches::mcp::{ANSWER, McpBench};
use loopbound_mcp::Unsupported;
use loopbound_mcp::schema::InputSchema;
use serde_json::json;

fn per_call(c: &mut Criterion) {
    let bench = McpBench::new();
    assert_eq!((bench.direct(), bench.raw(), bench.guarded()), (ANSWER.into(), ANSWER.into(), ANSWER.into()));
    let mut group = c.benchmark_group("mcp_call");
    group.bench_function("direct_guarded_tool", |b| b.iter(|| black_box(bench.direct())));
    group.bench_function("sdk_tools_call_unguarded", |b| b.iter(|| black_box(bench.raw())));
    group.bench_function("loopbound_mcp_guarded", |b| b.iter(|| black_box(bench.guarded())));
    group.finish();
}

/// A file-search tool's schema, as MCP servers write them, and what a model sends it.
fn schema_check(c: &mut Criterion) {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1},
            "pattern": {"type": "string", "description": "A glob."},
            "excludePatterns": {"type": "array", "items": {"type": "string"}, "default": []},
            "maxResults": {"type": "integer", "minimum": 1, "maximum": 1000},
            "caseSensitive": {"type": "boolean"}
        },
        "required": ["path", "pattern"],
        "additionalProperties": false
    });
    let valid = json!({"path": "/src", "pattern": "*.rs", "excludePatterns": ["target", "node_modules"], "maxResults": 50});
    let invalid = json!({"path": "/src", "pattern": "*.rs", "maxResults": 5000});
    let schema = InputSchema::compile(&schema, Unsupported::Refuse).expect("a supported schema");
    assert_eq!(schema.check(&valid), Ok(()));
    assert_eq!(
        schema.check(&invalid).map_err(|v| v.to_string()),
        Err("at /maxResults: expected a number <= 1000".into())
    );
    let mut group = c.benchmark_group("mcp_schema_check");
    group.bench_function("valid_arguments", |b| b.iter(|| black_box(schema.check(black_box(&valid)))));
    group.bench_function("refused_arguments", |b| b.iter(|| black_box(schema.check(black_box(&invalid)))));
    group.finish();
}

criterion_group!(benches, per_call, schema_check);
criterion_main!(benches);
