//! The live stream of every scripted scenario: its audit events are the outcome's events, in
//! order, in both compositions, on both call paths, one after another and in parallel, plain
//! and journaled; its last update is the outcome. Also `demo330 --watch`'s golden transcripts,
//! written under tokio's paused clock (`UPDATE_GOLDEN=1` rewrites them).

use std::fs;
use std::path::{Path, PathBuf};

use clap::Parser;
use loopbound::journal::{MemoryJournal, RunId};
use loopbound::watch::{self, Update, Updates};
use loopbound::{Concurrency, Outcome, RunError, Scope, Status};
use loopbound_demos::console::{self, Cli};
use loopbound_demos::scenario::Scenario;
use loopbound_fixtures::Composition;
use loopbound_fixtures::review::{self, Review};
use loopbound_testkit::golden;
use tokio_util::sync::CancellationToken;

const COMPOSITIONS: [Composition; 2] = [Composition::Harness, Composition::Simple];

/// One way of running a scenario.
#[derive(Clone, Copy, Debug)]
struct Way {
    composition: Composition,
    streaming: bool,
    parallel: bool,
    journaled: bool,
}

fn ways() -> Vec<Way> {
    let mut ways = Vec::new();
    for composition in COMPOSITIONS {
        for streaming in [false, true] {
            for parallel in [false, true] {
                for journaled in [false, true] {
                    ways.push(Way { composition, streaming, parallel, journaled });
                }
            }
        }
    }
    ways
}

async fn watched_run(scenario: Scenario, way: Way) -> (Result<Outcome, RunError>, Vec<Update>) {
    let tools = review::tools();
    let (feed, mut updates) = watch::channel();
    let scope = Scope::builder()
        .grants(scenario.capabilities().iter().copied())
        .limits(scenario.limits())
        .progress(scenario.progress())
        .watch(feed)
        .state(Review::default())
        .build()
        .expect("the scenario's limits");
    let mut runtime = way.composition.runner(&tools.set, scenario.transport()).streaming(way.streaming);
    if way.parallel {
        runtime = runtime.parallel(Concurrency::new(4).expect("a cap of 4"));
    }
    let mut conversation = review::conversation();
    let result = if way.journaled {
        let journal = MemoryJournal::default();
        let run = RunId::new(format!("watch-{}", scenario.name())).expect("a run id");
        runtime
            .run_journaled(&journal, &run, &scope, &mut conversation, |ended| ended.state().completed())
            .await
    } else {
        runtime.run(&scope, &mut conversation, |ended| Review::completed(ended.state())).await
    };
    (result, drain(&mut updates))
}

fn drain(updates: &mut Updates) -> Vec<Update> {
    std::iter::from_fn(|| updates.try_next()).collect()
}

#[tokio::test(start_paused = true)]
async fn the_streams_events_are_the_outcomes_events_for_every_scenario_and_way() {
    let mut checked = 0;
    for scenario in Scenario::ALL {
        for way in ways() {
            let case = format!("{scenario} {way:?}");
            let (result, updates) = watched_run(scenario, way).await;
            let outcome = result.unwrap_or_else(|error| panic!("{case}: {error}"));
            let streamed: Vec<_> = updates
                .iter()
                .filter_map(|update| match update {
                    Update::Event(event) => Some(event.clone()),
                    _ => None,
                })
                .collect();
            assert_eq!(streamed, outcome.events(), "{case}");
            assert_eq!(outcome.status(), scenario.expected().status, "{case}");
            assert_eq!(updates.last(), Some(&Update::Outcome(outcome.clone())), "{case}");
            assert_eq!(updates.iter().filter(|update| update.is_final()).count(), 1, "{case}");
            if let Some(text) = outcome.text() {
                let streamed_text: String = updates
                    .iter()
                    .filter_map(|update| match update {
                        Update::Text(piece) => Some(piece.text()),
                        _ => None,
                    })
                    .collect();
                assert_eq!(streamed_text, text, "{case}: the scripted runs' only text is the last reply's");
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 12 * 16);
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("golden-watch")
}

#[tokio::test(start_paused = true)]
async fn every_watched_scenario_matches_its_golden_transcript() {
    let update = golden::updating();
    let mut failures = Vec::new();
    let mut files = Vec::new();
    for scenario in Scenario::ALL {
        for (composition, flag) in [("harness", None), ("simple", Some("--simple"))] {
            let args: Vec<&str> = ["demo330", scenario.name(), "--watch"].into_iter().chain(flag).collect();
            let cli = Cli::try_parse_from(&args).expect("valid arguments");
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let code = console::execute(&cli, CancellationToken::new(), &mut out, &mut err).await;
            let stdout = String::from_utf8(out).expect("utf-8");
            let expected_code = if scenario.expected().status == Status::Completed { 0 } else { 2 };
            if code != expected_code || !err.is_empty() {
                failures.push(format!("{args:?}: exit {code}, stderr {:?}", String::from_utf8_lossy(&err)));
            }
            let file = format!("{}.{composition}.txt", scenario.name());
            if let Err(difference) = golden::compare(&golden_dir().join(&file), &stdout, update) {
                failures.push(difference);
            }
            files.push(file);
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n\nIf intended: UPDATE_GOLDEN=1 cargo test -p loopbound-demos --test watch",
        failures.join("\n\n")
    );
    let mut found: Vec<String> = fs::read_dir(golden_dir())
        .expect("tests/golden-watch exists")
        .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    files.sort();
    assert_eq!(found, files, "one golden file per scenario and composition, no other");
}

#[tokio::test]
async fn watch_is_refused_with_json_and_with_the_durable_commands() {
    let json = Cli::try_parse_from(["demo330", "complete", "--watch", "--json"]);
    assert_eq!(json.map_err(|error| error.kind()).err(), Some(clap::error::ErrorKind::ArgumentConflict));
    let durable =
        Cli::try_parse_from(["demo330", "--watch", "refund", "--journal", "unused.db"]).expect("parsed");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = console::execute(&durable, CancellationToken::new(), &mut out, &mut err).await;
    assert_eq!(code, loopbound_demos::console::EXIT_USAGE);
    assert!(out.is_empty());
    assert!(
        String::from_utf8_lossy(&err)
            .contains("--watch and the budget flags before a command are for the review scenarios")
    );
}
