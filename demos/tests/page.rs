//! The operator's page in a real browser: headless Chromium driven through chromedriver
//! (WebDriver), against the `service` binary on the scripted aimock model, the real MCP
//! `server-filesystem` and a SQLite journal, over real HTTP on loopback.
//!
//! - A run that reaches `AwaitingApproval` appears in the page's list without a reload; the
//!   service is restarted while the page follows the run; the Approve button resumes it; the page
//!   shows `Completed`, every update of the run's stream once and in order (the same numbers as
//!   the service's own stream), the write done once, and the tenant's pool charged.
//! - The service is killed while a run's second model call is in flight and the page shows it
//!   live; started again, the page offers Resume, and the resumed run's updates all arrive once:
//!   the page's numbers are the service's, increasing, with no update lost or repeated.
//! - A model reply and tool arguments that carry `<script>`, `<img onerror=…>` and a
//!   `javascript:` link show as text: no such element exists in the page and no script of
//!   theirs ran.
//! - A command without the seam's identity (no token) is refused in the page (401), and one from
//!   a page of another origin is refused by the service (403) or never sent by the browser; the
//!   run still waits and nothing is written.
//!
//! Without `chromium` and `chromedriver` (Debian's packages), or without `node`, these print
//! SKIPPED and pass, unless LOOPBOUND_REQUIRE_SERVERS=1.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use loopbound_testkit::aimock::Aimock;
use loopbound_testkit::mcp::{self, TempDir};
use loopbound_testkit::skip::skip;
use serde_json::{Value, json};
use support::Service;

mod support;

/// The development token the tests' service takes.
const TOKEN: &str = "a-token-for-the-page-tests";
/// What a model and its tool arguments write to try to act in the page.
const HOSTILE: &str = r#"<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> <a href="javascript:window.__pwned = 3">open</a>"#;
/// How long the page gets to show a change (it polls every 2 to 3 s).
const PATIENCE: Duration = Duration::from_secs(30);

/// A program on the `PATH`, if there.
fn program(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths).map(|dir| dir.join(name)).find(|path| path.is_file())
}

/// A loopback port free now.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// chromedriver, stopped by its PID when dropped.
struct Driver {
    child: Child,
    url: String,
    chromium: PathBuf,
    profile: TempDir,
}

impl Driver {
    /// chromedriver on a free port, once it accepts connections; `None` (SKIPPED) without
    /// Chromium or chromedriver.
    fn start() -> Option<Self> {
        let (Some(chromium), Some(chromedriver)) = (program("chromium"), program("chromedriver")) else {
            skip("the browser tests need Debian's chromium and chromium-driver (testkit/browser/setup.sh)");
            return None;
        };
        let port = free_port();
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let driver = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            chromium,
            profile: TempDir::new("chromium"),
        };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(20), "chromedriver did not listen within 20 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(driver)
    }

    /// A new headless browser session.
    async fn browser(&self) -> Client {
        let options = json!({
            "binary": self.chromium,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--window-size=1440,1000", format!("--user-data-dir={}", self.profile.path().display()),
            ],
        });
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("goog:chromeOptions".to_owned(), options);
        ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .expect("a browser session")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The scripted model: a write that waits for approval, and an answer; both carry [`HOSTILE`].
fn fixtures(root: &Path) -> Value {
    let call = |name: &str, arguments: Value| json!({"toolCalls": [{"id": "call_1", "name": name, "arguments": arguments}]});
    let write = json!({"path": root.join("summary.txt").to_str().expect("a UTF-8 path"), "content": format!("Summary {HOSTILE}\n")});
    json!({"fixtures": [
        {"match": {"userMessage": "[page:save]", "hasToolResult": false}, "response": call("write_file", write)},
        {"match": {"userMessage": "[page:save]", "hasToolResult": true}, "response": {"content": "I wrote summary.txt."}},
        {"match": {"userMessage": "[page:answer]", "hasToolResult": false}, "response": call("read_ticket", json!({"id": 7}))},
        {"match": {"userMessage": "[page:answer]", "hasToolResult": true}, "response": {"content": HOSTILE}},
        {"match": {"userMessage": "[page:slow]", "hasToolResult": false}, "response": call("read_ticket", json!({"id": 7}))},
        {"match": {"userMessage": "[page:slow]", "hasToolResult": true}, "response": {"content": "Ticket 7 is about an invoice that shows the wrong currency, says the customer who wrote it on Monday."}, "streamingProfile": {"ttft": 300, "tps": 1}},
    ]})
}

/// Everything a page test needs, stopped in order when dropped (the browser session is closed
/// by the test).
struct Setup {
    service: Service,
    model: Aimock,
    root: TempDir,
    state: TempDir,
    port: u16,
    driver: Driver,
}

impl Setup {
    fn start() -> Option<Self> {
        if !mcp::available() {
            return None;
        }
        let driver = Driver::start()?;
        let root = TempDir::new("page-files");
        let state = TempDir::new("page-state");
        let fixtures_file = state.path().join("fixtures.json");
        std::fs::write(&fixtures_file, fixtures(root.path()).to_string()).expect("fixtures written");
        let model = Aimock::start_with_fixtures(&fixtures_file, &[])?;
        let port = free_port();
        let service = Self::service(port, &model, root.path(), state.path());
        Some(Self { service, model, root, state, port, driver })
    }

    fn service(port: u16, model: &Aimock, files: &Path, state: &Path) -> Service {
        let extra = [
            "--approver-token",
            TOKEN,
            "--approver-name",
            "ops",
            "--tenant",
            "acme=20000",
            "--tenant",
            "globex=20000",
        ];
        Service::start_on(&format!("127.0.0.1:{port}"), model, files, &state.join("service.db"), None, &extra)
    }

    /// Stops the service by its PID (as a crash) and starts a new one on the same port, journal
    /// and files.
    fn restart(&mut self) {
        self.service.terminate(Duration::from_secs(10)).expect("the service stops within 10 s");
        self.service = Self::service(self.port, &self.model, self.root.path(), self.state.path());
    }

    fn url(&self, path: &str) -> String {
        self.service.url(path)
    }

    /// Starts a run over the API, as a client of the service would: its id.
    async fn start_run(&self, client: &reqwest::Client, request: Value) -> String {
        let response =
            client.post(self.url("/runs")).body(request.to_string()).send().await.expect("an answer");
        assert_eq!(response.status().as_u16(), 202);
        let body: Value = response.json().await.expect("JSON");
        body["id"].as_str().expect("an id").to_owned()
    }

    /// The run's answer once no attempt of it is in flight.
    async fn settled(&self, client: &reqwest::Client, id: &str) -> Value {
        let response =
            client.get(self.url(&format!("/runs/{id}?wait=true"))).send().await.expect("an answer");
        response.json().await.expect("JSON")
    }
}

/// Waits until `script` (a function body returning a value) returns `wanted` in the page.
async fn until(browser: &Client, script: &str, wanted: &Value) -> Value {
    let started = Instant::now();
    loop {
        let got = browser.execute(script, Vec::new()).await.expect("the script runs");
        if &got == wanted {
            return got;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the page shows {got} after {PATIENCE:?}, wanted {wanted}: {script}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `script` returns a string that is not empty in the page: that string.
async fn until_some(browser: &Client, script: &str) -> String {
    let started = Instant::now();
    loop {
        let got = browser.execute(script, Vec::new()).await.expect("the script runs");
        if let Some(text) = got.as_str().filter(|text| !text.is_empty()) {
            return text.to_owned();
        }
        assert!(started.elapsed() < PATIENCE, "the page shows {got} after {PATIENCE:?}: {script}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Clicks run `id`'s row in the page's list.
async fn click_row(browser: &Client, id: &str) {
    let row = browser.find(Locator::Css(&format!("tr[data-run=\"{id}\"]"))).await.expect("the row");
    row.click().await.expect("selected");
}

/// The text of element `id` in the page.
fn text_of(id: &str) -> String {
    format!("const e = document.getElementById({id:?}); return e ? e.textContent : null;")
}

/// The page's stream as `[id, class, text]` rows.
const STREAM: &str = "return Array.from(document.querySelectorAll('#stream li'), li => [li.dataset.id, li.className, li.textContent]);";

/// Whether anything a model wrote became markup or ran: `[no script of theirs ran, elements
/// that are not the page's own]`.
const INERT: &str = "return [window.__pwned === undefined, document.querySelectorAll('img, iframe, object, embed, a, #run script').length, document.scripts.length];";

/// Run `id`'s stream as the page shows it (`[id, class, text]` rows, and their ids) and the ids
/// of the service's stream of it.
async fn streams(
    browser: &Client,
    client: &reqwest::Client,
    setup: &Setup,
    id: &str,
) -> (Vec<Value>, Vec<u64>, Vec<u64>) {
    let stream = browser.execute(STREAM, Vec::new()).await.expect("read");
    let rows = stream.as_array().expect("rows").clone();
    let ids = rows.iter().map(|row| row[0].as_str().expect("an id").parse().expect("a number")).collect();
    let served = served_ids(client, setup.url(&format!("/runs/{id}/events"))).await;
    (rows, ids, served)
}

/// The ids of a run's stream as the service sends it, read from the start to its end.
async fn served_ids(client: &reqwest::Client, url: String) -> Vec<u64> {
    let body = client.get(url).send().await.expect("the stream").text().await.expect("to its end");
    body.lines()
        .filter_map(|line| line.strip_prefix("id: "))
        .map(|id| id.parse().expect("a number"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_run_appears_live_is_approved_in_the_page_across_a_restart_and_completes_once() {
    let Some(mut setup) = Setup::start() else { return };
    let client = reqwest::Client::new();
    let browser = setup.driver.browser().await;
    browser.goto(&setup.url(&format!("/#token={TOKEN}"))).await.expect("the page loads");
    // The token leaves the address bar (and the history) at once.
    let address = browser.current_url().await.expect("the page's address");
    assert_eq!(address.as_str(), setup.url("/"));
    until(
        &browser,
        &text_of("who"),
        &json!("Commands are sent with the development token of the link this tab was opened with."),
    )
    .await;

    // A run started elsewhere appears in the list, waiting, without a reload.
    let save = json!({"task": "save", "prompt": "[page:save] Save a summary.", "grants": ["tickets.read", "mcp.filesystem.write_file"], "tenant": "acme"});
    let id = setup.start_run(&client, save).await;
    let row = format!(
        "const r = document.querySelector('tr[data-run=\"{id}\"]'); return r ? Array.from(r.cells, c => c.textContent) : null;"
    );
    until(&browser, &row, &json!([id, "save", "acme", "AwaitingApproval", "1"])).await;
    click_row(&browser, &id).await;

    // Its proposal, for a decision: tool, capability, arguments as text.
    until(&browser, "return document.getElementById('pending').hidden;", &json!(false)).await;
    until(&browser, &text_of("pending-tool"), &json!("write_file")).await;
    until(&browser, &text_of("pending-capability"), &json!("mcp.filesystem.write_file")).await;
    until(&browser, &text_of("pending-operation"), &json!(format!("{id}/op/1"))).await;
    let arguments = browser.execute(&text_of("pending-arguments"), Vec::new()).await.expect("read");
    let shown: Value = serde_json::from_str(arguments.as_str().expect("text")).expect("pretty JSON");
    assert_eq!(shown["content"], json!(format!("Summary {HOSTILE}\n")));
    let waiting = "const l = document.querySelectorAll('#stream li.outcome'); return l.length ? l[l.length - 1].textContent : null;";
    until(&browser, waiting, &json!("outcome: AwaitingApproval")).await;
    assert!(!setup.root.path().join("summary.txt").exists(), "nothing written before the approval");

    // The service restarts while the page follows the run; the page's stream reconnects.
    setup.restart();
    browser.find(Locator::Id("approve")).await.expect("the button").click().await.expect("clicked");
    until(&browser, &text_of("command-result"), &json!("approved: the run resumes")).await;
    until(&browser, &text_of("run-state"), &json!("Completed")).await;
    until(&browser, waiting, &json!("outcome: Completed")).await;
    until(&browser, &text_of("stream-state"), &json!("(ended)")).await;

    // Every update once, in order: the page's numbers are the service's, 1 to n.
    let (rows, ids, served) = streams(&browser, &client, &setup, &id).await;
    assert_eq!(ids, served, "the page's stream is the service's");
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>(), "no update lost or repeated");
    let outcomes: Vec<&str> =
        rows.iter().filter(|row| row[1] == "outcome").map(|row| row[2].as_str().expect("text")).collect();
    assert_eq!(outcomes, ["outcome: AwaitingApproval", "outcome: Completed"]);
    let writes = rows
        .iter()
        .filter(|row| {
            row[1] == "tool_result" && row[2].as_str().is_some_and(|t| t.starts_with("← write_file"))
        })
        .count();
    assert_eq!(writes, 1, "one answer of the write: {rows:?}");
    let written = std::fs::read_to_string(setup.root.path().join("summary.txt")).expect("the approved file");
    assert_eq!(written, format!("Summary {HOSTILE}\n"));
    assert_eq!(until(&browser, INERT, &json!([true, 0, 1])).await, json!([true, 0, 1]));

    // The tenant's pool: what the run's model calls were charged, as the service reports it.
    let tenants: Value =
        client.get(setup.url("/tenants")).send().await.expect("an answer").json().await.expect("JSON");
    let acme = &tenants["tenants"][0];
    assert_eq!((&acme["tenant"], &acme["held"], &acme["limit"]), (&json!("acme"), &json!(0), &json!(20_000)));
    let settled = acme["settled"].as_u64().expect("a number");
    assert!(settled > 0, "the run's calls were charged to acme: {acme}");
    let figures = format!("settled {settled} · held 0 · left {} of 20000 tokens this day", 20_000 - settled);
    until(&browser, "const f = document.querySelector('.pool[data-tenant=\"acme\"] .pool-figures'); return f ? f.textContent : null;", &json!(figures)).await;
    until(&browser, "const f = document.querySelector('.pool[data-tenant=\"globex\"] .pool-figures'); return f ? f.textContent : null;", &json!("settled 0 · held 0 · left 20000 of 20000 tokens this day")).await;

    // The list follows too, without a reload.
    until(&browser, &row, &json!([id, "save", "acme", "Completed", "2"])).await;

    // The picture docs/service.md shows, written by this test.
    let picture = browser.screenshot().await.expect("a screenshot");
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("operator-page.png");
    std::fs::write(&target, &picture).expect("written");
    if std::env::var_os("LOOPBOUND_UPDATE_SCREENSHOT").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/images/operator-page.png");
        std::fs::write(docs, &picture).expect("the docs' picture written");
    }
    browser.close().await.expect("the session ends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_model_writes_stays_text_and_commands_without_the_seam_or_from_another_origin_are_refused() {
    let Some(setup) = Setup::start() else { return };
    let client = reqwest::Client::new();
    let save = json!({"task": "save", "prompt": "[page:save] Save a summary.", "grants": ["mcp.filesystem.write_file"]});
    let saved = setup.start_run(&client, save).await;
    let waiting = setup.settled(&client, &saved).await;
    assert_eq!(waiting["outcome"]["status"], json!("AwaitingApproval"));
    let digest = waiting["pending"]["digest"].as_str().expect("a digest").to_owned();

    // The page's policy: its own script and style only, nothing inline, no frame around it.
    let page = client.get(setup.url("/")).send().await.expect("the page");
    let policy = page.headers().get("content-security-policy").and_then(|value| value.to_str().ok());
    assert_eq!(policy, Some(loopbound_demos::service::page::CONTENT_SECURITY_POLICY));

    // A run started from the page's own form, for tenant globex: the page shows it at once.
    let browser = setup.driver.browser().await;
    browser.goto(&setup.url("/")).await.expect("the page loads");
    let options = "return Array.from(document.getElementById('try-tenant').options, o => o.value);";
    until(&browser, options, &json!(["", "acme", "globex"])).await;
    browser
        .find(Locator::Id("try-task"))
        .await
        .expect("the task")
        .select_by_value("answer")
        .await
        .expect("chosen");
    browser
        .find(Locator::Id("try-tenant"))
        .await
        .expect("the tenant")
        .select_by_value("globex")
        .await
        .expect("chosen");
    let prompt = browser.find(Locator::Id("try-prompt")).await.expect("the prompt");
    assert_eq!(prompt.prop("value").await.expect("read").as_deref(), Some("What is ticket 7 about?"));
    prompt.clear().await.expect("cleared");
    prompt.send_keys("[page:answer] What is ticket 7 about?").await.expect("typed");
    browser.find(Locator::Id("try-start")).await.expect("the button").click().await.expect("clicked");
    let started = until_some(&browser, &text_of("run-id")).await;
    until(&browser, &text_of("try-result"), &json!(format!("started {started}"))).await;
    let answered = setup.settled(&client, &started).await;
    assert_eq!(answered["outcome"]["status"], json!("Completed"), "{answered}");
    let runs: Value = client
        .get(setup.url("/runs?tenant=globex"))
        .send()
        .await
        .expect("a list")
        .json()
        .await
        .expect("JSON");
    assert_eq!(runs["runs"][0]["id"], json!(started), "{runs}");
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(1), "{runs}");

    // The reply with markup in it: shown as its text, in the stream and in the outcome.
    until(&browser, &text_of("outcome-text"), &json!(HOSTILE)).await;
    let text =
        "return Array.from(document.querySelectorAll('#stream li.text'), li => li.textContent).join('');";
    until(&browser, text, &json!(HOSTILE)).await;
    assert_eq!(browser.execute(INERT, Vec::new()).await.expect("read"), json!([true, 0, 1]));

    // The proposal with markup in its arguments: shown as text.
    click_row(&browser, &saved).await;
    until(&browser, &text_of("pending-tool"), &json!("write_file")).await;
    let arguments = browser.execute(&text_of("pending-arguments"), Vec::new()).await.expect("read");
    assert!(
        arguments
            .as_str()
            .expect("text")
            .contains(r#"<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"#),
        "{arguments}"
    );
    assert_eq!(browser.execute(INERT, Vec::new()).await.expect("read"), json!([true, 0, 1]));

    // This tab has no token: the page sends the approval without an identity, and it is refused.
    browser.find(Locator::Id("approve")).await.expect("the button").click().await.expect("clicked");
    until(
        &browser,
        &text_of("command-result"),
        &json!("refused (401 unauthenticated): this command needs an authenticated approver. Open this page with the link the service's start printed (…/#token=…), or through the proxy that names you."),
    )
    .await;

    // A page of another origin (aimock's) posts a form to the service: refused before the
    // approver is looked at. A script there cannot even send the token's header (the browser's
    // preflight fails, the service allows no other origin).
    let foreign = setup.model.base_url().trim_end_matches("/v1").to_owned();
    browser.goto(&format!("{foreign}/")).await.expect("the other origin's page");
    let target = setup.url(&format!("/runs/{saved}/approve"));
    let post = format!(
        "const f = document.createElement('form'); f.method = 'POST'; f.action = {target:?}; f.enctype = 'text/plain';
         const i = document.createElement('input'); i.name = '{{\"digest\":\"{digest}\",\"x\":\"'; i.value = '\"}}';
         f.appendChild(i); document.body.appendChild(f); f.submit(); return true;"
    );
    browser.execute(&post, Vec::new()).await.expect("the form is sent");
    until(
        &browser,
        "return document.body ? document.body.innerText.includes('foreign_origin') : false;",
        &json!(true),
    )
    .await;
    browser.goto(&format!("{foreign}/")).await.expect("the other origin's page");
    let fetch = format!(
        "const done = arguments[0];
         fetch({target:?}, {{method: 'POST', headers: {{'content-type': 'application/json', authorization: 'Bearer {TOKEN}'}}, body: JSON.stringify({{digest: {digest:?}}})}})
           .then(r => done('answered ' + r.status), e => done('failed: ' + e.name));"
    );
    assert_eq!(
        browser.execute_async(&fetch, Vec::new()).await.expect("the script ends"),
        json!("failed: TypeError")
    );

    // The run still waits, and nothing was written.
    let still: Value = client
        .get(setup.url(&format!("/runs/{saved}")))
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("JSON");
    assert_eq!(still["outcome"]["status"], json!("AwaitingApproval"), "{still}");
    assert_eq!(std::fs::read_dir(setup.root.path()).expect("the folder").count(), 0, "nothing written");
    browser.close().await.expect("the session ends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_by_a_restart_mid_call_is_resumed_from_the_page_and_its_stream_loses_and_repeats_nothing() {
    let Some(mut setup) = Setup::start() else { return };
    let client = reqwest::Client::new();
    let browser = setup.driver.browser().await;
    browser.goto(&setup.url(&format!("/#token={TOKEN}"))).await.expect("the page loads");
    let slow = json!({"task": "answer", "prompt": "[page:slow] What is ticket 7 about?", "grants": ["tickets.read"], "tenant": "acme"});
    let id = setup.start_run(&client, slow).await;
    until(&browser, "return document.querySelectorAll('#runs tbody tr').length;", &json!(1)).await;
    click_row(&browser, &id).await;
    // The second model call's reply streams slowly; its first pieces are shown live, before
    // the reply is committed; then the process dies.
    until(&browser, "return document.querySelectorAll('#stream li.text').length > 0;", &json!(true)).await;
    setup.restart();

    // The new process finds the run open in the journal; the page offers Resume.
    until(&browser, "return document.getElementById('resume').hidden;", &json!(false)).await;
    browser.find(Locator::Id("resume")).await.expect("the button").click().await.expect("clicked");
    until(&browser, &text_of("command-result"), &json!("resumed")).await;
    until(&browser, &text_of("run-state"), &json!("Completed")).await;
    until(&browser, &text_of("stream-state"), &json!("(ended)")).await;

    let (rows, ids, served) = streams(&browser, &client, &setup, &id).await;
    let shown: Vec<u64> = ids.iter().copied().filter(|id| served.contains(id)).collect();
    assert_eq!(shown, served, "every update the service keeps, once, in order: {rows:?}");
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "increasing, none repeated: {ids:?}");
    let texts: Vec<&str> = rows.iter().map(|row| row[2].as_str().expect("text")).collect();
    assert!(texts.contains(&"Resumed run 2"), "{texts:?}");
    assert_eq!(texts.last(), Some(&"outcome: Completed"), "{texts:?}");
    // What the page saw live of the cut call and the journal never kept: the numbers the
    // resumed attempt skipped.
    let lost: Vec<u64> = ids.iter().copied().filter(|id| !served.contains(id)).collect();
    assert!(!lost.is_empty(), "the cut reply's pieces were shown live and never kept: {rows:?}");
    let resumed =
        served.iter().copied().find(|id| *id > lost.last().copied().unwrap_or(0)).expect("resumed lines");
    assert!(lost.iter().all(|id| *id < resumed), "{lost:?} before {resumed}");
    browser.close().await.expect("the session ends");
}
