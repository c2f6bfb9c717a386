//! Journaled runs as a service runs them: spawned on a multi-threaded runtime (so the run's
//! future is `Send`), many runs at once on one journal value, each effect run once (counted).

use std::sync::Arc;

use loopbound::journal::{self, RunId, RunState};
use loopbound::tool::Policy;
use loopbound::{Runner, Scope, Status};
use loopbound_sqlite::SqliteJournal;
use loopbound_testkit::refund::{self, EffectSink, MemorySink};
use loopbound_testkit::scratch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_spawned_runs_share_one_journal_and_each_refund_runs_once() {
    let journal = SqliteJournal::open(scratch::dir("sqlite-concurrent").join("runs.db")).unwrap();
    let sink = Arc::new(MemorySink::default());
    let tools = refund::tools(Arc::clone(&sink) as Arc<dyn EffectSink>, Policy::Allow);
    let runtime = Arc::new(Runner::new(&tools.set, refund::model(refund::long_script(), |_| {})));
    let mut tasks = Vec::new();
    for n in 0..16 {
        let (journal, runtime) = (journal.clone(), Arc::clone(&runtime));
        tasks.push(tokio::spawn(async move {
            let run = RunId::new(format!("run-{n}")).unwrap();
            let scope = Scope::builder().grants(refund::CAPABILITIES).build().unwrap();
            runtime.run_journaled(&journal, &run, &scope, &mut refund::conversation(), |_| true).await
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap().map(|o| o.status()), Ok(Status::Completed));
    }
    assert_eq!(sink.count("refund"), 32);
    assert_eq!(sink.count("send_receipt"), 16);
    // Per run: one to take it, two per effect (three effects), one at the end.
    assert_eq!(journal.commits(), 16 * 8);
    for n in 0..16 {
        let record = journal::inspect(&journal, &RunId::new(format!("run-{n}")).unwrap()).await.unwrap();
        assert_eq!(record.state(), RunState::Finished(Status::Completed));
    }
}
