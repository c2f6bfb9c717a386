//! The tools the loop traces call, over a small deterministic world kept in the run's scope:
//! jobs to poll, pages, files, a flaky endpoint, a search, records and the seed's ticket.
//!
//! # Invariants
//!
//! - A tool's result depends only on its arguments and on what the run did before (how often a
//!   job or a URL was asked, what was written): a trace replays the same way under every policy.
//! - `job_status` of job `0` never changes; of job `n ≥ 1` it reaches `done` on its `n`-th poll;
//!   of job `100 + n` it does the same, reporting `queued` twice first. `fetch` of `flaky-k`
//!   fails its first `k` calls; of `down` always fails. `lookup` fails for every id but 7.

use std::collections::BTreeMap;
use std::sync::Mutex;

use loopbound::{RegistrationError, ToolBuilder, ToolContext, ToolSet};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The capability every trace tool needs.
pub const CAPABILITY: &str = "world";

/// What the tools of one run have changed or counted.
#[derive(Debug, Default)]
pub struct World {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    asked: BTreeMap<String, u32>,
    files: BTreeMap<String, String>,
}

impl World {
    /// How many times `key` was asked before (0 the first time), counting this one.
    fn ask(&self, key: String) -> u32 {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let asked = state.asked.entry(key).or_insert(0);
        *asked += 1;
        *asked - 1
    }

    fn read(&self, path: &str) -> String {
        let state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        state.files.get(path).cloned().unwrap_or_else(|| "v0".to_owned())
    }

    fn write(&self, path: String, text: String) {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        state.files.insert(path, text);
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Job {
    job: i64,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Seconds {
    seconds: i64,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Cursor {
    cursor: i64,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Path {
    path: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Write {
    path: String,
    text: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Url {
    url: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Query {
    q: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Id {
    id: i64,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Ticket {
    input: i64,
}

/// What job `job` reports on its `nth` poll (0-based).
fn job_status(job: i64, nth: u32) -> String {
    let (steps, stall) = if job >= 100 { (job - 100, 2) } else { (job, 0) };
    let nth = i64::from(nth);
    if steps == 0 {
        return "running 10%".to_owned();
    }
    if nth < stall {
        return "queued".to_owned();
    }
    let progressed = nth - stall + 1;
    if progressed >= steps { "done".to_owned() } else { format!("running {}%", 100 * progressed / steps) }
}

/// The world's tools.
///
/// # Panics
///
/// Never: every name is valid and distinct (checked by the tests).
#[must_use]
pub fn tools() -> ToolSet<World> {
    define().unwrap_or_else(|error| unreachable!("valid, distinct tool names: {error}"))
}

/// The world's tools, or why they cannot be a set.
fn define() -> Result<ToolSet<World>, RegistrationError> {
    let job_status = ToolBuilder::new("job_status", CAPABILITY).build(
        |input: Job, call: ToolContext<World>| async move {
            let nth = call.state().ask(format!("job {}", input.job));
            Ok::<_, String>(job_status(input.job, nth))
        },
    )?;
    let sleep = ToolBuilder::new("sleep", CAPABILITY).build(
        |input: Seconds, _call: ToolContext<World>| async move {
            Ok::<_, String>(format!("slept {}s", input.seconds))
        },
    )?;
    let list_page = ToolBuilder::new("list_page", CAPABILITY).build(
        |input: Cursor, _call: ToolContext<World>| async move {
            Ok::<_, String>(if input.cursor >= 9 {
                format!("page {}: 3 items, last page", input.cursor)
            } else {
                format!("page {}: 10 items, next cursor {}", input.cursor, input.cursor + 1)
            })
        },
    )?;
    let read_file = ToolBuilder::new("read_file", CAPABILITY)
            .build(|input: Path, call: ToolContext<World>| async move {
                Ok::<_, String>(call.state().read(&input.path))
            })
            ?;
    let write_file = ToolBuilder::new("write_file", CAPABILITY).build(
        |input: Write, call: ToolContext<World>| async move {
            call.state().write(input.path, input.text);
            Ok::<_, String>("written".to_owned())
        },
    )?;
    let fetch =
        ToolBuilder::new("fetch", CAPABILITY).build(|input: Url, call: ToolContext<World>| async move {
            let nth = call.state().ask(format!("url {}", input.url));
            let failures = input.url.strip_prefix("flaky-").and_then(|k| k.parse::<u32>().ok());
            match failures {
                Some(failures) if nth >= failures => Ok("payload".to_owned()),
                _ => Err("503 service unavailable".to_owned()),
            }
        })?;
    let search = ToolBuilder::new("search", CAPABILITY).build(
        |input: Query, _call: ToolContext<World>| async move {
            Ok::<_, String>(format!("results for {}: documents 1, 2, 3", input.q))
        },
    )?;
    let open =
        ToolBuilder::new("open", CAPABILITY).build(|input: Id, _call: ToolContext<World>| async move {
            Ok::<_, String>(format!("document {}", input.id))
        })?;
    let lookup =
        ToolBuilder::new("lookup", CAPABILITY).build(|input: Id, _call: ToolContext<World>| async move {
            if input.id == 7 { Ok("record 7".to_owned()) } else { Err(format!("no record {}", input.id)) }
        })?;
    let read_ticket = ToolBuilder::new("read_ticket", CAPABILITY).build(
        |input: Ticket, _call: ToolContext<World>| async move {
            Ok::<_, String>(if input.input == 42 {
                "Ticket 42: Login returns HTTP 401.".to_owned()
            } else {
                "NotFound: only ticket 42 is in scope.".to_owned()
            })
        },
    )?;
    let finish =
        ToolBuilder::new("finish", CAPABILITY).build(|_: Ticket, _call: ToolContext<World>| async move {
            Ok::<_, String>("Review finished.".to_owned())
        })?;
    ToolSet::builder()
        .add(&job_status)
        .add(&sleep)
        .add(&list_page)
        .add(&read_file)
        .add(&write_file)
        .add(&fetch)
        .add(&search)
        .add(&open)
        .add(&lookup)
        .add(&read_ticket)
        .add(&finish)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_report_as_documented() {
        let reports = |job| (0..4).map(|nth| job_status(job, nth)).collect::<Vec<_>>();
        assert_eq!(reports(0), ["running 10%"; 4]);
        assert_eq!(reports(2), ["running 50%", "done", "done", "done"]);
        assert_eq!(reports(102), ["queued", "queued", "running 50%", "done"]);
    }

    #[test]
    fn every_tool_is_in_the_set() {
        assert_eq!(tools().definitions().len(), 11);
    }
}
