//! Tenants: each one a daily token budget that every run started for it draws from, kept in a
//! shared pool ([`loopbound::pool`]) beside the journal, so that a tenant's budget holds across
//! restarts and across the processes of one journal.
//!
//! A tenant is configured at start-up (`--tenant acme=20000`: 20,000 tokens per UTC day); a
//! request names its tenant (`"tenant":"acme"`), and its run is labelled with it
//! ([`TENANT_LABEL`]) and draws from the pool `tenant:acme`. A resume draws from the pools the
//! run's definition names, whatever the request or the process ([`Tenants::store`]).
//!
//! # Invariants
//!
//! - A run draws only from the pool of a tenant configured here; a request that names another is
//!   refused before anything starts.
//! - Every model call of a tenant's run is reserved in its pool before it is sent (the library's
//!   guarantee); this module only names the pool and reads its figures.
//! - A tenant's budget is defined again at every start: a limit changed on the command line
//!   applies from the next call, and the current day's figures are kept.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use loopbound::pool::{DynPoolStore, PoolBudget, PoolError, PoolState, Window};
use serde::Serialize;

/// The label that stores a run's tenant in its journal.
pub const TENANT_LABEL: &str = "tenant";
/// The longest tenant name, in bytes.
pub const MAX_TENANT: usize = 32;

/// One tenant as configured: its name and its budget of tokens per UTC day.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenant {
    name: String,
    tokens_per_day: u64,
}

/// Why a `--tenant` option is not one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantError(String);

impl fmt::Display for TenantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a tenant is NAME=TOKENS (1 to {MAX_TENANT} of a-z, 0-9, '-' and '_', then a positive number of \
             tokens per day): {:?}",
            self.0
        )
    }
}

impl std::error::Error for TenantError {}

/// Whether `name` can name a tenant: 1 to [`MAX_TENANT`] lower-case ASCII letters, digits, `-`
/// and `_`.
#[must_use]
pub fn valid_name(name: &str) -> bool {
    (1..=MAX_TENANT).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_'))
}

impl FromStr for Tenant {
    type Err = TenantError;

    /// `NAME=TOKENS`, e.g. `acme=20000`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let refused = || TenantError(text.to_owned());
        let (name, tokens) = text.split_once('=').ok_or_else(refused)?;
        let tokens_per_day = tokens.parse::<u64>().ok().filter(|&tokens| tokens > 0).ok_or_else(refused)?;
        if !valid_name(name) {
            return Err(refused());
        }
        Ok(Self { name: name.to_owned(), tokens_per_day })
    }
}

impl Tenant {
    /// The tenant's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its budget: tokens per UTC day.
    #[must_use]
    pub fn tokens_per_day(&self) -> u64 {
        self.tokens_per_day
    }

    /// Its pool's name: `tenant:<name>`.
    fn pool(&self) -> String {
        format!("tenant:{}", self.name)
    }
}

/// The tenants of this service and the store of their pools.
#[derive(Clone, Debug, Default)]
pub struct Tenants {
    store: Option<Arc<dyn DynPoolStore>>,
    pools: Vec<(String, String)>,
}

/// One tenant's pool as a page shows it: today's window, what is settled and held, and the
/// budget.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TenantPool {
    /// The tenant.
    pub tenant: String,
    /// Its pool, as the store names it.
    pub pool: String,
    /// The window's length: `day`.
    pub window: &'static str,
    /// When the current window started, in milliseconds since 1970-01-01 UTC.
    pub window_start: u64,
    /// When it ends, if it ends.
    pub window_end: Option<u64>,
    /// The budget in tokens per window.
    pub limit: u64,
    /// Tokens settled in the window (charged by replies and by expired holds).
    pub settled: u64,
    /// Tokens held by calls in flight.
    pub held: u64,
    /// Tokens left for new calls: the limit less what is settled and held.
    pub left: u64,
    /// Calls in flight.
    pub holds: u64,
}

impl TenantPool {
    fn of(tenant: &str, state: &PoolState) -> Self {
        let limit = state.budget.tokens().unwrap_or(0);
        let (settled, held) = (state.settled.tokens, state.reserved.tokens);
        Self {
            tenant: tenant.to_owned(),
            pool: state.name.as_str().to_owned(),
            window: state.budget.window().as_str(),
            window_start: state.window_start,
            window_end: state.window_end,
            limit,
            settled,
            held,
            left: limit.saturating_sub(settled.saturating_add(held)),
            holds: state.holds,
        }
    }
}

impl Tenants {
    /// No tenant: runs draw from no pool.
    #[must_use]
    pub fn none() -> Self {
        Self::default()
    }

    /// `tenants`, their pools defined (or their limits set again) in `store`.
    ///
    /// # Errors
    ///
    /// The store's error; a tenant named twice is [`PoolError::InvalidBudget`].
    pub async fn define(store: Arc<dyn DynPoolStore>, tenants: &[Tenant]) -> Result<Self, PoolError> {
        let mut pools: Vec<(String, String)> = Vec::with_capacity(tenants.len());
        for tenant in tenants {
            if pools.iter().any(|(name, _)| name == tenant.name()) {
                return Err(PoolError::InvalidBudget);
            }
            let pool = tenant.pool();
            let budget = PoolBudget::default().with_tokens(tenant.tokens_per_day).per(Window::Day);
            store.define(&pool, budget).await?;
            pools.push((tenant.name.clone(), pool));
        }
        Ok(Self { store: Some(store), pools })
    }

    /// The pool store, for a resume whose run draws from pools.
    #[must_use]
    pub fn store(&self) -> Option<&Arc<dyn DynPoolStore>> {
        self.store.as_ref()
    }

    /// Whether `name` is a configured tenant.
    #[must_use]
    pub fn knows(&self, name: &str) -> bool {
        self.pools.iter().any(|(tenant, _)| tenant == name)
    }

    /// The configured tenants' names, in the order given.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.pools.iter().map(|(name, _)| name.as_str())
    }

    /// What a new run of tenant `name` draws from: the store and its pool's name; `None` for a
    /// tenant not configured here.
    #[must_use]
    pub fn draw(&self, name: &str) -> Option<(&Arc<dyn DynPoolStore>, &str)> {
        let store = self.store.as_ref()?;
        let (_, pool) = self.pools.iter().find(|(tenant, _)| tenant == name)?;
        Some((store, pool.as_str()))
    }

    /// Every tenant's pool now, in the order configured.
    ///
    /// # Errors
    ///
    /// The store's error.
    pub async fn pools(&self) -> Result<Vec<TenantPool>, PoolError> {
        let Some(store) = &self.store else { return Ok(Vec::new()) };
        let mut states = Vec::with_capacity(self.pools.len());
        for (tenant, pool) in &self.pools {
            states.push(TenantPool::of(tenant, &store.state(pool).await?));
        }
        Ok(states)
    }
}

#[cfg(test)]
mod tests {
    use loopbound::pool::MemoryPools;

    use super::*;

    #[test]
    fn a_tenant_option_is_a_name_and_a_positive_daily_budget() {
        let acme: Tenant = "acme=20000".parse().expect("a tenant");
        assert_eq!((acme.name(), acme.tokens_per_day()), ("acme", 20_000));
        for bad in [
            "acme",
            "acme=0",
            "acme=-1",
            "=5",
            "Acme=5",
            "a b=5",
            "acme=5k",
            &format!("{}=5", "a".repeat(33)),
        ] {
            assert_eq!(bad.parse::<Tenant>(), Err(TenantError(bad.to_owned())), "{bad}");
        }
    }

    #[tokio::test]
    async fn tenants_define_their_pools_and_read_them_back() {
        let store: Arc<dyn DynPoolStore> = Arc::new(MemoryPools::new());
        let given: Vec<Tenant> =
            ["acme=2000", "globex=500"].iter().map(|t| t.parse().expect("a tenant")).collect();
        let tenants = Tenants::define(Arc::clone(&store), &given).await.expect("defined");
        assert_eq!(tenants.names().collect::<Vec<_>>(), ["acme", "globex"]);
        assert!(tenants.knows("acme") && !tenants.knows("initech"));
        assert!(tenants.draw("initech").is_none());
        let (_, pool) = tenants.draw("globex").expect("a draw");
        assert_eq!(pool, "tenant:globex");
        let pools = tenants.pools().await.expect("read");
        assert_eq!(
            pools
                .iter()
                .map(|p| (p.tenant.as_str(), p.window, p.limit, p.settled, p.held, p.left))
                .collect::<Vec<_>>(),
            [("acme", "day", 2000, 0, 0, 2000), ("globex", "day", 500, 0, 0, 500)]
        );
        let twice: Vec<Tenant> = ["acme=1", "acme=2"].iter().map(|t| t.parse().expect("a tenant")).collect();
        assert!(matches!(Tenants::define(store, &twice).await, Err(PoolError::InvalidBudget)));
        assert_eq!(Tenants::none().pools().await.expect("none"), []);
    }
}
