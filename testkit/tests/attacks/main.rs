//! The release `demo330 --live` against the hostile server, through every provider (chat
//! completions, `--provider anthropic` against the server's Anthropic mode and `--provider
//! responses` against its Responses mode): every attack of issue 10, and the Messages API's own
//! (usage reports that grow forever, an overload after 10,000 deltas), ends by itself, with its documented status and exit code, within 64 MiB of
//! resident memory above an idle run, with at most `model calls × (2 × calls per reply + 2)`
//! events, no run of the API key anywhere it prints, and, under the `deadline` scenario's
//! one-second deadline, a return within 1.1 s.
//!
//! The console is the release build (see [`console::release_demo`]): the time bound is about
//! our own work after the deadline, which a debug build does too slowly to say anything. The
//! attacks run one after another, so that they do not compete for the machine.

mod console;

use std::time::Duration;

use console::{KEY, Run, assert_no_key_run, run};
use loopbound_testkit::hostile::{
    Behaviour, Budget, FAKE_STATUS_LINE, HostileServer, KeyPart, KeyPlace, Reply,
};
use serde_json::Value;

const MIB: u64 = 1024 * 1024;
/// The most a run may use above an idle run.
const MEMORY_ABOVE_IDLE: u64 = 64 * MIB;
/// A run with a one-second deadline returns within this.
const DEADLINE_RETURN: Duration = Duration::from_millis(1100);
/// The default limits' bound on events: 6 model calls × (2 × 16 calls per reply + 2).
const MAX_EVENTS: usize = 6 * (2 * 16 + 2);
/// The byte bound's error, as the console prints it.
const TOO_LONG: &str = "malformed provider response: the reply is longer than 16777216 bytes";

/// What an attack must end with.
#[derive(Clone, Debug)]
enum Ends {
    /// An outcome with this status and these events (exit 2).
    Outcome(&'static str, Vec<String>),
    /// No outcome: a provider error whose message holds this (exit 1).
    ProviderError(&'static str),
}

/// One attack: the server's behaviour, the console's arguments after the scenario, and how it
/// must end.
struct Attack {
    name: &'static str,
    behaviour: Behaviour,
    args: Vec<&'static str>,
    ends: Ends,
    /// Run only with a one-second deadline: the server never finishes and never crosses a
    /// bound (only the deadline ends it), or it is timed against that deadline.
    deadline_only: bool,
}

fn events(lines: &[&str]) -> Vec<String> {
    lines.iter().map(|line| (*line).to_owned()).collect()
}

fn too_many_calls() -> Ends {
    Ends::Outcome("TooManyCalls", events(&["ModelCall model 1", "TooManyCalls model 1"]))
}

fn deadline() -> Ends {
    Ends::Outcome("DeadlineExceeded", events(&["ModelCall model 1", "DeadlineExceeded model 1"]))
}

fn flood(calls: usize, name: &str, arguments: &str) -> Behaviour {
    Behaviour::CallFlood { calls, arguments: arguments.to_owned(), name: name.to_owned() }
}

/// `then`, 0.95 s after the request: our own work on it straddles a one-second deadline.
fn delayed(then: Behaviour) -> Behaviour {
    Behaviour::Delayed { delay: Duration::from_millis(950), then: Box::new(then) }
}

fn echo(status: u16, place: KeyPlace, part: KeyPart) -> Behaviour {
    Behaviour::EchoKey { status, padding: 270, place, part }
}

/// Six model calls, each answered with calls to an unknown tool, then the model budget.
fn six_model_calls() -> Vec<String> {
    let mut lines: Vec<String> = (1..=6).map(|n| format!("ModelCall model {n}")).collect();
    lines.push("ModelBudget model 6".to_owned());
    lines
}

/// Six model calls, each answered with 16 unbindable calls to a known tool (each seen by the
/// middleware, none admitted), then the model budget: the event bound's worst case but for the
/// admissions, which the tool budget stops first.
fn six_replies_of_sixteen_unbindable_calls() -> Vec<String> {
    let mut lines = Vec::new();
    for n in 1..=6 {
        lines.push(format!("ModelCall model {n}"));
        lines.extend((1..=16).map(|k| format!("Middleware read_ticket {}", 16 * (n - 1) + k)));
    }
    lines.push("ModelBudget model 6".to_owned());
    lines
}

/// The API the console talks to the server in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Provider {
    OpenAi,
    Anthropic,
    Responses,
}

impl Provider {
    /// The console's arguments that choose this provider.
    fn args(self) -> &'static [&'static str] {
        match self {
            Self::OpenAi => &[],
            Self::Anthropic => &["--provider", "anthropic"],
            Self::Responses => &["--provider", "responses"],
        }
    }

    /// A whole text reply in this provider's shape.
    fn text(self, content: &str) -> Reply {
        match self {
            Self::OpenAi => Reply::text(content),
            Self::Anthropic => Reply::message_text(content),
            Self::Responses => Reply::response_text(content),
        }
    }

    /// How the report names this provider's transport.
    fn label(self) -> &'static str {
        match self {
            Self::OpenAi => "openai-compatible",
            Self::Anthropic => "anthropic-messages",
            Self::Responses => "openai-responses",
        }
    }
}

/// Every attack through `provider`; its arguments follow the scenario, which each pass chooses.
fn attacks(provider: Provider) -> Vec<Attack> {
    let json = |extra: &[&'static str]| {
        let mut args = vec!["--live", "--json"];
        args.extend_from_slice(provider.args());
        args.extend_from_slice(extra);
        args
    };
    let live = |extra: &[&'static str]| {
        let mut args = vec!["--live"];
        args.extend_from_slice(provider.args());
        args.extend_from_slice(extra);
        args
    };
    vec![
        Attack {
            name: "endless text, streamed",
            behaviour: Behaviour::EndlessText { delta: MIB as usize },
            args: json(&["--stream"]),
            ends: Ends::ProviderError(TOO_LONG),
            deadline_only: false,
        },
        Attack {
            name: "endless text, read whole",
            behaviour: Behaviour::EndlessText { delta: MIB as usize },
            args: json(&[]),
            ends: Ends::ProviderError(TOO_LONG),
            deadline_only: false,
        },
        Attack {
            name: "endless call indices",
            behaviour: Behaviour::EndlessCallIndices,
            args: json(&["--stream"]),
            ends: too_many_calls(),
            deadline_only: false,
        },
        Attack {
            name: "endless arguments (4 MiB per event)",
            behaviour: Behaviour::EndlessArguments { delta: 4 * MIB as usize },
            args: json(&["--stream"]),
            ends: Ends::ProviderError(TOO_LONG),
            deadline_only: false,
        },
        Attack {
            name: "100,000 unbindable calls in one whole reply",
            behaviour: flood(100_000, "read_ticket", r#"{"input":"x"}"#),
            args: json(&[]),
            ends: too_many_calls(),
            deadline_only: false,
        },
        Attack {
            name: "250,000 calls in one whole reply (over 16 MiB)",
            behaviour: flood(250_000, "read_ticket", r#"{"input":"x"}"#),
            args: json(&[]),
            ends: Ends::ProviderError(TOO_LONG),
            deadline_only: false,
        },
        Attack {
            name: "100,000 calls streamed",
            behaviour: flood(100_000, "read_ticket", r#"{"input":"x"}"#),
            args: json(&["--stream"]),
            ends: too_many_calls(),
            deadline_only: false,
        },
        Attack {
            name: "17 unknown names in one reply",
            behaviour: flood(17, "no_such_tool", r#"{"input":42}"#),
            args: json(&[]),
            ends: too_many_calls(),
            deadline_only: false,
        },
        Attack {
            name: "16 unknown names in every reply",
            behaviour: flood(16, "no_such_tool", r#"{"input":42}"#),
            args: json(&["--stream"]),
            ends: Ends::Outcome("ModelBudget", six_model_calls()),
            deadline_only: false,
        },
        Attack {
            name: "16 unbindable calls in every reply",
            behaviour: flood(16, "read_ticket", r#"{"input":"x"}"#),
            args: json(&[]),
            ends: Ends::Outcome("ModelBudget", six_replies_of_sixteen_unbindable_calls()),
            deadline_only: false,
        },
        Attack {
            name: "usage reports that grow forever",
            behaviour: Behaviour::EndlessUsage,
            args: json(&["--stream"]),
            ends: Ends::ProviderError(TOO_LONG),
            deadline_only: false,
        },
        Attack {
            name: "an overload after 10,000 deltas",
            behaviour: Behaviour::ErrorAfterDeltas { deltas: 10_000 },
            args: json(&["--stream"]),
            ends: Ends::Outcome("ProviderUnavailable", events(&["ModelCall model 1"])),
            deadline_only: false,
        },
        Attack {
            name: "a body trickled byte by byte",
            behaviour: Behaviour::Trickle {
                body: provider.text("Review finished.").body,
                interval: Duration::from_millis(20),
            },
            args: json(&[]),
            ends: deadline(),
            deadline_only: true,
        },
        Attack {
            name: "keep-alive comments forever",
            behaviour: Behaviour::KeepAliveForever { interval: Duration::from_millis(10) },
            args: json(&["--stream"]),
            ends: deadline(),
            deadline_only: true,
        },
        Attack {
            name: "endless text, from 0.95 s",
            behaviour: delayed(Behaviour::EndlessText { delta: MIB as usize }),
            args: json(&["--stream"]),
            ends: Ends::ProviderError(TOO_LONG),
            deadline_only: true,
        },
        Attack {
            name: "a 15 MiB reply arriving at 0.95 s",
            behaviour: delayed(Behaviour::Reply(provider.text(&"a".repeat(15 << 20)))),
            args: json(&[]),
            ends: Ends::Outcome("Incomplete", events(&["ModelCall model 1"])),
            deadline_only: true,
        },
        Attack {
            name: "the key echoed after padding in a 401",
            behaviour: echo(401, KeyPlace::ErrorBody, KeyPart::Whole),
            args: live(&[]),
            ends: Ends::ProviderError("provider refused authentication: HTTP 401: ....."),
            deadline_only: false,
        },
        Attack {
            name: "30 characters of the key echoed after padding in a 401",
            behaviour: echo(401, KeyPlace::ErrorBody, KeyPart::Chars(0..30)),
            args: json(&[]),
            ends: Ends::ProviderError("provider refused authentication: HTTP 401: ....."),
            deadline_only: false,
        },
        Attack {
            name: "the key echoed after padding in a 503",
            behaviour: echo(503, KeyPlace::ErrorBody, KeyPart::Whole),
            args: live(&[]),
            ends: Ends::Outcome("ProviderUnavailable", events(&["ModelCall model 1"])),
            deadline_only: false,
        },
        Attack {
            name: "the key echoed in the model's text (200)",
            behaviour: echo(200, KeyPlace::Text, KeyPart::Whole),
            args: live(&[]),
            ends: Ends::Outcome("Incomplete", events(&["ModelCall model 1"])),
            deadline_only: false,
        },
        Attack {
            name: "the key echoed in the model's text, split across deltas",
            behaviour: echo(200, KeyPlace::StreamText, KeyPart::Whole),
            args: json(&["--stream"]),
            ends: Ends::Outcome("Incomplete", events(&["ModelCall model 1"])),
            deadline_only: false,
        },
        Attack {
            name: "the key echoed in a tool call's id, name and arguments",
            behaviour: echo(200, KeyPlace::ToolCallFields, KeyPart::Whole),
            args: json(&[]),
            ends: Ends::Outcome("ModelBudget", six_model_calls()),
            deadline_only: false,
        },
        Attack {
            name: "escape sequences in the model's text",
            behaviour: Behaviour::EscapeSequences,
            args: live(&["--stream"]),
            ends: Ends::Outcome("Incomplete", events(&["ModelCall model 1"])),
            deadline_only: false,
        },
    ]
}

/// The status line's status and the event lines of a text transcript.
fn transcript(stdout: &str) -> (String, Vec<String>) {
    let status = stdout
        .lines()
        .find_map(|line| line.strip_prefix("status"))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_default()
        .to_owned();
    let events = stdout
        .lines()
        .filter(|line| {
            line.starts_with("   ")
                && line.split_whitespace().next().is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .map(|line| line.split_whitespace().skip(1).take(3).collect::<Vec<_>>().join(" "))
        .collect();
    (status, events)
}

/// The scenario a pass runs every attack under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    /// `complete`: the default limits, a 120-second deadline. An attack must end by itself,
    /// exactly as documented.
    ByItself,
    /// `deadline`: the default limits, a one-second deadline. Every attack returns within
    /// 1.1 s: with its own ending when that comes first, else `DeadlineExceeded`.
    OneSecond,
}

impl Pass {
    fn scenario(self) -> &'static str {
        match self {
            Self::ByItself => "complete",
            Self::OneSecond => "deadline",
        }
    }
}

/// The status and events of a run that produced an outcome, from its JSON or its transcript.
fn outcome(run: &Run, json: bool) -> (String, Vec<String>) {
    if json {
        (run.report()["status"].as_str().unwrap_or_default().to_owned(), run.events())
    } else {
        transcript(&run.stdout)
    }
}

/// Checks one run against what its attack, through `provider`, must end with, in `pass`.
fn check(attack: &Attack, provider: Provider, pass: Pass, run: &Run, idle_kib: u64) {
    let name = format!("{} ({provider:?}, {})", attack.name, pass.scenario());
    assert_no_key_run(&run.stdout, &format!("{name}: stdout"));
    assert_no_key_run(&run.stderr, &format!("{name}: stderr"));
    let above_idle = run.peak_kib.saturating_sub(idle_kib) * 1024;
    assert!(above_idle < MEMORY_ABOVE_IDLE, "{name}: {} MiB above idle", above_idle / MIB);
    let json = attack.args.contains(&"--json");
    if !json {
        let forbidden = |c: char| c != '\n' && (c.is_control() || ('\u{80}'..='\u{9f}').contains(&c));
        assert!(!run.stdout.chars().any(forbidden), "{name}: a control character reached the terminal");
        assert!(!run.stdout.lines().any(|line| line.trim_start().starts_with(FAKE_STATUS_LINE)), "{name}");
    }
    if pass == Pass::OneSecond {
        assert!(run.elapsed <= DEADLINE_RETURN, "{name}: returned after {:?}", run.elapsed);
        // A slow machine may see the deadline before the attack's own ending: both are fine.
        if run.code == 2 && outcome(run, json).0 == "DeadlineExceeded" {
            let (_, events) = outcome(run, json);
            let model_calls = events.iter().filter(|line| line.starts_with("ModelCall ")).count();
            assert_eq!(events.last(), Some(&format!("DeadlineExceeded model {model_calls}")), "{name}");
            assert!(events.len() <= MAX_EVENTS, "{name}");
            return;
        }
    }
    match &attack.ends {
        Ends::Outcome(status, expected) => {
            assert_eq!(run.code, 2, "{name}: {}", run.stderr);
            let (got_status, got_events) = outcome(run, json);
            assert_eq!(&got_status, status, "{name}: {}", run.stdout);
            assert_eq!(&got_events, expected, "{name}");
            assert!(got_events.len() <= MAX_EVENTS, "{name}");
        }
        Ends::ProviderError(message) => {
            assert_eq!(run.code, 1, "{name}: {}\n{}", run.stdout, run.stderr);
            assert!(run.stderr.contains(message), "{name}: {}", run.stderr);
            if json {
                assert!(run.stdout.is_empty(), "{name}: no outcome, nothing on stdout: {}", run.stdout);
            }
        }
    }
}

/// Starts a server with `behaviour` and runs the console against it with `args`.
async fn against(behaviour: Behaviour, args: Vec<&'static str>) -> (Run, HostileServer) {
    // Each connection may cost the server 256 MiB and 5 s at most; the console must stop first.
    let budget = Budget::new(256 * MIB, Duration::from_secs(5));
    let server = HostileServer::start_with(behaviour, budget).await.expect("a loopback server");
    let base = server.base_url();
    let run = tokio::task::spawn_blocking(move || run(&base, &args)).await.expect("the run completes");
    (run, server)
}

#[tokio::test]
async fn every_attack_ends_by_itself_within_its_bounds() {
    let (idle, _) =
        against(Behaviour::Reply(Reply::text("Review finished.")), vec!["deadline", "--live", "--json"])
            .await;
    assert_eq!(idle.code, 2, "an idle run is Incomplete: {}", idle.stderr);
    assert_eq!(idle.report()["text"], "Review finished.");
    let mut table = vec![format!("idle run: peak {} KiB, {:?}", idle.peak_kib, idle.elapsed)];
    table.push(format!(
        "{:<58} {:<9} {:>5} {:>12} {:>9} {:>8} {:>8}",
        "attack", "scenario", "exit", "peak-idle", "returned", "events", "requests"
    ));
    for (provider, pass) in [
        (Provider::OpenAi, Pass::ByItself),
        (Provider::OpenAi, Pass::OneSecond),
        (Provider::Anthropic, Pass::ByItself),
        (Provider::Anthropic, Pass::OneSecond),
        (Provider::Responses, Pass::ByItself),
        (Provider::Responses, Pass::OneSecond),
    ] {
        for attack in attacks(provider) {
            // Some attacks end only by the deadline, or are timed against it: they are for the second pass.
            if pass == Pass::ByItself && attack.deadline_only {
                continue;
            }
            let mut args = vec![pass.scenario()];
            args.extend(attack.args.iter().copied());
            let (run, server) = against(attack.behaviour.clone(), args).await;
            let events =
                if run.code == 2 { outcome(&run, attack.args.contains(&"--json")).1.len() } else { 0 };
            table.push(format!(
                "{:<58} {:<9} {:>5} {:>8} KiB {:>7}ms {:>8} {:>8}",
                format!("{} ({provider:?})", attack.name),
                pass.scenario(),
                run.code,
                run.peak_kib.saturating_sub(idle.peak_kib),
                run.elapsed.as_millis(),
                events,
                server.requests()
            ));
            check(&attack, provider, pass, &run, idle.peak_kib);
            // A request never carries more than the conversation plus six bounded replies.
            assert!(
                server.largest_request_body_len() < 64 * 1024,
                "{}: {} bytes sent",
                attack.name,
                server.largest_request_body_len()
            );
        }
    }
    eprintln!("{}", table.join("\n"));
    // The text around an echoed key is kept, the key replaced, whole or split across deltas.
    for provider in [Provider::OpenAi, Provider::Anthropic, Provider::Responses] {
        for place in [KeyPlace::Text, KeyPlace::StreamText] {
            let mut args = vec!["complete", "--live", "--json", "--stream"];
            args.extend_from_slice(provider.args());
            let (run, _) = against(echo(200, place, KeyPart::Whole), args).await;
            assert_no_key_run(&run.stdout, "stdout");
            let report: Value = run.report();
            assert_eq!(
                report["text"],
                format!("{} the key you sent was [redacted]", ".".repeat(270)),
                "{provider:?} {place:?}"
            );
            let transport = report["transport"].as_str().unwrap_or_default();
            assert!(transport.starts_with(provider.label()), "{provider:?}: {transport}");
        }
    }
    assert_eq!(KEY.len(), 52);
}
