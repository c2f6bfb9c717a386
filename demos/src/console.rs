//! The `demo330` console: its arguments, and one run printed as text or JSON.
//!
//! # Invariants
//!
//! - Exit codes: 0 `Completed`; 2 a controlled stop, `Incomplete` or `ProviderUnavailable`;
//!   130 the caller cancelled; 1 a provider error; 64 bad arguments. `--help` and `--version`
//!   exit 0.
//! - With `--json`, stdout receives exactly one JSON object and nothing else; every other message
//!   goes to stderr. Without it, the header is printed before the run starts.
//! - `--live` never pretends and never falls back: without its provider's base URL and model
//!   (`LOOPBOUND_OPENAI_BASE_URL` and `LOOPBOUND_OPENAI_MODEL`, or with `--provider anthropic`
//!   `LOOPBOUND_ANTHROPIC_BASE_URL` and `LOOPBOUND_ANTHROPIC_MODEL`) it says so, sends nothing,
//!   and the run ends as `ProviderUnavailable` (exit 2). `--provider` needs `--live`.
//! - The run itself is generic over the transport ([`play`]): a live transport plugs in there,
//!   whichever provider it talks to.

use std::io::Write;

use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use loopbound::transport::Transport;
use loopbound::watch;
use loopbound_fixtures::Composition;
use tokio_util::sync::CancellationToken;

use loopbound_fixtures::review;

use crate::budget::BudgetArgs;
use crate::durable::{self, Durable};
use crate::live::print_updates;
use crate::pool::{self, PoolArgs};
use crate::provider::Live;
use crate::report::{Report, render_json};
use crate::scenario::Scenario;
use crate::session::{SCRIPTED, Session};
use crate::spend::{self, SpendArgs};
use crate::text::{render_header, render_outcome};
use crate::visible::visible;
pub use crate::vocabulary::{EXIT_INTERNAL, EXIT_USAGE};
use crate::vocabulary::{chained, error_exit_code, status_exit_code};

const EXIT_CODES: &str = "\
Exit codes:
  0    Completed: the host's completion condition holds
  2    a controlled stop (PermissionDenied, RepeatedCall, ToolBudget, ModelBudget,
       DeadlineExceeded, TooManyCalls, AwaitingApproval, Denied, Ambiguous, TokenBudget,
       CostBudget, ToolLimit, NoProgress), Incomplete, or ProviderUnavailable
  130  cancelled by the caller (Ctrl-C)
  1    provider error: the endpoint answered, but not usably
  64   bad arguments (a budget of zero, a malformed price, --cost without a price)
  74   the journal failed or refused (a finished run, a mismatched approval, ...)
  137  `crash` only: the process was killed by SIGKILL, as intended";

const ABOUT: &str = "demo330: the review of ticket 42, driven by a scripted model (or, with --live, a real \
     one) through a bounded loop.";

const LONG_ABOUT: &str = "\
demo330: the review of ticket 42, driven by a scripted model (or, with --live, a real
one) through a bounded loop.

Every scenario runs the same two guarded tools (read_ticket, finish_review) in one
scope, and the scripted model's tool calls are really executed. The console prints the
composition, transport, capabilities, limits (with the spend budgets set), progress policy
(retry, cycle, streak and nudge set one) and completion condition, then the ordered events,
then the status, only when it is kept the text, and what the run spent when it had budgets
or its provider reported usage.

The spend budgets are reserved before every model call: the call goes out with its output
cap set to what the budgets leave, a call that would not fit is never sent, and the
provider's reported usage then replaces the reservation (a reply without a report is
charged the whole reservation). The `spend` and `subagent` commands show them with a
scripted model that reports usage.";

/// The command line of `demo330`: `[SCENARIO] [--simple] [--live] [--json] [--stream]` with
/// optional spend budgets, or one of the commands (durable, `spend`, `subagent`).
#[derive(Clone, Debug, PartialEq, Eq, Parser)]
#[command(name = "demo330", version, about = ABOUT, long_about = LONG_ABOUT, after_help = EXIT_CODES)]
#[allow(clippy::struct_excessive_bools, reason = "each flag of the command line is one independent switch")]
pub struct Cli {
    /// A durable scenario, a host's command on a journal, or a spend scenario.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// The scenario to run.
    #[arg(value_enum, default_value_t = Scenario::Complete)]
    pub scenario: Scenario,

    /// Use the simple composition (the plain loop, cap 40) instead of the harness.
    #[arg(long)]
    pub simple: bool,

    /// `--live` and `--provider`.
    #[command(flatten)]
    pub endpoint: Live,

    /// Print one JSON object with the keys agent, transport, capabilities, limits, progress (when
    /// the scenario sets a policy), price (when the model has one), status, text, events, usage, detail, operation, `partial_text`, spend and pending.
    #[arg(long)]
    pub json: bool,

    /// Drive the model through its streaming path.
    #[arg(long)]
    pub stream: bool,

    /// Print the run's updates as they happen (events, the model's text, each tool call and
    /// its answer), then the transcript; with --live the model streams, so its text appears as
    /// it is written.
    #[arg(long, conflicts_with = "json")]
    pub watch: bool,

    /// The run's spend budgets and its model's price.
    #[command(flatten)]
    pub budget: BudgetArgs,
}

/// The durable scenarios and the host's commands, each on one SQLite journal file.
#[derive(Clone, Debug, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Durable: a refund that needs approval; the run waits for it and prints the next commands.
    Refund(JournalArg),
    /// Durable: the process is killed right after the refund's started record is committed.
    Crash(JournalArg),
    /// Approve one proposal, bound to its digest.
    Approve(Decide),
    /// Deny one proposal, bound to its digest.
    Deny(Decide),
    /// Resume a run where its journal left it.
    Resume(Resume),
    /// Settle an ambiguous effect: it ran (with a result) or it did not run.
    Reconcile(Reconcile),
    /// List the journal's runs, by state and by label, a page at a time.
    Runs(crate::runs::RunsArgs),
    /// Print everything the journal holds about one run.
    Inspect(Resume),
    /// Spend budgets: a scripted model that reports usage, each call capped at what a total-token
    /// and a cost budget leave; the call that would not fit is never sent.
    Spend(SpendArgs),
    /// A tree of agents: a planner's tool runs a reviewer sub-agent; its halt is an error result
    /// for the planner, and the whole tree spends within the planner's budgets.
    Subagent(SpendArgs),
    /// A tenant's shared pool on SQLite: requests reserve in it before their call is sent; the
    /// last one does not fit and is refused unsent.
    Pool(PoolArgs),
}

/// The journal file.
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct JournalArg {
    /// The SQLite journal file (created if missing).
    #[arg(long, value_name = "PATH")]
    pub journal: PathBuf,
}

/// An approver's decision.
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct Decide {
    /// The SQLite journal file.
    #[arg(long, value_name = "PATH")]
    pub journal: PathBuf,
    /// The operation, e.g. refund-42/op/2.
    pub operation: String,
    /// The digest of the proposal shown to the approver (64 hex digits).
    #[arg(long)]
    pub digest: String,
    /// Who decides.
    #[arg(long, default_value = "alice")]
    pub approver: String,
}

/// A run to resume or inspect.
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct Resume {
    /// The SQLite journal file.
    #[arg(long, value_name = "PATH")]
    pub journal: PathBuf,
    /// The run, e.g. refund-42.
    pub run: String,
}

/// A host's reconciliation.
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct Reconcile {
    /// The SQLite journal file.
    #[arg(long, value_name = "PATH")]
    pub journal: PathBuf,
    /// The ambiguous operation, e.g. crash-42/op/2.
    pub operation: String,
    /// It ran: this is its result, handed to the model on resume.
    #[arg(long, value_name = "RESULT", conflicts_with = "not_run", required_unless_present = "not_run")]
    pub ran: Option<String>,
    /// It did not run: the resume runs it.
    #[arg(long)]
    pub not_run: bool,
    /// Who reconciles.
    #[arg(long, default_value = "ops")]
    pub by: String,
}

impl Cli {
    /// The composition the flags select.
    #[must_use]
    pub fn composition(&self) -> Composition {
        if self.simple { Composition::Simple } else { Composition::Harness }
    }
}

impl ValueEnum for Scenario {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()).help(self.demonstrates()))
    }
}

/// Prints an argument error from [`Cli::try_parse`] and returns its exit code: `--help` and
/// `--version` (which clap reports as errors) print to `out` and exit 0; every other error
/// prints to `err` with the usage line and exits [`EXIT_USAGE`].
pub fn parse_error(error: &clap::Error, out: &mut impl Write, err: &mut impl Write) -> i32 {
    let rendered = error.render().to_string();
    if !error.use_stderr() {
        emit(out, &rendered);
        return 0;
    }
    emit(err, &with_usage(rendered));
    EXIT_USAGE
}

/// `rendered` with the usage line before clap's closing hint, unless it already has one.
fn with_usage(mut rendered: String) -> String {
    if rendered.contains("Usage:") {
        return rendered;
    }
    let usage = format!("{}\n\n", Cli::command().render_usage());
    let at = rendered.find("For more information").unwrap_or(rendered.len());
    rendered.insert_str(at, &usage);
    rendered
}

/// Runs the console for `cli`: picks the transport, plays the scenario, prints the result to
/// `out` (and messages to `err`), and returns the exit code. `caller` is the caller's
/// cancellation, e.g. fired by Ctrl-C.
pub async fn execute(
    cli: &Cli,
    caller: CancellationToken,
    out: &mut impl Write,
    err: &mut impl Write,
) -> i32 {
    if let Some(command) = &cli.command {
        if cli.endpoint.live || cli.json || cli.simple || cli.stream || cli.watch || !cli.budget.is_empty() {
            emit(
                err,
                "demo330: --live, --json, --simple, --stream, --watch and the budget flags before a command are for \
                 the review scenarios; spend and subagent take --json, --simple and --stream after their name\n",
            );
            return EXIT_USAGE;
        }
        return match command {
            Command::Spend(args) => spend::play(false, *args, caller, out, err).await,
            Command::Subagent(args) => spend::play(true, *args, caller, out, err).await,
            Command::Pool(args) => pool::play(args, out, err).await,
            durable => durable_command(durable, out, err).await,
        };
    }
    if !cli.endpoint.live {
        // The scripted model is named, so that a price can name it too.
        let transport = cli.scenario.transport().with_model(SCRIPTED);
        return play(cli, transport, SCRIPTED, caller, out, err).await;
    }
    let (transport, label) = cli.endpoint.provider.unwrap_or_default().connect("demo330", err);
    play(cli, transport, &label, caller, out, err).await
}

/// Runs one durable scenario or host's command.
async fn durable_command(command: &Command, out: &mut impl Write, err: &mut impl Write) -> i32 {
    match command {
        Command::Refund(arg) => durable::play(Durable::Refund, &arg.journal, out, err).await,
        Command::Crash(arg) => durable::play(Durable::Crash, &arg.journal, out, err).await,
        Command::Approve(d) => {
            durable::decide(&d.journal, &d.operation, &d.digest, &d.approver, true, out, err).await
        }
        Command::Deny(d) => {
            durable::decide(&d.journal, &d.operation, &d.digest, &d.approver, false, out, err).await
        }
        Command::Resume(r) => durable::resume(&r.journal, &r.run, out, err).await,
        Command::Reconcile(r) => {
            durable::reconcile(&r.journal, &r.operation, r.ran.as_deref(), &r.by, out, err).await
        }
        Command::Runs(args) => crate::runs::runs(args, out, err).await,
        Command::Inspect(r) => crate::runs::inspect(&r.journal, &r.run, out, err).await,
        // Played by `execute`, with the caller's cancellation.
        Command::Spend(_) | Command::Subagent(_) | Command::Pool(_) => EXIT_INTERNAL,
    }
}

/// Plays `cli.scenario` over `transport` (described as `label` in the header) and prints it.
/// Generic over the transport, so a live one goes through the same scope, tools, budget and loop
/// as the scripted one; with `--live` the conversation carries a worked example.
pub async fn play<T: Transport>(
    cli: &Cli,
    transport: T,
    label: &str,
    caller: CancellationToken,
    out: &mut impl Write,
    err: &mut impl Write,
) -> i32 {
    let tools = review::tools();
    let limits = cli.budget.apply(cli.scenario.limits());
    let price = transport.model().and_then(|model| cli.budget.price_of(model));
    let (feed, updates) = watch::channel();
    let feed = cli.watch.then_some(feed);
    let session =
        match Session::open(&tools.set, cli.scenario, cli.composition(), caller, limits, price, feed) {
            Ok(session) => session,
            Err(error) => {
                emit(err, &format!("demo330: {}\n", chained(&error)));
                return EXIT_INTERNAL;
            }
        };
    // Watching a live model streams it, so that its text shows as it is written.
    let streaming = cli.stream || (cli.watch && cli.endpoint.live);
    let header = session.header(label, streaming, cli.endpoint.live);
    if !cli.json {
        emit(out, &render_header(&header));
    }
    let conversation = if cli.endpoint.live { review::live_conversation() } else { review::conversation() };
    let run = session.run_conversation(transport, streaming, conversation);
    let result = if cli.watch {
        emit(out, "\n");
        let (result, ()) = tokio::join!(run, print_updates(updates, &mut *out));
        result
    } else {
        drop(updates);
        run.await
    };
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(error) => {
            let code = error_exit_code(&error);
            emit(err, &format!("demo330: {}; no outcome (exit {code})\n", visible(&error.to_string())));
            return code;
        }
    };
    if cli.json {
        let report = Report { header, outcome };
        match render_json(&report) {
            Ok(json) => emit(out, &format!("{json}\n")),
            Err(error) => {
                emit(err, &format!("demo330: could not write the report as JSON: {error}\n"));
                return EXIT_INTERNAL;
            }
        }
        report.exit_code()
    } else {
        emit(out, "\n");
        emit(out, &render_outcome(&outcome));
        status_exit_code(outcome.status())
    }
}

/// Writes `text` and flushes, so that the header is visible while the run goes on.
///
/// A closed or failing stream is ignored on purpose: the exit code still carries the outcome.
fn emit(stream: &mut impl Write, text: &str) {
    let _ = stream.write_all(text.as_bytes()).and_then(|()| stream.flush());
}
