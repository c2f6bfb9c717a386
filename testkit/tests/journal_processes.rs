//! Journals shared by processes (this test binary run again as children): two processes racing
//! to resume one approved run on one SQLite file, its effect an MCP `write_file` on the real
//! filesystem server; six processes opening one new SQLite file, or one empty PostgreSQL
//! database, at the same moment; an attempt killed with SIGKILL taken over once its lease
//! expired, and one whose process named its lease as a process does taken over at once by one
//! of two fresh processes racing for it; an attempt paused with SIGSTOP past its lease that gets
//! `LeaseLost` and runs no further effect; an attempt that a host in another process cancels
//! through the journal. The last four on SQLite (FULL and NORMAL) and PostgreSQL.
//!
//! Counts are kept outside the processes, in files each process appends to and syncs: the
//! `tools/call` messages written to the MCP server, the model replies asked for, the effects
//! the refund task's bodies applied.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::time::Duration;

use loopbound::journal::{self, Journal as _, JournalError, Resolution, RunId, RunQuery, RunState};
use loopbound::pool::{DEFAULT_LEASE, PoolBudget, PoolDraw, PoolName, PoolTerms};
use loopbound::tool::Policy;
use loopbound::transport::{ModelReply, Usage};
use loopbound::{LimitsError, Message, RunError, Runner, Scope, Status, ToolSet};
use loopbound_mcp::{Connection, Mapping};
use loopbound_sqlite::Synchronous;
use loopbound_testkit::backend::{self, AnyJournal};
use loopbound_testkit::child::{self, next_report, report, role};
use loopbound_testkit::mcp::{self, TempDir, WireLog};
use loopbound_testkit::pool;
use loopbound_testkit::postgres::{Cluster, Durability};
use loopbound_testkit::refund::{self, EffectSink, FileSink};
use loopbound_testkit::scratch;

/// The folder a child shares with its parent.
const DIR: &str = "LOOPBOUND_TEST_DIR";
/// Where the child's journal is ([`backend::open`]).
const PLACE: &str = "LOOPBOUND_TEST_PLACE";
/// The name the child's leases carry.
const NAME: &str = "LOOPBOUND_TEST_NAME";

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("the parent sets {name}"))
}

/// Appends `line` to `path` and syncs it.
fn append(path: &Path, line: &str) {
    let mut file = OpenOptions::new().create(true).append(true).open(path).expect("the file opens");
    file.write_all(format!("{line}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .expect("the line is written");
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_owned).collect()
}

fn spawn(test: &str, role: &str, dir: &Path, place: &str, name: &str) -> Child {
    child::command(test, role)
        .env(DIR, dir)
        .env(PLACE, place)
        .env(NAME, name)
        .spawn()
        .expect("the test binary runs again")
}

/// How an attempt ended, as one word and what it names.
fn verdict(result: &Result<loopbound::Outcome, RunError>) -> String {
    match result {
        Ok(outcome) => format!("outcome {}", outcome.status()),
        Err(RunError::Journal(JournalError::LeaseHeld { holder, .. })) => format!("held {holder}"),
        Err(RunError::Journal(JournalError::Finished(status))) => format!("finished {status}"),
        Err(RunError::Journal(JournalError::LeaseLost)) => "lost".to_owned(),
        Err(other) => format!("error {other}"),
    }
}

// Two processes racing to resume one approved run.

const RACE: &str = "two_processes_racing_to_resume_one_sqlite_run_one_runs_it_and_its_write_is_sent_once";
const ROUNDS: usize = 100;
const WRITE: &str = "mcp.filesystem.write_file";

/// The model of a racing run: write `race-<n>.txt`, then say it is done; each step it is asked
/// for is appended to `asks` as `<run> <step>`.
fn race_attempt<'a>(
    journal: &'a AnyJournal,
    tools: &'a ToolSet,
    dir: &'a Path,
    round: usize,
) -> impl Future<Output = Result<loopbound::Outcome, RunError>> + 'a {
    let run = format!("race-{round}");
    let path = dir.join("files").join(format!("{run}.txt"));
    let write = serde_json::json!({ "path": path.to_str().expect("utf-8"), "content": run }).to_string();
    let script = vec![ModelReply::call("c1", "write_file", &write), ModelReply::text("Written.")];
    let asks = dir.join("asks");
    let model = refund::model(script, {
        let run = run.clone();
        move |step| append(&asks, &format!("{run} {step}"))
    });
    async move {
        let scope = Scope::builder().grant(WRITE).build().expect("valid limits");
        let mut conversation = vec![Message::user("Write the file.")];
        let run = RunId::new(&run).expect("a valid run id");
        Runner::new(tools, model).run_journaled(journal, &run, &scope, &mut conversation, |_| true).await
    }
}

/// server-filesystem on `dir/files`, recorded, and its tools.
async fn filesystem(dir: &Path) -> (Connection, WireLog, ToolSet) {
    let root = dir.join("files");
    let (connection, log, _) =
        mcp::recorded("filesystem", &mcp::filesystem_js(), &[root.to_str().expect("utf-8")], mcp::timeouts())
            .await
            .expect("server-filesystem starts");
    let registered = connection.register(&Mapping::new());
    assert!(registered.get("write_file").is_some(), "the server has write_file");
    let set = registered.add_to(ToolSet::builder()).build().expect("the server's names are distinct");
    (connection, log, set)
}

/// The `tools/call` messages `log` holds after the first `seen`, as `<tool> <path>`.
fn calls_after(log: &WireLog, seen: usize) -> Vec<String> {
    log.sent("tools/call")
        .iter()
        .skip(seen)
        .map(|message| {
            let params = &message["params"];
            format!(
                "{} {}",
                params["name"].as_str().unwrap_or("?"),
                params["arguments"]["path"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

fn racer() {
    let dir = PathBuf::from(env(DIR));
    let rt = child::runtime();
    let journal =
        rt.block_on(backend::open(&env(PLACE), &env(NAME), Duration::from_secs(30))).expect("opens");
    let (_connection, log, tools) = rt.block_on(filesystem(&dir));
    report("ready");
    let mut seen = 0;
    for line in std::io::stdin().lines().map_while(Result::ok) {
        let Some(round) = line.strip_prefix("round ").and_then(|n| n.parse::<usize>().ok()) else { break };
        let result = rt.block_on(race_attempt(&journal, &tools, &dir, round));
        let sent = calls_after(&log, seen);
        seen += sent.len();
        for call in sent {
            append(&dir.join("sent"), &call);
        }
        report(&format!("{round} {}", verdict(&result)));
    }
}

#[test]
fn two_processes_racing_to_resume_one_sqlite_run_one_runs_it_and_its_write_is_sent_once() {
    if role().as_deref() == Some("racer") {
        racer();
        return;
    }
    if !mcp::available() {
        return;
    }
    let root = TempDir::new("race");
    let dir = root.path().to_path_buf();
    std::fs::create_dir(dir.join("files")).expect("the files' folder");
    let place = backend::sqlite_place(&dir.join("runs.db"), Synchronous::Full);
    let rt = child::runtime();
    let host = rt.block_on(backend::open(&place, "host", Duration::from_secs(30))).expect("opens");
    let (_connection, host_log, host_tools) = rt.block_on(filesystem(&dir));
    let mut children: Vec<Child> =
        ["p1", "p2"].iter().map(|name| spawn(RACE, "racer", &dir, &place, name)).collect();
    let mut outputs: Vec<_> = children.iter_mut().map(child::output).collect();
    for output in &mut outputs {
        assert_eq!(next_report(output).as_deref(), Some("ready"));
    }
    let (mut wins, mut held, mut finished) = ([0usize; 2], 0usize, 0usize);
    for round in 0..ROUNDS {
        let first = rt.block_on(race_attempt(&host, &host_tools, &dir, round)).expect("a first attempt");
        assert_eq!(first.status(), Status::AwaitingApproval, "round {round}");
        let pending = first.pending().expect("the outcome hands out the write that waits");
        rt.block_on(journal::approve(&host, pending, "alice")).expect("approve");
        for child in &mut children {
            writeln!(child.stdin.as_mut().expect("piped"), "round {round}").expect("the child reads");
        }
        let reports: Vec<String> =
            outputs.iter_mut().map(|output| next_report(output).expect("one report per round")).collect();
        let completed = format!("{round} outcome Completed");
        let winner = reports
            .iter()
            .position(|r| *r == completed)
            .unwrap_or_else(|| panic!("round {round}: {reports:?}"));
        let loser = &reports[1 - winner];
        if *loser == format!("{round} held {}", ["p1", "p2"][winner]) {
            held += 1;
        } else if *loser == format!("{round} finished Completed") {
            finished += 1;
        } else {
            panic!("round {round}: the other process must be refused, got {reports:?}");
        }
        wins[winner] += 1;
    }
    for mut child in children {
        drop(child.stdin.take());
        assert!(child.wait().expect("the child exits").success());
    }
    assert!(host_log.sent("tools/call").is_empty(), "nothing was sent before the approvals");
    let mut sent = lines(&dir.join("sent"));
    sent.sort();
    let mut expected: Vec<String> = (0..ROUNDS)
        .map(|round| format!("write_file {}", dir.join("files").join(format!("race-{round}.txt")).display()))
        .collect();
    expected.sort();
    assert_eq!(sent, expected, "each write_file reached the server once");
    for round in 0..ROUNDS {
        let text =
            std::fs::read_to_string(dir.join("files").join(format!("race-{round}.txt"))).expect("written");
        assert_eq!(text, format!("race-{round}"));
    }
    let mut asks = lines(&dir.join("asks"));
    asks.sort();
    let mut expected: Vec<String> =
        (0..ROUNDS).flat_map(|round| [format!("race-{round} 1"), format!("race-{round} 2")]).collect();
    expected.sort();
    assert_eq!(asks, expected, "each model reply was asked for once");
    let page = rt
        .block_on(journal::list(
            &host,
            &RunQuery::new().state(journal::StateFilter::Finished(Some(Status::Completed))).limit(1000),
        ))
        .expect("a listing");
    assert_eq!(page.runs().len(), ROUNDS, "every run completed");
    assert!(page.runs().iter().all(|run| run.attempts() == 2), "in two attempts: a refusal writes nothing");
    eprintln!(
        "two processes, {ROUNDS} rounds on one SQLite file: p1 ran {}, p2 ran {}; the other was refused \
         with LeaseHeld {held} times, Finished {finished} times",
        wins[0], wins[1]
    );
}

// Six processes opening one new journal at once.

const OPEN_SQLITE: &str = "six_processes_opening_one_new_sqlite_file_at_once_all_succeed";
const OPEN_POSTGRES: &str = "six_processes_opening_one_empty_postgres_database_at_once_all_succeed";
const OPENERS: usize = 6;

/// The opener child: for each `open <place> <run>` line, opens the journal there, takes the run
/// and ends its attempt.
fn opener() {
    let rt = child::runtime();
    report("ready");
    for line in std::io::stdin().lines().map_while(Result::ok) {
        let Some((place, run)) = line.strip_prefix("open ").and_then(|rest| rest.rsplit_once(' ')) else {
            break;
        };
        let result = rt.block_on(async {
            let journal = backend::open(place, &env(NAME), Duration::from_secs(30)).await?;
            let run = RunId::new(run).map_err(|error| error.to_string())?;
            let fresh = loopbound_testkit::conformance::fresh_row();
            use loopbound::journal::Journal as _;
            let stored = journal.acquire(&run, fresh).await.map_err(|error| error.to_string())?;
            let end = loopbound::journal::backend::Batch {
                entries: vec![
                    loopbound::journal::backend::Entry::State(RunState::Finished(Status::Completed)),
                    loopbound::journal::backend::Entry::Release,
                ],
            };
            journal
                .commit(&run, loopbound::journal::backend::Fence::Epoch(stored.run.epoch), end)
                .await
                .map_err(|error| error.to_string())
        });
        report(&match result {
            Ok(()) => "ok".to_owned(),
            Err(error) => format!("error {error}"),
        });
    }
}

/// Six openers open the place `place_of(round)` gives, every round at once.
fn open_at_once(test: &str, rounds: usize, place_of: impl Fn(usize) -> String) {
    let dir = scratch::dir("open-at-once");
    let mut children: Vec<Child> =
        (0..OPENERS).map(|i| spawn(test, "opener", &dir, "-", &format!("opener-{i}"))).collect();
    let mut outputs: Vec<_> = children.iter_mut().map(child::output).collect();
    for output in &mut outputs {
        assert_eq!(next_report(output).as_deref(), Some("ready"));
    }
    let rt = child::runtime();
    for round in 0..rounds {
        let place = place_of(round);
        for (i, child) in children.iter_mut().enumerate() {
            writeln!(child.stdin.as_mut().expect("piped"), "open {place} z-{i}").expect("the child reads");
        }
        let reports: Vec<String> =
            outputs.iter_mut().map(|output| next_report(output).expect("a report")).collect();
        assert!(
            reports.iter().all(|r| r == "ok"),
            "round {round}: every process opens the journal: {reports:?}"
        );
        let journal = rt.block_on(backend::open(&place, "checker", Duration::from_secs(30))).expect("opens");
        let page = rt.block_on(journal::list(&journal, &RunQuery::new())).expect("a listing");
        assert_eq!(page.runs().len(), OPENERS, "round {round}: every process's run is there");
    }
    for mut child in children {
        drop(child.stdin.take());
        assert!(child.wait().expect("the child exits").success());
    }
}

#[test]
fn six_processes_opening_one_new_sqlite_file_at_once_all_succeed() {
    if role().as_deref() == Some("opener") {
        opener();
        return;
    }
    let dir = scratch::dir("new-files");
    open_at_once(OPEN_SQLITE, 100, |round| {
        backend::sqlite_place(&dir.join(format!("f-{round}.db")), Synchronous::Full)
    });
}

#[test]
fn six_processes_opening_one_empty_postgres_database_at_once_all_succeed() {
    if role().as_deref() == Some("opener") {
        opener();
        return;
    }
    let Some(cluster) = Cluster::shared(Durability::Fast) else { return };
    open_at_once(OPEN_POSTGRES, 100, |round| {
        backend::postgres_place(&cluster.create_database(&format!("empty_{round}")).url)
    });
}

// An attempt killed, and one paused, past its lease.

const KILLED: &str = "a_sigkilled_attempt_is_taken_over_once_its_lease_expired_on_every_backend";
const PAUSED: &str =
    "a_sigstopped_attempt_past_its_lease_gets_lease_lost_and_runs_no_further_effect_on_every_backend";
/// The paused attempt's lease.
const LEASE: Duration = Duration::from_secs(1);
/// The killed attempt's lease: long enough for the parent to see it held after the kill.
const KILL_LEASE: Duration = Duration::from_secs(3);

/// Every durable backend's place for a test named `label`, in `dir`.
fn places(dir: &Path, label: &str) -> Vec<String> {
    let mut places = vec![
        backend::sqlite_place(&dir.join("full.db"), Synchronous::Full),
        backend::sqlite_place(&dir.join("normal.db"), Synchronous::Normal),
    ];
    if let Some(cluster) = Cluster::shared(Durability::Fast) {
        places.push(backend::postgres_place(&cluster.create_database(label).url));
    }
    places
}

/// One attempt of the refund task's short script on `run`, effects in `effects`; `observe` sees
/// each model step asked for.
async fn refund_attempt(
    journal: &AnyJournal,
    run: &str,
    sink: Arc<dyn EffectSink>,
    observe: impl Fn(usize) + Send + Sync,
) -> Result<loopbound::Outcome, RunError> {
    let tools = refund::tools(sink, Policy::Allow);
    let scope = Scope::builder().grants(refund::CAPABILITIES).build().expect("valid limits");
    let runtime = Runner::new(&tools.set, refund::model(refund::short_script(), observe));
    let run = RunId::new(run).expect("a valid run id");
    runtime.run_journaled(journal, &run, &scope, &mut refund::conversation(), |_| true).await
}

/// A sink that reports `inside` once the refund was applied, and then never returns.
struct Stuck(FileSink);

impl EffectSink for Stuck {
    fn apply(&self, tool: &str, key: Option<&str>) {
        self.0.apply(tool, key);
        if tool == "refund" {
            report("inside");
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
    }

    fn applied(&self) -> Vec<(String, Option<String>)> {
        self.0.applied()
    }
}

fn killed() {
    let dir = PathBuf::from(env(DIR));
    let rt = child::runtime();
    let journal = rt.block_on(backend::open(&env(PLACE), &env(NAME), KILL_LEASE)).expect("opens");
    let sink = Arc::new(Stuck(FileSink::new(dir.join("effects"))));
    let result = rt.block_on(refund_attempt(&journal, "killed-run", sink, |_| {}));
    report(&verdict(&result));
}

#[test]
fn a_sigkilled_attempt_is_taken_over_once_its_lease_expired_on_every_backend() {
    if role().as_deref() == Some("killed") {
        killed();
        return;
    }
    let dir = scratch::dir("killed");
    let rt = child::runtime();
    for place in places(&dir, "killed") {
        let effects = dir.join(format!("effects-{}", place.split(':').next().unwrap_or_default()));
        std::fs::create_dir_all(&effects).expect("a folder");
        let mut child = spawn(KILLED, "killed", &effects, &place, "doomed");
        let mut output = child::output(&mut child);
        assert_eq!(next_report(&mut output).as_deref(), Some("inside"), "{place}");
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        let host = rt.block_on(backend::open(&place, "taker", Duration::from_secs(30))).expect("opens");
        let sink: Arc<dyn EffectSink> = Arc::new(FileSink::new(effects.join("effects")));
        let refused = rt.block_on(refund_attempt(&host, "killed-run", Arc::clone(&sink), |_| {}));
        assert_eq!(verdict(&refused), "held doomed", "{place}: the dead attempt's lease holds the run");
        let record =
            rt.block_on(journal::inspect(&host, &RunId::new("killed-run").expect("an id"))).expect("inspect");
        assert_eq!((record.state(), record.is_running()), (RunState::Ambiguous(2), true), "{place}");
        std::thread::sleep(KILL_LEASE + Duration::from_millis(300));
        let resumed =
            rt.block_on(refund_attempt(&host, "killed-run", Arc::clone(&sink), |_| {})).expect("taken over");
        assert_eq!(resumed.status(), Status::Ambiguous, "{place}: the killed body's effect is ambiguous");
        let operation = RunId::new("killed-run").expect("an id").operation(2);
        assert_eq!(sink.count("refund"), 1, "{place}: the payments system shows the refund");
        let ran = Resolution::Ran { result: "Refunded 1500 cents on order 42.".to_owned() };
        rt.block_on(journal::reconcile(&host, &operation, ran, "ops")).expect("reconciled");
        let done =
            rt.block_on(refund_attempt(&host, "killed-run", Arc::clone(&sink), |_| {})).expect("resumed");
        assert_eq!(done.status(), Status::Completed, "{place}");
        assert_eq!(sink.count("refund"), 1, "{place}: the refund ran once");
    }
}

// An attempt killed, its run taken over at once by fresh processes of the same machine.

const KILLED_HERE: &str =
    "a_sigkilled_attempts_run_is_taken_over_at_once_by_one_fresh_process_of_its_machine_on_every_backend";
/// The lease of the processes named by `process_holder`: far longer than the takeover may take.
const LONG_LEASE: Duration = Duration::from_secs(60);
/// What "at once" means here: the takers' attempts end well within the dead one's lease.
const AT_ONCE: Duration = Duration::from_secs(10);

/// A child that names its leases as a process does (`journal::backend::process_holder`) and says so.
fn named_journal(rt: &tokio::runtime::Runtime) -> AnyJournal {
    let holder = journal::backend::process_holder();
    let journal = rt.block_on(backend::open(&env(PLACE), &holder, LONG_LEASE)).expect("opens");
    report(&format!("holder {holder}"));
    journal
}

fn doomed_here() {
    let dir = PathBuf::from(env(DIR));
    let rt = child::runtime();
    let journal = named_journal(&rt);
    let sink = Arc::new(Stuck(FileSink::new(dir.join("effects"))));
    let result = rt.block_on(refund_attempt(&journal, "killed-here", sink, |_| {}));
    report(&verdict(&result));
}

fn taker_here() {
    let dir = PathBuf::from(env(DIR));
    let rt = child::runtime();
    let journal = named_journal(&rt);
    let sink = Arc::new(FileSink::new(dir.join("effects")));
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).expect("the parent says go");
    let result = rt.block_on(refund_attempt(&journal, "killed-here", sink, |_| {}));
    report(&verdict(&result));
}

/// The holder a child reported.
fn holder_of(output: &mut child::Output) -> String {
    let line = next_report(output).expect("the child names its holder");
    line.strip_prefix("holder ").unwrap_or_else(|| panic!("a holder, not {line}")).to_owned()
}

#[test]
fn a_sigkilled_attempts_run_is_taken_over_at_once_by_one_fresh_process_of_its_machine_on_every_backend() {
    match role().as_deref() {
        Some("doomed") => return doomed_here(),
        Some("taker") => return taker_here(),
        _ => {}
    }
    let dir = scratch::dir("killed-here");
    let rt = child::runtime();
    let run = RunId::new("killed-here").expect("an id");
    for place in places(&dir, "killed_here") {
        let effects = dir.join(format!("effects-{}", place.split(':').next().unwrap_or_default()));
        std::fs::create_dir_all(&effects).expect("a folder");
        let mut doomed = spawn(KILLED_HERE, "doomed", &effects, &place, "-");
        let mut output = child::output(&mut doomed);
        let dead = holder_of(&mut output);
        assert_eq!(next_report(&mut output).as_deref(), Some("inside"), "{place}");
        assert!(!journal::backend::is_dead_holder(&dead), "{place}: {dead} is alive inside the refund");
        let mut takers: Vec<Child> =
            (0..2).map(|_| spawn(KILLED_HERE, "taker", &effects, &place, "-")).collect();
        let mut outputs: Vec<_> = takers.iter_mut().map(child::output).collect();
        let names: Vec<String> = outputs.iter_mut().map(holder_of).collect();
        doomed.kill().expect("SIGKILL");
        doomed.wait().expect("reaped");
        assert!(journal::backend::is_dead_holder(&dead), "{place}: {dead} is gone");
        let host = rt.block_on(backend::open(&place, "host", LONG_LEASE)).expect("opens");
        let record = rt.block_on(journal::inspect(&host, &run)).expect("inspect");
        let lease = record.lease().expect("the dead attempt's lease");
        assert_eq!(
            (lease.holder.as_str(), record.state()),
            (dead.as_str(), RunState::Ambiguous(2)),
            "{place}"
        );
        assert!(lease.remaining > LONG_LEASE - AT_ONCE, "{place}: {:?} left of its lease", lease.remaining);

        let go = std::time::Instant::now();
        for taker in &mut takers {
            writeln!(taker.stdin.as_mut().expect("piped"), "go").expect("the taker reads");
        }
        let verdicts: Vec<String> =
            outputs.iter_mut().map(|output| next_report(output).expect("a verdict")).collect();
        let took = go.elapsed();
        for mut taker in takers {
            assert!(taker.wait().expect("the taker exits").success(), "{place}");
        }
        assert!(took < AT_ONCE, "{place}: taken over in {took:?}, within a {LONG_LEASE:?} lease");
        let ambiguous = "outcome Ambiguous".to_owned();
        let first =
            verdicts.iter().position(|v| *v == ambiguous).unwrap_or_else(|| panic!("{place}: {verdicts:?}"));
        let other = &verdicts[1 - first];
        assert!(
            *other == format!("held {}", names[first]) || *other == ambiguous,
            "{place}: the other taker is refused while the first holds the run, or comes after it: {verdicts:?}"
        );
        let record = rt.block_on(journal::inspect(&host, &run)).expect("inspect");
        let attempts = if *other == ambiguous { 3 } else { 2 };
        assert_eq!(
            (record.state(), record.is_running(), record.attempts()),
            (RunState::Ambiguous(2), false, attempts),
            "{place}: {verdicts:?}"
        );
        let sink = FileSink::new(effects.join("effects"));
        assert_eq!(sink.count("refund"), 1, "{place}: the killed body applied the refund, no taker ran it");
        let ran = Resolution::Ran { result: "Refunded 1500 cents on order 42.".to_owned() };
        rt.block_on(journal::reconcile(&host, &run.operation(2), ran, "ops")).expect("reconciled");
        let done = rt.block_on(refund_attempt(&host, "killed-here", Arc::new(sink.clone()), |_| {}));
        assert_eq!(verdict(&done), "outcome Completed", "{place}");
        assert_eq!(sink.count("refund"), 1, "{place}: the refund ran once");
        eprintln!(
            "{place}: the dead attempt's run taken over in {took:?} of its {LONG_LEASE:?} lease: {verdicts:?}"
        );
    }
}

fn paused() {
    let dir = PathBuf::from(env(DIR));
    let rt = child::runtime();
    let journal = rt.block_on(backend::open(&env(PLACE), &env(NAME), LEASE)).expect("opens");
    let sink = Arc::new(FileSink::new(dir.join("effects")));
    let result = rt.block_on(refund_attempt(&journal, "paused-run", sink, |step| {
        if step == 2 {
            report("asking");
            // The parent stops this process on reading the line; give it the time to.
            std::thread::sleep(Duration::from_millis(500));
        }
    }));
    report(&verdict(&result));
}

#[test]
fn a_sigstopped_attempt_past_its_lease_gets_lease_lost_and_runs_no_further_effect_on_every_backend() {
    if role().as_deref() == Some("paused") {
        paused();
        return;
    }
    let dir = scratch::dir("paused");
    let rt = child::runtime();
    for place in places(&dir, "paused") {
        let effects = dir.join(format!("effects-{}", place.split(':').next().unwrap_or_default()));
        std::fs::create_dir_all(&effects).expect("a folder");
        let mut child = spawn(PAUSED, "paused", &effects, &place, "paused");
        let mut output = child::output(&mut child);
        assert_eq!(next_report(&mut output).as_deref(), Some("asking"), "{place}");
        child::pause(&child);
        std::thread::sleep(LEASE + Duration::from_millis(500));
        let taker = rt.block_on(backend::open(&place, "taker", Duration::from_secs(30))).expect("opens");
        let sink: Arc<dyn EffectSink> = Arc::new(FileSink::new(effects.join("effects")));
        let taken = rt.block_on(refund_attempt(&taker, "paused-run", Arc::clone(&sink), |_| {}));
        let applied_at_takeover = sink.applied();
        child::resume(&child);
        assert_eq!(verdict(&taken), "outcome Completed", "{place}: the taker finishes the run");
        assert_eq!(
            next_report(&mut output).as_deref(),
            Some("lost"),
            "{place}: the paused attempt's next write fails"
        );
        assert!(child.wait().expect("the child exits").success());
        assert_eq!(sink.applied(), applied_at_takeover, "{place}: the paused attempt ran no effect");
        assert_eq!(
            applied_at_takeover,
            [("refund".to_owned(), Some("paused-run/op/2".to_owned()))],
            "{place}: the refund ran once"
        );
    }
}

// A run defined in one process, killed after its effect's result, resumed from its id alone.

const DEFINED: &str =
    "a_run_killed_after_its_effect_resumes_in_a_fresh_process_from_its_id_alone_on_every_backend";

/// The journal of the defining child: after the commit that records operation 2's result, the
/// child reports `recorded` and waits for its SIGKILL.
struct KilledAfterResult(AnyJournal);

impl loopbound::journal::Journal for KilledAfterResult {
    fn lease(&self) -> Duration {
        self.0.lease()
    }

    async fn acquire(
        &self,
        run: &RunId,
        fresh: loopbound::journal::backend::RunRow,
    ) -> Result<loopbound::journal::backend::StoredRun, JournalError> {
        self.0.acquire(run, fresh).await
    }

    async fn renew(&self, run: &RunId, epoch: u64) -> Result<(), JournalError> {
        self.0.renew(run, epoch).await
    }

    async fn load(
        &self,
        run: &RunId,
    ) -> Result<Option<loopbound::journal::backend::StoredRun>, JournalError> {
        self.0.load(run).await
    }

    async fn commit(
        &self,
        run: &RunId,
        fence: loopbound::journal::backend::Fence,
        batch: loopbound::journal::backend::Batch,
    ) -> Result<(), JournalError> {
        let records = batch
            .entries
            .iter()
            .any(|entry| matches!(entry, loopbound::journal::backend::Entry::Call(call) if call.operation == Some(2)));
        self.0.commit(run, fence, batch).await?;
        if records {
            report("recorded");
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        Ok(())
    }

    async fn list_rows(
        &self,
        query: &RunQuery,
    ) -> Result<Vec<loopbound::journal::backend::ListedRow>, JournalError> {
        self.0.list_rows(query).await
    }
}

/// The pool store beside the journal at `place`: the PostgreSQL database itself, or a SQLite
/// file in `dir`.
fn pools_beside(place: &str, dir: &Path) -> String {
    match place.split_once(':') {
        Some(("postgres", url)) => format!("postgres:{url}"),
        _ => format!("sqlite:{}", dir.join("pools.db").display()),
    }
}

/// The tenant's pool the defined run draws from.
fn tenant_pool() -> PoolName {
    PoolName::new("tenant:acme").expect("a valid pool name")
}

/// The refund task's short script, each reply billing 20 input and 10 output tokens.
fn billed_script() -> Vec<ModelReply> {
    refund::short_script().into_iter().map(|reply| reply.with_usage(Usage::new(20, 10))).collect()
}

fn definer() {
    let dir = PathBuf::from(env(DIR));
    let rt = child::runtime();
    let journal =
        KilledAfterResult(rt.block_on(backend::open(&env(PLACE), &env(NAME), KILL_LEASE)).expect("opens"));
    let pools = rt.block_on(pool::open(&pools_beside(&env(PLACE), &dir))).expect("the pools open");
    let labels = journal::Labels::new().with("tenant", "acme").expect("a valid label");
    let scope = Scope::builder()
        .grants(refund::CAPABILITIES)
        .limits(loopbound::Limits::default().with_model_calls(5).with_tool_calls(3))
        .labels(labels)
        .pools(pools, [tenant_pool().as_str()])
        .pool_output_cap(200)
        .build()
        .expect("valid limits");
    let tools = refund::tools(Arc::new(FileSink::new(dir.join("effects"))), Policy::Allow);
    let runtime = Runner::new(&tools.set, refund::model(billed_script(), |_| {}));
    let run = RunId::new("defined-run").expect("a valid id");
    let result =
        rt.block_on(runtime.run_journaled(&journal, &run, &scope, &mut refund::conversation(), refunded));
    report(&verdict(&result));
}

/// The completion condition that survives a resume in another process: the record says the
/// refund succeeded, whichever attempt ran it.
fn refunded(ended: loopbound::Ended<'_, ()>) -> bool {
    ended.has_succeeded("refund")
}

#[test]
fn a_run_killed_after_its_effect_resumes_in_a_fresh_process_from_its_id_alone_on_every_backend() {
    if role().as_deref() == Some("definer") {
        definer();
        return;
    }
    let dir = scratch::dir("defined");
    let rt = child::runtime();
    for place in places(&dir, "defined") {
        let effects = dir.join(format!("effects-{}", place.split(':').next().unwrap_or_default()));
        std::fs::create_dir_all(&effects).expect("a folder");
        let pools = rt.block_on(pool::open(&pools_beside(&place, &effects))).expect("the pools open");
        let budget = PoolBudget::default().with_tokens(100_000);
        rt.block_on(pools.define(tenant_pool().as_str(), budget)).expect("the tenant's pool");
        let mut child = spawn(DEFINED, "definer", &effects, &place, "definer");
        let mut output = child::output(&mut child);
        assert_eq!(next_report(&mut output).as_deref(), Some("recorded"), "{place}");
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        std::thread::sleep(KILL_LEASE + Duration::from_millis(300));

        // This process has the run's id, its tools, and nothing else.
        let host = rt.block_on(backend::open(&place, "fresh", Duration::from_secs(30))).expect("opens");
        let run = RunId::new("defined-run").expect("a valid id");
        let definition = rt.block_on(journal::scope_of(&host, &run)).expect("a definition");
        assert_eq!(
            definition.build().err(),
            Some(LimitsError::PoolStoreMissing),
            "{place}: a resume needs the pools' store"
        );
        let scope = rt
            .block_on(journal::scope_of(&host, &run))
            .expect("a definition")
            .pool_store(Arc::clone(&pools))
            .build()
            .expect("valid");
        let terms = scope.pools().map(PoolDraw::terms);
        assert_eq!(terms, Some(PoolTerms::new([tenant_pool()], DEFAULT_LEASE, 200)), "{place}: the pools");
        let mut granted = refund::CAPABILITIES.to_vec();
        granted.sort_unstable();
        assert_eq!(scope.capabilities().collect::<Vec<_>>(), granted, "{place}: the grants");
        assert_eq!(
            (scope.limits().model_calls(), scope.limits().tool_calls()),
            (5, 3),
            "{place}: the limits"
        );
        assert_eq!(scope.labels().get("tenant"), Some("acme"), "{place}: the labels");
        let sink = FileSink::new(effects.join("effects"));
        let tools = refund::tools(Arc::new(sink.clone()), Policy::Allow);
        let runtime = Runner::new(&tools.set, refund::model(billed_script(), |_| {}));
        let outcome = rt
            .block_on(runtime.run_journaled(&host, &run, &scope, &mut Vec::new(), refunded))
            .expect("the resume runs");
        assert_eq!(outcome.status(), Status::Completed, "{place}: completed by the record-based condition");
        assert_eq!(sink.count("refund"), 1, "{place}: the refund ran once, in the killed process");
        let state = rt.block_on(pools.state(tenant_pool().as_str())).expect("the pool's state");
        assert_eq!(
            (state.settled.calls, state.settled.tokens, state.reserved.tokens),
            (3, 90, 0),
            "{place}: the two model calls of the killed process and the resume's one, each charged"
        );
        let record = rt.block_on(journal::inspect(&host, &run)).expect("inspect");
        assert!(
            record.succeeded().any(|(tool, _)| tool == "refund"),
            "{place}: the record says the refund succeeded"
        );
    }
}

// A cancel requested from another process.

const CANCELLED: &str =
    "a_cancel_requested_from_another_process_ends_the_attempt_within_a_second_on_every_backend";

fn waiting() {
    let rt = child::runtime();
    let journal =
        rt.block_on(backend::open(&env(PLACE), &env(NAME), Duration::from_secs(30))).expect("opens");
    let model = loopbound::scripted::Scripted::new(|_, _| {
        report("asking");
        loopbound::scripted::Step::Hang
    });
    let runtime = Runner::new(&ToolSet::default(), model);
    let scope = Scope::builder().build().expect("valid limits");
    let run = RunId::new("waiting-run").expect("a valid run id");
    let result =
        rt.block_on(runtime.run_journaled(&journal, &run, &scope, &mut vec![Message::user("Hi.")], |_| true));
    report(&verdict(&result));
}

#[test]
fn a_cancel_requested_from_another_process_ends_the_attempt_within_a_second_on_every_backend() {
    if role().as_deref() == Some("waiting") {
        waiting();
        return;
    }
    let dir = scratch::dir("cancelled");
    let rt = child::runtime();
    let run = RunId::new("waiting-run").expect("a valid run id");
    for place in places(&dir, "cancelled") {
        let mut child = spawn(CANCELLED, "waiting", &dir, &place, "waiter");
        let mut output = child::output(&mut child);
        assert_eq!(next_report(&mut output).as_deref(), Some("asking"), "{place}");
        let host = rt.block_on(backend::open(&place, "host", Duration::from_secs(30))).expect("opens");
        rt.block_on(journal::cancel(&host, &run, "ops")).expect("the request is recorded");
        let requested = std::time::Instant::now();
        let ended = next_report(&mut output);
        let took = requested.elapsed();
        assert_eq!(ended.as_deref(), Some("error the run was cancelled by its caller"), "{place}");
        assert!(took < Duration::from_secs(1), "{place}: the attempt ended {took:?} after the request");
        assert!(child.wait().expect("reaped").success(), "{place}");
        let record = rt.block_on(journal::inspect(&host, &run)).expect("inspect");
        let last = record.events().last().expect("events");
        assert_eq!(
            (last.to_string(), last.decided_by()),
            ("Cancelled run 1 by ops".to_owned(), Some("ops")),
            "{place}"
        );
        assert_eq!((record.state(), record.is_running()), (RunState::Open, false), "{place}: resumable");
        assert_eq!(rt.block_on(host.cancel_requested(&run)), Ok(None), "{place}: honoured and cleared");
    }
}
