//! The runtime's one way into the shared pools ([`pool`](crate::pool), the `pools` feature): the
//! scope's draw and a model call's hold in it, as the guard and the model budget use them.
//!
//! With the `pools` feature, [`Draw`] is the pool module's `PoolDraw` and [`Held`] a call's
//! grant in its pools. Without it both are types no value has (`enum {}`): a scope's draw is
//! always `None`, every branch that handles one is dead code the compiler drops, and nothing of
//! `pool` is compiled. Outside `pool`, only this module and the host's entries to it
//! (`ScopeBuilder::pools` and its terms, `Scope::pools`, a journaled run's recorded pools, the
//! pool variants of the error enums) name pool types, each behind `#[cfg(feature = "pools")]`.
//!
//! # Invariants
//!
//! - A call holds something in its pools only through [`reserve`]: all or nothing across the
//!   draw's pools, in one transaction of their store.
//! - A hold is given back once: released ([`Held::release`], it is consumed) when its call is
//!   not sent, or settled ([`Held::settle`]) once when the call came back or was stopped. A
//!   store that fails or does not answer within the run's bounds leaves it to its lease's expiry,
//!   charged whole: never less than the truth.
//! - Without the feature, no value of [`Draw`] or [`Held`] exists, so none of their methods runs.

/// The largest output a model call is granted when neither the call nor the run's budgets set a
/// smaller one: a call drawn from pools, or a child scope's call under a spend budget of its tree
/// (so that one call never holds all that a shared budget has left). Public as
/// `pool::DEFAULT_OUTPUT_CAP`.
pub(crate) const DEFAULT_OUTPUT_CAP: u32 = 4_096;

#[cfg(feature = "pools")]
pub(crate) use with_pools::{Held, reserve};
#[cfg(not(feature = "pools"))]
pub(crate) use without_pools::{Draw, Held, reserve};

/// The pools a scope draws from, in one store, with the terms of its holds.
#[cfg(feature = "pools")]
pub(crate) type Draw = crate::pool::PoolDraw;

#[cfg(feature = "pools")]
mod with_pools {
    use std::sync::Arc;

    use crate::budgeted::CallError;
    use crate::guard::{Activity, Guard, SpendAsk};
    use crate::pool::backend::{Grant, PoolAsk, rules};
    use crate::pool::{Amount, PoolDraw};
    use crate::spend::{Micros, Price};
    use crate::transport::Usage;

    /// The first pause before a crowded pool is asked again ([`reserve`]).
    const CROWDED_FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(25);

    /// The longest pause between two asks of a crowded pool: short beside a lease (30 s by
    /// default), long enough that runs waiting on one pool ask it a few times a second at most.
    const CROWDED_LONGEST_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);

    /// A call's hold in its scope's pools.
    pub(crate) struct Held {
        grant: Grant,
        input: u64,
        /// The output cap the request went out with.
        sent: u64,
    }

    /// Reserves one call of `ask` in every pool of `draw`, its output at most `room` and the
    /// draw's cap; a pool without room halts the run.
    ///
    /// A pool that is crowded, not spent (the call would fit once the holds in flight settled,
    /// [`PoolRefusal::crowded`](crate::pool::backend::PoolRefusal::crowded)), is asked again
    /// after a pause that doubles from [`CROWDED_FIRST_PAUSE`] up to [`CROWDED_LONGEST_PAUSE`],
    /// within the run's deadline and cancellation: a hold in flight ends by its settlement or its
    /// lease's expiry, and the call holds nothing meanwhile.
    pub(crate) async fn reserve(
        draw: &PoolDraw,
        guard: &Guard,
        ask: SpendAsk,
        room: u64,
    ) -> Result<Held, CallError> {
        let cap = room.min(u64::from(draw.max_output()));
        let pool_ask = PoolAsk {
            pools: draw.names().to_vec(),
            input: ask.input,
            cap,
            price: ask.price,
            min_output: u64::from(guard.limits().min_output_tokens()),
            lease: draw.lease_duration(),
            holder: Arc::from(draw.holder_name()),
        };
        let mut pause = CROWDED_FIRST_PAUSE;
        loop {
            // Bounded by the deadline and the caller: a reservation given up may have been
            // taken, and is then charged whole when its lease expires.
            match guard.on_store(draw.store().reserve(pool_ask.clone())).await {
                Ok(Ok(Ok(grant))) => return Ok(Held { grant, input: ask.input, sent: grant.output }),
                Ok(Ok(Err(refusal))) if refusal.crowded => {
                    guard
                        .bounded(Activity::Model, tokio::time::sleep(pause))
                        .await
                        .map_err(CallError::Stopped)?;
                    pause = (pause * 2).min(CROWDED_LONGEST_PAUSE);
                }
                Ok(Ok(Err(refusal))) => return Err(CallError::Stopped(guard.refuse_pool(&refusal))),
                Ok(Err(error)) => return Err(CallError::Pool(error)),
                Err(stop) => return Err(CallError::Stopped(stop)),
            }
        }
    }

    impl Held {
        /// The input the hold was reserved for.
        pub(crate) fn input(&self) -> u64 {
            self.input
        }

        /// The output the pools granted.
        pub(crate) fn granted(&self) -> u64 {
            self.grant.output
        }

        /// This hold, its request going out with the output cap `sent`.
        pub(crate) fn sent(self, sent: u64) -> Self {
            Self { sent, ..self }
        }

        /// Releases the hold of a call that was never sent. A store that fails, or does not
        /// answer within the run's bounds ([`Guard::on_store`]), leaves it to expire, charged
        /// whole: never less than the truth.
        pub(crate) async fn release(self, draw: &PoolDraw, guard: &Guard) {
            match guard.on_store(draw.store().release(self.grant.hold)).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    tracing::warn!(error = %error, "a pool hold was not released; it is charged when its lease expires");
                }
                Err(_) => tracing::warn!(
                    "a pool hold's release was given up at the run's end; it is charged when its lease expires"
                ),
            }
        }

        /// Runs `sent`, renewing the hold every third of its lease until it completes.
        pub(crate) async fn renewing<F: Future>(&self, draw: &PoolDraw, sent: F) -> F::Output {
            let lease = draw.lease_duration();
            let every = (lease / 3).max(std::time::Duration::from_millis(1));
            let renew = async {
                loop {
                    tokio::time::sleep(every).await;
                    // A failed renewal is tried again; a hold no longer open needs none.
                    if let Ok(false) = draw.store().renew(self.grant.hold, lease).await {
                        std::future::pending::<()>().await;
                    }
                }
            };
            tokio::select! {
                biased;
                output = sent => output,
                () = renew => unreachable!("the renewal loop never ends"),
            }
        }

        /// Settles the hold: the provider's `usage`, priced; without one, what the request could
        /// have cost (its input and the output cap it was sent with), or for a stream cut past
        /// its reservation, at least that and the `cut` output counted. A store that fails
        /// leaves the hold to expire, charged whole.
        pub(crate) async fn settle(
            &self,
            draw: &PoolDraw,
            guard: &Guard,
            price: Option<&Price>,
            usage: Option<Usage>,
            cut: Option<u64>,
        ) {
            let charge = match (usage, cut) {
                (Some(usage), None) => Amount {
                    calls: 1,
                    tokens: usage.input_tokens.saturating_add(usage.output_tokens),
                    cost: price.map_or(Micros::ZERO, |price| price.cost(&usage)),
                },
                (_, Some(cut)) => rules::held(self.input, cut.max(self.sent), price),
                (None, None) => rules::held(self.input, self.sent, price),
            };
            match guard.on_store(draw.store().settle(self.grant.hold, charge)).await {
                Ok(Ok(_)) => {}
                Ok(Err(error)) => {
                    tracing::warn!(error = %error, "a pool hold was not settled; it is charged whole when its lease expires");
                }
                Err(_) => tracing::warn!(
                    "a pool hold's settlement was given up at the run's end; it is charged whole when its lease expires"
                ),
            }
        }
    }
}

/// The stand-ins without the `pools` feature: types no value has, whose methods cannot run.
#[cfg(not(feature = "pools"))]
mod without_pools {
    use crate::budgeted::CallError;
    use crate::guard::{Guard, SpendAsk};
    use crate::spend::Price;
    use crate::transport::Usage;

    /// No pools: a scope's draw is always `None`.
    #[derive(Clone, Debug)]
    pub(crate) enum Draw {}

    impl Draw {
        /// The largest output a call is granted (never asked: no draw exists).
        pub(crate) fn max_output(&self) -> u32 {
            match *self {}
        }
    }

    /// No pools: a call holds nothing in them.
    pub(crate) enum Held {}

    /// Never called: no draw exists.
    #[allow(clippy::unused_async, reason = "the same signature as the pools' own")]
    pub(crate) async fn reserve(draw: &Draw, _: &Guard, _: SpendAsk, _: u64) -> Result<Held, CallError> {
        match *draw {}
    }

    #[allow(clippy::unused_async, clippy::unused_self, reason = "the same signatures as the pools' own")]
    impl Held {
        pub(crate) fn input(&self) -> u64 {
            match *self {}
        }

        pub(crate) fn granted(&self) -> u64 {
            match *self {}
        }

        pub(crate) fn sent(self, _: u64) -> Self {
            match self {}
        }

        pub(crate) async fn release(self, _: &Draw, _: &Guard) {
            match self {}
        }

        pub(crate) async fn renewing<F: Future>(&self, _: &Draw, _: F) -> F::Output {
            match *self {}
        }

        pub(crate) async fn settle(
            &self,
            _: &Draw,
            _: &Guard,
            _: Option<&Price>,
            _: Option<Usage>,
            _: Option<u64>,
        ) {
            match *self {}
        }
    }
}
