//! A group's write statement and its parameters: the batches of many runs as arrays, one per
//! column, that the statement `unnest`s into rows.
//!
//! The statement's parts, in the order of its parameters: the batches' fences and their changes
//! to the runs' rows (one element per batch), then one insert per table of the rows that a batch
//! inserts as they are (one element per row, the recorded stream's lines among them), then the
//! events (numbered after the run's last one). Each part's columns and types are declared once, in [`BATCHES`], [`TABLES`] and
//! [`EVENTS`]; the statement's text and the arrays are both built from them.
//!
//! # Invariants
//!
//! - Only the fenced batches' rows are written: every insert takes the rows whose run the
//!   fences' update returned.
//! - A batch's changes to its run's row are those of its last entry of each kind (ledger,
//!   state, definition), in one update with its fence: the lease renewed, or released by
//!   [`Entry::Release`]; the cancel request cleared by [`Entry::CancelHonoured`].
//! - A batch's events are numbered in its order after the run's last event, read once per
//!   fenced run in the statement's snapshot, under the fence's lock, before any of the group's
//!   events: the statement holds at most one batch per run.
//! - The fence reaches each batch's run by its key, one lookup per batch (the row's place,
//!   `ctid`, read by id in a subquery that cannot become a join), then the row at that place:
//!   whatever the planner believes of the tables' sizes (a plan cached while the runs' table was
//!   nearly empty), a round never walks every leased run, and its cost grows with its group, not
//!   with the runs in flight. The place is the row's current one: the round's lock statement
//!   locked the group's rows before this statement's snapshot was taken, so no other
//!   transaction can have moved them (and a moved row would fail the fence: fail closed). The
//!   holder is compared with `IS NOT DISTINCT FROM` (a batch's holder is never null), which no
//!   index or hash can serve, so that the comparison cannot lead the planner to the index of
//!   the leased runs.
//! - A value whose type is not its column's is refused with an error (a defect of this module),
//!   never sent.

use std::sync::LazyLock;

use loopbound::journal::JournalError;
use loopbound::journal::backend::{Batch, Entry};
use tokio_postgres::types::ToSql;

/// A column's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Int,
    Bool,
    Bytes,
}

impl Kind {
    const fn sql(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Int => "bigint",
            Self::Bool => "bool",
            Self::Bytes => "bytea",
        }
    }
}

/// The batches' columns: the fence, then the run row's changes (null where the batch leaves a
/// column as it is).
const BATCHES: &[(&str, Kind)] = &[
    ("run_id", Kind::Text),
    ("epoch", Kind::Int),
    ("holder", Kind::Text),
    ("lease", Kind::Int),
    ("ledger", Kind::Text),
    ("state", Kind::Text),
    ("state_operation", Kind::Int),
    ("state_status", Kind::Text),
    ("definition", Kind::Text),
    ("cancel_honoured", Kind::Bool),
    ("release", Kind::Bool),
];

/// The tables whose rows a batch inserts as they are, with their columns.
const TABLES: [(&str, &[(&str, Kind)]); 7] = [
    ("loopbound_replies", &[("run_id", Kind::Text), ("ordinal", Kind::Int), ("reply", Kind::Text)]),
    (
        "loopbound_calls",
        &[
            ("run_id", Kind::Text),
            ("reply", Kind::Int),
            ("idx", Kind::Int),
            ("operation", Kind::Int),
            ("is_error", Kind::Bool),
            ("text", Kind::Bytes),
        ],
    ),
    (
        "loopbound_proposals",
        &[
            ("run_id", Kind::Text),
            ("ordinal", Kind::Int),
            ("reply", Kind::Int),
            ("idx", Kind::Int),
            ("tool", Kind::Text),
            ("capability", Kind::Text),
            ("effect", Kind::Text),
            ("arguments", Kind::Text),
            ("expires", Kind::Int),
        ],
    ),
    (
        "loopbound_decisions",
        &[
            ("run_id", Kind::Text),
            ("ordinal", Kind::Int),
            ("verdict", Kind::Text),
            ("decided_by", Kind::Text),
        ],
    ),
    ("loopbound_started", &[("run_id", Kind::Text), ("ordinal", Kind::Int), ("start", Kind::Int)]),
    (
        "loopbound_reconciliations",
        &[
            ("run_id", Kind::Text),
            ("ordinal", Kind::Int),
            ("start", Kind::Int),
            ("resolution", Kind::Text),
            ("result", Kind::Bytes),
            ("reconciled_by", Kind::Text),
        ],
    ),
    ("loopbound_updates", &[("run_id", Kind::Text), ("seq", Kind::Int), ("line", Kind::Text)]),
];

/// The events' columns: `ord` is an event's place among its batch's events.
const EVENTS: &[(&str, Kind)] = &[
    ("run_id", Kind::Text),
    ("ord", Kind::Int),
    ("kind", Kind::Text),
    ("name", Kind::Text),
    ("count", Kind::Int),
    ("operation", Kind::Text),
    ("decided_by", Kind::Text),
    ("reason", Kind::Text),
];

/// The parts of the statement, in the order of their parameters: the batches, each table, the
/// events.
fn parts() -> impl Iterator<Item = &'static [(&'static str, Kind)]> {
    std::iter::once(BATCHES).chain(TABLES.iter().map(|(_, columns)| *columns)).chain(std::iter::once(EVENTS))
}

/// Where the events' part is among [`parts`].
const EVENTS_PART: usize = TABLES.len() + 1;

/// Where the stream lines' part is among [`parts`]: the last table's.
const LINES_PART: usize = TABLES.len();

/// The write statement: the fences and their runs' changes, then one insert per table and the
/// events' insert, each of the fenced batches' rows only; returns the fenced runs.
pub(super) static WRITE: LazyLock<String> = LazyLock::new(|| {
    let mut next = 0;
    let mut unnest = |columns: &[(&str, Kind)]| -> String {
        let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
        let arrays: Vec<String> = columns
            .iter()
            .map(|(_, kind)| {
                next += 1;
                format!("${next}::{}[]", kind.sql())
            })
            .collect();
        format!("unnest({}) AS x({})", arrays.join(", "), names.join(", "))
    };
    let mut statement = format!(
        "WITH batch AS (SELECT x.*, \
                               (SELECT r.ctid FROM loopbound_runs r WHERE r.run_id = x.run_id) AS place \
                          FROM {}), \
         fenced AS (\
           UPDATE loopbound_runs r \
              SET lease_holder = CASE WHEN b.release THEN NULL ELSE r.lease_holder END, \
                  lease_until = CASE WHEN b.release THEN NULL \
                                     ELSE now() + b.lease * interval '1 microsecond' END, \
                  updated_at = now(), \
                  ledger = coalesce(b.ledger, r.ledger), \
                  state = coalesce(b.state, r.state), \
                  state_operation = CASE WHEN b.state IS NULL THEN r.state_operation ELSE b.state_operation END, \
                  state_status = CASE WHEN b.state IS NULL THEN r.state_status ELSE b.state_status END, \
                  definition = coalesce(b.definition, r.definition), \
                  cancel_by = CASE WHEN b.cancel_honoured THEN NULL ELSE r.cancel_by END \
             FROM batch b \
            WHERE r.ctid = b.place AND r.epoch = b.epoch \
              AND r.lease_holder IS NOT DISTINCT FROM b.holder AND r.lease_until > now() \
           RETURNING r.run_id), \
         last AS (\
           SELECT f.run_id, \
                  coalesce((SELECT max(e.seq) FROM loopbound_events e WHERE e.run_id = f.run_id), 0) AS seq \
             FROM fenced f)",
        unnest(BATCHES)
    );
    for (n, (table, columns)) in TABLES.iter().enumerate() {
        let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
        statement.push_str(&format!(
            ", rows{n} AS (INSERT INTO {table} ({}) SELECT x.* FROM {} \
             WHERE x.run_id IN (SELECT run_id FROM fenced))",
            names.join(", "),
            unnest(columns)
        ));
    }
    statement.push_str(&format!(
        ", events AS (INSERT INTO loopbound_events (run_id, seq, kind, name, count, operation, decided_by, reason) \
         SELECT x.run_id, last.seq + x.ord, x.kind, x.name, x.count, x.operation, x.decided_by, x.reason \
           FROM {} JOIN last ON last.run_id = x.run_id) \
         SELECT run_id FROM fenced",
        unnest(EVENTS)
    ));
    statement
});

/// One value of a row.
#[derive(Clone, Copy, Debug)]
enum Value<'a> {
    Text(Option<&'a str>),
    Int(Option<i64>),
    Bool(bool),
    Bytes(Option<&'a [u8]>),
}

/// One array parameter.
#[derive(Debug)]
enum Column<'a> {
    Text(Vec<Option<&'a str>>),
    Int(Vec<Option<i64>>),
    Bool(Vec<bool>),
    Bytes(Vec<Option<&'a [u8]>>),
}

impl<'a> Column<'a> {
    fn new(kind: Kind) -> Self {
        match kind {
            Kind::Text => Self::Text(Vec::new()),
            Kind::Int => Self::Int(Vec::new()),
            Kind::Bool => Self::Bool(Vec::new()),
            Kind::Bytes => Self::Bytes(Vec::new()),
        }
    }

    fn push(&mut self, value: Value<'a>) -> Result<(), JournalError> {
        match (self, value) {
            (Self::Text(column), Value::Text(value)) => column.push(value),
            (Self::Int(column), Value::Int(value)) => column.push(value),
            (Self::Bool(column), Value::Bool(value)) => column.push(value),
            (Self::Bytes(column), Value::Bytes(value)) => column.push(value),
            _ => return Err(JournalError::storage("a group's value does not match its column's type")),
        }
        Ok(())
    }

    fn param(&self) -> &(dyn ToSql + Sync) {
        match self {
            Self::Text(column) => column,
            Self::Int(column) => column,
            Self::Bool(column) => column,
            Self::Bytes(column) => column,
        }
    }
}

/// The statement's arrays: one list of columns per part, in [`parts`]' order.
#[derive(Debug)]
pub(super) struct Columns<'a> {
    parts: Vec<Vec<Column<'a>>>,
}

/// One batch of a group: its run, its fence (epoch, holder, lease in microseconds) and rows.
pub(super) struct Fenced<'a> {
    pub(super) run: &'a str,
    pub(super) epoch: i64,
    pub(super) holder: &'a str,
    pub(super) lease_micros: i64,
    pub(super) batch: &'a Batch,
}

const fn text(value: &str) -> Value<'_> {
    Value::Text(Some(value))
}

fn int(value: u32) -> Value<'static> {
    Value::Int(Some(i64::from(value)))
}

impl<'a> Columns<'a> {
    /// The arrays of `batches` (at most one per run).
    ///
    /// # Errors
    ///
    /// A storage error when a value's type is not its column's (a defect here).
    pub(super) fn of(batches: &[Fenced<'a>]) -> Result<Self, JournalError> {
        let parts = parts().map(|columns| columns.iter().map(|(_, kind)| Column::new(*kind)).collect());
        let mut columns = Self { parts: parts.collect() };
        for fenced in batches {
            columns.push(fenced)?;
        }
        Ok(columns)
    }

    /// Appends `values` as a row of part `part`.
    fn row(&mut self, part: usize, values: &[Value<'a>]) -> Result<(), JournalError> {
        let columns = self.parts.get_mut(part).ok_or_else(|| JournalError::storage("a group's part"))?;
        if columns.len() != values.len() {
            return Err(JournalError::storage("a group's row does not match its part's columns"));
        }
        columns.iter_mut().zip(values).try_for_each(|(column, value)| column.push(*value))
    }

    /// Adds `fenced`: its rows, then its fence and its run row's changes.
    fn push(&mut self, fenced: &Fenced<'a>) -> Result<(), JournalError> {
        let run = text(fenced.run);
        let (mut ledger, mut state, mut definition, mut cancel, mut release) =
            (None, None, None, false, false);
        let mut events = 0;
        for entry in &fenced.batch.entries {
            match entry {
                Entry::Reply(row) => self.row(1, &[run, int(row.ordinal), text(&row.reply)])?,
                Entry::Call(row) => self.row(
                    2,
                    &[
                        run,
                        int(row.reply),
                        int(row.index),
                        Value::Int(row.operation.map(i64::from)),
                        Value::Bool(row.is_error),
                        Value::Bytes(Some(row.text.as_bytes())),
                    ],
                )?,
                Entry::Proposal(row) => self.row(
                    3,
                    &[
                        run,
                        int(row.ordinal),
                        int(row.reply),
                        int(row.index),
                        text(&row.tool),
                        text(&row.capability),
                        text(&row.effect),
                        text(&row.arguments),
                        Value::Int(row.expires.map(|millis| i64::try_from(millis).unwrap_or(i64::MAX))),
                    ],
                )?,
                Entry::Decision(row) => {
                    self.row(4, &[run, int(row.ordinal), text(&row.verdict), text(&row.by)])?;
                }
                Entry::Started(row) => self.row(5, &[run, int(row.ordinal), int(row.start)])?,
                Entry::Reconciliation(row) => self.row(
                    6,
                    &[
                        run,
                        int(row.ordinal),
                        int(row.start),
                        text(&row.resolution),
                        Value::Bytes(row.result.as_deref().map(str::as_bytes)),
                        text(&row.by),
                    ],
                )?,
                Entry::Event(row) => {
                    events += 1;
                    self.row(
                        EVENTS_PART,
                        &[
                            run,
                            int(events),
                            text(&row.kind),
                            text(&row.name),
                            int(row.count),
                            Value::Text(row.operation.as_deref()),
                            Value::Text(row.by.as_deref()),
                            Value::Text(row.reason.as_deref()),
                        ],
                    )?;
                }
                // A host's check of the run's state, which a group cannot make: such a batch
                // goes on the single path (see `PostgresJournal::commit_batch`).
                Entry::ExpectState(_) => {
                    return Err(JournalError::storage("a batch expecting a state cannot join a group"));
                }
                // A host's command, which goes on the single path too.
                Entry::Expiry(_) => {
                    return Err(JournalError::storage("a host's new expiry cannot join a group"));
                }
                Entry::Ledger(value) => ledger = Some(value.as_str()),
                Entry::State(value) => state = Some(*value),
                Entry::Definition(value) => definition = Some(value.as_str()),
                Entry::CancelHonoured => cancel = true,
                Entry::Release => release = true,
                Entry::Update(row) => self.row(
                    LINES_PART,
                    &[run, Value::Int(Some(i64::try_from(row.seq).unwrap_or(i64::MAX))), text(&row.line)],
                )?,
            }
        }
        self.row(
            0,
            &[
                run,
                Value::Int(Some(fenced.epoch)),
                text(fenced.holder),
                Value::Int(Some(fenced.lease_micros)),
                Value::Text(ledger),
                Value::Text(state.map(loopbound::journal::RunState::name)),
                Value::Int(state.and_then(|state| state.operation()).map(i64::from)),
                Value::Text(state.and_then(|state| state.status()).map(loopbound::Status::as_str)),
                Value::Text(definition),
                Value::Bool(cancel),
                Value::Bool(release),
            ],
        )
    }

    /// The runs of the batches, in their order.
    pub(super) fn runs(&self) -> &(dyn ToSql + Sync) {
        self.parts.first().and_then(|batches| batches.first()).map_or(&NO_RUNS, Column::param)
    }

    /// The write statement's parameters, in its order.
    pub(super) fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.parts.iter().flatten().map(Column::param).collect()
    }
}

/// The runs of no batch.
static NO_RUNS: Vec<Option<&str>> = Vec::new();

#[cfg(test)]
mod tests {
    use loopbound::journal::backend::{EventRow, ReplyRow, UpdateRow};

    use super::*;

    fn event(kind: &str) -> Entry {
        Entry::Event(EventRow {
            kind: kind.to_owned(),
            name: "model".to_owned(),
            count: 1,
            operation: None,
            by: None,
            reason: None,
        })
    }

    #[test]
    fn the_statement_takes_one_array_per_column_in_order_and_events_are_numbered_per_batch() {
        let first = Batch {
            entries: vec![
                event("ModelCall"),
                Entry::Reply(ReplyRow { ordinal: 1, reply: "{}".to_owned() }),
                Entry::Ledger("a".to_owned()),
                event("ToolCall"),
                Entry::Ledger("b".to_owned()),
            ],
        };
        let second = Batch {
            entries: vec![
                event("RunEnded"),
                Entry::Update(UpdateRow { seq: 4, line: "{\"type\":\"text\"}".to_owned() }),
                Entry::Update(UpdateRow { seq: 5, line: "{\"type\":\"outcome\"}".to_owned() }),
                Entry::Release,
            ],
        };
        let fenced = |run, batch| Fenced { run, epoch: 1, holder: "w", lease_micros: 1, batch };
        let columns = Columns::of(&[fenced("r1", &first), fenced("r2", &second)]).expect("columns");
        let params = columns.params().len();
        assert_eq!(params, 53);
        assert!(WRITE.contains(&format!("${params}::text[]")), "{}", *WRITE);
        assert!(!WRITE.contains(&format!("${}::", params + 1)), "{}", *WRITE);
        let text = |part: usize, column: usize| match &columns.parts[part][column] {
            Column::Text(values) => values.clone(),
            other => panic!("not text: {other:?}"),
        };
        let ints = |part: usize, column: usize| match &columns.parts[part][column] {
            Column::Int(values) => values.clone(),
            other => panic!("not int: {other:?}"),
        };
        assert_eq!(text(0, 0), [Some("r1"), Some("r2")], "the batches' runs");
        assert_eq!(text(0, 4), [Some("b"), None], "the last ledger of each");
        assert!(matches!(&columns.parts[0][10], Column::Bool(values) if *values == [false, true]), "release");
        assert_eq!(text(1, 0), [Some("r1")], "one reply");
        assert_eq!(text(EVENTS_PART, 0), [Some("r1"), Some("r1"), Some("r2")], "the events' runs");
        assert_eq!(ints(EVENTS_PART, 1), [Some(1), Some(2), Some(1)], "numbered within each batch");
        assert_eq!(text(LINES_PART, 0), [Some("r2"), Some("r2")], "the lines' runs");
        assert_eq!(ints(LINES_PART, 1), [Some(4), Some(5)], "lines under their own numbers");
        assert!(WRITE.contains("x.decided_by, x.reason"), "a grouped event keeps its reason");
    }

    #[test]
    fn a_row_that_does_not_match_its_part_is_refused() {
        let mut columns = Columns::of(&[]).expect("columns");
        assert!(columns.row(1, &[text("r")]).is_err(), "too few values");
        assert!(columns.row(1, &[int(1), int(1), text("{}")]).is_err(), "a value of another type");
        assert!(columns.row(99, &[]).is_err(), "no such part");
    }
}
