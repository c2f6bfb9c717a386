//! The `service` binary end to end, over real HTTP on loopback: the OpenAI-compatible transport
//! against the scripted aimock server, the real MCP `server-filesystem` writing into a temporary
//! folder, and a SQLite journal.
//!
//! 64 concurrent requests of four kinds (one that completes, one that loops into the repetition
//! limit, one that calls a write it was not granted, one whose destructive write waits for a
//! person), every status asserted exactly and no file written before an approval; then
//! approvals and denials recorded concurrently and resumed, and exactly the approved files
//! present; a run's live stream read in order over Server-Sent Events; a run in flight cancelled
//! by its id. Across a restart (the process stopped by its PID, a new one on the same journal):
//! a run waiting for approval shown, approved and completed with its write done once (SQLite
//! with a development token, PostgreSQL behind the proxy's header), a run cut during its model
//! call resumed. Closing a waiting run, and refusing to close one an attempt holds (in this
//! process or another). Commands without an approver (401) or from a foreign origin (403).
//! Without `node` these print SKIPPED and pass, unless LOOPBOUND_REQUIRE_SERVERS=1.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use loopbound_testkit::aimock::Aimock;
use loopbound_testkit::mcp::{self, TempDir};
use loopbound_testkit::postgres::{Cluster, Durability};
use serde_json::{Value, json};
use support::Service;

mod support;

/// Requests of each kind.
const PER_KIND: usize = 16;

/// The kinds of request, by the request's number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Completes,
    Loops,
    Forbidden,
    Write,
}

impl Kind {
    fn of(request: usize) -> Self {
        [Self::Completes, Self::Loops, Self::Forbidden, Self::Write][request % 4]
    }
}

/// The file request `n` asks to write.
fn note(root: &Path, n: usize) -> PathBuf {
    root.join(format!("note-{n}.txt"))
}

/// The scripted model: per request, what it answers before and after a tool result.
fn fixtures(root: &Path) -> Value {
    let mut fixtures = Vec::new();
    for n in 0..4 * PER_KIND {
        let tag = format!("[req:{n}]");
        let call = |name: &str, arguments: Value| json!({"toolCalls": [{"id": format!("call_{n}"), "name": name, "arguments": arguments}]});
        match Kind::of(n) {
            Kind::Completes => {
                fixtures.push(json!({"match": {"userMessage": tag, "hasToolResult": false}, "response": call("read_ticket", json!({"id": n + 1}))}));
                fixtures.push(json!({"match": {"userMessage": tag, "hasToolResult": true}, "response": {"content": format!("Ticket {} is about a login.", n + 1)}}));
            }
            // The same call forever: the second is refused by the repetition limit.
            Kind::Loops => fixtures.push(
                json!({"match": {"userMessage": tag}, "response": call("read_ticket", json!({"id": 7}))}),
            ),
            Kind::Forbidden | Kind::Write => {
                let write = json!({"path": note(root, n).to_str().expect("a UTF-8 path"), "content": format!("note {n}\n")});
                fixtures.push(json!({"match": {"userMessage": tag, "hasToolResult": false}, "response": call("write_file", write)}));
                fixtures.push(json!({"match": {"userMessage": tag, "hasToolResult": true}, "response": {"content": format!("Saved note-{n}.txt.")}}));
            }
        }
    }
    // A model call that takes a minute to answer: what a cancel by id interrupts.
    fixtures.push(json!({"match": {"userMessage": "[req:slow]"}, "response": {"content": "Too late."}, "streamingProfile": {"ttft": 60_000}}));
    json!({"fixtures": fixtures})
}

fn request(n: usize) -> Value {
    let tag = format!("[req:{n}]");
    match Kind::of(n) {
        Kind::Completes => {
            json!({"task": "answer", "prompt": format!("{tag} What is ticket {} about?", n + 1), "grants": ["tickets.read"]})
        }
        Kind::Loops => {
            json!({"task": "answer", "prompt": format!("{tag} Keep reading ticket 7."), "grants": ["tickets.read"]})
        }
        Kind::Forbidden => {
            json!({"task": "save", "prompt": format!("{tag} Save a note."), "grants": ["tickets.read"]})
        }
        Kind::Write => {
            json!({"task": "save", "prompt": format!("{tag} Save a note."), "grants": ["tickets.read", "mcp.filesystem.write_file"]})
        }
    }
}

/// A service with its own scripted model, files folder and journal (fields drop in order: the
/// service first).
struct Setup {
    service: Service,
    root: TempDir,
    model: Aimock,
    state: TempDir,
    database: Option<String>,
}

impl Setup {
    /// Everything started, with the SQLite journal or the PostgreSQL database `database`, or
    /// `None` where `node` is absent (SKIPPED, unless servers are required).
    fn start(database: Option<&str>) -> Option<Self> {
        if !mcp::available() {
            return None;
        }
        let root = TempDir::new("service-files");
        let state = TempDir::new("service-state");
        let fixtures_file = state.path().join("fixtures.json");
        std::fs::write(&fixtures_file, fixtures(root.path()).to_string()).expect("fixtures written");
        let model = Aimock::start_with_fixtures(&fixtures_file, &[])?;
        let service = Service::start(&model, root.path(), &state.path().join("service.db"), database);
        Some(Self { service, root, model, state, database: database.map(str::to_owned) })
    }

    /// Stops the service by its PID (SIGTERM, which it does not handle: it dies at once, as
    /// after a crash) and starts a new process on the same journal, files and model, with
    /// `extra` arguments.
    fn restart(&mut self, extra: &[&str]) {
        let status = self.service.terminate(Duration::from_secs(10)).expect("the service stops within 10 s");
        assert!(!status.success(), "killed by its signal: {status:?}");
        let journal = self.state.path().join("service.db");
        let database = self.database.as_deref();
        self.service =
            Service::start_on("127.0.0.1:0", &self.model, self.root.path(), &journal, database, extra);
    }
}

/// The links of run `id`: `self` and `events`, and the actions `next` (`cancel`, `approve`,
/// `deny`) that its phase allows.
fn links(id: &str, next: &[&str]) -> Value {
    let mut links = json!({"self": format!("/runs/{id}"), "events": format!("/runs/{id}/events")});
    for action in next {
        links[*action] = json!(format!("/runs/{id}/{action}"));
    }
    links
}

/// A response's code and JSON body.
async fn answer(response: reqwest::Response) -> (u16, Value) {
    let code = response.status().as_u16();
    let text = response.text().await.expect("a body");
    (code, serde_json::from_str(&text).unwrap_or_else(|error| panic!("JSON ({error}): {text}")))
}

async fn post(client: &reqwest::Client, url: String, body: &Value) -> (u16, Value) {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("the service answers");
    answer(response).await
}

/// A command on a run (approve, deny, close, cancel, resume) as `approver`, the name that the
/// trusted proxy in front of the service would set in `x-approver`.
async fn command(client: &reqwest::Client, url: String, approver: &str, body: &Value) -> (u16, Value) {
    let response = client
        .post(url)
        .header("x-approver", approver)
        .body(body.to_string())
        .send()
        .await
        .expect("the service answers");
    answer(response).await
}

/// A command on a run presenting the development `token` (`Authorization: Bearer`).
async fn as_developer(client: &reqwest::Client, url: String, token: &str, body: &Value) -> (u16, Value) {
    let response =
        client.post(url).bearer_auth(token).body(body.to_string()).send().await.expect("the service answers");
    answer(response).await
}

async fn owned_command(client: reqwest::Client, url: String, approver: String, body: Value) -> (u16, Value) {
    command(&client, url, &approver, &body).await
}

async fn get(client: &reqwest::Client, url: String) -> (u16, Value) {
    answer(client.get(url).send().await.expect("the service answers")).await
}

/// Runs `requests` concurrently, each on its own task; the answers in their order.
async fn all<F>(requests: Vec<F>) -> Vec<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = requests.into_iter().map(tokio::spawn).collect();
    let mut answers = Vec::with_capacity(handles.len());
    for handle in handles {
        answers.push(handle.await.expect("a request task"));
    }
    answers
}

/// The data lines of a run's event stream, with their ids, until it ends or `stop` holds.
async fn events(
    client: &reqwest::Client,
    url: String,
    after: Option<usize>,
    stop: impl Fn(&Value) -> bool,
) -> Vec<(usize, Value)> {
    let mut request = client.get(url);
    if let Some(after) = after {
        request = request.header("last-event-id", after.to_string());
    }
    let mut response = request.send().await.expect("the event stream opens");
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers().get("content-type").and_then(|value| value.to_str().ok());
    assert_eq!(content_type, Some("text/event-stream"));
    let (mut buffer, mut seen, mut id) = (String::new(), Vec::new(), None);
    while let Some(chunk) = response.chunk().await.expect("the stream reads") {
        buffer.push_str(std::str::from_utf8(&chunk).expect("UTF-8 events"));
        while let Some(end) = buffer.find('\n') {
            let line: String = buffer.drain(..=end).collect();
            let line = line.trim_end_matches('\n');
            if let Some(number) = line.strip_prefix("id: ") {
                id = Some(number.parse::<usize>().expect("a numeric id"));
            } else if let Some(data) = line.strip_prefix("data: ") {
                let update: Value = serde_json::from_str(data).expect("JSON data");
                let done = stop(&update);
                seen.push((id.take().expect("an id before each data line"), update));
                if done {
                    return seen;
                }
            }
        }
    }
    seen
}

/// An update's short form: its type, and for an event its kind and name.
fn brief(update: &Value) -> String {
    match update["type"].as_str() {
        Some("event") => format!(
            "event {} {}",
            update["kind"].as_str().unwrap_or("?"),
            update["name"].as_str().unwrap_or("?")
        ),
        Some("outcome") => format!("outcome {}", update["status"].as_str().unwrap_or("?")),
        Some(other) => other.to_owned(),
        None => "?".to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_requests_on_sqlite_end_with_their_statuses_and_only_approved_writes_happen() {
    let Some(setup) = Setup::start(None) else { return };
    sixty_four_requests(&setup).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_requests_on_postgres_end_with_their_statuses_and_only_approved_writes_happen() {
    let Some(cluster) = Cluster::shared(Durability::Fast) else { return };
    let database = cluster.create_database("service");
    let Some(setup) = Setup::start(Some(&database.url)) else { return };
    sixty_four_requests(&setup).await;
}

/// The four kinds at once, their statuses, the decisions and the files; one run's stream.
async fn sixty_four_requests(setup: &Setup) {
    let (service, root) = (&setup.service, &setup.root);
    let client = reqwest::Client::new();

    // 64 requests at once.
    let posts = (0..4 * PER_KIND)
        .map(|n| {
            let (client, url) = (client.clone(), service.url("/runs"));
            async move { post(&client, url, &request(n)).await }
        })
        .collect();
    let started = all(posts).await;
    let mut ids = Vec::new();
    for (n, (code, body)) in started.iter().enumerate() {
        assert_eq!(*code, 202, "request {n}: {body}");
        let id = body["id"].as_str().expect("an id").to_owned();
        assert_eq!(body["links"], links(&id, &["cancel"]), "request {n}");
        ids.push(id);
    }

    // One run's live stream, in order, to its end.
    let stream = events(&client, service.url(&format!("/runs/{}/events", ids[0])), None, |_| false).await;
    let numbers: Vec<usize> = stream.iter().map(|(id, _)| *id).collect();
    assert_eq!(numbers, (1..=stream.len()).collect::<Vec<_>>());
    // A streamed reply's text comes in pieces, as many as the watcher saw arrive separately.
    let mut kinds: Vec<String> = stream.iter().map(|(_, update)| brief(update)).collect();
    kinds.dedup_by(|next, previous| next == "text" && previous == "text");
    let text: String = stream
        .iter()
        .filter(|(_, update)| update["type"] == "text")
        .filter_map(|(_, update)| update["text"].as_str())
        .collect();
    assert_eq!(text, "Ticket 1 is about a login.");
    assert_eq!(
        kinds,
        [
            "event ModelCall model",
            "tool_started",
            "event Middleware read_ticket",
            "event ToolCall read_ticket",
            "event Proposed read_ticket",
            "event Allowed read_ticket",
            "tool_result",
            "event ModelCall model",
            "text",
            "outcome Completed",
        ],
        "{stream:?}"
    );
    assert_eq!(stream[6].1["text"], "Ticket 1: an invoice shows the wrong currency.");
    // The stream's events are the outcome's audit log, in the same order.
    let streamed: Vec<Value> = stream
        .iter()
        .filter(|(_, update)| update["type"] == "event")
        .map(|(_, update)| {
            let mut event = update.clone();
            event.as_object_mut().map(|object| object.remove("type"));
            event
        })
        .collect();
    assert_eq!(stream[stream.len() - 1].1["events"], Value::Array(streamed));

    // Every run's outcome, waited for at once.
    let waits = ids
        .iter()
        .map(|id| {
            let (client, url) = (client.clone(), service.url(&format!("/runs/{id}?wait=true")));
            async move { get(&client, url).await }
        })
        .collect();
    let ended = all(waits).await;
    let mut pending = Vec::new();
    for (n, (code, body)) in ended.iter().enumerate() {
        let status = body["outcome"]["status"].as_str().unwrap_or("none");
        match Kind::of(n) {
            Kind::Completes => {
                assert_eq!((*code, status), (200, "Completed"), "request {n}: {body}");
                assert_eq!(body["outcome"]["text"], format!("Ticket {} is about a login.", n + 1));
            }
            Kind::Loops => assert_eq!((*code, status), (422, "RepeatedCall"), "request {n}: {body}"),
            Kind::Forbidden => assert_eq!((*code, status), (403, "PermissionDenied"), "request {n}: {body}"),
            Kind::Write => {
                assert_eq!((*code, status), (202, "AwaitingApproval"), "request {n}: {body}");
                let proposal = &body["pending"];
                assert_eq!(proposal["operation"], format!("{}/op/1", ids[n]));
                assert_eq!(proposal["tool"], "write_file");
                assert_eq!(proposal["capability"], "mcp.filesystem.write_file");
                let shown: Value =
                    serde_json::from_str(proposal["arguments"].as_str().expect("arguments")).expect("JSON");
                assert_eq!(shown["path"], note(root.path(), n).to_str().expect("UTF-8"));
                let digest = proposal["digest"].as_str().expect("a digest").to_owned();
                assert_eq!(digest.len(), 64);
                pending.push((n, ids[n].clone(), digest));
            }
        }
        let next: &[&str] = if Kind::of(n) == Kind::Write { &["approve", "deny", "close"] } else { &[] };
        assert_eq!(body["links"], links(&ids[n], next), "request {n}");
        assert_eq!(body["state"], "ended");
    }
    assert_eq!(pending.len(), PER_KIND);
    assert_eq!(root.files(), Vec::<String>::new(), "nothing is written before an approval");

    // A digest of other arguments is refused, and changes nothing.
    let (first, first_id, _) = &pending[0];
    let other = pending[1].2.clone();
    let refused = command(
        &client,
        service.url(&format!("/runs/{first_id}/approve")),
        "mallory",
        &json!({"digest": other}),
    )
    .await;
    assert_eq!(refused.0, 409, "{}", refused.1);
    assert_eq!(refused.1["error"]["kind"], "journal");
    // A digest that is not one (not 64 hexadecimal digits) is the client's mistake: 400.
    let malformed = command(
        &client,
        service.url(&format!("/runs/{first_id}/approve")),
        "mallory",
        &json!({"digest": "0000"}),
    )
    .await;
    assert_eq!((malformed.0, &malformed.1["error"]["kind"]), (400, &json!("bad_request")), "{}", malformed.1);
    let still = get(&client, service.url(&format!("/runs/{first_id}"))).await;
    assert_eq!(
        (still.0, still.1["outcome"]["status"].as_str()),
        (202, Some("AwaitingApproval")),
        "request {first}"
    );

    // Approvals (even requests) and denials (odd) at once, the first run's approval sent twice.
    let mut decisions: Vec<_> = pending
        .iter()
        .map(|(n, id, digest)| {
            let verb = if n % 8 == 3 { "approve" } else { "deny" };
            (format!("/runs/{id}/{verb}"), "alice", json!({"digest": digest}))
        })
        .collect();
    decisions.push((format!("/runs/{}/approve", pending[0].1), "bob", json!({"digest": pending[0].2})));
    let decisions = decisions
        .into_iter()
        .map(|(path, approver, body)| {
            owned_command(client.clone(), service.url(&path), approver.to_owned(), body)
        })
        .collect();
    let decided = all(decisions).await;
    let (first_twice, rest) = decided.split_at(1);
    let twice = [&first_twice[0], &decided[decided.len() - 1]];
    let mut codes: Vec<u16> = twice.iter().map(|(code, _)| *code).collect();
    codes.sort_unstable();
    assert_eq!(codes, [202, 409], "one of two racing approvals wins: {twice:?}");
    for (code, body) in &rest[..rest.len() - 1] {
        assert_eq!(*code, 202, "{body}");
        let id = body["id"].as_str().expect("an id");
        assert_eq!(body["links"], links(id, &["cancel"]), "a resumed run is in flight");
    }

    // The resumed runs: approved ones wrote their file and completed; denied ones wrote nothing.
    let waits = pending
        .iter()
        .map(|(_, id, _)| {
            let (client, url) = (client.clone(), service.url(&format!("/runs/{id}?wait=true")));
            async move { get(&client, url).await }
        })
        .collect();
    let resumed = all(waits).await;
    let mut approved = Vec::new();
    for ((n, _, _), (code, body)) in pending.iter().zip(&resumed) {
        let status = body["outcome"]["status"].as_str().unwrap_or("none");
        if n % 8 == 3 {
            assert_eq!((*code, status), (200, "Completed"), "request {n}: {body}");
            assert_eq!(body["outcome"]["text"], format!("Saved note-{n}.txt."));
            approved.push(format!("note-{n}.txt"));
            let text = std::fs::read_to_string(note(root.path(), *n)).expect("the approved file");
            assert_eq!(text, format!("note {n}\n"));
        } else {
            assert_eq!((*code, status), (403, "Denied"), "request {n}: {body}");
            assert_eq!(body["outcome"]["text"], Value::Null);
        }
        let id = body["id"].as_str().expect("an id");
        assert_eq!(body["links"], links(id, &[]), "a decided run offers no decision: {body}");
    }
    approved.sort();
    assert_eq!(approved.len(), PER_KIND / 2);
    assert_eq!(root.files(), approved, "exactly the approved files");

    // The first approved run's stream after the approval, from where its first attempt ended.
    let (_, id, _) = &pending[0];
    let before = events(&client, service.url(&format!("/runs/{id}/events")), None, |_| false).await;
    let suspended = before
        .iter()
        .position(|(_, update)| update["type"] == "outcome")
        .expect("the first attempt's outcome");
    assert_eq!(brief(&before[suspended].1), "outcome AwaitingApproval");
    let after =
        events(&client, service.url(&format!("/runs/{id}/events")), Some(before[suspended].0), |_| false)
            .await;
    assert_eq!(after.first().map(|(number, _)| *number), Some(before[suspended].0 + 1));
    assert_eq!(after.last().map(|(_, update)| brief(update)).as_deref(), Some("outcome Completed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_flight_is_cancelled_by_its_id_and_bad_requests_are_refused() {
    let Some(setup) = Setup::start(None) else { return };
    let (service, root) = (&setup.service, &setup.root);
    let client = reqwest::Client::new();

    let slow = json!({"task": "answer", "prompt": "[req:slow] Anything.", "grants": ["tickets.read"]});
    let (code, body) = post(&client, service.url("/runs"), &slow).await;
    assert_eq!(code, 202, "{body}");
    let id = body["id"].as_str().expect("an id").to_owned();
    // The model call is in flight once its event is in the stream.
    let first = events(&client, service.url(&format!("/runs/{id}/events")), None, |_| true).await;
    assert_eq!(first.iter().map(|(_, update)| brief(update)).collect::<Vec<_>>(), ["event ModelCall model"]);
    let (code, body) = get(&client, service.url(&format!("/runs/{id}"))).await;
    assert_eq!((code, &body["state"]), (202, &json!("running")), "{body}");
    assert_eq!(body["links"], links(&id, &["cancel"]));
    // The client dropped its stream mid-run; it reconnects with the last id it got while the
    // model call is still in flight, and reads on to the end.
    let rest = tokio::spawn({
        let (client, url) = (client.clone(), service.url(&format!("/runs/{id}/events")));
        async move { events(&client, url, Some(1), |_| false).await }
    });
    let (code, body) =
        command(&client, service.url(&format!("/runs/{id}/cancel")), "alice", &json!({})).await;
    assert_eq!((code, &body["cancelled"]), (202, &json!(true)), "{body}");
    let (code, body) = get(&client, service.url(&format!("/runs/{id}?wait=true"))).await;
    assert_eq!((code, &body["error"]["kind"]), (499, &json!("cancelled")), "{body}");
    assert_eq!(body["links"], links(&id, &[]), "nothing left to cancel");
    let rest = rest.await.expect("the reconnected reader");
    assert_eq!(rest.iter().map(|(id, _)| *id).collect::<Vec<_>>(), (2..=rest.len() + 1).collect::<Vec<_>>());
    assert_eq!(rest.last().map(|(_, update)| update["type"].clone()), Some(json!("error")), "{rest:?}");
    let whole: Vec<(usize, Value)> = first.iter().chain(&rest).cloned().collect();
    let again = events(&client, service.url(&format!("/runs/{id}/events")), None, |_| false).await;
    assert_eq!(again, whole, "every update once, in order, to the end");
    let (code, body) =
        command(&client, service.url(&format!("/runs/{id}/cancel")), "alice", &json!({})).await;
    assert_eq!((code, &body["error"]["kind"]), (409, &json!("not_running")), "{body}");
    let (code, body) =
        command(&client, service.url(&format!("/runs/{id}/approve")), "a", &json!({"digest": "0"})).await;
    assert_eq!((code, &body["error"]["kind"]), (409, &json!("not_waiting")), "{body}");

    // Commands need an authenticated approver, and a page of another origin may not send them:
    // refused before the run is looked at, with the API's JSON error.
    for verb in ["approve", "deny", "close", "cancel", "resume"] {
        let (code, body) = post(&client, service.url(&format!("/runs/{id}/{verb}")), &json!({})).await;
        assert_eq!((code, &body["error"]["kind"]), (401, &json!("unauthenticated")), "{verb}: {body}");
    }
    let (code, body) =
        command(&client, service.url("/runs/run-unknown/close"), &"a".repeat(65), &json!({})).await;
    assert_eq!((code, &body["error"]["kind"]), (401, &json!("unauthenticated")), "{body}");
    let decision = json!({"digest": "0"});
    let from = |origin: &str| {
        client
            .post(service.url(&format!("/runs/{id}/approve")))
            .header("x-approver", "alice")
            .header("origin", origin)
            .body(decision.to_string())
    };
    let (code, body) = answer(from("http://evil.example").send().await.expect("an answer")).await;
    assert_eq!((code, &body["error"]["kind"]), (403, &json!("foreign_origin")), "{body}");
    let (code, body) = answer(from(&service.base).send().await.expect("an answer")).await;
    assert_eq!((code, &body["error"]["kind"]), (409, &json!("not_waiting")), "the own origin passes: {body}");
    let old = json!({"digest": "0", "approver": "alice"});
    let (code, body) = command(&client, service.url(&format!("/runs/{id}/approve")), "alice", &old).await;
    assert_eq!((code, &body["error"]["kind"]), (400, &json!("bad_request")), "no approver in a body: {body}");

    // A cancel sent as soon as the run's id is known reaches its attempt: it is registered
    // before `POST /runs` answers.
    for _ in 0..8 {
        let (code, body) = post(&client, service.url("/runs"), &slow).await;
        assert_eq!(code, 202, "{body}");
        let id = body["id"].as_str().expect("an id").to_owned();
        let (code, body) =
            command(&client, service.url(&format!("/runs/{id}/cancel")), "alice", &json!({})).await;
        assert_eq!((code, &body["cancelled"]), (202, &json!(true)), "{body}");
        let (code, body) = get(&client, service.url(&format!("/runs/{id}?wait=true"))).await;
        assert_eq!((code, &body["error"]["kind"]), (499, &json!("cancelled")), "{body}");
    }

    // Refusals: an unknown run, an invalid id, a body with an unknown field, an empty prompt,
    // an unknown task.
    assert_eq!(get(&client, service.url("/runs/run-unknown")).await.0, 404);
    assert_eq!(get(&client, service.url("/runs/not%20an%20id")).await.0, 400);
    let refused = [
        json!({"task": "answer", "prompt": "Hi.", "grants": [], "limits": {}}),
        json!({"task": "answer", "prompt": " ", "grants": []}),
        json!({"task": "delete", "prompt": "Hi.", "grants": []}),
        json!({"task": "answer", "prompt": "Hi.", "grants": ["a\nb"]}),
    ];
    let (code, answer) = get(&client, service.url(&format!("/runs/{id}?wait=soon"))).await;
    assert_eq!((code, &answer["error"]["kind"]), (400, &json!("bad_request")), "{answer}");
    let huge = json!({"task": "answer", "prompt": "x".repeat(100_000), "grants": []});
    let (code, answer) = post(&client, service.url("/runs"), &huge).await;
    assert_eq!((code, &answer["error"]["kind"]), (413, &json!("too_large")), "{answer}");
    let long = json!({"task": "answer", "prompt": "x".repeat(20_000), "grants": []});
    let many: Vec<String> = (0..33).map(|n| format!("grant.{n}")).collect();
    let crowded = json!({"task": "answer", "prompt": "Hi.", "grants": many});
    for body in refused.into_iter().chain([long, crowded]) {
        let (code, answer) = post(&client, service.url("/runs"), &body).await;
        assert_eq!((code, &answer["error"]["kind"]), (400, &json!("bad_request")), "{body}: {answer}");
    }
    assert_eq!(root.files(), Vec::<String>::new());
}

/// Starts run `request` and waits for its attempt to end: its id and the ended run's answer.
async fn run_to_end(client: &reqwest::Client, service: &Service, request: &Value) -> (String, u16, Value) {
    let (code, body) = post(client, service.url("/runs"), request).await;
    assert_eq!(code, 202, "{request}: {body}");
    let id = body["id"].as_str().expect("an id").to_owned();
    assert_eq!(body["links"], links(&id, &["cancel"]));
    let (code, body) = get(client, service.url(&format!("/runs/{id}?wait=true"))).await;
    (id, code, body)
}

/// What docs/service.md tells a newcomer to run: `demos/service/run-offline.sh` starts aimock
/// with the shipped `demos/service/fixtures.json`, then the service; the page's session gets the
/// answers it shows (both tasks to their ends, a missing grant, a loop, a denial, a closing, a
/// cancel), and SIGTERM to the script stops both servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offline_script_and_its_fixtures_give_the_documented_session() {
    if !mcp::available() {
        return;
    }
    let state = TempDir::new("service-offline");
    let mut script = Command::new("bash");
    script
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("service/run-offline.sh"))
        .env("LOOPBOUND_SERVICE_BIN", env!("CARGO_BIN_EXE_service"))
        .env("LOOPBOUND_SERVICE_LISTEN", "127.0.0.1:0")
        .env("LOOPBOUND_SERVICE_DIR", state.path())
        .env_remove("LOOPBOUND_DATABASE_URL")
        .env_remove("AIMOCK_PORT");
    // The script may install the pinned npm packages first.
    let mut service = Service::spawn(script, Duration::from_secs(300));
    let model = service
        .before
        .iter()
        .find_map(|line| line.split_once(" serves 7 fixtures at ").map(|(_, url)| url.to_owned()))
        .unwrap_or_else(|| panic!("aimock's line, with all 7 fixtures: {:?}", service.before));
    let model = model.split_whitespace().next().expect("aimock's URL").to_owned();
    // The script made a development token, kept in its state folder, and printed the page's link.
    let token = std::fs::read_to_string(state.path().join("approver-token")).expect("the approver token");
    assert_eq!((token.len(), token.bytes().all(|b| b.is_ascii_hexdigit())), (48, true), "{token:?}");
    let page = format!("the operator page: the address below, followed by /#token={token}");
    assert!(service.before.contains(&page), "{:?}", service.before);
    let files = state.path().join("files");
    let summary = files.join("summary-7.txt");
    let client = reqwest::Client::new();

    // The answer task: read the ticket, answer.
    let answer = json!({"task": "answer", "prompt": "What is ticket 7 about?", "grants": ["tickets.read"]});
    let (id, code, body) = run_to_end(&client, &service, &answer).await;
    assert_eq!((code, &body["outcome"]["status"]), (200, &json!("Completed")), "{body}");
    assert_eq!(body["outcome"]["text"], "Ticket 7 is about an invoice that shows the wrong currency.");
    assert_eq!(body["links"], links(&id, &[]));

    // The save task: it reads the ticket, proposes the write, and waits; approved, it writes.
    let grants = json!(["tickets.read", "mcp.filesystem.write_file"]);
    let save = json!({"task": "save", "prompt": "Save a summary of ticket 7.", "grants": grants});
    let (id, code, body) = run_to_end(&client, &service, &save).await;
    assert_eq!((code, &body["outcome"]["status"]), (202, &json!("AwaitingApproval")), "{body}");
    assert_eq!(body["links"], links(&id, &["approve", "deny", "close"]));
    assert_eq!(
        (&body["pending"]["tool"], &body["pending"]["operation"]),
        (&json!("write_file"), &json!(format!("{id}/op/2")))
    );
    assert!(!summary.exists(), "nothing written before the approval");
    let digest = body["pending"]["digest"].clone();
    let approve = json!({"digest": digest});
    let (code, body) =
        as_developer(&client, service.url(&format!("/runs/{id}/approve")), &token, &approve).await;
    assert_eq!((code, &body["resumed"]), (202, &json!(true)), "{body}");
    let (code, body) = get(&client, service.url(&format!("/runs/{id}?wait=true"))).await;
    assert_eq!((code, &body["outcome"]["status"]), (200, &json!("Completed")), "{body}");
    assert_eq!(body["outcome"]["text"], "I wrote summary-7.txt.");
    let written = std::fs::read_to_string(&summary).expect("the approved file");
    assert_eq!(written, "Ticket 7: an invoice shows the wrong currency.\n");
    std::fs::remove_file(&summary).expect("removed");

    // The same request denied: nothing written.
    let (id, code, body) = run_to_end(&client, &service, &save).await;
    assert_eq!((code, &body["outcome"]["status"]), (202, &json!("AwaitingApproval")), "{body}");
    let deny = json!({"digest": body["pending"]["digest"]});
    let (code, body) = as_developer(&client, service.url(&format!("/runs/{id}/deny")), &token, &deny).await;
    assert_eq!((code, &body["resumed"]), (202, &json!(true)), "{body}");
    let (code, body) = get(&client, service.url(&format!("/runs/{id}?wait=true"))).await;
    assert_eq!((code, &body["outcome"]["status"]), (403, &json!("Denied")), "{body}");

    // The same request closed instead: finished `Closed`, and it takes no decision.
    let (id, code, body) = run_to_end(&client, &service, &save).await;
    assert_eq!((code, &body["outcome"]["status"]), (202, &json!("AwaitingApproval")), "{body}");
    let digest = json!({"digest": body["pending"]["digest"]});
    let reason = json!({"reason": "not needed after all"});
    let (code, body) =
        as_developer(&client, service.url(&format!("/runs/{id}/close")), &token, &reason).await;
    assert_eq!((code, &body["closed"]), (200, &json!(true)), "{body}");
    let (code, body) = get(&client, service.url(&format!("/runs/{id}"))).await;
    assert_eq!(
        (code, &body["journal"]["state"], &body["journal"]["status"]),
        (409, &json!("finished"), &json!("Closed"))
    );
    let (code, body) = post(&client, service.url(&format!("/runs/{id}/approve")), &digest).await;
    assert_eq!((code, &body["error"]["kind"]), (401, &json!("unauthenticated")), "{body}");
    let (code, body) = command(&client, service.url(&format!("/runs/{id}/approve")), "alice", &digest).await;
    assert_eq!(
        (code, &body["error"]["kind"]),
        (401, &json!("unauthenticated")),
        "the proxy's header is not read"
    );
    let (code, body) =
        as_developer(&client, service.url(&format!("/runs/{id}/approve")), &token, &digest).await;
    assert_eq!((code, &body["error"]["kind"]), (409, &json!("not_waiting")), "{body}");

    // Without the write grant, the write is refused; the same call forever hits the limit.
    let forbidden =
        json!({"task": "save", "prompt": "Save a summary of ticket 7.", "grants": ["tickets.read"]});
    let (_, code, body) = run_to_end(&client, &service, &forbidden).await;
    assert_eq!((code, &body["outcome"]["status"]), (403, &json!("PermissionDenied")), "{body}");
    let loops = json!({"task": "answer", "prompt": "Keep reading ticket 7.", "grants": ["tickets.read"]});
    let (_, code, body) = run_to_end(&client, &service, &loops).await;
    assert_eq!((code, &body["outcome"]["status"]), (422, &json!("RepeatedCall")), "{body}");
    assert_eq!(
        std::fs::read_dir(&files).expect("the files folder").count(),
        0,
        "only the approved write happened"
    );

    // A slow model call, cancelled by the run's id.
    let slow = json!({"task": "answer", "prompt": "Take your time.", "grants": []});
    let (code, body) = post(&client, service.url("/runs"), &slow).await;
    assert_eq!(code, 202, "{body}");
    let id = body["id"].as_str().expect("an id").to_owned();
    let first = events(&client, service.url(&format!("/runs/{id}/events")), None, |_| true).await;
    assert_eq!(first.iter().map(|(_, update)| brief(update)).collect::<Vec<_>>(), ["event ModelCall model"]);
    let (code, _) =
        as_developer(&client, service.url(&format!("/runs/{id}/cancel")), &token, &json!({})).await;
    assert_eq!(code, 202);
    let (code, body) = get(&client, service.url(&format!("/runs/{id}?wait=true"))).await;
    assert_eq!((code, &body["error"]["kind"]), (499, &json!("cancelled")), "{body}");

    // SIGTERM to the script stops the service and aimock.
    let status = service.terminate(Duration::from_secs(20)).expect("the script exits within 20 s");
    assert_eq!(status.code(), Some(143), "the script's own exit on SIGTERM");
    for url in [service.base.clone(), model] {
        let address = url.trim_start_matches("http://").trim_end_matches("/v1").to_owned();
        let refused = std::net::TcpStream::connect(&address);
        assert!(refused.is_err(), "{address} still accepts connections after the script stopped");
    }
}

/// The kind and name of each event of `events` (an outcome's or a record's audit log).
fn audit(events: &Value) -> Vec<String> {
    events
        .as_array()
        .expect("events")
        .iter()
        .map(|event| {
            format!("{} {}", event["kind"].as_str().unwrap_or("?"), event["name"].as_str().unwrap_or("?"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_approval_is_decided_and_resumed_by_a_new_process_on_sqlite() {
    let Some(mut setup) = Setup::start(None) else { return };
    waiting_run_survives_a_restart(&mut setup, Some(TOKEN)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_approval_is_decided_and_resumed_by_a_new_process_on_postgres() {
    let Some(cluster) = Cluster::shared(Durability::Fast) else { return };
    let database = cluster.create_database("service_restart");
    let Some(mut setup) = Setup::start(Some(&database.url)) else { return };
    waiting_run_survives_a_restart(&mut setup, None).await;
}

/// A development token of the tests.
const TOKEN: &str = "a-token-for-tests-only";

/// A write waits for approval; the process stops; a new one (with the development `token` if
/// any, else behind the proxy's header) shows the run from the journal, takes the approval and
/// resumes it: the file is written once, and the run completes.
async fn waiting_run_survives_a_restart(setup: &mut Setup, token: Option<&str>) {
    let client = reqwest::Client::new();
    let n = 3;
    assert_eq!(Kind::of(n), Kind::Write);
    let (id, code, body) = run_to_end(&client, &setup.service, &request(n)).await;
    assert_eq!((code, &body["outcome"]["status"]), (202, &json!("AwaitingApproval")), "{body}");
    let digest = body["pending"]["digest"].as_str().expect("a digest").to_owned();
    let shown = body["pending"].clone();
    // A client that drops the stream after two events and reconnects with the last id it got
    // gets the rest once, in order, to the attempt's outcome.
    let stream = setup.service.url(&format!("/runs/{id}/events"));
    let seen = std::sync::atomic::AtomicUsize::new(0);
    let two = |_: &Value| seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1;
    let mut first = events(&client, stream.clone(), None, two).await;
    assert_eq!(first.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [1, 2]);
    first.extend(events(&client, stream.clone(), Some(2), |_| false).await);
    assert_eq!(first.iter().map(|(id, _)| *id).collect::<Vec<_>>(), (1..=first.len()).collect::<Vec<_>>());
    assert_eq!(first, events(&client, stream.clone(), None, |_| false).await, "the same as read at once");
    assert_eq!(first.last().map(|(_, update)| brief(update)).as_deref(), Some("outcome AwaitingApproval"));
    let last = first.len();

    let extra = token.map(|token| ["--approver-token", token, "--approver-name", "ops-dev"]);
    setup.restart(extra.as_ref().map_or(&[][..], |extra| &extra[..]));
    let service = &setup.service;
    let stream = service.url(&format!("/runs/{id}/events"));
    // The new process serves the same stream from the journal: a reader after the outcome ends
    // at once, one from the start reads it all again.
    assert_eq!(events(&client, stream.clone(), Some(last), |_| false).await, []);
    assert_eq!(events(&client, stream.clone(), None, |_| false).await, first, "after the restart");
    let (code, body) = get(&client, service.url(&format!("/runs/{id}"))).await;
    assert_eq!(code, 202, "{body}");
    assert_eq!(body["state"], "recorded");
    assert_eq!(
        body["journal"],
        json!({"state": "awaiting_approval", "status": null, "attempts": 1, "held": false})
    );
    assert_eq!(body["pending"], shown, "the proposal the first process showed");
    assert_eq!(body["links"], links(&id, &["approve", "deny", "close"]));
    assert_eq!(
        audit(&body["events"]),
        [
            "ModelCall model",
            "Middleware write_file",
            "ToolCall write_file",
            "Proposed write_file",
            "AwaitingApproval write_file"
        ],
        "{body}"
    );
    assert_eq!(setup.root.files(), Vec::<String>::new(), "nothing written before the approval");

    let approve = json!({"digest": digest});
    let url = service.url(&format!("/runs/{id}/approve"));
    let (code, body) = post(&client, url.clone(), &approve).await;
    assert_eq!((code, &body["error"]["kind"]), (401, &json!("unauthenticated")), "{body}");
    let approver = if let Some(token) = token {
        // With a development token, the proxy's header is not believed, nor another token.
        let (code, body) = command(&client, url.clone(), "alice", &approve).await;
        assert_eq!((code, &body["error"]["kind"]), (401, &json!("unauthenticated")), "{body}");
        let wrong = client.post(url.clone()).bearer_auth("not-the-token-at-all").body(approve.to_string());
        let response = wrong.send().await.expect("the service answers");
        let challenge = response.headers().get("www-authenticate").and_then(|value| value.to_str().ok());
        assert_eq!(challenge, Some("Bearer"));
        assert_eq!(answer(response).await.0, 401);
        let right = client.post(url).bearer_auth(token).body(approve.to_string());
        let (code, body) = answer(right.send().await.expect("the service answers")).await;
        assert_eq!((code, &body["resumed"]), (202, &json!(true)), "{body}");
        "ops-dev"
    } else {
        let (code, body) = command(&client, url, "alice", &approve).await;
        assert_eq!((code, &body["resumed"]), (202, &json!(true)), "{body}");
        "alice"
    };
    let (code, body) = get(&client, service.url(&format!("/runs/{id}?wait=true"))).await;
    assert_eq!((code, &body["outcome"]["status"]), (200, &json!("Completed")), "{body}");
    assert_eq!(body["outcome"]["text"], format!("Saved note-{n}.txt."));
    assert_eq!(body["links"], links(&id, &[]));
    // The reader that reconnects with the first attempt's last id gets the resume's updates,
    // numbered on, once, to its outcome.
    let resumed = events(&client, stream.clone(), Some(last), |_| false).await;
    assert_eq!(
        resumed.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        (last + 1..=last + resumed.len()).collect::<Vec<_>>()
    );
    assert_eq!(resumed.first().map(|(_, update)| brief(update)).as_deref(), Some("event Resumed run"));
    assert_eq!(resumed.last().map(|(_, update)| brief(update)).as_deref(), Some("outcome Completed"));
    let whole: Vec<(usize, Value)> = first.iter().chain(&resumed).cloned().collect();
    assert_eq!(events(&client, stream, None, |_| false).await, whole, "both attempts, each update once");
    let events = &body["outcome"]["events"];
    assert_eq!(
        audit(events),
        [
            "ModelCall model",
            "Middleware write_file",
            "ToolCall write_file",
            "Proposed write_file",
            "AwaitingApproval write_file",
            "Resumed run",
            "Allowed write_file",
            "EffectStarted write_file",
            "EffectRecorded write_file",
            "ModelCall model"
        ],
        "{body}"
    );
    let effect = |kind: &str| {
        events.as_array().and_then(|all| all.iter().find(|event| event["kind"] == kind)).cloned()
    };
    let started = effect("EffectStarted").expect("the effect's start");
    assert_eq!((&started["count"], &started["operation"]), (&json!(1), &json!(format!("{id}/op/1"))));
    assert_eq!(effect("EffectRecorded").expect("the effect's result")["count"], 1);
    assert_eq!(effect("Allowed").expect("the approval")["by"], format!("approver {approver}"));
    assert_eq!(effect("Resumed").expect("the resume")["count"], 2, "the second attempt");
    assert_eq!(setup.root.files(), [format!("note-{n}.txt")], "the approved write, once");
    let text = std::fs::read_to_string(note(setup.root.path(), n)).expect("the approved file");
    assert_eq!(text, format!("note {n}\n"));

    // The decided run takes no second decision, in this process either.
    let again = client.post(service.url(&format!("/runs/{id}/approve"))).body(approve.to_string());
    let again = match token {
        Some(token) => again.bearer_auth(token),
        None => again.header("x-approver", "alice"),
    };
    let (code, body) = answer(again.send().await.expect("the service answers")).await;
    assert_eq!((code, &body["error"]["kind"]), (409, &json!("not_waiting")), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_by_a_crash_is_shown_open_and_resumed_by_a_new_process() {
    let Some(mut setup) = Setup::start(None) else { return };
    let client = reqwest::Client::new();
    let slow = json!({"task": "answer", "prompt": "[req:slow] Anything.", "grants": ["tickets.read"]});
    let (code, body) = post(&client, setup.service.url("/runs"), &slow).await;
    assert_eq!(code, 202, "{body}");
    let id = body["id"].as_str().expect("an id").to_owned();
    let first = events(&client, setup.service.url(&format!("/runs/{id}/events")), None, |_| true).await;
    assert_eq!(first.iter().map(|(_, update)| brief(update)).collect::<Vec<_>>(), ["event ModelCall model"]);

    // Killed during its model call: the journal holds the run open, under a lease of a process
    // that is gone.
    setup.restart(&[]);
    let service = &setup.service;
    let (code, body) = get(&client, service.url(&format!("/runs/{id}"))).await;
    assert_eq!(code, 202, "{body}");
    assert_eq!(body["journal"], json!({"state": "open", "status": null, "attempts": 1, "held": false}));
    assert_eq!(body["pending"], Value::Null);
    assert_eq!(body["links"], links(&id, &["resume", "close"]));

    let (code, body) =
        command(&client, service.url(&format!("/runs/{id}/resume")), "alice", &json!({})).await;
    assert_eq!((code, &body["resumed"]), (202, &json!(true)), "{body}");
    let calling = |update: &Value| brief(update) == "event ModelCall model";
    let again = events(&client, service.url(&format!("/runs/{id}/events")), None, calling).await;
    assert_eq!(
        again.iter().map(|(_, update)| brief(update)).collect::<Vec<_>>(),
        ["event Resumed run", "event ModelCall model"]
    );
    let (code, body) =
        command(&client, service.url(&format!("/runs/{id}/resume")), "alice", &json!({})).await;
    assert_eq!((code, &body["error"]["kind"]), (409, &json!("running")), "{body}");
    let (code, _) = command(&client, service.url(&format!("/runs/{id}/cancel")), "alice", &json!({})).await;
    assert_eq!(code, 202);
    let (code, body) = get(&client, service.url(&format!("/runs/{id}?wait=true"))).await;
    assert_eq!((code, &body["error"]["kind"]), (499, &json!("cancelled")), "{body}");

    // A run that ended for good is not resumed; an unknown run is not found.
    let answer = request(0);
    let (done, code, _) = run_to_end(&client, service, &answer).await;
    assert_eq!(code, 200);
    let (code, body) =
        command(&client, service.url(&format!("/runs/{done}/resume")), "alice", &json!({})).await;
    assert_eq!((code, &body["error"]["kind"]), (409, &json!("not_open")), "{body}");
    let (code, body) = command(&client, service.url("/runs/run-unknown/resume"), "alice", &json!({})).await;
    assert_eq!((code, &body["error"]["kind"]), (404, &json!("unknown_run")), "{body}");

    // A run of the same journal that this service did not start (no task label) is not its own.
    let journal =
        loopbound_sqlite::SqliteJournal::open(setup.state.path().join("service.db")).expect("the journal");
    let model = loopbound::scripted::sequence(vec![loopbound::scripted::Step::Reply(
        loopbound::transport::ModelReply::text("Done."),
    )]);
    let tools = loopbound::ToolSet::default();
    let runtime = loopbound::Runner::new(&tools, model);
    let other = loopbound::journal::RunId::new("someone-else-42").expect("an id");
    let scope = loopbound::Scope::builder().build().expect("a scope");
    let mut conversation = vec![loopbound::Message::user("Hi.")];
    let outcome =
        runtime.run_journaled(&journal, &other, &scope, &mut conversation, |_| true).await.expect("a run");
    assert_eq!(outcome.status(), loopbound::Status::Completed);
    let (code, body) = get(&client, service.url("/runs/someone-else-42")).await;
    assert_eq!((code, &body["error"]["kind"]), (404, &json!("unknown_run")), "{body}");
    assert_eq!(body["error"]["message"], "the journal holds this run, but this service did not start it");
}

/// The ids of the runs the SQLite journal `file` lists as finished with `Closed`.
async fn listed_closed(file: &Path) -> Vec<String> {
    use loopbound::journal::{self, RunQuery, StateFilter};
    let journal = loopbound_sqlite::SqliteJournal::open(file).expect("the journal opens");
    let query = RunQuery::new().state(StateFilter::Finished(Some(loopbound::Status::Closed)));
    let page = journal::list(&journal, &query).await.expect("a listing");
    page.runs().iter().map(|run| run.run().as_str().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_run_is_closed_for_good_and_a_run_an_attempt_holds_is_not() {
    let Some(setup) = Setup::start(None) else { return };
    let (service, journal) = (&setup.service, setup.state.path().join("service.db"));
    let client = reqwest::Client::new();

    // A run that waits for approval is closed: listed finished `Closed`, its write never runs.
    let (id, code, body) = run_to_end(&client, service, &request(3)).await;
    assert_eq!((code, &body["outcome"]["status"]), (202, &json!("AwaitingApproval")), "{body}");
    let digest = body["pending"]["digest"].clone();
    let close = |reason: &str| json!({"reason": reason});
    let (code, body) = command(&client, service.url(&format!("/runs/{id}/close")), "alice", &close("")).await;
    assert_eq!((code, &body["error"]["kind"]), (400, &json!("bad_request")), "{body}");
    let (code, body) =
        command(&client, service.url(&format!("/runs/{id}/close")), "alice", &close("not wanted")).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body, json!({"id": id, "closed": true, "links": links(&id, &[])}));
    let (code, body) = get(&client, service.url(&format!("/runs/{id}"))).await;
    assert_eq!(code, 409, "{body}");
    assert_eq!(
        body["journal"],
        json!({"state": "finished", "status": "Closed", "attempts": 1, "held": false})
    );
    assert_eq!(body["pending"], Value::Null);
    let last = body["events"].as_array().and_then(|events| events.last()).cloned().expect("events");
    assert_eq!(
        (&last["kind"], &last["by"], &last["reason"]),
        (&json!("Closed"), &json!("alice"), &json!("not wanted")),
        "{body}"
    );
    assert_eq!(listed_closed(&journal).await, std::slice::from_ref(&id));
    let approve = json!({"digest": digest});
    let (code, body) = command(&client, service.url(&format!("/runs/{id}/approve")), "alice", &approve).await;
    assert_eq!((code, &body["error"]["kind"]), (409, &json!("not_waiting")), "{body}");
    let (code, body) =
        command(&client, service.url(&format!("/runs/{id}/close")), "alice", &close("again")).await;
    assert_eq!((code, &body["error"]["kind"]), (409, &json!("finished")), "{body}");
    assert_eq!(setup.root.files(), Vec::<String>::new(), "the closed run's write never ran");

    // A run with an attempt in flight is not closed: in this process, nor by another process on
    // the same journal, whose attempt's lease the journal sees.
    let slow = json!({"task": "answer", "prompt": "[req:slow] Anything.", "grants": ["tickets.read"]});
    let (code, body) = post(&client, service.url("/runs"), &slow).await;
    assert_eq!(code, 202, "{body}");
    let slow_id = body["id"].as_str().expect("an id").to_owned();
    let first = events(&client, service.url(&format!("/runs/{slow_id}/events")), None, |_| true).await;
    assert_eq!(first.len(), 1, "the model call is in flight");
    let (code, body) =
        command(&client, service.url(&format!("/runs/{slow_id}/close")), "alice", &close("stop")).await;
    assert_eq!((code, &body["error"]["kind"]), (409, &json!("running")), "{body}");
    let other = Service::start(&setup.model, setup.root.path(), &journal, None);
    let (code, body) = get(&client, other.url(&format!("/runs/{slow_id}"))).await;
    assert_eq!(code, 202, "{body}");
    assert_eq!(body["journal"], json!({"state": "open", "status": null, "attempts": 1, "held": true}));
    assert_eq!(body["links"], links(&slow_id, &[]));
    let (code, body) =
        command(&client, other.url(&format!("/runs/{slow_id}/close")), "alice", &close("stop")).await;
    assert_eq!((code, &body["error"]["kind"]), (409, &json!("running")), "{body}");
    assert!(
        body["error"]["message"].as_str().is_some_and(|text| text.contains("another attempt holds this run")),
        "{body}"
    );
    let (code, _) =
        command(&client, service.url(&format!("/runs/{slow_id}/cancel")), "alice", &json!({})).await;
    assert_eq!(code, 202);
    let (code, body) = get(&client, service.url(&format!("/runs/{slow_id}?wait=true"))).await;
    assert_eq!((code, &body["error"]["kind"]), (499, &json!("cancelled")), "{body}");
    assert_eq!(listed_closed(&journal).await, [id]);
}
