//! The `load` binary end to end at a small N: it starts its own load server, every run does
//! exactly the review, the server's figures count every call, and the JSON report says so.

use std::process::Command;
use std::time::Duration;

use loopbound_benches::load::report::Report;
use loopbound_testkit::load::{LoadServer, Mode, ServerConfig};

fn load(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_load")).args(args).output().expect("the load binary runs")
}

fn report(args: &[&str]) -> Report {
    let output = load(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?}: {stderr}");
    serde_json::from_slice(&output.stdout).expect("a JSON report")
}

#[test]
fn every_run_completes_the_review_and_every_call_is_measured() {
    for args in [
        &["--runs", "30", "--latency-ms", "10", "--json"][..],
        &["--runs", "30", "--latency-ms", "10", "--json", "--stream"],
    ] {
        let report = report(args);
        assert_eq!((report.peer.as_str(), report.runs, report.completed), ("loopbound", 30, 30), "{args:?}");
        assert!(report.failures.is_empty(), "{:?}", report.failures);
        assert_eq!(report.added_latency_us.count, 60, "two gaps per run");
        assert_eq!(report.start_to_first_request_us.count, 30, "one first request per run");
        assert_eq!(report.stream, args.contains(&"--stream"));
        assert!(report.rss_waiting_mib >= report.rss_before_mib && report.peak_rss_mib > 0.0);
        assert!(report.cpu_s > 0.0 && report.throughput_runs_per_s > 0.0);
        assert_eq!(report.journal_effect_us, None);
    }
}

#[test]
fn over_http2_every_run_shares_the_connections_the_warm_up_opened() {
    for args in [
        &["--runs", "30", "--latency-ms", "10", "--json", "--http2", "2"][..],
        &["--runs", "30", "--latency-ms", "10", "--json", "--http2", "2", "--stream"],
    ] {
        let report = report(args);
        assert_eq!((report.completed, report.http2_connections), (30, Some(2)), "{:?}", report.failures);
        assert_eq!(report.added_latency_us.count, 60, "two gaps per run");
        // The warm-up opened both connections, and the 90 calls of the runs went over them: the
        // server accepted at most one more connection, the control client's (which may open a
        // new one for its own requests), against one per call in flight over HTTP/1.1 below.
        assert!(report.connections <= 1, "{args:?}: {} connections accepted", report.connections);
        assert!(report.peak_open_connections <= 4, "{args:?}: {} open at once", report.peak_open_connections);
    }
    let report = report(&["--runs", "30", "--latency-ms", "10", "--json"]);
    assert_eq!(report.http2_connections, None);
    assert!(report.peak_open_connections >= 30, "HTTP/1.1: one connection per call in flight");
}

#[test]
fn a_spread_release_paces_the_runs_over_its_window() {
    let report = report(&["--runs", "20", "--latency-ms", "10", "--json", "--release-over-ms", "600"]);
    assert_eq!((report.completed, report.release_over_ms), (20, 600.0), "{:?}", report.failures);
    assert_eq!(report.added_latency_us.count, 40, "two gaps per run");
    // The first calls are answered over 600 ms: the load lasts that long at least.
    assert!(report.wall_s >= 0.6, "{} s", report.wall_s);
}

#[test]
fn http2_over_more_connections_than_allowed_is_refused_before_any_run() {
    let too_many = load(&["--runs", "2", "--http2", "65", "--latency-ms", "10"]);
    assert!(!too_many.status.success());
    let stderr = String::from_utf8_lossy(&too_many.stderr);
    assert!(stderr.contains("HTTP/2 over 65 connections asks for more than the 64 allowed"), "{stderr}");
}

#[test]
fn a_spread_start_begins_the_runs_over_its_window() {
    let report = report(&["--runs", "20", "--latency-ms", "10", "--json", "--start-over-ms", "400"]);
    assert_eq!((report.completed, report.start_over_ms), (20, 400.0), "{:?}", report.failures);
    assert_eq!(report.added_latency_us.count, 40, "two gaps per run");
    // The last run starts 380 ms after the first, and every first call is held until it does.
    assert!(report.wall_s >= 0.38, "{} s", report.wall_s);
}

#[test]
fn journaled_runs_complete_and_time_each_effect() {
    let report = report(&["--runs", "10", "--latency-ms", "10", "--json", "--journal", "sqlite"]);
    assert_eq!((report.completed, report.journal.as_deref()), (10, Some("sqlite")));
    let effects = report.journal_effect_us.expect("effect times");
    assert_eq!(effects.count, 20, "two effects per run, each timed once");
}

#[test]
fn an_unreachable_server_is_a_clear_failure() {
    let output = load(&["--runs", "2", "--server", "http://127.0.0.1:9/v1"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("load: the load server's /__load/reset failed:"), "{stderr}");
}

#[test]
fn runs_that_do_not_do_the_review_fail_the_command_with_their_reasons() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let config = ServerConfig { latency: Duration::from_millis(5), mode: Mode::Stream };
    let server = runtime.block_on(async { LoadServer::start(config) }).expect("a server");
    // Whole requests to a server that answers streamed ones only: every first call is refused.
    let output = load(&["--runs", "4", "--warmup", "0", "--server", &server.base_url()]);
    assert!(!output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("completed as the review must:  0 of 4"), "{stdout}");
    assert!(stdout.contains("FAILED: 4 of 4 runs did not do exactly the review"), "{stdout}");
    assert!(
        stdout.contains("with 1 model calls, 0 tool calls, no closing text; the server never saw it"),
        "{stdout}"
    );
    assert_eq!(server.stats().bad_requests, 4);
    let output = load(&["--runs", "4", "--server", &server.base_url()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("load: warm-up run 0: error (provider error: HTTP 400"), "{stderr}");
}

#[test]
fn a_server_left_holding_by_a_stopped_client_still_serves_the_next_load() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let config = ServerConfig { latency: Duration::from_millis(5), mode: Mode::Whole };
    let server = runtime.block_on(async { LoadServer::start(config) }).expect("a server");
    server.reset(true);
    let report = report(&["--runs", "5", "--warmup", "3", "--json", "--server", &server.base_url()]);
    assert_eq!((report.completed, report.added_latency_us.count), (5, 10), "{:?}", report.failures);
}
