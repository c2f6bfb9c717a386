//! Workers in separate processes (this test binary run again as a child, told its role by
//! environment): two racing for one run many rounds, and one paused past its lease with
//! SIGSTOP while another takes the run over.

use std::io::{BufRead, BufReader, Lines, Write as _};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use loopbound_postgres::{Error, Store};

use crate::{config, worker};

/// The child's role; absent in the parent.
const ROLE: &str = "LOOPBOUND_POSTGRES_TEST_ROLE";
const URL: &str = "LOOPBOUND_POSTGRES_TEST_URL";
const WORKER: &str = "LOOPBOUND_POSTGRES_TEST_WORKER";
/// Marks the lines a child reports, apart from what libtest prints on the same stream.
const MARK: &str = "@@ ";

pub(crate) fn role() -> Option<String> {
    std::env::var(ROLE).ok()
}

pub(crate) fn report(line: &str) {
    println!("{MARK}{line}");
}

/// The command that runs this binary's test `test` as a child with `role`, connected to `url`
/// as `name`.
pub(crate) fn command(test: &str, role: &str, url: &str, name: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("the test binary"));
    command
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(URL, url)
        .env(WORKER, name)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    command
}

/// Runs this binary's test `test` as a child with `role`, connected to `url` as `name`.
fn spawn(test: &str, role: &str, url: &str, name: &str) -> Child {
    command(test, role, url, name).spawn().expect("the test binary runs again")
}

/// The child's next report, or `None` when its output ends.
pub(crate) fn next_report(lines: &mut Lines<BufReader<ChildStdout>>) -> Option<String> {
    lines.map_while(Result::ok).find_map(|line| line.split_once(MARK).map(|(_, report)| report.to_owned()))
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}

/// A child's start: a runtime, the URL and the worker id its parent gave.
pub(crate) fn child_start() -> (tokio::runtime::Runtime, String, loopbound_postgres::WorkerId) {
    let url = std::env::var(URL).expect("the parent gives the URL");
    let name = worker(&std::env::var(WORKER).expect("the parent gives the worker id"));
    (runtime(), url, name)
}

/// Inserts `row` into `table` under `lease`.
async fn write(
    store: &Store,
    lease: &mut loopbound_postgres::Lease,
    sql: &'static str,
    n: i32,
) -> Result<u64, Error> {
    let (run, who) = (lease.run().to_owned(), lease.worker().as_str().to_owned());
    store
        .fenced(lease, |transaction| {
            Box::pin(async move { Ok(transaction.execute(sql, &[&run, &who, &n]).await?) })
        })
        .await
}

const RACE: &str = "processes::two_processes_racing_for_one_run_one_runs_it_every_round";
const ROUNDS: usize = 150;

/// The racer child: for each `round N` on its input, tries to take run `race-N`; the winner
/// records the round's effect under its lease. Reports `won N` or `held N HOLDER`.
fn racer() {
    let (runtime, url, name) = child_start();
    let store = runtime.block_on(Store::connect(&config(&url))).expect("the child connects");
    report("ready");
    for line in std::io::stdin().lines().map_while(Result::ok) {
        let Some(round) = line.strip_prefix("round ").and_then(|n| n.parse::<i32>().ok()) else { break };
        let run = format!("race-{round}");
        match runtime.block_on(store.acquire(&run, &name, Duration::from_secs(60))) {
            Ok(mut lease) => {
                let sql = "INSERT INTO effects (run_id, worker, round) VALUES ($1, $2, $3)";
                runtime
                    .block_on(write(&store, &mut lease, sql, round))
                    .expect("the winner records its effect");
                report(&format!("won {round}"));
            }
            Err(Error::LeaseHeld { holder, .. }) => report(&format!("held {round} {holder}")),
            Err(other) => report(&format!("error {round} {other}")),
        }
    }
}

#[test]
fn two_processes_racing_for_one_run_one_runs_it_every_round() {
    if role().as_deref() == Some("racer") {
        racer();
        return;
    }
    let Some(cluster) = crate::cluster() else { return };
    let database = cluster.create_database("race_processes");
    let _ = cluster.execute(
        &database.name,
        "CREATE TABLE effects (run_id text NOT NULL, worker text NOT NULL, round int)",
    );
    let mut children: Vec<Child> =
        ["p1", "p2"].iter().map(|name| spawn(RACE, "racer", &database.url, name)).collect();
    let mut outputs: Vec<_> = children
        .iter_mut()
        .map(|child| BufReader::new(child.stdout.take().expect("piped")).lines())
        .collect();
    for output in &mut outputs {
        assert_eq!(next_report(output).as_deref(), Some("ready"));
    }
    let mut wins = [0usize; 2];
    for round in 0..ROUNDS {
        for child in &mut children {
            writeln!(child.stdin.as_mut().expect("piped"), "round {round}").expect("the child reads");
        }
        let reports: Vec<String> =
            outputs.iter_mut().map(|output| next_report(output).expect("one report per round")).collect();
        let winner = match (reports[0].as_str(), reports[1].as_str()) {
            (won, held) if won == format!("won {round}") && held == format!("held {round} p1") => 0,
            (held, won) if won == format!("won {round}") && held == format!("held {round} p2") => 1,
            _ => panic!("round {round}: expected one winner and one refusal naming it, got {reports:?}"),
        };
        wins[winner] += 1;
    }
    for mut child in children {
        drop(child.stdin.take());
        assert!(child.wait().expect("the child exits").success());
    }
    eprintln!("two processes, {ROUNDS} rounds: p1 won {}, p2 won {}", wins[0], wins[1]);
    assert_eq!(
        cluster.execute(&database.name, "SELECT count(*), count(DISTINCT run_id) FROM effects"),
        format!("{ROUNDS}|{ROUNDS}")
    );
    assert_eq!(
        cluster.execute(&database.name, "SELECT count(*) FROM effects WHERE run_id <> 'race-' || round"),
        "0"
    );
}

const STALE: &str = "processes::a_worker_paused_past_its_lease_gets_lease_lost_and_runs_no_further_effect";
const STALE_LEASE: Duration = Duration::from_secs(1);

/// The paused child: takes `stale-run`, then every 200 ms records one step under its lease and,
/// once recorded, runs the step's "effect" (reports `effect N`); stops at `LeaseLost`.
fn paused() {
    let (runtime, url, name) = child_start();
    let config = config(&url).with_lease(STALE_LEASE).expect("a valid lease");
    let store = runtime.block_on(Store::connect(&config)).expect("the child connects");
    let mut lease =
        runtime.block_on(store.acquire("stale-run", &name, config.lease())).expect("the run is free");
    report(&format!("acquired {}", lease.epoch()));
    for step in 1..=100 {
        std::thread::sleep(Duration::from_millis(200));
        let sql = "INSERT INTO steps (run_id, worker, step) VALUES ($1, $2, $3)";
        match runtime.block_on(write(&store, &mut lease, sql, step)) {
            Ok(_) => report(&format!("effect {step}")),
            Err(Error::LeaseLost { epoch, .. }) => {
                report(&format!("lost {step} {epoch}"));
                return;
            }
            Err(Error::Unavailable(_)) => report(&format!("unavailable {step}")),
            Err(other) => panic!("step {step}: {other:?}"),
        }
    }
    report("never lost");
}

#[test]
fn a_worker_paused_past_its_lease_gets_lease_lost_and_runs_no_further_effect() {
    if role().as_deref() == Some("paused") {
        paused();
        return;
    }
    let Some(cluster) = crate::cluster() else { return };
    let database = cluster.create_database("stale_process");
    let _ = cluster
        .execute(&database.name, "CREATE TABLE steps (run_id text NOT NULL, worker text NOT NULL, step int)");
    let mut child = spawn(STALE, "paused", &database.url, "paused");
    let mut output = BufReader::new(child.stdout.take().expect("piped")).lines();
    assert_eq!(next_report(&mut output).as_deref(), Some("acquired 1"));
    let mut before = Vec::new();
    while before.len() < 3 {
        before.push(next_report(&mut output).expect("the child works"));
    }
    assert_eq!(before, ["effect 1", "effect 2", "effect 3"]);

    loopbound_testkit::child::pause(&child);
    std::thread::sleep(STALE_LEASE + Duration::from_millis(500));
    let runtime = runtime();
    let store = runtime.block_on(Store::connect(&config(&database.url))).unwrap();
    let taken = runtime.block_on(store.acquire("stale-run", &worker("taker"), Duration::from_secs(60)));
    let recorded_at_takeover =
        cluster.execute(&database.name, "SELECT count(*) FROM steps WHERE worker = 'paused'");
    loopbound_testkit::child::resume(&child);
    let taken = taken.expect("the expired lease is taken over");
    assert_eq!(taken.epoch(), 2);

    let after: Vec<String> = std::iter::from_fn(|| next_report(&mut output)).collect();
    assert!(child.wait().expect("the child exits").success());
    let (last, resumed) = after.split_last().expect("the child reports after resuming");
    assert!(last.starts_with("lost ") && last.ends_with(" 1"), "{after:?}");
    // A step whose commit preceded the pause may still report its effect after resuming; no
    // step recorded after the takeover exists, so no effect ran under a stale lease.
    let effects = before.len() + resumed.iter().filter(|line| line.starts_with("effect ")).count();
    assert_eq!(recorded_at_takeover, effects.to_string(), "{before:?} {after:?}");
    assert_eq!(
        cluster.execute(&database.name, "SELECT count(*) FROM steps WHERE worker = 'paused'"),
        recorded_at_takeover
    );
    eprintln!("paused worker: {} effects before the takeover, then {last:?}", effects);
}
