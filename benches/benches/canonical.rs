//! Canonical form throughput next to `serde_json::to_string` of the same value, for argument
//! values of about 100 B, 10 KB and 1 MB; and `loopbound::canonical::signature` of typed values next to
//! `serde_json::to_string` of the same values.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loopbound::canonical::{canonical_json, signature};
use loopbound_benches::values::{samples, typed_records};
use loopbound_testkit::review::TicketInput;

fn canonical(c: &mut Criterion) {
    for sample in samples() {
        let mut group = c.benchmark_group(format!("canonical/{}", sample.name));
        group.throughput(Throughput::Bytes(sample.bytes as u64));
        if sample.bytes > 100_000 {
            group.sample_size(20);
        }
        group.bench_function("canonical_json", |b| b.iter(|| canonical_json(black_box(&sample.value))));
        group.bench_function("serde_json::to_string", |b| {
            b.iter(|| serde_json::to_string(black_box(&sample.value)));
        });
        group.finish();
    }
}

/// The length of `value`'s compact JSON, the byte count of its throughput.
fn json_len<T: serde::Serialize>(value: &T) -> u64 {
    serde_json::to_string(value).map_or(0, |text| text.len() as u64)
}

fn typed(c: &mut Criterion) {
    let ticket = TicketInput { input: 42 };
    let mut group = c.benchmark_group("signature/TicketInput");
    group.throughput(Throughput::Bytes(json_len(&ticket)));
    group.bench_function("signature", |b| b.iter(|| signature("read_ticket", black_box(&ticket))));
    group.bench_function("serde_json::to_string", |b| b.iter(|| serde_json::to_string(black_box(&ticket))));
    group.finish();

    let records = typed_records(100);
    let mut group = c.benchmark_group("signature/100_records");
    group.throughput(Throughput::Bytes(json_len(&records)));
    group.bench_function("signature", |b| b.iter(|| signature("records", black_box(&records))));
    group.bench_function("serde_json::to_string", |b| b.iter(|| serde_json::to_string(black_box(&records))));
    group.finish();
}

criterion_group!(benches, canonical, typed);
criterion_main!(benches);
