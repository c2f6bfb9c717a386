//! `mcp330`: a bounded loop over a real MCP server's tools (the pinned
//! `@modelcontextprotocol/server-everything`, started as a child process), scripted by default
//! so that it runs offline, or with a live model (`--live`).
//!
//! The header, the events, the statuses and the exit codes are the review's (`demo330`); the
//! tools are the server's, guarded by [`loopbound_mcp`]: a capability per tool, the server's
//! schema checked before the guard, budgets, the repetition limit and the deadline, with the
//! server told when a call is cut.
//!
//! # Invariants
//!
//! - Exit codes: 0 `Completed`; 2 a controlled stop, `Incomplete` or `ProviderUnavailable`;
//!   130 the caller cancelled; 1 a provider error; 64 bad arguments; 70 the server could not be
//!   started (nothing ran).
//! - The scope's clock starts once the server is connected and its tools are listed: the
//!   deadline bounds the run, not the server's start-up.
//! - Nothing printed carries a wall-clock time or a temporary path: the same scenario gives the
//!   same bytes.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{CommandFactory, Parser, ValueEnum};
use loopbound::scripted::{Step, sequence};
use loopbound::transport::{ModelReply, Transport};
use loopbound::{Limits, Message, Outcome, Scope, ToolSet};
use loopbound_fixtures::Composition;
use loopbound_fixtures::mcp_servers as servers;
use loopbound_mcp::{Connection, Mapping, Timeouts};
use tokio_util::sync::CancellationToken;

use crate::provider::Live;
use crate::report::JsonLimits;
use crate::text::{labelled, labelled_items, render_outcome};
use crate::visible::visible;
use crate::vocabulary::{Agent, EXIT_INTERNAL, EXIT_USAGE, chained, error_exit_code, status_exit_code};

/// The host's name for the server, used in capabilities.
pub const SERVER: &str = "everything";
/// The tools of the server this console offers the model.
pub const OFFERED: [&str; 4] = ["echo", "get-sum", "get-env", "trigger-long-running-operation"];
/// The host's completion condition, in words.
pub const COMPLETION: &str = "get-sum answered (the host's flag, set by the tool's result)";
/// What the user asks.
pub const TASK: &str = "Add 2 and 40 with the get-sum tool, then say the result.";

/// One scripted scenario over the server's tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum McpScenario {
    /// echo, then get-sum, then the answer.
    Complete,
    /// A tool the model can see but the scope does not grant.
    Forbidden,
    /// Arguments that break the tool's schema, refused before the guard.
    Invalid,
    /// The same arguments, spelled differently.
    Repeat,
    /// Three tools under a budget of two.
    Budget,
    /// A long operation cut by a 1 s deadline; the server is told.
    Deadline,
}

impl McpScenario {
    /// Every scenario, in the order `--help` lists them.
    pub const ALL: [Self; 6] =
        [Self::Complete, Self::Forbidden, Self::Invalid, Self::Repeat, Self::Budget, Self::Deadline];

    /// The scenario's name on the command line.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Forbidden => "forbidden",
            Self::Invalid => "invalid",
            Self::Repeat => "repeat",
            Self::Budget => "budget",
            Self::Deadline => "deadline",
        }
    }

    /// What it shows.
    #[must_use]
    pub const fn demonstrates(self) -> &'static str {
        match self {
            Self::Complete => "two of the server's tools run under the guard; the host's condition holds",
            Self::Forbidden => "a tool the model sees but the scope does not grant halts before it is sent",
            Self::Invalid => "arguments that break the server's schema are refused before the guard",
            Self::Repeat => "the same arguments spelled differently are one signature",
            Self::Budget => "the tool budget counts calls across the server's tools",
            Self::Deadline => {
                "the deadline cuts a long operation; the server is sent notifications/cancelled"
            }
        }
    }

    /// The capabilities the scope grants.
    #[must_use]
    pub fn capabilities(self) -> Vec<String> {
        let tools: &[&str] = match self {
            Self::Forbidden => &["echo"],
            Self::Budget => &["echo", "get-sum", "get-env"],
            Self::Deadline => &["trigger-long-running-operation"],
            Self::Complete | Self::Invalid | Self::Repeat => &["echo", "get-sum"],
        };
        tools.iter().map(|tool| format!("mcp.{SERVER}.{tool}")).collect()
    }

    /// The limits of the scope.
    #[must_use]
    pub fn limits(self) -> Limits {
        match self {
            Self::Budget => Limits::default().with_tool_calls(2),
            Self::Deadline => Limits::default().with_deadline(Duration::from_secs(1)),
            _ => Limits::default(),
        }
    }

    /// The scripted model's replies.
    #[must_use]
    pub fn steps(self) -> Vec<Step> {
        let call = |n: u32, tool: &str, arguments: &str| {
            Step::Reply(ModelReply::call(format!("c{n}"), tool, arguments))
        };
        let text = |content: &str| Step::Reply(ModelReply::text(content));
        match self {
            Self::Complete => vec![
                call(1, "echo", r#"{"message": "adding 2 and 40"}"#),
                call(2, "get-sum", r#"{"a": 2, "b": 40}"#),
                text("2 + 40 = 42."),
            ],
            Self::Forbidden => vec![call(1, "get-env", "{}"), text("Here is the environment.")],
            Self::Invalid => {
                vec![call(1, "get-sum", r#"{"a": "two", "b": 40}"#), text("I could not add them.")]
            }
            Self::Repeat => vec![
                call(1, "get-sum", r#"{"a": 2, "b": 40}"#),
                call(2, "get-sum", r#"{"b": 4e1, "a": 2.0}"#),
                text("42."),
            ],
            Self::Budget => vec![
                call(1, "echo", r#"{"message": "hi"}"#),
                call(2, "get-sum", r#"{"a": 2, "b": 40}"#),
                call(3, "get-env", "{}"),
                text("Done."),
            ],
            Self::Deadline => vec![
                call(1, "trigger-long-running-operation", r#"{"duration": 5, "steps": 5}"#),
                text("Finished."),
            ],
        }
    }
}

impl ValueEnum for McpScenario {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()).help(self.demonstrates()))
    }
}

const ABOUT: &str = "mcp330: a bounded loop over a real MCP server's tools (server-everything), scripted \
     (or, with --live, a real model).";

const EXIT_CODES: &str = "\
Exit codes:
  0    Completed: the host's completion condition holds
  2    a controlled stop (PermissionDenied, RepeatedCall, ToolBudget, ModelBudget,
       DeadlineExceeded), Incomplete, or ProviderUnavailable
  130  cancelled by the caller (Ctrl-C)
  1    provider error: the endpoint answered, but not usably
  64   bad arguments
  70   the MCP server could not be started (run testkit/mcp/setup.sh; node is required)";

/// The command line of `mcp330`: `[SCENARIO] [--simple] [--live [--provider P]] [--json]`.
#[derive(Clone, Debug, PartialEq, Eq, Parser)]
#[command(name = "mcp330", version, about = ABOUT, after_help = EXIT_CODES)]
pub struct McpCli {
    /// The scenario to run.
    #[arg(value_enum, default_value_t = McpScenario::Complete)]
    pub scenario: McpScenario,

    /// Use the simple composition (the plain loop, cap 40) instead of the harness.
    #[arg(long)]
    pub simple: bool,

    /// `--live` and `--provider`.
    #[command(flatten)]
    pub endpoint: Live,

    /// Print one JSON object {agent, transport, server, capabilities, limits, status, text, events}.
    #[arg(long)]
    pub json: bool,
}

impl McpCli {
    /// The composition the flags select.
    #[must_use]
    pub fn composition(&self) -> Composition {
        if self.simple { Composition::Simple } else { Composition::Harness }
    }
}

/// Prints an argument error and returns its exit code (0 for `--help` and `--version`, else
/// [`EXIT_USAGE`]).
pub fn parse_error(error: &clap::Error, out: &mut impl Write, err: &mut impl Write) -> i32 {
    let rendered = error.render().to_string();
    if !error.use_stderr() {
        emit(out, &rendered);
        return 0;
    }
    if rendered.contains("Usage:") {
        emit(err, &rendered);
    } else {
        emit(err, &format!("{rendered}\n{}\n", McpCli::command().render_usage()));
    }
    EXIT_USAGE
}

/// One request's state: whether `get-sum` answered.
#[derive(Debug, Default)]
pub struct McpState {
    summed: AtomicBool,
}

impl McpState {
    /// The host's completion condition.
    #[must_use]
    pub fn completed(&self) -> bool {
        self.summed.load(Ordering::SeqCst)
    }
}

/// How the server's tools are offered: four of them, with the default capabilities, and the
/// host's flag set when `get-sum` answers.
#[must_use]
pub fn mapping() -> Mapping<McpState> {
    Mapping::new().only(OFFERED).on_success(|tool, _text, state: &McpState| {
        if tool == "get-sum" {
            state.summed.store(true, Ordering::SeqCst);
        }
    })
}

/// Runs the console for `cli` and returns the exit code.
pub async fn execute(
    cli: &McpCli,
    caller: CancellationToken,
    out: &mut impl Write,
    err: &mut impl Write,
) -> i32 {
    if !cli.endpoint.live {
        return play(cli, sequence(cli.scenario.steps()), "scripted", caller, out, err).await;
    }
    let (transport, label) = cli.endpoint.provider.unwrap_or_default().connect("mcp330", err);
    play(cli, transport, &label, caller, out, err).await
}

/// Connects to the server, offers its tools, runs the scenario over `transport` and prints it.
pub async fn play<T: Transport>(
    cli: &McpCli,
    transport: T,
    label: &str,
    caller: CancellationToken,
    out: &mut impl Write,
    err: &mut impl Write,
) -> i32 {
    if !servers::everything_js().is_file() {
        emit(
            err,
            "mcp330: server-everything is not installed: run `bash testkit/mcp/setup.sh` (needs node and npm)\n",
        );
        return EXIT_INTERNAL;
    }
    let timeouts =
        Timeouts::default().with_initialize(Duration::from_secs(30)).with_list(Duration::from_secs(30));
    let connection = match Connection::stdio(&servers::everything(), timeouts).await {
        Ok(connection) => connection,
        Err(error) => {
            emit(err, &format!("mcp330: {}\n", chained(&error)));
            return EXIT_INTERNAL;
        }
    };
    let registered = connection.register(&mapping());
    let tools = match registered.add_to(ToolSet::builder()).build() {
        Ok(tools) => tools,
        Err(error) => {
            emit(err, &format!("mcp330: {}\n", chained(&error)));
            return EXIT_INTERNAL;
        }
    };
    let scenario = cli.scenario;
    let scope = match Scope::builder()
        .grants(scenario.capabilities())
        .limits(scenario.limits())
        .caller(caller)
        .state(McpState::default())
        .build()
    {
        Ok(scope) => scope,
        Err(error) => {
            emit(err, &format!("mcp330: {}\n", chained(&error)));
            return EXIT_INTERNAL;
        }
    };
    let offered: Vec<&str> = registered.tools().iter().map(loopbound_mcp::McpTool::name).collect();
    let header = Header {
        agent: Agent::new(cli.composition(), scope.limits()),
        transport: label.to_owned(),
        server: format!(
            "{SERVER}: @modelcontextprotocol/server-everything over stdio; offered: {}",
            offered.join(", ")
        ),
        capabilities: scope.capabilities().map(str::to_owned).collect(),
        limits: scope.limits().clone(),
        scenario: if cli.endpoint.live {
            format!(
                "{}: its capabilities and limits, with a live model whose replies are its own",
                scenario.name()
            )
        } else {
            format!("{}: {}", scenario.name(), scenario.demonstrates())
        },
    };
    if !cli.json {
        emit(out, &header.render());
    }
    let mut conversation = vec![Message::user(TASK)];
    let runtime = cli.composition().runner(&tools, transport);
    let outcome = runtime.run(&scope, &mut conversation, |ended| McpState::completed(ended.state())).await;
    connection.close().await;
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(error) => {
            let code = error_exit_code(&error);
            emit(err, &format!("mcp330: {error}; no outcome (exit {code})\n"));
            return code;
        }
    };
    if cli.json {
        emit(out, &format!("{}\n", json(&header, &outcome)));
    } else {
        emit(out, "\n");
        emit(out, &render_outcome(&outcome));
    }
    status_exit_code(outcome.status())
}

/// What is stated before the run.
struct Header {
    agent: Agent,
    transport: String,
    server: String,
    capabilities: Vec<String>,
    limits: Limits,
    scenario: String,
}

impl Header {
    fn render(&self) -> String {
        let mut out = String::new();
        labelled(&mut out, "agent", &self.agent.loop_line());
        labelled(&mut out, "", &self.agent.absent_line());
        labelled(&mut out, "transport", &visible(&self.transport));
        labelled(&mut out, "mcp server", &self.server);
        labelled(&mut out, "capabilities", &self.capabilities.join(", "));
        labelled_items(&mut out, "limits", &self.limits.to_string());
        labelled(&mut out, "completion", COMPLETION);
        labelled(&mut out, "scenario", &self.scenario);
        out
    }
}

/// The report as one line of JSON.
fn json(header: &Header, outcome: &Outcome) -> serde_json::Value {
    serde_json::json!({
        "agent": header.agent.to_string(),
        "transport": header.transport,
        "server": header.server,
        "capabilities": header.capabilities,
        "limits": JsonLimits::from(&header.limits),
        "status": outcome.status(),
        "text": outcome.text(),
        "events": outcome.events(),
    })
}

/// Writes `text` and flushes; a closed stream is ignored (the exit code carries the outcome).
fn emit(stream: &mut impl Write, text: &str) {
    let _ = stream.write_all(text.as_bytes()).and_then(|()| stream.flush());
}
