//! Journaled workers in separate processes (this test binary run again as a child): two racing
//! for one run of the refund task, many rounds; and one paused with SIGSTOP past its lease, in
//! the middle of a run, while another worker takes the run over and finishes it.
//!
//! Effects are counted outside the runs, in a file that each `effect` body appends to and
//! syncs before it returns ([`FileSink`]), so a count holds whatever happened to the process.

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::time::Duration;

use loopbound::journal::{JournalError, RunId};
use loopbound::tool::Policy;
use loopbound::{RunError, Runner, Scope, Status};
use loopbound_postgres::PostgresJournal;
use loopbound_testkit::refund::{self, EffectSink, FileSink};
use loopbound_testkit::scratch;

use crate::config;
use crate::processes::{child_start, command, next_report, report, role, runtime};

/// The folder holding the effects file; given to the children.
const DIR: &str = "LOOPBOUND_POSTGRES_TEST_DIR";

/// One attempt of `run` with the refund task's short script; `observe` sees each model step
/// asked for.
async fn attempt(
    journal: &PostgresJournal,
    run: &str,
    effects: &Path,
    observe: impl Fn(usize) + Send + Sync,
) -> Result<Status, RunError> {
    let sink = Arc::new(FileSink::new(effects));
    let tools = refund::tools(sink as Arc<dyn EffectSink>, Policy::Allow);
    let scope = Scope::builder().grants(refund::CAPABILITIES).build().expect("valid limits");
    let runtime = Runner::new(&tools.set, refund::model(refund::short_script(), observe));
    let run = RunId::new(run).expect("a valid run id");
    let outcome = runtime.run_journaled(journal, &run, &scope, &mut refund::conversation(), |_| true).await?;
    Ok(outcome.status())
}

/// How a child's attempt ended, as one word and what it names.
fn verdict(result: &Result<Status, RunError>) -> String {
    match result {
        Ok(status) => format!("outcome {status}"),
        Err(RunError::Journal(JournalError::LeaseHeld { holder, .. })) => format!("held {holder}"),
        Err(RunError::Journal(JournalError::Finished(status))) => format!("finished {status}"),
        Err(RunError::Journal(JournalError::LeaseLost)) => "lost".to_owned(),
        Err(other) => format!("error {other}"),
    }
}

fn child_journal(
    rt: &tokio::runtime::Runtime,
    url: &str,
    name: loopbound_postgres::WorkerId,
    lease: Duration,
) -> PostgresJournal {
    rt.block_on(PostgresJournal::connect(&config(url)))
        .expect("the child connects")
        .with_worker(name)
        .with_lease(lease)
        .expect("a valid lease")
}

const RACE: &str =
    "journal_processes::two_journaled_workers_racing_for_one_run_one_runs_it_and_the_other_is_refused";
const ROUNDS: usize = 100;

/// The racer child: for each `round N` on its input, runs (or tries to) run `race-N`.
fn racer() {
    let (rt, url, name) = child_start();
    let effects = PathBuf::from(std::env::var(DIR).expect("the parent gives the folder")).join("effects");
    let journal = child_journal(&rt, &url, name, Duration::from_secs(60));
    report("ready");
    for line in std::io::stdin().lines().map_while(Result::ok) {
        let Some(round) = line.strip_prefix("round ").and_then(|n| n.parse::<usize>().ok()) else { break };
        let result = rt.block_on(attempt(&journal, &format!("race-{round}"), &effects, |_| {}));
        report(&format!("{round} {}", verdict(&result)));
    }
}

#[test]
fn two_journaled_workers_racing_for_one_run_one_runs_it_and_the_other_is_refused() {
    if role().as_deref() == Some("journal-racer") {
        racer();
        return;
    }
    let Some(cluster) = crate::cluster() else { return };
    let database = cluster.create_database("journal_race");
    // The schema exists before the children start, so neither waits on the other's migration.
    drop(runtime().block_on(loopbound_postgres::Store::connect(&config(&database.url))).expect("migrated"));
    let dir = scratch::dir("pg-journal-race");
    let mut children: Vec<Child> = ["p1", "p2"]
        .iter()
        .map(|name| {
            command(RACE, "journal-racer", &database.url, name)
                .env(DIR, &dir)
                .spawn()
                .expect("the test binary runs again")
        })
        .collect();
    let mut outputs: Vec<_> = children
        .iter_mut()
        .map(|child| BufReader::new(child.stdout.take().expect("piped")).lines())
        .collect();
    for output in &mut outputs {
        assert_eq!(next_report(output).as_deref(), Some("ready"));
    }
    let (mut wins, mut held, mut finished) = ([0usize; 2], 0usize, 0usize);
    for round in 0..ROUNDS {
        for child in &mut children {
            writeln!(child.stdin.as_mut().expect("piped"), "round {round}").expect("the child reads");
        }
        let reports: Vec<String> =
            outputs.iter_mut().map(|output| next_report(output).expect("one report per round")).collect();
        let completed = format!("{round} outcome Completed");
        let winner = match (reports[0].as_str(), reports[1].as_str()) {
            (won, _) if won == completed => 0,
            (_, won) if won == completed => 1,
            _ => panic!("round {round}: nobody completed the run: {reports:?}"),
        };
        let loser = &reports[1 - winner];
        let holder = ["p1", "p2"][winner];
        if *loser == format!("{round} held {holder}") {
            held += 1;
        } else if *loser == format!("{round} finished Completed") {
            finished += 1;
        } else {
            panic!("round {round}: the other worker must be refused, got {reports:?}");
        }
        wins[winner] += 1;
    }
    for mut child in children {
        drop(child.stdin.take());
        assert!(child.wait().expect("the child exits").success());
    }
    let applied = FileSink::new(dir.join("effects")).applied();
    for round in 0..ROUNDS {
        let key = format!("race-{round}/op/2");
        let refunds =
            applied.iter().filter(|(tool, k)| tool == "refund" && k.as_deref() == Some(&key)).count();
        assert_eq!(refunds, 1, "round {round}: the refund ran {refunds} times");
    }
    assert_eq!(applied.len(), ROUNDS, "no other effect ran: {applied:?}");
    assert_eq!(
        cluster.execute(
            &database.name,
            "SELECT count(*), sum(attempts), min(epoch), max(epoch) FROM loopbound_runs \
             WHERE state = 'finished' AND state_status = 'Completed'"
        ),
        format!("{ROUNDS}|{ROUNDS}|1|1"),
        "every run completed in one attempt: a refusal writes nothing"
    );
    eprintln!(
        "two journaled workers, {ROUNDS} rounds: p1 ran {}, p2 ran {}; the other was refused with \
         LeaseHeld {held} times, Finished {finished} times",
        wins[0], wins[1]
    );
}

const STALE: &str =
    "journal_processes::a_journaled_worker_paused_past_its_lease_gets_lease_lost_and_runs_no_effect_after";
const STALE_LEASE: Duration = Duration::from_secs(1);

/// The paused child: runs `stale-run` under a 1 s lease; when the model is asked for step 2
/// (the reply that calls `refund`) it reports `asking` and lets the parent pause it.
fn paused() {
    let (rt, url, name) = child_start();
    let effects = PathBuf::from(std::env::var(DIR).expect("the parent gives the folder")).join("effects");
    let journal = child_journal(&rt, &url, name, STALE_LEASE);
    let result = rt.block_on(attempt(&journal, "stale-run", &effects, |step| {
        if step == 2 {
            report("asking");
            // The parent stops this process on reading the line; give it the time to.
            std::thread::sleep(Duration::from_millis(500));
        }
    }));
    report(&verdict(&result));
}

#[test]
fn a_journaled_worker_paused_past_its_lease_gets_lease_lost_and_runs_no_effect_after() {
    if role().as_deref() == Some("journal-paused") {
        paused();
        return;
    }
    let Some(cluster) = crate::cluster() else { return };
    let database = cluster.create_database("journal_stale");
    let rt = runtime();
    let taker = rt
        .block_on(PostgresJournal::connect(&config(&database.url)))
        .expect("the taker connects")
        .with_worker(crate::worker("taker"));
    let dir = scratch::dir("pg-journal-stale");
    let effects = dir.join("effects");
    let mut child = command(STALE, "journal-paused", &database.url, "paused")
        .env(DIR, &dir)
        .spawn()
        .expect("the test binary runs again");
    let mut output = BufReader::new(child.stdout.take().expect("piped")).lines();
    assert_eq!(next_report(&mut output).as_deref(), Some("asking"));

    loopbound_testkit::child::pause(&child);
    std::thread::sleep(STALE_LEASE + Duration::from_millis(500));
    let taken = rt.block_on(attempt(&taker, "stale-run", &effects, |_| {}));
    let applied_at_takeover = FileSink::new(&effects).applied();
    loopbound_testkit::child::resume(&child);

    assert_eq!(verdict(&taken), "outcome Completed", "the taker finishes the run");
    assert_eq!(next_report(&mut output).as_deref(), Some("lost"), "the resumed worker's next write fails");
    assert!(child.wait().expect("the child exits").success());
    let applied = FileSink::new(&effects).applied();
    assert_eq!(applied, applied_at_takeover, "the resumed worker ran no effect");
    assert_eq!(applied, [("refund".to_owned(), Some("stale-run/op/2".to_owned()))], "the refund ran once");
    assert_eq!(
        cluster.execute(&database.name, "SELECT epoch, attempts, state, state_status FROM loopbound_runs"),
        "2|2|finished|Completed"
    );
}
