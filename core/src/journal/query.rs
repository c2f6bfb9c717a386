//! Listing runs: by state (running, open, awaiting approval, ambiguous, finished with a status)
//! and by label, one page at a time, on every backend.
//!
//! # Invariants
//!
//! - Pages follow the runs' ids in byte order; a page starts after its query's cursor, so a run
//!   listed once is never listed again by the following pages of one listing, and pages cost the
//!   same wherever they start (no offset).
//! - The state filters are disjoint: a run whose lease is live is `Running` whatever its stored
//!   state; every other run is in the filter of its stored [`RunState`].

use super::error::JournalError;
use super::id::RunId;
use super::label::{Labels, valid_key, valid_value};
use super::record::RunState;
use super::row::{LabelRow, Lease, ListedRow};
use crate::outcome::Status;

/// Which runs a listing returns, by where they stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StateFilter {
    /// An attempt holds a live lease on the run: it may be running it now.
    Running,
    /// No attempt holds it and nothing waits on the host: created, or stopped in a way a resume
    /// continues (an attempt's deadline, an unreachable provider, a crash outside an effect).
    Open,
    /// Stopped on a proposal that waits for the host's decision.
    AwaitingApproval,
    /// Stopped, or crashed, with an effect started and no result: the host reconciles it.
    Ambiguous,
    /// Ended for good, with this status or with any.
    Finished(Option<Status>),
}

impl StateFilter {
    /// Whether a run in `state`, whose lease is live or not, is in this filter.
    #[must_use]
    pub fn matches(self, state: RunState, live: bool) -> bool {
        match self {
            Self::Running => live,
            _ if live => false,
            Self::Open => state == RunState::Open,
            Self::AwaitingApproval => matches!(state, RunState::AwaitingApproval(_)),
            Self::Ambiguous => matches!(state, RunState::Ambiguous(_)),
            Self::Finished(None) => state.is_finished(),
            Self::Finished(Some(status)) => state == RunState::Finished(status),
        }
    }
}

/// One page's worth of a listing: filters, a cursor, a page size.
///
/// ```
/// use loopbound::journal::{RunQuery, StateFilter};
///
/// let query = RunQuery::new().state(StateFilter::AwaitingApproval).label("tenant", "acme")?.limit(50);
/// assert_eq!(query.page_size(), 50);
/// assert_eq!(query.label_filter(), Some(("tenant", "acme")));
/// # Ok::<(), loopbound::journal::JournalError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunQuery {
    state: Option<StateFilter>,
    label: Option<LabelRow>,
    after: Option<RunId>,
    limit: u32,
}

impl Default for RunQuery {
    fn default() -> Self {
        Self { state: None, label: None, after: None, limit: Self::DEFAULT_LIMIT }
    }
}

impl RunQuery {
    /// The page size unless [`limit`](Self::limit) says otherwise.
    pub const DEFAULT_LIMIT: u32 = 100;
    /// The largest page size.
    pub const MAX_LIMIT: u32 = 1000;

    /// Every run, first page, [`DEFAULT_LIMIT`](Self::DEFAULT_LIMIT) runs per page.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Only runs in `filter`.
    #[must_use]
    pub fn state(mut self, filter: StateFilter) -> Self {
        self.state = Some(filter);
        self
    }

    /// Only runs labelled `key` = `value`.
    ///
    /// # Errors
    ///
    /// [`JournalError::InvalidLabel`] for a key or value no label can have.
    pub fn label(mut self, key: &str, value: &str) -> Result<Self, JournalError> {
        if !valid_key(key) || !valid_value(value) {
            return Err(JournalError::InvalidLabel);
        }
        self.label = Some(LabelRow { key: key.to_owned(), value: value.to_owned() });
        Ok(self)
    }

    /// The page that starts after run `cursor` (a previous page's [`RunPage::next`]).
    #[must_use]
    pub fn after(mut self, cursor: RunId) -> Self {
        self.after = Some(cursor);
        self
    }

    /// At most `runs` runs per page, within 1 and [`MAX_LIMIT`](Self::MAX_LIMIT).
    #[must_use]
    pub fn limit(mut self, runs: u32) -> Self {
        self.limit = runs.clamp(1, Self::MAX_LIMIT);
        self
    }

    /// The state filter, if any.
    #[must_use]
    pub fn state_filter(&self) -> Option<StateFilter> {
        self.state
    }

    /// The label filter, if any: `(key, value)`.
    #[must_use]
    pub fn label_filter(&self) -> Option<(&str, &str)> {
        self.label.as_ref().map(|label| (label.key.as_str(), label.value.as_str()))
    }

    /// The run the page starts after, if any.
    #[must_use]
    pub fn cursor(&self) -> Option<&RunId> {
        self.after.as_ref()
    }

    /// How many runs a page holds at most.
    #[must_use]
    pub fn page_size(&self) -> u32 {
        self.limit
    }

    /// Whether a run with these parts is in the query's filters (its cursor and page size
    /// aside): for backends that filter in memory.
    #[must_use]
    pub fn matches(&self, state: RunState, live: bool, labels: &[LabelRow]) -> bool {
        self.state.is_none_or(|filter| filter.matches(state, live))
            && self.label.as_ref().is_none_or(|wanted| labels.contains(wanted))
    }
}

/// One run of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSummary {
    run: RunId,
    epoch: u64,
    attempts: u32,
    state: RunState,
    lease: Option<Lease>,
    labels: Labels,
}

impl RunSummary {
    /// The run's id.
    #[must_use]
    pub fn run(&self) -> &RunId {
        &self.run
    }

    /// The newest attempt's epoch.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// How many attempts took the run.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Its stored state.
    #[must_use]
    pub fn state(&self) -> RunState {
        self.state
    }

    /// Its lease, unless released: live while an attempt may be running it.
    #[must_use]
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// Whether an attempt held a live lease on it when it was listed.
    #[must_use]
    pub fn is_running(&self) -> bool {
        self.lease.as_ref().is_some_and(Lease::is_live)
    }

    /// The host's labels.
    #[must_use]
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    pub(crate) fn decode(row: ListedRow) -> Result<Self, JournalError> {
        let run = RunId::new(&row.run).map_err(|_| JournalError::Corrupt("a listed run's id".to_owned()))?;
        if row.epoch == 0 || row.attempts == 0 {
            return Err(JournalError::Corrupt("a listed run's epoch or attempts".to_owned()));
        }
        Ok(Self {
            run,
            epoch: row.epoch,
            attempts: row.attempts,
            state: row.state,
            lease: row.lease,
            labels: Labels::from_rows(&row.labels)?,
        })
    }
}

/// One page of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunPage {
    runs: Vec<RunSummary>,
    next: Option<RunId>,
}

impl RunPage {
    pub(crate) fn new(runs: Vec<RunSummary>, full: bool) -> Self {
        let next = if full { runs.last().map(|summary| summary.run.clone()) } else { None };
        Self { runs, next }
    }

    /// The page's runs, by id.
    #[must_use]
    pub fn runs(&self) -> &[RunSummary] {
        &self.runs
    }

    /// The cursor of the next page ([`RunQuery::after`]), or `None` when this page is the last.
    /// A full page names its last run, so the next page may be empty.
    #[must_use]
    pub fn next(&self) -> Option<&RunId> {
        self.next.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_filters_are_disjoint_and_running_wins() {
        let states = [
            RunState::Open,
            RunState::AwaitingApproval(2),
            RunState::Ambiguous(2),
            RunState::Finished(Status::Completed),
            RunState::Finished(Status::Denied),
        ];
        let filters = [
            StateFilter::Running,
            StateFilter::Open,
            StateFilter::AwaitingApproval,
            StateFilter::Ambiguous,
            StateFilter::Finished(None),
        ];
        for state in states {
            for live in [false, true] {
                let hits: Vec<StateFilter> =
                    filters.iter().copied().filter(|filter| filter.matches(state, live)).collect();
                assert_eq!(hits.len(), 1, "{state:?} live {live}: {hits:?}");
                assert_eq!(hits[0] == StateFilter::Running, live);
            }
        }
        let completed = StateFilter::Finished(Some(Status::Completed));
        assert!(completed.matches(RunState::Finished(Status::Completed), false));
        assert!(!completed.matches(RunState::Finished(Status::Denied), false));
    }

    #[test]
    fn a_query_refuses_labels_no_run_can_have_and_clamps_its_page() {
        assert_eq!(RunQuery::new().label("Tenant", "a"), Err(JournalError::InvalidLabel));
        assert_eq!(RunQuery::new().label("tenant", ""), Err(JournalError::InvalidLabel));
        assert_eq!(RunQuery::new().limit(0).page_size(), 1);
        assert_eq!(RunQuery::new().limit(5000).page_size(), RunQuery::MAX_LIMIT);
        let query = RunQuery::new().label("tenant", "acme").unwrap();
        let acme = [LabelRow { key: "tenant".into(), value: "acme".into() }];
        assert!(query.matches(RunState::Open, true, &acme));
        assert!(!query.matches(RunState::Open, true, &[]));
    }
}
