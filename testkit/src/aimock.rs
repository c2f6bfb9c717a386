//! A scripted aimock server per test, started on 127.0.0.1 with a free port and killed on drop.
//!
//! Each test starts its own server because queued errors and the request journal are global to
//! a server. The pinned package is installed by `testkit/aimock/setup.sh` when missing; only a
//! machine without `node` skips these tests, with a printed reason (a failure under
//! `LOOPBOUND_REQUIRE_SERVERS=1`, see [`crate::skip`]).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

/// A running aimock server.
#[derive(Debug)]
pub struct Aimock {
    child: Child,
    base: String,
    log: Arc<Mutex<Vec<String>>>,
}

/// The testkit's folder, which holds the pinned package and the fixtures.
fn testkit_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn package_dir() -> PathBuf {
    testkit_dir().join("aimock")
}

fn cli() -> PathBuf {
    package_dir().join("node_modules/@copilotkit/aimock/dist/cli.js")
}

fn fixtures() -> PathBuf {
    testkit_dir().join("fixtures/aimock-review.json")
}

/// Whether `node` can run here; prints why the calling test is skipped if not.
fn node_present() -> bool {
    match Command::new("node").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(status) if status.success() => true,
        Ok(status) => panic!("`node --version` failed with {status}"),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            crate::skip::skip(format_args!(
                "node is not installed, so the aimock server cannot run ({error})"
            ));
            false
        }
        Err(error) => panic!("`node` could not be started: {error}"),
    }
}

/// Installs the pinned package once per test binary, or fails loudly.
fn ensure_installed() {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _guard = INSTALL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if cli().is_file() {
        return;
    }
    let output = Command::new("bash")
        .arg(package_dir().join("setup.sh"))
        .output()
        .expect("bash must be able to run testkit/aimock/setup.sh");
    assert!(
        output.status.success() && cli().is_file(),
        "testkit/aimock/setup.sh failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn collect(
    stream: impl Read + Send + 'static,
    log: Arc<Mutex<Vec<String>>>,
    url: Option<mpsc::Sender<String>>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if let (Some(url), Some(at)) = (&url, line.find("listening on ")) {
                let _ = url.send(line[at + "listening on ".len()..].trim().to_owned());
            }
            log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(line);
        }
    });
}

impl Aimock {
    /// Starts a server with the review fixtures, or `None` where `node` is absent.
    pub fn start() -> Option<Self> {
        Self::start_with_env(&[])
    }

    /// As [`start`](Self::start), with extra environment for the server process.
    pub fn start_with_env(env: &[(&str, &str)]) -> Option<Self> {
        Self::start_with_fixtures(&fixtures(), env)
    }

    /// As [`start_with_env`](Self::start_with_env), with the fixtures of the file `fixtures`
    /// instead of the review's (a test that writes its own, e.g. with paths it made).
    pub fn start_with_fixtures(fixtures: &Path, env: &[(&str, &str)]) -> Option<Self> {
        if !node_present() {
            return None;
        }
        ensure_installed();
        let mut child = Command::new("node")
            .arg(cli())
            .args(["-h", "127.0.0.1", "-p", "0", "--validate-on-load", "-f"])
            .arg(fixtures)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node must start the aimock server");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (url_tx, url_rx) = mpsc::channel();
        collect(child.stdout.take().expect("piped stdout"), Arc::clone(&log), Some(url_tx));
        collect(child.stderr.take().expect("piped stderr"), Arc::clone(&log), None);
        let mut server = Self { child, base: String::new(), log };
        match url_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(url) => server.base = url,
            Err(_) => panic!("aimock did not report its address within 30 s:\n{}", server.log()),
        }
        Some(server)
    }

    /// The base URL of every API, e.g. `http://127.0.0.1:41277/v1` (`/chat/completions`,
    /// `/messages` and `/responses` below it).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.base)
    }

    /// Everything the server printed so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).join("\n")
    }

    /// Queues one error response for the next chat request.
    pub async fn queue_error(&self, status: u16, body: Value) {
        let response = reqwest::Client::new()
            .post(format!("{}/__aimock/error", self.base))
            .header("content-type", "application/json")
            .body(serde_json::json!({"status": status, "body": body}).to_string())
            .send()
            .await
            .expect("the control endpoint answers");
        assert!(response.status().is_success(), "queueing an error failed: {}", response.status());
    }

    /// The whole request journal, as the server returns it.
    pub async fn journal_text(&self) -> String {
        reqwest::Client::new()
            .get(format!("{}/__aimock/journal", self.base))
            .send()
            .await
            .expect("the journal endpoint answers")
            .text()
            .await
            .expect("the journal is text")
    }

    /// The bodies of the chat-completions requests received, in order.
    pub async fn request_bodies(&self) -> Vec<Value> {
        self.bodies(CHAT_COMPLETIONS).await
    }

    /// The bodies of the Messages API requests received, in order, as aimock journals them: turned
    /// into the chat-completions shape it matches fixtures on (system first, tool results as
    /// `tool` messages with their `tool_call_id`), not the bytes sent.
    pub async fn message_bodies(&self) -> Vec<Value> {
        self.bodies(MESSAGES).await
    }

    /// The bodies of the Responses API requests received, in order, as aimock journals them:
    /// turned into the chat-completions shape it matches fixtures on (`input` items as
    /// `messages`, `max_output_tokens` as `max_tokens`), not the bytes sent.
    pub async fn response_bodies(&self) -> Vec<Value> {
        self.bodies(RESPONSES).await
    }

    /// The journal entries of the requests to `path` (each with its `headers`, credentials shown
    /// as `[REDACTED]`, and its `body`), in order.
    pub async fn entries(&self, path: &str) -> Vec<Value> {
        let journal: Vec<Value> =
            serde_json::from_str(&self.journal_text().await).expect("the journal is JSON");
        journal.into_iter().filter(|entry| entry["path"] == path).collect()
    }

    async fn bodies(&self, path: &str) -> Vec<Value> {
        self.entries(path)
            .await
            .into_iter()
            .map(|mut entry| {
                let mut body = entry["body"].take();
                // aimock's own annotation, not part of what the client sent.
                body.as_object_mut().map(|object| object.remove("_endpointType"));
                body
            })
            .collect()
    }
}

/// The OpenAI-compatible path aimock serves.
pub const CHAT_COMPLETIONS: &str = "/v1/chat/completions";
/// The Anthropic Messages API path aimock serves.
pub const MESSAGES: &str = "/v1/messages";
/// The OpenAI Responses API path aimock serves.
pub const RESPONSES: &str = "/v1/responses";

impl Drop for Aimock {
    fn drop(&mut self) {
        // Kills exactly the process this test started, by its PID.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
