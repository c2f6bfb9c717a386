//! The loop traces: what a model asks for, turn after turn, and the verdict a user wants.
//!
//! A progressing trace ends with an answer once its work is done; the run should complete. A
//! stuck trace never ends by itself; the run should halt, the earlier the better.
//!
//! # Invariants
//!
//! - A trace is a pure function of the turn (1 for the first model call): it never reads what
//!   the tools answered, so every policy sees the same requests until it stops the run.
//! - Every progressing trace answers within 20 turns, below every policy's model-call budget.

/// What the model does on one turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Turn {
    /// One tool call: the tool's name and its JSON arguments.
    Call(&'static str, String),
    /// The model answers with text: the run ends.
    Answer,
}

/// Whether a user wants the run to go on to its answer or to be stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The loop makes progress: it should complete.
    Progresses,
    /// The loop makes no progress: it should be halted.
    Stuck,
}

/// One scripted loop.
#[derive(Clone, Copy, Debug)]
pub struct Trace {
    /// A short name.
    pub name: &'static str,
    /// What a user wants.
    pub verdict: Verdict,
    /// The model's turn `n` (1-based).
    pub turn: fn(usize) -> Turn,
}

fn call(tool: &'static str, arguments: String) -> Turn {
    Turn::Call(tool, arguments)
}

fn job(id: i64) -> Turn {
    call("job_status", format!(r#"{{"job":{id}}}"#))
}

fn sleep() -> Turn {
    call("sleep", r#"{"seconds":5}"#.to_owned())
}

fn page(cursor: usize) -> Turn {
    call("list_page", format!(r#"{{"cursor":{cursor}}}"#))
}

fn read(path: &str) -> Turn {
    call("read_file", format!(r#"{{"path":"{path}"}}"#))
}

fn write(path: &str, text: &str) -> Turn {
    call("write_file", format!(r#"{{"path":"{path}","text":"{text}"}}"#))
}

fn fetch(url: &str) -> Turn {
    call("fetch", format!(r#"{{"url":"{url}"}}"#))
}

fn search(q: &str) -> Turn {
    call("search", format!(r#"{{"q":"{q}"}}"#))
}

fn open(id: usize) -> Turn {
    call("open", format!(r#"{{"id":{id}}}"#))
}

fn lookup(id: usize) -> Turn {
    call("lookup", format!(r#"{{"id":{id}}}"#))
}

fn ticket(id: usize) -> Turn {
    call("read_ticket", format!(r#"{{"input":{id}}}"#))
}

/// Turn `n` of `steps`, then the answer.
fn then_answer(steps: &[Turn], n: usize) -> Turn {
    steps.get(n - 1).cloned().unwrap_or(Turn::Answer)
}

/// Turn `n` of `pattern`, repeated forever.
fn forever(pattern: &[Turn], n: usize) -> Turn {
    pattern[(n - 1) % pattern.len()].clone()
}

/// `polls` polls of job `id`, then the answer.
fn polls(id: i64, polls: usize, n: usize) -> Turn {
    if n <= polls { job(id) } else { Turn::Answer }
}

const fn progresses(name: &'static str, turn: fn(usize) -> Turn) -> Trace {
    Trace { name, verdict: Verdict::Progresses, turn }
}

const fn stuck(name: &'static str, turn: fn(usize) -> Turn) -> Trace {
    Trace { name, verdict: Verdict::Stuck, turn }
}

/// Every trace, progressing ones first.
pub const TRACES: &[Trace] = &[
    progresses("poll done after 2", |n| polls(2, 2, n)),
    progresses("poll done after 4", |n| polls(4, 4, n)),
    progresses("poll done after 8", |n| polls(8, 8, n)),
    progresses("poll done after 12", |n| polls(12, 12, n)),
    progresses("poll queued twice, then done", |n| polls(103, 5, n)),
    progresses("poll two jobs in turn", |n| {
        if n <= 6 { job(if n % 2 == 1 { 3 } else { 4 }) } else { Turn::Answer }
    }),
    progresses("poll and sleep", |n| then_answer(&[job(3), sleep(), job(3), sleep(), job(3)], n)),
    progresses("pagination, 5 pages", |n| if n <= 5 { page(n - 1) } else { Turn::Answer }),
    progresses("pagination, 10 pages", |n| if n <= 10 { page(n - 1) } else { Turn::Answer }),
    progresses("re-read after a write", |n| {
        then_answer(&[read("a.txt"), write("a.txt", "v1"), read("a.txt")], n)
    }),
    progresses("edit loop, two edits", |n| {
        then_answer(
            &[read("a.txt"), write("a.txt", "v1"), read("a.txt"), write("a.txt", "v2"), read("a.txt")],
            n,
        )
    }),
    progresses("retry after one transient error", |n| then_answer(&[fetch("flaky-1"), fetch("flaky-1")], n)),
    progresses("retry after two transient errors", |n| {
        then_answer(&[fetch("flaky-2"), fetch("flaky-2"), fetch("flaky-2")], n)
    }),
    progresses("the seed's complete", |n| {
        then_answer(&[ticket(42), call("finish", r#"{"input":42}"#.to_owned())], n)
    }),
    progresses("search, then open three", |n| then_answer(&[search("login"), open(1), open(2), open(3)], n)),
    progresses("read three files", |n| then_answer(&[read("a.txt"), read("b.txt"), read("c.txt")], n)),
    progresses("a wrong id, then the right one", |n| then_answer(&[lookup(3), lookup(7)], n)),
    stuck("the seed's repeat", |_| ticket(42)),
    stuck("the seed's changing", ticket),
    stuck("poll that never changes", |_| job(0)),
    stuck("poll and sleep, never changes", |n| forever(&[job(0), sleep()], n)),
    stuck("A-B oscillation", |n| forever(&[search("login"), open(1)], n)),
    stuck("A-B-C cycle", |n| forever(&[search("login"), open(1), read("a.txt")], n)),
    stuck("A-B-C-D cycle", |n| forever(&[search("login"), open(1), open(2), read("a.txt")], n)),
    stuck("pagination that loops back", |n| forever(&[page(3), page(4)], n)),
    stuck("one tool, three queries in a loop", |n| forever(&[search("a"), search("b"), search("c")], n)),
    stuck("two stuck jobs in turn", |n| {
        forever(&[job(0), call("job_status", r#"{"job":-1}"#.to_owned())], n)
    }),
    stuck("write then read the same, forever", |n| forever(&[write("a.txt", "v1"), read("a.txt")], n)),
    stuck("re-read with no write", |_| read("a.txt")),
    stuck("retry a permanent error", |_| fetch("down")),
    stuck("failing calls with fresh arguments", |n| lookup(100 + n)),
    stuck("two tools failing in turn, fresh arguments", |n| {
        if n % 2 == 1 { lookup(100 + n) } else { fetch(&format!("down-{n}")) }
    }),
    stuck("arguments that never bind", |n| call("lookup", format!(r#"{{"id":"x{n}"}}"#))),
    stuck("a tool that does not exist", |n| call("lookup_order", format!(r#"{{"id":{n}}}"#))),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_are_at_least_thirty_traces_of_both_verdicts() {
        let stuck = TRACES.iter().filter(|trace| trace.verdict == Verdict::Stuck).count();
        assert_eq!((TRACES.len(), stuck), (34, 17));
    }

    #[test]
    fn every_progressing_trace_answers_within_twenty_turns() {
        for trace in TRACES.iter().filter(|trace| trace.verdict == Verdict::Progresses) {
            assert!((1..=20).any(|n| (trace.turn)(n) == Turn::Answer), "{}", trace.name);
        }
    }
}
