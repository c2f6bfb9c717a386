//! The human-readable transcript: a labelled header, the ordered events, the status and the text.
//!
//! # Invariants
//!
//! - The header comes first and starts with the agent's composition, then the transport, the
//!   granted capabilities, the limits, the progress policy (only when one is active, so a run
//!   under exact repetition prints no such line) and the completion condition.
//! - The text is printed only when the status keeps it; under `Incomplete` it is flagged as not a
//!   completed task.
//! - The spend comes last, and only when there is one: budgets that reserved, or a provider that
//!   reported usage. The header's limits line states the budgets, and its prices line the price.
//! - Nothing here formats with `Debug` or reads a clock: the same report gives the same text.
//! - What the model or a provider wrote (the text, the detail) and what the environment
//!   configured (the transport's label) are printed through [`visible`]: no control character
//!   or escape sequence reaches the terminal, so a reply cannot redraw the screen or fake a line.
//!   The text is one value on its label's line; long values wrap under the value column, so no
//!   part of it can stand where a label stands.

use std::borrow::Cow;
use std::fmt::Write as _;

use loopbound::spend::{Reserved, Spend};
use loopbound::{ControlEvent, EventKind, HaltReason, Outcome, Status};

use crate::report::{Header, Report};
use crate::visible::visible;
use crate::vocabulary::{progress_items, status_exit_code};

/// Width of the label column.
const LABEL: usize = 14;
/// Lines are wrapped before this many characters.
const WIDTH: usize = 100;

/// The header, the events, the status and the kept text, as the console prints them.
#[must_use]
pub fn render_text(report: &Report) -> String {
    let mut text = render_header(&report.header);
    text.push('\n');
    text.push_str(&render_outcome(&report.outcome));
    text
}

/// The header: what the run is bounded by, stated before it starts.
#[must_use]
pub fn render_header(header: &Header) -> String {
    let mut out = String::new();
    labelled(&mut out, "agent", &header.agent.loop_line());
    labelled(&mut out, "", &header.agent.absent_line());
    labelled(&mut out, "transport", &visible(&header.transport));
    labelled(&mut out, "capabilities", &header.capabilities.join(", "));
    labelled_items(&mut out, "limits", &header.limits.to_string());
    let progress = progress_items(&header.progress);
    if !progress.is_empty() {
        labelled_items(&mut out, "progress", &progress.join(", "));
    }
    if let Some(price) = &header.price {
        labelled(&mut out, "prices", &visible(&price.to_string()));
    }
    labelled(&mut out, "completion", header.completion);
    let scenario = if header.live {
        format!(
            "{}: its capabilities and limits, with a live model whose replies are its own",
            header.scenario
        )
    } else {
        format!("{}: {}", header.scenario, header.scenario.demonstrates())
    };
    labelled(&mut out, "scenario", &scenario);
    out
}

/// The ordered events, then the status, only when kept the text, and the spend when there is
/// one.
#[must_use]
pub fn render_outcome(outcome: &Outcome) -> String {
    let mut out = render_events(outcome);
    out.push('\n');
    out.push_str(&render_ending(outcome));
    out
}

/// The ordered events.
#[must_use]
pub fn render_events(outcome: &Outcome) -> String {
    let mut out = String::new();
    if outcome.events().is_empty() {
        labelled(&mut out, "events", "none");
    } else {
        labelled(&mut out, "events", "in order; a halt's count is the count it stopped at");
        out.push_str("   #  kind              name           count\n");
        for (event, number) in outcome.events().iter().zip(1..) {
            event_line(&mut out, number, event);
        }
    }
    out
}

/// The status, its detail or operation, only when kept the text, then the spend if the run
/// spent or reserved anything (a run without budgets whose provider reported no usage shows
/// none).
#[must_use]
pub fn render_ending(outcome: &Outcome) -> String {
    let mut out = String::new();
    let status = outcome.status();
    labelled(
        &mut out,
        "status",
        &format!("{status} (exit {}): {}", status_exit_code(status), meaning(status)),
    );
    if let Some(detail) = outcome.detail() {
        labelled(&mut out, "detail", &visible(detail));
    }
    if let Some(operation) = outcome.operation() {
        labelled(&mut out, "operation", &visible(operation));
    }
    if let Some(text) = outcome.text() {
        labelled(&mut out, "text", &format!("\"{}\"", visible(text)));
        if status == Status::Incomplete {
            labelled(
                &mut out,
                "",
                "NOT a completed task: the model's words only, the host's condition does not hold",
            );
        }
    }
    if *outcome.spend() != Spend::default() {
        render_spend(&mut out, outcome.spend());
    }
    out
}

/// The spend block: tokens and money settled, calls over their reservation, the overshoot past
/// the budgets, and what calls cut off in flight still hold.
pub fn render_spend(out: &mut String, spend: &Spend) {
    let settled = spend.settled;
    labelled(
        out,
        "spend",
        &format!(
            "settled {} input + {} output = {} tokens ({} input cached), cost {}",
            settled.input_tokens,
            settled.output_tokens,
            settled.total_tokens(),
            settled.cached_input_tokens,
            spend.cost
        ),
    );
    labelled(
        out,
        "",
        &format!(
            "calls over their reservation {}, overshoot past the budgets {} tokens and {}",
            spend.calls_over_reservation, spend.overshoot_tokens, spend.overshoot_cost
        ),
    );
    let held = spend.reserved;
    if held != Reserved::default() {
        let output = if held.output_tokens == u64::MAX {
            "uncapped".to_owned()
        } else {
            held.output_tokens.to_string()
        };
        labelled(
            out,
            "",
            &format!(
                "still reserved by a call stopped in flight (it may be billed): {} input, {output} output \
                 tokens, {}",
                held.input_tokens, held.cost
            ),
        );
    }
}

/// What a status means for the reader.
const fn meaning(status: Status) -> &'static str {
    match status {
        Status::Completed => "the host's completion condition holds",
        Status::Incomplete => "the run ended, but the host's completion condition does not hold",
        Status::PermissionDenied => "controlled stop, a tool was called without its capability",
        Status::RepeatedCall => "controlled stop, a call was asked for again with the same arguments",
        Status::ToolBudget => "controlled stop, the tool-call budget was spent",
        Status::ModelBudget => "controlled stop, the model-call budget was spent",
        Status::DeadlineExceeded => "controlled stop, the deadline passed",
        Status::ProviderUnavailable => {
            "the provider could not serve the call: unreachable, timed out, rate limited, overloaded or failing"
        }
        Status::TooManyCalls => "controlled stop, a reply asked for more tool calls than the bound",
        Status::AwaitingApproval => {
            "controlled stop, a proposal waits for the host's decision; resume after it"
        }
        Status::Denied => "controlled stop, the policy or an approver refused a proposal",
        Status::Ambiguous => {
            "controlled stop, a crash fell between an effect's start and its result; reconcile it"
        }
        Status::TokenBudget => {
            "controlled stop, a token budget had no room for the next call, or a report went past it"
        }
        Status::CostBudget => "controlled stop, the cost budget had no room for the next call or priced tool",
        Status::ToolLimit => "controlled stop, a tool reached its own per-run limit",
        Status::Closed => "a host closed the run for good; nothing runs in it again",
        Status::NoProgress => {
            "controlled stop, the calls went round a cycle or failed in a row without progress"
        }
        _ => "a status this console does not describe yet",
    }
}

/// What an event records, for the reader.
const fn gloss(kind: EventKind) -> &'static str {
    match kind {
        EventKind::ModelCall => "a transport attempt, counted before it was sent",
        EventKind::Middleware => "the middleware saw the call, before the guard",
        EventKind::ToolCall => "the guard admitted the call, counted before the body ran",
        EventKind::Halt(HaltReason::PermissionDenied) => "halt: capability not granted, the body never ran",
        EventKind::Halt(HaltReason::RepeatedCall) => "halt: same tool and arguments again, refused",
        EventKind::Halt(HaltReason::ToolBudget) => "halt: tool budget spent, refused before the body",
        EventKind::Halt(HaltReason::ModelBudget) => "halt: model budget spent, the call was not sent",
        EventKind::Halt(HaltReason::DeadlineExceeded) => "halt: the deadline passed, the wait was dropped",
        EventKind::Halt(HaltReason::TooManyCalls) => "halt: the reply asked for too many calls, none ran",
        EventKind::Halt(HaltReason::Denied) => "halt: the proposal was refused, the body never ran",
        EventKind::Halt(HaltReason::TokenBudget) => "halt: token budget, no further call is sent",
        EventKind::Halt(HaltReason::CostBudget) => "halt: cost budget, no further call is sent or run",
        EventKind::Halt(HaltReason::ToolLimit) => "halt: the tool's own limit, refused before the body",
        EventKind::Halt(HaltReason::NoProgress) => "halt: a cycle or a streak of failures, no progress",
        EventKind::Nudged => "the repeat was answered with a warning instead of running",
        EventKind::Proposed => "proposal written, before anything is decided or run",
        EventKind::Allowed => "decision: the call may run",
        EventKind::EffectStarted => "started committed; the body runs next",
        EventKind::EffectRecorded => "result committed",
        EventKind::Resumed => "the run continues from its journal",
        EventKind::Reconciled => "the host settled an ambiguous effect",
        EventKind::AwaitingApproval => "the run stops here until the host decides",
        EventKind::Widened => "the host widened the run's grants or limits",
        EventKind::Closed => "the host closed the run for good",
        _ => "an event this console does not describe yet",
    }
}

fn event_line(out: &mut String, number: u32, event: &ControlEvent) {
    let kind = event.kind();
    // Writing to a String cannot fail.
    let _ = writeln!(
        out,
        "{number:>4}  {:<17} {:<14} {:>5}  {}",
        kind.as_str(),
        event.name(),
        event.count(),
        gloss(kind)
    );
    let about = match (event.operation(), event.decided_by()) {
        (Some(operation), Some(by)) => format!("{operation}, by {by}"),
        (Some(operation), None) => operation.to_owned(),
        (None, Some(by)) => format!("by {by}"),
        (None, None) => return,
    };
    let _ = writeln!(out, "{:46}{about}", "");
}

/// Writes the `, `-separated items of `value` after `label`, wrapping between items only, so
/// that no item is cut in two (the layout of the limits line, shared by the consoles).
pub fn labelled_items(out: &mut String, label: &str, value: &str) {
    let items: Vec<&str> = value.split(", ").collect();
    let last = items.len().saturating_sub(1);
    let pieces = items
        .iter()
        .enumerate()
        .map(|(n, item)| if n < last { Cow::Owned(format!("{item},")) } else { Cow::Borrowed(*item) });
    wrapped(out, label, pieces);
}

/// Writes `value` after `label`, wrapping at word boundaries under the value column (the layout
/// of every header line, shared by the consoles).
pub fn labelled(out: &mut String, label: &str, value: &str) {
    wrapped(out, label, value.split(' ').map(Cow::Borrowed));
}

/// Writes `pieces`, separated by spaces, after `label`, wrapping between pieces under the value
/// column.
fn wrapped<'a>(out: &mut String, label: &str, pieces: impl Iterator<Item = Cow<'a, str>>) {
    let mut line = format!("{label:<LABEL$}");
    let mut empty = true;
    for piece in pieces {
        if !empty && line.len() + 1 + piece.len() > WIDTH {
            out.push_str(&line);
            out.push('\n');
            line = " ".repeat(LABEL);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(&piece);
        empty = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_wrap_under_the_value_column() {
        let mut out = String::new();
        let words = vec!["word"; 30].join(" ");
        labelled(&mut out, "agent", &words);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines.iter().all(|line| line.len() <= WIDTH), "{out}");
        assert!(lines[0].starts_with("agent         word"));
        assert!(lines[1].starts_with(&format!("{}word", " ".repeat(LABEL))));
        assert_eq!(out.matches("word").count(), 30);
    }

    #[test]
    fn items_wrap_between_items_only() {
        let mut out = String::new();
        labelled_items(&mut out, "limits", &loopbound::Limits::default().to_string());
        assert_eq!(
            out,
            "limits        model calls 6, tool calls 4, repetitions 1, deadline 120s, calls per reply 16,\n\
             \x20             reply bytes 16MiB\n"
        );
    }

    #[test]
    fn an_empty_label_continues_the_previous_entry() {
        let mut out = String::new();
        labelled(&mut out, "", "absent: shell");
        assert_eq!(out, format!("{}absent: shell\n", " ".repeat(LABEL)));
    }
}
