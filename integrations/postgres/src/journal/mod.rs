//! The journal on PostgreSQL, for many workers: [`PostgresJournal`]
//! implements [`loopbound::journal::Journal`] with the rows and semantics of
//! `loopbound-sqlite`, plus a lease per run.
//!
//! A journal value is one worker: it names itself with a [`WorkerId`] (this process's
//! [`process_holder`], `<host>:<pid>/<start>/<scope>`, unless
//! [`with_worker`](PostgresJournal::with_worker) says otherwise) and has a lease duration. Its
//! `acquire` takes the run's lease (adding one to the epoch) only when the run is new, or its
//! lease was released or has expired, or its holder is a process of this machine that no longer
//! exists ([`is_dead_holder`](loopbound::journal::backend::is_dead_holder): taken over at once, only
//! while the lease is still that holder's; a worker of another machine or one named with
//! `with_worker` is waited out until its lease expires); a live lease is refused with
//! [`JournalError::LeaseHeld`], whoever holds it (this worker too), so two attempts racing for
//! one run cannot both run it. Every commit of the attempt is fenced by its epoch and its live
//! lease, and renews the lease; the attempt's last commit (the one that records how it ended)
//! releases it. A host's commands (inspect, list, approve, deny, reconcile) need no worker of
//! their own: any journal value does.
//!
//! # Invariants
//!
//! - Each operation is one transaction, or (an attempt's commit or renewal) one part of a
//!   group's transaction (see [`group`]): `acquire` and `commit` commit whole or write nothing;
//!   `load` reads one snapshot (`REPEATABLE READ`, read only). A failed operation rolls its
//!   transaction back before it returns, so it holds no lock once the caller has its error (a
//!   commit refused in a group is told once its group ended).
//! - A commit under an epoch that is no longer the run's is
//!   [`LeaseLost`](JournalError::LeaseLost) and writes nothing: a worker paused past its lease
//!   while another took the run over runs no further effect, because an effect's body starts
//!   only after its `started` record committed.
//! - Failures are typed [`JournalError`]s, never panics; a server that is down or refuses is
//!   [`Storage`](JournalError::Storage), and no message carries the password.

mod columns;
mod convert;
mod group;
mod list;
mod listen;
mod many;
mod read;
mod write;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use loopbound::journal::backend::{
    Batch, CancelWatch, Fence, ListedRow, LiveStreams, RunRow, StoredRun, UpdateRow, process_holder,
};
use loopbound::journal::{Journal, JournalError, RunId, RunQuery};
use tokio_postgres::IsolationLevel;

use crate::config::Config;
use crate::error::Error;
use crate::id::WorkerId;
use crate::lease::{epoch_param, micros};
use crate::store::Store;
pub(crate) use group::Group;
pub use group::{GROUP_WRITERS, MAX_GROUP};
use write::{ACQUIRE_ATTEMPTS, Writer};

/// One worker's journal on a PostgreSQL database.
#[derive(Clone)]
pub struct PostgresJournal {
    store: Store,
    worker: WorkerId,
    lease: Duration,
    lease_micros: i64,
    /// The watcher of cancel requests this value's attempts, and its clones', share.
    watch: CancelWatch,
    /// The live ends of the streams of the runs this value's attempts, and its clones', run.
    live: Arc<LiveStreams>,
}

impl fmt::Debug for PostgresJournal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresJournal")
            .field("worker", &self.worker)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl PostgresJournal {
    /// The journal on `store`, as this process's worker ([`process_holder`]), with the store's
    /// configured lease ([`Config::lease`]: `LOOPBOUND_LEASE_SECS`, 30 s by default).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] when the configured lease is longer than [`MAX_LEASE`](crate::MAX_LEASE).
    pub fn new(store: Store) -> Result<Self, Error> {
        let lease = store.config().lease();
        let worker = WorkerId::new(process_holder())?;
        Self { store, worker, lease, lease_micros: 1, watch: CancelWatch::new(), live: Arc::default() }
            .with_lease(lease)
    }

    /// Connects to the database of `config` (migrating it) and returns its journal, as this
    /// process's worker.
    ///
    /// ```no_run
    /// use loopbound::journal::RunId;
    /// use loopbound_postgres::{Config, PostgresJournal};
    ///
    /// # async fn demo(runtime: loopbound::Runner<impl loopbound::transport::Transport>, scope: loopbound::Scope)
    /// # -> Result<(), Box<dyn std::error::Error>> {
    /// let journal = PostgresJournal::connect(&Config::from_env()?).await?;
    /// let run = RunId::new("refund-42")?;
    /// let mut conversation = vec![loopbound::Message::user("Refund order 42.")];
    /// match runtime.run_journaled(&journal, &run, &scope, &mut conversation, |ended| ended.has_succeeded("refund")).await {
    ///     Ok(outcome) => println!("{}", outcome.status()),
    ///     // Another attempt runs it now; nothing started here.
    ///     Err(loopbound::RunError::Journal(loopbound::journal::JournalError::LeaseHeld { remaining, .. })) => {
    ///         println!("busy; retry in {} ms", remaining.as_millis());
    ///     }
    ///     Err(other) => return Err(other.into()),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Store::connect`] and [`new`](Self::new).
    pub async fn connect(config: &Config) -> Result<Self, Error> {
        Self::new(Store::connect(config).await?)
    }

    /// This journal, naming its leases' holder `worker` (what another worker's `LeaseHeld` and a
    /// host's inspection show), e.g. a pod's name and a process id.
    #[must_use]
    pub fn with_worker(mut self, worker: WorkerId) -> Self {
        self.worker = worker;
        self
    }

    /// Sets how long each grant or fenced write holds the run. The server ends a transaction
    /// left idle for the store's configured lease ([`Config::lease`]), not this one: set the
    /// lease in the [`Config`] instead where the two should agree.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for zero or more than [`MAX_LEASE`](crate::MAX_LEASE).
    pub fn with_lease(mut self, lease: Duration) -> Result<Self, Error> {
        self.lease_micros = micros(lease)?;
        self.lease = lease;
        Ok(self)
    }

    /// The store this journal writes through.
    #[must_use]
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The worker this journal acquires runs for.
    #[must_use]
    pub fn worker(&self) -> &WorkerId {
        &self.worker
    }

    /// How long each grant or fenced write holds the run.
    #[must_use]
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// How many group transactions the journals of this store committed so far: the commits and
    /// lease renewals of attempts that arrive together share one (see
    /// [`grouped_writes`](Self::grouped_writes)).
    #[must_use]
    pub fn groups(&self) -> u64 {
        self.store.group().groups()
    }

    /// How many commits and renewals those group transactions held (a group's write refused by
    /// its fence is not counted, nor one committed alone after its group rolled back).
    #[must_use]
    pub fn grouped_writes(&self) -> u64 {
        self.store.group().writes()
    }

    fn writer(&self) -> Writer<'_> {
        Writer { redactor: self.store.redactor(), worker: &self.worker, lease_micros: self.lease_micros }
    }

    async fn acquire_run(&self, run: &RunId, fresh: RunRow) -> Result<StoredRun, JournalError> {
        let mut client = self.store.client().await?;
        let writer = self.writer();
        for _ in 0..ACQUIRE_ATTEMPTS {
            let transaction = client.transaction().await.map_err(|e| self.fail(&e))?;
            match writer.acquire(&transaction, run.as_str(), &fresh).await {
                Ok(Some(stored)) => {
                    transaction.commit().await.map_err(|e| self.fail(&e))?;
                    return Ok(stored);
                }
                Ok(None) => transaction.rollback().await.map_err(|e| self.fail(&e))?,
                Err(error) => return Err(rolled_back(transaction, error).await),
            }
        }
        Err(JournalError::storage(format!(
            "the run's lease changed hands {ACQUIRE_ATTEMPTS} times during one acquisition"
        )))
    }

    async fn load_run(&self, run: &RunId) -> Result<Option<StoredRun>, JournalError> {
        let mut client = self.store.client().await?;
        let transaction = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(|e| self.fail(&e))?;
        match read::stored_run(&transaction, self.store.redactor(), run.as_str()).await {
            Ok(stored) => {
                transaction.commit().await.map_err(|e| self.fail(&e))?;
                Ok(stored)
            }
            Err(error) => Err(rolled_back(transaction, error).await),
        }
    }

    /// A renewal is a commit without rows: its fence renews the lease.
    async fn renew_lease(&self, run: &RunId, epoch: u64) -> Result<(), JournalError> {
        self.commit_batch(run, Fence::Epoch(epoch), Batch::default()).await
    }

    async fn stream_lines(
        &self,
        run: &RunId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<UpdateRow>, JournalError> {
        let client = self.store.client().await?;
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = client
            .query(
                "SELECT seq, line FROM loopbound_updates WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                &[&run.as_str(), &after, &limit],
            )
            .await
            .map_err(|e| self.fail(&e))?;
        rows.iter()
            .map(|row| {
                let seq: i64 = row.try_get(0).map_err(|e| self.fail(&e))?;
                let seq = u64::try_from(seq)
                    .map_err(|_| JournalError::Corrupt(format!("a stream line's number {seq}")))?;
                Ok(UpdateRow { seq, line: row.try_get(1).map_err(|e| self.fail(&e))? })
            })
            .collect()
    }

    async fn cancel_requested_by(&self, run: &RunId) -> Result<Option<String>, JournalError> {
        let client = self.store.client().await?;
        let row = client
            .query_opt("SELECT cancel_by FROM loopbound_runs WHERE run_id = $1", &[&run.as_str()])
            .await
            .map_err(|e| self.fail(&e))?;
        row.map_or(Ok(None), |row| row.try_get(0).map_err(|e| self.fail(&e)))
    }

    async fn cancel_requests_of(&self, runs: &[RunId]) -> Result<Vec<RunId>, JournalError> {
        let client = self.store.client().await?;
        let ids: Vec<&str> = runs.iter().map(RunId::as_str).collect();
        // Prepared once per connection: the check runs for every batch of waiting runs, and its
        // plan (the index of pending requests, nearly always empty) suits any table size.
        let statement = client
            .prepare_cached(
                "SELECT run_id FROM loopbound_runs WHERE run_id = ANY($1) AND cancel_by IS NOT NULL",
            )
            .await
            .map_err(|e| self.fail(&e))?;
        let rows = client.query(&statement, &[&ids]).await.map_err(|e| self.fail(&e))?;
        rows.iter()
            .map(|row| {
                let id: String = row.try_get(0).map_err(|e| self.fail(&e))?;
                RunId::new(&id).map_err(|_| JournalError::Corrupt(format!("run id {id:?}")))
            })
            .collect()
    }

    async fn record_cancel(&self, run: &RunId, by: &str) -> Result<(), JournalError> {
        let client = self.store.client().await?;
        let changed = client
            .execute("UPDATE loopbound_runs SET cancel_by = $2 WHERE run_id = $1", &[&run.as_str(), &by])
            .await
            .map_err(|e| self.fail(&e))?;
        if changed == 0 {
            return Err(JournalError::UnknownRun);
        }
        // After the request is committed: a listener that hears it reads it back committed.
        client
            .execute("SELECT pg_notify($1, $2)", &[&listen::CHANNEL, &run.as_str()])
            .await
            .map(drop)
            .map_err(|e| self.fail(&e))
    }

    async fn list_runs(&self, query: &RunQuery) -> Result<Vec<ListedRow>, JournalError> {
        let mut client = self.store.client().await?;
        let transaction = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(|e| self.fail(&e))?;
        match list::page(&transaction, self.store.redactor(), query).await {
            Ok(page) => {
                transaction.commit().await.map_err(|e| self.fail(&e))?;
                Ok(page)
            }
            Err(error) => Err(rolled_back(transaction, error).await),
        }
    }

    async fn commit_batch(&self, run: &RunId, fence: Fence, batch: Batch) -> Result<(), JournalError> {
        // An attempt's commits join a group; a host's, fenced by a free lease, go alone, as does
        // one that expects a state (checked under the row's lock on the single path) and any
        // commit made where no tokio runtime runs (a group's writer is a task of its own).
        let expects = batch
            .entries
            .iter()
            .any(|entry| matches!(entry, loopbound::journal::backend::Entry::ExpectState(_)));
        if let (Fence::Epoch(epoch), Ok(runtime), false) =
            (fence, tokio::runtime::Handle::try_current(), expects)
        {
            let write = group::Write {
                run: run.as_str().to_owned(),
                epoch: epoch_param(epoch).map_err(JournalError::from)?,
                worker: self.worker.clone(),
                lease_micros: self.lease_micros,
                batch,
            };
            return Arc::clone(self.store.group()).write(runtime, self.store.clone(), write).await;
        }
        let mut client = self.store.client().await?;
        self.writer().commit_alone(&mut client, run.as_str(), fence, &batch).await
    }

    /// `operation`, given up with a storage error after the store's query timeout.
    async fn bounded<T>(
        &self,
        operation: impl Future<Output = Result<T, JournalError>>,
    ) -> Result<T, JournalError> {
        self.store.within(operation).await.unwrap_or_else(|| {
            Err(JournalError::storage(format!(
                "the database did not answer within {} ms",
                self.store.config().query_timeout().as_millis()
            )))
        })
    }

    fn fail(&self, error: &tokio_postgres::Error) -> JournalError {
        JournalError::from(self.store.redactor().postgres(error))
    }
}

/// Ends `transaction` before returning `error`. Dropping it would only queue the `ROLLBACK`,
/// which a runtime that is not driven again (a current-thread runtime between two `block_on`
/// calls) never sends: the transaction would keep the run's row locked, and its workers
/// waiting, until the server's idle-in-transaction timeout. A failed rollback changes nothing
/// for the caller (the server rolls back when the connection ends).
async fn rolled_back(transaction: deadpool_postgres::Transaction<'_>, error: JournalError) -> JournalError {
    let _ = transaction.rollback().await;
    error
}

impl Journal for PostgresJournal {
    fn lease(&self) -> Duration {
        self.lease
    }

    fn acquire(
        &self,
        run: &RunId,
        fresh: RunRow,
    ) -> impl Future<Output = Result<StoredRun, JournalError>> + Send {
        self.bounded(self.acquire_run(run, fresh))
    }

    fn renew(&self, run: &RunId, epoch: u64) -> impl Future<Output = Result<(), JournalError>> + Send {
        self.bounded(self.renew_lease(run, epoch))
    }

    fn load(&self, run: &RunId) -> impl Future<Output = Result<Option<StoredRun>, JournalError>> + Send {
        self.bounded(self.load_run(run))
    }

    fn commit(
        &self,
        run: &RunId,
        fence: Fence,
        batch: Batch,
    ) -> impl Future<Output = Result<(), JournalError>> + Send {
        // Boxed: a commit's pipeline holds a future per row; its caller's stack keeps a pointer.
        self.bounded(Box::pin(self.commit_batch(run, fence, batch)))
    }

    fn list_rows(
        &self,
        query: &RunQuery,
    ) -> impl Future<Output = Result<Vec<ListedRow>, JournalError>> + Send {
        self.bounded(self.list_runs(query))
    }

    fn cancel_requested(
        &self,
        run: &RunId,
    ) -> impl Future<Output = Result<Option<String>, JournalError>> + Send {
        self.bounded(self.cancel_requested_by(run))
    }

    fn request_cancel(&self, run: &RunId, by: &str) -> impl Future<Output = Result<(), JournalError>> + Send {
        self.bounded(self.record_cancel(run, by))
    }

    fn cancel_requests(
        &self,
        runs: &[RunId],
    ) -> impl Future<Output = Result<Vec<RunId>, JournalError>> + Send {
        self.bounded(self.cancel_requests_of(runs))
    }

    fn cancel_watch(&self) -> Option<&CancelWatch> {
        // The first attempt that waits starts the handle's listener (where a runtime runs it;
        // elsewhere the watcher polls).
        if self.watch.claim_listener()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(listen::listen(self.store.config().postgres().clone(), self.watch.downgrade()));
        }
        Some(&self.watch)
    }

    fn updates(
        &self,
        run: &RunId,
        after: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<UpdateRow>, JournalError>> + Send {
        self.bounded(self.stream_lines(run, after, limit))
    }

    fn live_streams(&self) -> Option<&LiveStreams> {
        Some(&self.live)
    }
}
