//! Leases: which worker may run a run now, and with which epoch.
//!
//! A worker [`acquire`](Store::acquire)s a run before running or resuming it. The lease is
//! granted when the run is new, its lease was released, has expired, or is already this worker's;
//! each grant adds one to the run's epoch. Another worker's live lease is refused with
//! [`Error::LeaseHeld`]. The holder extends its lease with [`renew`](Store::renew) (every fenced
//! write also renews it, see [`fence`](crate::fence)) and gives it up with
//! [`release`](Store::release). Unlike the journal's acquisition
//! ([`PostgresJournal`](crate::PostgresJournal)), this one never judges a holder dead: a
//! lease is waited out until it expires or is released.
//!
//! # Invariants
//!
//! - Expiry is judged by the database's clock (`now()`), never a worker's: workers whose clocks
//!   disagree still agree on who holds a run.
//! - A grant is one statement (an upsert whose update is conditioned on the lease being free,
//!   expired or the caller's): of workers racing for one run, exactly one is granted while its
//!   lease is live, whatever the interleaving.
//! - The epoch only grows. `renew` and `release` succeed only for the current epoch's holder,
//!   else [`Error::LeaseLost`], and change nothing then.

use std::time::{Duration, SystemTime};

use crate::config::ConfigError;
use crate::error::Error;
use crate::id::{WorkerId, check_run};
use crate::store::Store;

/// How many times `acquire` retries when the lease it was refused turns out to be free.
const ACQUIRE_ATTEMPTS: usize = 3;

/// The longest lease: one day.
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 60 * 60);

/// A worker's hold on a run under one epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub(crate) run: String,
    pub(crate) worker: WorkerId,
    pub(crate) epoch: u64,
    pub(crate) duration: Duration,
    pub(crate) until: SystemTime,
}

impl Lease {
    /// The run.
    #[must_use]
    pub fn run(&self) -> &str {
        &self.run
    }

    /// The worker holding it.
    #[must_use]
    pub fn worker(&self) -> &WorkerId {
        &self.worker
    }

    /// The epoch: every write of this worker for this run is conditioned on it.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// How long each grant or renewal lasts.
    #[must_use]
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// When the lease expires, by the database's clock, as of its last grant, renewal or write.
    #[must_use]
    pub fn until(&self) -> SystemTime {
        self.until
    }
}

/// What the database holds about a run's lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseState {
    /// The current epoch.
    pub epoch: u64,
    /// How many grants the run has had.
    pub attempts: u64,
    /// The holder, unless the lease was released.
    pub holder: Option<WorkerId>,
    /// When the lease expires (expired when in the past), unless it was released.
    pub until: Option<SystemTime>,
    /// Whether the lease is live now, by the database's clock.
    pub live: bool,
}

/// The time `micros` microseconds after the Unix epoch.
pub(crate) fn time_from_micros(micros: i64) -> SystemTime {
    let magnitude = Duration::from_micros(micros.unsigned_abs());
    if micros >= 0 { SystemTime::UNIX_EPOCH + magnitude } else { SystemTime::UNIX_EPOCH - magnitude }
}

/// A lease duration in microseconds, checked.
pub(crate) fn micros(duration: Duration) -> Result<i64, Error> {
    if duration.is_zero() || duration > MAX_LEASE {
        return Err(Error::Config(ConfigError::InvalidNumber {
            setting: "the lease duration (at most a day)",
        }));
    }
    i64::try_from(duration.as_micros())
        .map_err(|_| Error::Config(ConfigError::InvalidNumber { setting: "the lease duration" }))
}

fn epoch_of(value: i64) -> Result<u64, Error> {
    u64::try_from(value).map_err(|_| Error::Storage("a run's epoch is negative".to_owned()))
}

const GRANT: &str = "
    INSERT INTO loopbound_runs AS r (run_id, epoch, attempts, lease_holder, lease_until)
    VALUES ($1, 1, 1, $2, now() + $3::bigint * interval '1 microsecond')
    ON CONFLICT (run_id) DO UPDATE
       SET epoch = r.epoch + 1,
           attempts = r.attempts + 1,
           lease_holder = excluded.lease_holder,
           lease_until = excluded.lease_until,
           updated_at = now()
     WHERE r.lease_holder IS NULL OR r.lease_until <= now() OR r.lease_holder = excluded.lease_holder
    RETURNING r.epoch, (extract(epoch FROM r.lease_until) * 1000000)::bigint";

const HOLDER: &str = "
    SELECT lease_holder,
           (extract(epoch FROM lease_until) * 1000000)::bigint,
           greatest(0, (extract(epoch FROM lease_until - clock_timestamp()) * 1000000))::bigint
      FROM loopbound_runs WHERE run_id = $1";

const RENEW: &str = "
    UPDATE loopbound_runs
       SET lease_until = now() + $4::bigint * interval '1 microsecond', updated_at = now()
     WHERE run_id = $1 AND epoch = $2 AND lease_holder = $3
    RETURNING (extract(epoch FROM lease_until) * 1000000)::bigint";

const RELEASE: &str = "
    UPDATE loopbound_runs SET lease_holder = NULL, lease_until = NULL, updated_at = now()
     WHERE run_id = $1 AND epoch = $2 AND lease_holder = $3";

const STATE: &str = "
    SELECT epoch, attempts, lease_holder,
           (extract(epoch FROM lease_until) * 1000000)::bigint,
           coalesce(lease_until > now(), false)
      FROM loopbound_runs WHERE run_id = $1";

impl Store {
    /// Takes `run` for `worker` for `duration` (see [`Config::lease`](crate::Config::lease) for
    /// the configured default), adding one to its epoch: granted when the run is new, its lease
    /// was released or has expired, or `worker` already holds it.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseHeld`] when another worker's lease is live; [`Error::InvalidId`] or
    /// [`Error::Config`] for a bad run id or duration (zero, or over [`MAX_LEASE`]);
    /// [`Error::Unavailable`] and the other connection errors.
    pub async fn acquire(&self, run: &str, worker: &WorkerId, duration: Duration) -> Result<Lease, Error> {
        check_run(run)?;
        let micros = micros(duration)?;
        let client = self.client().await?;
        let fail = |error: tokio_postgres::Error| self.redactor().postgres(&error);
        for _ in 0..ACQUIRE_ATTEMPTS {
            if let Some(row) =
                client.query_opt(GRANT, &[&run, &worker.as_str(), &micros]).await.map_err(fail)?
            {
                return Ok(Lease {
                    run: run.to_owned(),
                    worker: worker.clone(),
                    epoch: epoch_of(row.get(0))?,
                    duration,
                    until: time_from_micros(row.get(1)),
                });
            }
            let Some(row) = client.query_opt(HOLDER, &[&run]).await.map_err(fail)? else { continue };
            let (holder, until, remaining): (Option<String>, Option<i64>, Option<i64>) =
                (row.get(0), row.get(1), row.get(2));
            if let (Some(holder), Some(until), Some(remaining)) = (holder, until, remaining)
                && remaining > 0
            {
                return Err(Error::LeaseHeld {
                    run: run.to_owned(),
                    holder,
                    until: time_from_micros(until),
                    remaining: Duration::from_micros(remaining.unsigned_abs()),
                });
            }
            // Released or expired between the two statements: try again.
        }
        Err(Error::Unavailable(format!(
            "run {run}: its lease changed hands {ACQUIRE_ATTEMPTS} times during one acquisition"
        )))
    }

    /// Extends `lease` by its duration from now, by the database's clock.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when another worker took the run over or the lease was released;
    /// the connection errors.
    pub async fn renew(&self, lease: &mut Lease) -> Result<(), Error> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                RENEW,
                &[&lease.run, &epoch_param(lease.epoch)?, &lease.worker.as_str(), &micros(lease.duration)?],
            )
            .await
            .map_err(|error| self.redactor().postgres(&error))?
            .ok_or_else(|| lost(lease))?;
        lease.until = time_from_micros(row.get(0));
        Ok(())
    }

    /// Gives `lease` up, so another worker can take the run at once (its next grant still adds
    /// one to the epoch).
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the lease was no longer this worker's; the connection errors.
    pub async fn release(&self, lease: Lease) -> Result<(), Error> {
        let client = self.client().await?;
        let released = client
            .execute(RELEASE, &[&lease.run, &epoch_param(lease.epoch)?, &lease.worker.as_str()])
            .await
            .map_err(|error| self.redactor().postgres(&error))?;
        if released == 1 { Ok(()) } else { Err(lost(&lease)) }
    }

    /// What the database holds about `run`'s lease, or `None` for a run never acquired.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] and the connection errors.
    pub async fn lease_state(&self, run: &str) -> Result<Option<LeaseState>, Error> {
        check_run(run)?;
        let client = self.client().await?;
        let Some(row) =
            client.query_opt(STATE, &[&run]).await.map_err(|error| self.redactor().postgres(&error))?
        else {
            return Ok(None);
        };
        let holder: Option<String> = row.get(2);
        Ok(Some(LeaseState {
            epoch: epoch_of(row.get(0))?,
            attempts: epoch_of(row.get(1))?,
            holder: holder.map(WorkerId::new).transpose()?,
            until: row.get::<_, Option<i64>>(3).map(time_from_micros),
            live: row.get(4),
        }))
    }
}

/// An epoch as the database's `bigint`.
pub(crate) fn epoch_param(epoch: u64) -> Result<i64, Error> {
    i64::try_from(epoch).map_err(|_| Error::Storage("an epoch beyond the database's range".to_owned()))
}

/// The error for a write or renewal under a stale epoch.
pub(crate) fn lost(lease: &Lease) -> Error {
    Error::LeaseLost { run: lease.run.clone(), epoch: lease.epoch }
}
