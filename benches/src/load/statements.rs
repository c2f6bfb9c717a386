//! What the PostgreSQL journal's statements cost the server over a load (`load --pg-stats`):
//! `pg_stat_statements` loaded on the load's own throwaway cluster, its counts reset after the
//! warm-up, and the costliest statements printed once every run has ended.
//!
//! # Invariants
//!
//! - Only the measured runs are counted: the counts are reset after the warm-up, and the
//!   statements this module sends itself are left out of the table.
//! - The extension changes nothing of the journal's durability: `fsync` and
//!   `synchronous_commit` stay as the cluster set them; it adds its own small cost per
//!   statement (planning is tracked too), the same before and after a change being measured.

use std::fmt::Write as _;

use loopbound_testkit::postgres::Cluster;

/// The server settings that load and configure the extension.
pub const SETTINGS: [&str; 3] = [
    "shared_preload_libraries=pg_stat_statements",
    "pg_stat_statements.track=all",
    "pg_stat_statements.track_planning=on",
];

/// How many statements the table lists.
const TOP: usize = 15;

/// The extension installed in one database of a cluster.
#[derive(Debug)]
pub struct Statements<'a> {
    cluster: &'a Cluster,
    database: String,
}

impl<'a> Statements<'a> {
    /// Creates the extension in `database` of `cluster`, which must have been started with
    /// [`SETTINGS`].
    ///
    /// # Errors
    ///
    /// The server's error text when the extension cannot be created.
    pub fn install(cluster: &'a Cluster, database: &str) -> Result<Self, String> {
        cluster.try_execute(database, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")?;
        Ok(Self { cluster, database: database.to_owned() })
    }

    /// Forgets every count so far.
    ///
    /// # Errors
    ///
    /// The server's error text.
    pub fn reset(&self) -> Result<(), String> {
        self.cluster.try_execute(&self.database, "SELECT pg_stat_statements_reset()").map(drop)
    }

    /// The costliest statements since the last reset, by execution plus planning time, as text:
    /// one line each, then the totals.
    ///
    /// # Errors
    ///
    /// The server's error text.
    pub fn top(&self) -> Result<String, String> {
        let own = "query NOT LIKE '%pg_stat_statements%'";
        let rows = self.cluster.try_execute(
            &self.database,
            &format!(
                "SELECT calls, round(total_exec_time::numeric, 1), round(total_plan_time::numeric, 1), \
                        plans, rows, wal_bytes, \
                        left(regexp_replace(query, '\\s+', ' ', 'g'), 110) \
                   FROM pg_stat_statements WHERE {own} \
                  ORDER BY total_exec_time + total_plan_time DESC LIMIT {TOP}"
            ),
        )?;
        let totals = self.cluster.try_execute(
            &self.database,
            &format!(
                "SELECT sum(calls), round(sum(total_exec_time)::numeric, 1), \
                        round(sum(total_plan_time)::numeric, 1), sum(plans), sum(wal_bytes) \
                   FROM pg_stat_statements WHERE {own}"
            ),
        )?;
        let mut text = String::from(
            "pg_stat_statements over the measured runs (calls | exec ms | plan ms | plans | rows | WAL bytes | statement):\n",
        );
        for line in rows.lines().filter(|line| !line.trim().is_empty()) {
            text.push_str("  ");
            text.push_str(line);
            text.push('\n');
        }
        let _ = writeln!(text, "  total (calls | exec ms | plan ms | plans | WAL bytes): {}", totals.trim());
        let tables = self.cluster.try_execute(
            &self.database,
            "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_dead_tup, idx_scan, seq_scan \
               FROM pg_stat_user_tables WHERE n_tup_ins + n_tup_upd > 0 ORDER BY relname",
        )?;
        text.push_str("tables since the cluster started (name | inserted | updated | heap-only updates | dead | index scans | scans):\n");
        for line in tables.lines().filter(|line| !line.trim().is_empty()) {
            text.push_str("  ");
            text.push_str(line);
            text.push('\n');
        }
        Ok(text)
    }
}
