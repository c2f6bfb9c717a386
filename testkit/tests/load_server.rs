//! The load model server against loopbound's real OpenAI transport, and against the worst a
//! client can send it: each run gets its own script from its own conversation, the figures count
//! exactly what happened, and the hold keeps every first call waiting until it is released.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use loopbound::{Limits, Message, Runner, Status};
use loopbound_openai::{Config, OpenAiTransport};
use loopbound_testkit::load::clock::monotonic_ns;
use loopbound_testkit::load::script::prompt;
use loopbound_testkit::load::{LoadServer, MAX_REQUEST_BODY, Mode, ServerConfig};
use loopbound_testkit::review::{self, BOTH_CAPABILITIES, CLOSING, INSTRUCTIONS, Review};

const LATENCY: Duration = Duration::from_millis(20);

fn server(mode: Mode) -> LoadServer {
    LoadServer::start(ServerConfig { latency: LATENCY, mode }).expect("a loopback server")
}

fn runtime(server: &LoadServer, streaming: bool) -> Arc<Runner<OpenAiTransport, Review>> {
    let config = Config::new(&server.base_url(), "load-model").expect("a base URL");
    let transport = OpenAiTransport::new(config).expect("a client");
    Arc::new(Runner::new(&review::tools().set, transport).options(review::options()).streaming(streaming))
}

/// Runs `runs` reviews at once; returns each one's model calls, tool calls and text.
async fn reviews(
    runtime: &Arc<Runner<OpenAiTransport, Review>>,
    runs: usize,
) -> Vec<(Status, u32, u32, String)> {
    let tasks: Vec<_> = (0..runs)
        .map(|n| {
            let runtime = Arc::clone(runtime);
            tokio::spawn(async move {
                let scope = review::scope(BOTH_CAPABILITIES, Limits::default()).expect("valid limits");
                let mut conversation = vec![Message::system(INSTRUCTIONS), Message::user(prompt(n))];
                let outcome = runtime
                    .run(&scope, &mut conversation, |ended| Review::completed(ended.state()))
                    .await
                    .expect("a run");
                let text = outcome.text().unwrap_or_default().to_owned();
                (outcome.status(), scope.model_calls(), scope.tool_calls(), text)
            })
        })
        .collect();
    let mut ends = Vec::new();
    for task in tasks {
        ends.push(task.await.expect("a run task"));
    }
    ends
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reviews_each_get_their_script_whole_and_streamed() {
    for (mode, streaming) in [(Mode::Whole, false), (Mode::Stream, true)] {
        let server = server(mode);
        let started = monotonic_ns();
        let ends = reviews(&runtime(&server, streaming), 40).await;
        let expected = (Status::Completed, 3, 2, CLOSING.to_owned());
        assert!(ends.iter().all(|end| *end == expected), "streaming {streaming}: {ends:?}");
        let stats = server.stats();
        assert_eq!((stats.requests, stats.replies, stats.runs), (120, 120, 40), "{stats:?}");
        assert_eq!(
            (stats.bad_requests, stats.feedback_mismatches, stats.unmatched, stats.untracked),
            (0, 0, 0, 0)
        );
        assert_eq!((stats.gaps.count, stats.in_flight, stats.held), (80, 0, 0), "{stats:?}");
        let runs = server.runs().runs;
        assert_eq!(runs.len(), 40);
        for n in 0..40 {
            let run = runs[&n.to_string()];
            assert_eq!((run.requests, run.replies), (3, 3), "run {n}");
            assert!(run.first_arrival_ns >= started, "run {n} arrived after the test started");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reply_waits_the_latency_and_streams_report_usage_when_asked() {
    let server = server(Mode::Any);
    let runtime = runtime(&server, true);
    let scope = review::scope(BOTH_CAPABILITIES, Limits::default()).expect("valid limits");
    let began = std::time::Instant::now();
    let mut conversation = vec![Message::system(INSTRUCTIONS), Message::user(prompt("usage"))];
    let outcome = runtime
        .run(&scope, &mut conversation, |ended| Review::completed(ended.state()))
        .await
        .expect("a run");
    assert!(began.elapsed() >= LATENCY * 3, "three calls, each {LATENCY:?} at least");
    assert_eq!(outcome.status(), Status::Completed);
    let usage = outcome.usage().expect("usage in the stream");
    assert_eq!(usage.output_tokens, 12 + 12 + 4);
    assert!(usage.input_tokens > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_keeps_every_first_call_waiting_until_released() {
    let server = Arc::new(server(Mode::Any));
    server.reset(true);
    let runtime = runtime(&server, false);
    let runs = tokio::spawn({
        let runtime = Arc::clone(&runtime);
        async move { reviews(&runtime, 25).await }
    });
    let waited = std::time::Instant::now();
    while server.stats().held < 25 {
        assert!(waited.elapsed() < Duration::from_secs(20), "25 first calls held: {:?}", server.stats());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(LATENCY * 3).await;
    let held = server.stats();
    assert_eq!((held.held, held.in_flight, held.replies, held.requests), (25, 25, 0, 25), "{held:?}");
    server.release(Duration::ZERO);
    let ends = runs.await.expect("the runs");
    assert!(ends.iter().all(|end| end.0 == Status::Completed && end.1 == 3), "{ends:?}");
    let stats = server.stats();
    assert_eq!((stats.held, stats.replies, stats.gaps.count), (0, 75, 50), "{stats:?}");
    assert!(stats.hold_extra_ms > 0.0, "the first calls waited past the latency: {stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_spread_over_a_window_answers_the_held_calls_evenly_over_it() {
    const RUNS: usize = 20;
    const SPREAD: Duration = Duration::from_millis(400);
    // A latency far longer than the hold: released at once, every held call's latency would
    // run out together, so a pacer that did not wait for the last of them would answer the
    // first half of the window in one burst.
    const LONG_LATENCY: Duration = Duration::from_millis(200);
    let server = Arc::new(
        LoadServer::start(ServerConfig { latency: LONG_LATENCY, mode: Mode::Any }).expect("a server"),
    );
    server.reset(true);
    let runtime = runtime(&server, false);
    let tasks: Vec<_> = (0..RUNS)
        .map(|n| {
            let runtime = Arc::clone(&runtime);
            tokio::spawn(async move {
                let scope = review::scope(BOTH_CAPABILITIES, Limits::default()).expect("valid limits");
                let mut conversation = vec![Message::system(INSTRUCTIONS), Message::user(prompt(n))];
                let outcome = runtime
                    .run(&scope, &mut conversation, |ended| Review::completed(ended.state()))
                    .await
                    .expect("a run");
                (outcome.status(), scope.model_calls(), monotonic_ns())
            })
        })
        .collect();
    let waited = std::time::Instant::now();
    while server.stats().held < RUNS as u64 {
        assert!(waited.elapsed() < Duration::from_secs(20), "first calls held: {:?}", server.stats());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let released = monotonic_ns();
    server.release(SPREAD);
    let mut ends = Vec::new();
    for task in tasks {
        ends.push(task.await.expect("a run task"));
    }
    assert!(ends.iter().all(|end| end.0 == Status::Completed && end.1 == 3), "{ends:?}");
    // The k-th held call is answered at S + k·SPREAD/RUNS (S: once the last held call has
    // waited a latency), its run's two later calls a latency each after that: the runs end 20
    // ms apart, over (RUNS − 1)/RUNS of the window (380 ms), less what a busy machine delays
    // some by; released at once, they end within a few milliseconds of each other. None ends
    // before the release plus its own three calls.
    let mut times: Vec<u64> = ends.iter().map(|end| end.2).collect();
    times.sort_unstable();
    let (first, last) = (times[0], times[RUNS - 1]);
    let half_ns = u64::try_from((SPREAD / 2).as_nanos()).unwrap();
    assert!(last - first >= half_ns, "the runs ended within {} ms", (last - first) / 1_000_000);
    assert!(first >= released + 2 * u64::try_from(LONG_LATENCY.as_nanos()).unwrap());
    // Evenly: a burst at the window's start would end about half the runs within a millisecond
    // or two of each other; a busy machine may bring a few neighbours together, never half.
    let together = times.windows(2).filter(|pair| pair[1] - pair[0] < 5_000_000).count();
    assert!(together <= 3, "{together} of {} neighbours ended within 5 ms: {times:?}", RUNS - 1);
    let stats = server.stats();
    assert_eq!(
        (stats.held, stats.replies, stats.gaps.count, stats.bad_requests),
        (0, 60, 40, 0),
        "{stats:?}"
    );
}

fn post(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_counted_and_leave_nothing_in_flight() {
    let server = server(Mode::Stream);
    let bad = tokio::task::spawn_blocking({
        let base = server.addr();
        move || {
            let server = LoadServerAddr(base);
            let huge = format!(
                "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
                MAX_REQUEST_BODY + 1
            );
            [
                server.raw(&post("/v1/chat/completions", "not json")),
                server.raw(&post("/v1/chat/completions", r#"{"messages":[]}"#)),
                server.raw(&post(
                    "/v1/chat/completions",
                    r#"{"messages":[{"role":"user","content":"run=1"}],"stream":false}"#,
                )),
                server.raw(huge.as_bytes()),
                server.raw(&post("/v2/elsewhere", "{}")),
                server.raw(&post("/__load/reset", r#"{"hold":"yes"}"#)),
                server.raw(&post("/__load/release", r#"{"over_ms":-1}"#)),
            ]
        }
    })
    .await
    .expect("the raw requests");
    assert_eq!(
        bad.iter().map(|line| line.split(' ').nth(1).unwrap_or_default()).collect::<Vec<_>>(),
        ["400", "400", "400", "413", "404", "400", "400"],
        "{bad:?}"
    );
    let stats = server.stats();
    assert_eq!((stats.bad_requests, stats.requests, stats.in_flight, stats.runs), (4, 0, 0, 0), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_during_the_hold_is_no_longer_held_or_in_flight() {
    let server = server(Mode::Any);
    server.reset(true);
    let addr = server.addr();
    let body = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, prompt("gone"));
    let request = post("/v1/chat/completions", &body);
    let client = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).expect("a connection");
        stream.write_all(&request).expect("the request");
        stream
    });
    let stream = client.join().expect("the client thread");
    let waited = std::time::Instant::now();
    while server.stats().held < 1 {
        assert!(waited.elapsed() < Duration::from_secs(10), "the request is held");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    drop(stream);
    let waited = std::time::Instant::now();
    loop {
        let stats = server.stats();
        if (stats.held, stats.in_flight, stats.open_connections) == (0, 0, 0) {
            assert_eq!((stats.requests, stats.replies), (1, 0));
            break;
        }
        assert!(waited.elapsed() < Duration::from_secs(10), "the held request is dropped: {stats:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The address of a server, for the blocking raw-request helpers.
struct LoadServerAddr(std::net::SocketAddr);

impl LoadServerAddr {
    fn raw(&self, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(self.0).expect("a connection");
        stream.set_read_timeout(Some(Duration::from_secs(10))).expect("a timeout");
        let _ = stream.write_all(request);
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_owned()
    }
}
