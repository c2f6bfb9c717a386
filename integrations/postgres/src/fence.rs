//! Fenced writes: every write for a run happens in a transaction that first checks, and locks,
//! the run's epoch.
//!
//! The rule: **a write of epoch *e* commits only if the run's epoch is still *e***. The
//! transaction's first statement is
//!
//! ```sql
//! UPDATE loopbound_runs SET lease_until = now() + duration, updated_at = now()
//!  WHERE run_id = $run AND epoch = $e AND lease_holder = $worker
//! ```
//!
//! If it matches no row, another worker took the run over (or the lease was released): the
//! transaction is rolled back and the caller gets [`Error::LeaseLost`] before its own statements
//! run. If it matches, the run's row stays locked until the transaction ends, so a competing
//! grant (which updates the same row) waits for this commit and then raises the epoch: a
//! takeover is ordered entirely before or entirely after each fenced write, never in between.
//!
//! # Invariants
//!
//! - The caller's statements run only after the fence matched, in the same transaction; any
//!   error rolls everything back: nothing is half-written.
//! - A fenced write renews the lease: a worker that keeps writing keeps its run.
//! - Errors from the caller's statements are classified like every other and have the
//!   password removed.

use std::future::Future;
use std::pin::Pin;

use tokio_postgres::Transaction;

use crate::error::Error;
use crate::lease::{Lease, epoch_param, lost, micros, time_from_micros};
use crate::store::Store;

/// The future a fenced write's closure returns: its statements, run inside the transaction.
pub type Write<'t, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 't>>;

const FENCE: &str = "
    UPDATE loopbound_runs
       SET lease_until = now() + $4::bigint * interval '1 microsecond', updated_at = now()
     WHERE run_id = $1 AND epoch = $2 AND lease_holder = $3
    RETURNING (extract(epoch FROM lease_until) * 1000000)::bigint";

impl Store {
    /// Runs `write` in one transaction conditioned on `lease`'s epoch, and commits it; renews
    /// the lease.
    ///
    /// ```no_run
    /// # async fn example(store: &loopbound_postgres::Store, lease: &mut loopbound_postgres::Lease)
    /// # -> Result<(), loopbound_postgres::Error> {
    /// let run = lease.run().to_owned();
    /// let rows = store
    ///     .fenced(lease, |transaction| {
    ///         Box::pin(async move {
    ///             Ok(transaction.execute("UPDATE my_table SET done = true WHERE run = $1", &[&run]).await?)
    ///         })
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the run's epoch is no longer the lease's (nothing written);
    /// whatever `write` returns (rolled back); [`Error::Unavailable`] when the connection
    /// breaks, in which case the caller cannot know whether the commit happened and must treat
    /// the write as not done (fail closed) until it reads otherwise.
    pub async fn fenced<T, F>(&self, lease: &mut Lease, write: F) -> Result<T, Error>
    where
        T: Send,
        F: for<'t> FnOnce(&'t Transaction<'t>) -> Write<'t, T> + Send,
    {
        let mut client = self.client().await?;
        let fail = |error: tokio_postgres::Error| self.redactor().postgres(&error);
        let transaction = client.transaction().await.map_err(fail)?;
        let fence = transaction
            .query_opt(
                FENCE,
                &[&lease.run, &epoch_param(lease.epoch)?, &lease.worker.as_str(), &micros(lease.duration)?],
            )
            .await
            .map_err(fail)?;
        let Some(fence) = fence else {
            transaction.rollback().await.map_err(fail)?;
            return Err(lost(lease));
        };
        let value = match write(&transaction).await {
            Ok(value) => value,
            Err(error) => {
                // Sent now: a dropped transaction only queues its `ROLLBACK`, and would keep the
                // run's row locked until the runtime is driven again.
                let _ = transaction.rollback().await;
                return Err(self.redactor().scrub(error));
            }
        };
        transaction.commit().await.map_err(fail)?;
        lease.until = time_from_micros(fence.get(0));
        Ok(value)
    }
}
