//! Listing: runs by state and by label, one page at a time, in id order, the running ones apart;
//! a finished run under each status of this version, by its status.

use loopbound::Status;
use loopbound::journal::backend::{Fence, LabelRow};
use loopbound::journal::{self, Journal, RunQuery, RunState, StateFilter};

use super::{Backend, LONG, ending, fresh_row, run_named, two};

pub(crate) async fn check_all<B: Backend>(backend: &B) {
    let (a, b) = two(backend, LONG).await;
    runs_are_listed_by_state_and_label_in_pages_of_id_order(&a, &b).await;
    let (a, b) = two(backend, LONG).await;
    a_finished_run_is_listed_under_each_status(&a, &b).await;
}

/// One finished run per status of [`Status::ALL`], each listed by its own status and once among
/// the finished: a store that does not keep a status (or lists it under another) fails here.
async fn a_finished_run_is_listed_under_each_status(a: &impl Journal, b: &impl Journal) {
    let name = |status: Status| format!("finished-{}", status.as_str());
    for status in Status::ALL {
        make(a, &name(*status), "acme", RunState::Finished(*status), false).await;
    }
    for status in Status::ALL {
        let by = RunQuery::new().state(StateFilter::Finished(Some(*status)));
        assert_eq!(every_page(b, by).await, [name(*status)], "a run finished {status:?} is listed as such");
    }
    let mut every: Vec<String> = Status::ALL.iter().map(|status| name(*status)).collect();
    every.sort();
    let finished = every_page(b, RunQuery::new().state(StateFilter::Finished(None))).await;
    assert_eq!(finished, every, "every finished run is listed among the finished, once");
}

/// Creates `name` with `labels` and leaves it in `state`, its lease released unless `running`.
async fn make(journal: &impl Journal, name: &str, tenant: &str, state: RunState, running: bool) {
    let mut fresh = fresh_row();
    fresh.labels = vec![LabelRow { key: "tenant".to_owned(), value: tenant.to_owned() }];
    journal.acquire(&run_named(name), fresh).await.expect("a new run");
    let mut batch = ending(state);
    if running {
        batch.entries.pop();
    }
    journal.commit(&run_named(name), Fence::Epoch(1), batch).await.expect("its state");
}

/// Every run id `query` lists, page after page; checks each page's size and order.
async fn every_page(journal: &impl Journal, query: RunQuery) -> Vec<String> {
    let mut query = query;
    let mut ids = Vec::new();
    for _ in 0..100 {
        let page = journal::list(journal, &query).await.expect("a page");
        let most = usize::try_from(query.page_size()).unwrap_or(usize::MAX);
        assert!(page.runs().len() <= most, "a page holds at most its size: {} of {most}", page.runs().len());
        ids.extend(page.runs().iter().map(|summary| summary.run().as_str().to_owned()));
        let Some(next) = page.next() else { return ids };
        query = query.after(next.clone());
    }
    panic!("a listing that never ends: {ids:?}")
}

async fn runs_are_listed_by_state_and_label_in_pages_of_id_order(a: &impl Journal, b: &impl Journal) {
    use RunState::{Ambiguous, AwaitingApproval, Finished, Open};
    for (name, tenant, state, running) in [
        ("await-1", "acme", AwaitingApproval(2), false),
        ("ambiguous-1", "beta", Ambiguous(2), false),
        ("running-1", "acme", Ambiguous(3), true),
        ("done-1", "acme", Finished(Status::Completed), false),
        ("denied-1", "beta", Finished(Status::Denied), false),
        ("await-2", "beta", AwaitingApproval(1), false),
    ] {
        make(a, name, tenant, state, running).await;
    }
    for n in 0..23 {
        make(a, &format!("open-{n:02}"), if n % 2 == 0 { "acme" } else { "beta" }, Open, false).await;
    }
    let opens: Vec<String> = (0..23).map(|n| format!("open-{n:02}")).collect();
    let by = |filter| RunQuery::new().state(filter);
    assert_eq!(every_page(b, by(StateFilter::Open).limit(10)).await, opens, "open runs, in pages of 10");
    assert_eq!(
        every_page(b, by(StateFilter::Open).limit(23)).await,
        opens,
        "one full page, then an empty one"
    );
    assert_eq!(
        every_page(b, by(StateFilter::AwaitingApproval)).await,
        ["await-1", "await-2"],
        "runs awaiting approval are listed as such"
    );
    assert_eq!(
        every_page(b, by(StateFilter::Ambiguous)).await,
        ["ambiguous-1"],
        "a live lease is not ambiguous"
    );
    assert_eq!(every_page(b, by(StateFilter::Running)).await, ["running-1"], "a live lease is running");
    assert_eq!(
        every_page(b, by(StateFilter::Finished(None))).await,
        ["denied-1", "done-1"],
        "finished runs, whatever their status"
    );
    assert_eq!(
        every_page(b, by(StateFilter::Finished(Some(Status::Completed)))).await,
        ["done-1"],
        "finished runs of one status"
    );
    let acme = RunQuery::new().label("tenant", "acme").expect("a valid label");
    let acme_awaiting = every_page(b, acme.clone().state(StateFilter::AwaitingApproval).limit(1)).await;
    assert_eq!(acme_awaiting, ["await-1"], "by label and state, one per page");
    let all_acme = every_page(b, acme.limit(4)).await;
    let mut expected: Vec<String> = ["await-1", "done-1", "running-1"].map(str::to_owned).to_vec();
    expected.extend(opens.iter().step_by(2).cloned());
    expected.sort();
    assert_eq!(all_acme, expected, "by label, in pages of 4");
    assert_eq!(every_page(b, RunQuery::new()).await.len(), 29, "every run once");
    let none = RunQuery::new().label("tenant", "gamma").expect("a valid label");
    assert!(every_page(b, none).await.is_empty(), "a label no run has lists nothing");

    let page = journal::list(b, &by(StateFilter::Running)).await.expect("a page");
    let running = &page.runs()[0];
    assert!(running.is_running(), "a running run says so");
    assert_eq!(running.state(), Ambiguous(3), "with its stored state");
    assert_eq!(running.lease().map(|lease| lease.holder.as_str()), Some("attempt-a"));
    assert_eq!(
        (running.epoch(), running.attempts(), running.labels().get("tenant")),
        (1, 1, Some("acme")),
        "a listed run's epoch, attempts and labels as stored"
    );
}
