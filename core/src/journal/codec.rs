//! The one encoding of the journal's stored values, shared by every backend: JSON for
//! structured values (replies, the conversation, the counters), short names for enumerations.
//!
//! Every JSON value is written and read through a private `Stored*` struct of this module or
//! of `codec_messages`, `codec_progress` and `codec_terms`, never through a public type's serde
//! derive: a public type may grow, the stored text may not change by accident.
//!
//! No value carries a version of its own. The format changes in two ways only: additively (a
//! new field is optional, read as its default when absent and not written while it holds it,
//! as `below_model_calls` and `progress` were added), which every reader of the same schema
//! handles; or with a new schema version of the backend (`PRAGMA user_version` for SQLite,
//! `loopbound_schema` for PostgreSQL), whose migration rewrites the stored rows. A version
//! field in each value would repeat the schema version, change the text of every row written
//! so far, and still not let an older build read a newer value, which the schema version
//! already refuses ([`JournalError::UnsupportedSchema`]).
//!
//! # Invariants
//!
//! - Every stored text is pinned by a test (`codec_pins.rs` and this module's tests): the
//!   journals an earlier version wrote (`testkit/fixtures/`) read as they did.
//! - `decode(encode(x)) == x` for every value this module encodes.
//! - Decoding never panics: any text gives a value or a typed
//!   [`Corrupt`](JournalError::Corrupt) error naming the field, never the stored text.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::codec_messages::{StoredMessage, StoredToolCall, StoredUsage};
use super::definition::RunDefinition;
use super::error::JournalError;
use super::label::Labels;
use super::record::{Decider, MAX_ACTOR_LEN, Resolution, Verdict, valid_actor, valid_reason};
use super::row::EventRow;
use super::{codec_progress, codec_terms};
use crate::event::{ControlEvent, EventKind};
use crate::guard::{Below, Counters};
use crate::limits::Limits;
use crate::spend::{Micros, Reserved};
use crate::tool::EffectKind;
use crate::transport::{Message, ModelReply, Usage};

fn corrupt(what: &str) -> JournalError {
    JournalError::Corrupt(what.to_owned())
}

/// A model reply as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredReply {
    content: Option<String>,
    tool_calls: Vec<StoredToolCall>,
    usage: Option<StoredUsage>,
}

pub(crate) fn encode_reply(reply: &ModelReply) -> String {
    let stored = StoredReply {
        content: reply.content.clone(),
        tool_calls: reply.tool_calls.iter().map(StoredToolCall::encode).collect(),
        usage: reply.usage.as_ref().map(StoredUsage::encode),
    };
    serde_json::to_string(&stored).unwrap_or_default()
}

pub(crate) fn decode_reply(text: &str) -> Result<ModelReply, JournalError> {
    let stored: StoredReply = serde_json::from_str(text).map_err(|_| corrupt("a recorded model reply"))?;
    Ok(ModelReply {
        content: stored.content,
        tool_calls: stored.tool_calls.into_iter().map(StoredToolCall::decode).collect(),
        usage: stored.usage.map(StoredUsage::decode),
    })
}

pub(crate) fn encode_conversation(conversation: &[Message]) -> String {
    let stored: Vec<StoredMessage> = conversation.iter().map(StoredMessage::encode).collect();
    serde_json::to_string(&stored).unwrap_or_default()
}

pub(crate) fn decode_conversation(text: &str) -> Result<Vec<Message>, JournalError> {
    let stored: Vec<StoredMessage> =
        serde_json::from_str(text).map_err(|_| corrupt("the run's initial conversation"))?;
    Ok(stored.into_iter().map(StoredMessage::decode).collect())
}

/// The counters as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredCounters {
    model_calls: u32,
    tool_calls: u32,
    middleware: u32,
    repetitions: Vec<(String, u32)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    per_tool: Vec<(String, u32)>,
    #[serde(default, skip_serializing_if = "StoredSpend::is_empty")]
    spend: StoredSpend,
    /// Model calls admitted by child scopes (sub-agents) and charged to this run.
    #[serde(default, skip_serializing_if = "is_zero")]
    below_model_calls: u32,
    /// Tool calls admitted by child scopes and charged to this run.
    #[serde(default, skip_serializing_if = "is_zero")]
    below_tool_calls: u32,
    /// What the progress checks remember; absent for a run without a progress policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    progress: Option<codec_progress::StoredProgress>,
}

#[allow(clippy::trivially_copy_pass_by_ref, reason = "serde's `skip_serializing_if` hands over a reference")]
fn is_zero(count: &u32) -> bool {
    *count == 0
}

/// The spend as stored: settled tokens and money, reservations in flight, calls over.
#[derive(Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredSpend {
    input: u64,
    cached: u64,
    written: u64,
    output: u64,
    cost: u64,
    reserved_input: u64,
    reserved_output: u64,
    reserved_cost: u64,
    over: u32,
}

impl StoredSpend {
    fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

pub(crate) fn encode_counters(counters: &Counters) -> String {
    let stored = StoredCounters {
        model_calls: counters.model_calls,
        tool_calls: counters.tool_calls,
        middleware: counters.middleware,
        repetitions: counters.repetitions.iter().map(|(s, n)| (s.clone(), *n)).collect(),
        per_tool: counters.per_tool.iter().map(|(tool, n)| (tool.clone(), *n)).collect(),
        spend: {
            let (settled, cost, reserved, over) = counters.spend;
            StoredSpend {
                input: settled.input_tokens,
                cached: settled.cached_input_tokens,
                written: settled.cache_write_tokens,
                output: settled.output_tokens,
                cost: cost.0,
                reserved_input: reserved.input_tokens,
                reserved_output: reserved.output_tokens,
                reserved_cost: reserved.cost.0,
                over,
            }
        },
        below_model_calls: counters.below.model_calls,
        below_tool_calls: counters.below.tool_calls,
        progress: codec_progress::encode(&counters.progress),
    };
    serde_json::to_string(&stored).unwrap_or_default()
}

pub(crate) fn decode_counters(text: &str) -> Result<Counters, JournalError> {
    let stored: StoredCounters = serde_json::from_str(text).map_err(|_| corrupt("the run's counters"))?;
    let mut repetitions = BTreeMap::new();
    for (signature, count) in stored.repetitions {
        if count == 0 || repetitions.insert(signature, count).is_some() {
            return Err(corrupt("the run's counters (repetitions)"));
        }
    }
    let mut per_tool = BTreeMap::new();
    for (tool, count) in stored.per_tool {
        if count == 0 || per_tool.insert(tool, count).is_some() {
            return Err(corrupt("the run's counters (per-tool counts)"));
        }
    }
    let spend = &stored.spend;
    let settled =
        Usage::new(spend.input, spend.output).with_cached_input(spend.cached).with_cache_write(spend.written);
    let reserved = Reserved {
        input_tokens: spend.reserved_input,
        output_tokens: spend.reserved_output,
        cost: Micros(spend.reserved_cost),
    };
    Ok(Counters {
        model_calls: stored.model_calls,
        tool_calls: stored.tool_calls,
        middleware: stored.middleware,
        repetitions,
        per_tool,
        spend: (settled, Micros(spend.cost), reserved, spend.over),
        below: Below { model_calls: stored.below_model_calls, tool_calls: stored.below_tool_calls },
        progress: match stored.progress {
            Some(progress) => {
                codec_progress::decode(progress).ok_or_else(|| corrupt("the run's counters (progress)"))?
            }
            None => crate::guard::Tracker::default(),
        },
    })
}

/// The run's definition as stored; labels are stored in their own rows.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredDefinition {
    grants: Vec<String>,
    model_calls: u32,
    tool_calls: u32,
    repetitions: u32,
    deadline: StoredDuration,
    calls_per_reply: u32,
    reply_bytes: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    total_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cost: Option<u64>,
    #[serde(default = "default_min_output", skip_serializing_if = "is_default_min_output")]
    min_output_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wrap_up_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    tool_limits: BTreeMap<String, u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prices: Option<codec_terms::StoredPrices>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pools: Option<codec_terms::StoredPools>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    /// The progress policy; absent for the default (exact repetition, no other check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    progress: Option<codec_progress::StoredPolicy>,
}

/// A duration as stored: whole seconds and the nanoseconds beyond them (the form serde gives
/// [`Duration`](std::time::Duration), which the definition was first stored with).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredDuration {
    secs: u64,
    nanos: u32,
}

impl StoredDuration {
    fn encode(duration: std::time::Duration) -> Self {
        Self { secs: duration.as_secs(), nanos: duration.subsec_nanos() }
    }

    /// The duration, or `None` when its nanoseconds carried into the seconds overflow them.
    fn decode(&self) -> Option<std::time::Duration> {
        self.secs.checked_add(u64::from(self.nanos / 1_000_000_000))?;
        Some(std::time::Duration::new(self.secs, self.nanos))
    }
}

fn default_min_output() -> u32 {
    Limits::DEFAULT_MIN_OUTPUT_TOKENS
}

#[allow(clippy::trivially_copy_pass_by_ref, reason = "serde's `skip_serializing_if` hands over a reference")]
fn is_default_min_output(tokens: &u32) -> bool {
    *tokens == Limits::DEFAULT_MIN_OUTPUT_TOKENS
}

pub(crate) fn encode_definition(definition: &RunDefinition) -> String {
    let limits = &definition.limits;
    let stored = StoredDefinition {
        grants: definition.grants.iter().cloned().collect(),
        model_calls: limits.model_calls(),
        tool_calls: limits.tool_calls(),
        repetitions: limits.repetitions(),
        deadline: StoredDuration::encode(limits.deadline()),
        calls_per_reply: limits.calls_per_reply(),
        reply_bytes: limits.reply_bytes(),
        input_tokens: limits.input_tokens(),
        output_tokens: limits.output_tokens(),
        total_tokens: limits.total_tokens(),
        cost: limits.cost().map(|cost| cost.0),
        min_output_tokens: limits.min_output_tokens(),
        wrap_up_tokens: limits.wrap_up_tokens(),
        tool_limits: limits.per_tool_calls().map(|(tool, calls)| (tool.to_owned(), calls)).collect(),
        prices: definition.prices.as_deref().map(codec_terms::encode_prices),
        #[cfg(feature = "pools")]
        pools: definition.pools.as_ref().map(codec_terms::encode_pools),
        #[cfg(not(feature = "pools"))]
        pools: None,
        stream: definition.records_stream,
        progress: codec_progress::encode_policy(&definition.progress),
    };
    serde_json::to_string(&stored).unwrap_or_default()
}

/// The definition in `text` with `labels`, or `None` for a run stored before definitions were
/// (an empty text).
pub(crate) fn decode_definition(text: &str, labels: Labels) -> Result<Option<RunDefinition>, JournalError> {
    if text.is_empty() {
        return Ok(None);
    }
    let bad = || corrupt("the run's definition");
    let stored: StoredDefinition = serde_json::from_str(text).map_err(|_| bad())?;
    let mut limits = Limits::default()
        .with_model_calls(stored.model_calls)
        .with_tool_calls(stored.tool_calls)
        .with_repetitions(stored.repetitions)
        .with_deadline(stored.deadline.decode().ok_or_else(bad)?)
        .with_calls_per_reply(stored.calls_per_reply)
        .with_reply_bytes(stored.reply_bytes)
        .with_min_output_tokens(stored.min_output_tokens);
    if let Some(tokens) = stored.input_tokens {
        limits = limits.with_input_tokens(tokens);
    }
    if let Some(tokens) = stored.output_tokens {
        limits = limits.with_output_tokens(tokens);
    }
    if let Some(tokens) = stored.total_tokens {
        limits = limits.with_total_tokens(tokens);
    }
    if let Some(cost) = stored.cost {
        limits = limits.with_cost(Micros(cost));
    }
    if let Some(tokens) = stored.wrap_up_tokens {
        limits = limits.with_wrap_up(tokens);
    }
    for (tool, calls) in stored.tool_limits {
        limits = limits.with_tool_calls_of(tool, calls);
    }
    limits.validate().map_err(|_| bad())?;
    let count = stored.grants.len();
    let grants: BTreeSet<String> = stored.grants.into_iter().collect();
    if grants.len() != count
        || grants.iter().any(|grant| grant.is_empty() || grant.chars().any(char::is_control))
    {
        return Err(bad());
    }
    let prices = match stored.prices {
        Some(stored) => Some(Arc::new(codec_terms::decode_prices(stored).ok_or_else(bad)?)),
        None => None,
    };
    #[cfg(feature = "pools")]
    let pools = match stored.pools {
        Some(stored) => Some(codec_terms::decode_pools(&stored).ok_or_else(bad)?),
        None => None,
    };
    // A run that draws from pools cannot run in a build without them: resumed here, it would
    // spend outside its pools. Its definition is refused, never read as one without pools.
    #[cfg(not(feature = "pools"))]
    if stored.pools.is_some() {
        return Err(corrupt("the run's definition (it draws from shared pools: the `pools` feature is off)"));
    }
    let progress = match stored.progress {
        Some(policy) => codec_progress::decode_policy(policy).ok_or_else(bad)?,
        None => crate::progress::Progress::exact(),
    };
    Ok(Some(RunDefinition {
        progress,
        grants,
        limits,
        prices,
        #[cfg(feature = "pools")]
        pools,
        labels,
        records_stream: stored.stream,
    }))
}

/// The instant `millis` milliseconds after the Unix epoch, if the clock can represent it (one
/// it cannot is later than any it can: never reached).
pub(crate) fn time_from_millis(millis: u64) -> Option<std::time::SystemTime> {
    std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_millis(millis))
}

/// `after` from now by this host's clock, in milliseconds since the Unix epoch (saturating).
pub(crate) fn expiry_from_now(after: std::time::Duration) -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(now.saturating_add(after).as_millis()).unwrap_or(u64::MAX)
}

pub(crate) fn decode_effect(text: &str) -> Result<EffectKind, JournalError> {
    [EffectKind::Read, EffectKind::Effect, EffectKind::Idempotent]
        .into_iter()
        .find(|kind| kind.as_str() == text)
        .ok_or_else(|| corrupt("a proposal's effect kind"))
}

pub(crate) fn decode_verdict(text: &str) -> Result<Verdict, JournalError> {
    [Verdict::Allow, Verdict::Deny]
        .into_iter()
        .find(|verdict| verdict.as_str() == text)
        .ok_or_else(|| corrupt("a decision's verdict"))
}

pub(crate) fn encode_decider(by: &Decider) -> String {
    match by {
        Decider::Policy => "policy".to_owned(),
        Decider::Approver(name) => format!("approver:{name}"),
    }
}

pub(crate) fn decode_decider(text: &str) -> Result<Decider, JournalError> {
    match text.split_once(':') {
        None if text == "policy" => Ok(Decider::Policy),
        Some(("approver", name)) if valid_actor(name) => Ok(Decider::Approver(name.to_owned())),
        _ => Err(corrupt("a decision's decider")),
    }
}

pub(crate) fn encode_resolution(resolution: &Resolution) -> (&'static str, Option<String>) {
    match resolution {
        Resolution::Ran { result } => ("ran", Some(result.clone())),
        Resolution::NotRun => ("not_run", None),
    }
}

pub(crate) fn decode_resolution(name: &str, result: Option<&str>) -> Result<Resolution, JournalError> {
    match (name, result) {
        ("ran", Some(result)) => Ok(Resolution::Ran { result: result.to_owned() }),
        ("not_run", None) => Ok(Resolution::NotRun),
        _ => Err(corrupt("a reconciliation")),
    }
}

pub(crate) fn decode_actor(text: &str) -> Result<String, JournalError> {
    if valid_actor(text) { Ok(text.to_owned()) } else { Err(corrupt("a reconciler's name")) }
}

pub(crate) fn encode_event(event: &ControlEvent) -> EventRow {
    EventRow {
        kind: event.kind().as_str().to_owned(),
        name: event.name().to_owned(),
        count: event.count(),
        operation: event.operation().map(str::to_owned),
        by: event.decided_by().map(str::to_owned),
        reason: event.reason().map(str::to_owned),
    }
}

/// Longest name an event may carry: a tool's (64), `model` or `run`.
const MAX_EVENT_NAME_LEN: usize = 64;

pub(crate) fn decode_event(row: &EventRow) -> Result<ControlEvent, JournalError> {
    let kind = EventKind::from_name(&row.kind).ok_or_else(|| corrupt("an event's kind"))?;
    if row.name.is_empty() || row.name.len() > MAX_EVENT_NAME_LEN || row.name.chars().any(char::is_control) {
        return Err(corrupt("an event's name"));
    }
    let mut event = ControlEvent::new(kind, crate::event::Subject::from_name(&row.name), row.count);
    if let Some(operation) = &row.operation {
        let id = super::id::OperationId::parse(operation).map_err(|_| corrupt("an event's operation"))?;
        event = event.on(id.shared());
    }
    if let Some(by) = &row.by {
        if by.len() > MAX_ACTOR_LEN + "approver ".len() || by.chars().any(char::is_control) || by.is_empty() {
            return Err(corrupt("an event's decider"));
        }
        event = event.by(Arc::from(by.as_str()));
    }
    if let Some(reason) = &row.reason {
        if !valid_reason(reason) {
            return Err(corrupt("an event's reason"));
        }
        event = event.because(Arc::from(reason.as_str()));
    }
    Ok(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_through_their_parts_and_refuse_others() {
        use super::super::record::RunState;
        use crate::outcome::Status;
        for state in [
            RunState::Open,
            RunState::AwaitingApproval(3),
            RunState::Ambiguous(1),
            RunState::Finished(Status::Completed),
            RunState::Finished(Status::Denied),
        ] {
            let status = state.status().map(Status::as_str);
            assert_eq!(RunState::from_parts(state.name(), state.operation(), status), Ok(state));
        }
        for (name, operation, status) in [
            ("", None, None),
            ("Open", None, None),
            ("open", Some(1), None),
            ("ambiguous", Some(0), None),
            ("ambiguous", None, None),
            ("awaiting_approval", Some(2), Some("Completed")),
            ("finished", None, Some("Nope")),
            ("finished", None, None),
        ] {
            let decoded = RunState::from_parts(name, operation, status);
            assert!(matches!(decoded, Err(JournalError::Corrupt(_))), "{name:?} {operation:?} {status:?}");
        }
    }

    fn defined(grants: &BTreeSet<String>, limits: Limits) -> RunDefinition {
        RunDefinition {
            grants: grants.clone(),
            limits,
            prices: None,
            #[cfg(feature = "pools")]
            pools: None,
            labels: Labels::new(),
            records_stream: false,
            progress: crate::progress::Progress::exact(),
        }
    }

    #[cfg(not(feature = "pools"))]
    #[test]
    fn a_definition_that_draws_from_pools_is_refused_by_a_build_without_them() {
        let plain = encode_definition(&defined(&BTreeSet::new(), Limits::default()));
        assert!(!plain.contains("pools"), "{plain}");
        assert!(decode_definition(&plain, Labels::new()).unwrap().is_some());
        let pooled = plain.replacen(
            '{',
            r#"{"pools":{"names":["tenant:acme"],"lease_micros":2500000,"output_cap":300},"#,
            1,
        );
        assert_eq!(
            decode_definition(&pooled, Labels::new()),
            Err(corrupt("the run's definition (it draws from shared pools: the `pools` feature is off)"))
        );
    }

    #[cfg(feature = "pools")]
    #[test]
    fn a_definitions_pools_round_trip_and_terms_no_draw_could_have_are_corrupt() {
        use crate::pool::{PoolName, PoolTerms};
        let names = [PoolName::new("tenant:acme").unwrap(), PoolName::new("user:7").unwrap()];
        let terms = PoolTerms::new(names, std::time::Duration::from_millis(2500), 300);
        let definition = RunDefinition { pools: Some(terms), ..defined(&BTreeSet::new(), Limits::default()) };
        let text = encode_definition(&definition);
        assert!(
            text.contains(
                r#""pools":{"names":["tenant:acme","user:7"],"lease_micros":2500000,"output_cap":300}"#
            ),
            "{text}"
        );
        assert_eq!(decode_definition(&text, Labels::new()), Ok(Some(definition)));
        let plain = encode_definition(&defined(&BTreeSet::new(), Limits::default()));
        assert!(!plain.contains("pools"), "{plain}");
        assert_eq!(decode_definition(&plain, Labels::new()).unwrap().unwrap().pools(), None);
        for (from, to) in [
            (r#""user:7""#, r#""user 7""#),
            (r#""user:7""#, r#""tenant:acme""#),
            (r#"["tenant:acme","user:7"]"#, "[]"),
            ("2500000", "0"),
            (r#""output_cap":300"#, r#""output_cap":0"#),
        ] {
            let bad = text.replace(from, to);
            assert_ne!(bad, text);
            assert_eq!(decode_definition(&bad, Labels::new()), Err(corrupt("the run's definition")), "{bad}");
        }
    }

    #[test]
    fn a_definitions_tool_limits_and_prices_round_trip_and_one_without_them_decodes_as_having_none() {
        let grants: BTreeSet<String> = ["payments.refund"].into_iter().map(str::to_owned).collect();
        let prices = crate::spend::Prices::new()
            .model("m", crate::spend::Price::per_million(Micros(3), Micros(15)).with_cached_input(Micros(1)))
            .tool("refund", Micros(20_000))
            .other_tools(Micros::ZERO);
        let limits = Limits::default()
            .with_cost(Micros(90_000))
            .with_tool_calls_of("refund", 1)
            .with_tool_calls_of("mail", 0);
        let definition = RunDefinition {
            prices: Some(Arc::new(prices)),
            progress: crate::progress::Progress::recommended().by_result("poll", 9).nudge(true),
            ..defined(&grants, limits)
        };
        let text = encode_definition(&definition);
        assert_eq!(decode_definition(&text, Labels::new()), Ok(Some(definition)));
        let plain = encode_definition(&defined(&grants, Limits::default()));
        assert!(
            !plain.contains("tool_limits") && !plain.contains("prices") && !plain.contains("stream"),
            "{plain}"
        );
        let recording = RunDefinition { records_stream: true, ..defined(&grants, Limits::default()) };
        let text_recording = encode_definition(&recording);
        assert!(text_recording.ends_with(r#","stream":true}"#), "{text_recording}");
        assert_eq!(decode_definition(&text_recording, Labels::new()), Ok(Some(recording)));
        let decoded = decode_definition(&plain, Labels::new()).unwrap().unwrap();
        assert_eq!((decoded.limits().per_tool_calls().count(), decoded.prices()), (0, None));
        let bad_tool = text.replace(r#""refund":1"#, r#""re fund":1"#);
        assert_ne!(bad_tool, text);
        assert_eq!(decode_definition(&bad_tool, Labels::new()), Err(corrupt("the run's definition")));
        let bad_price = text.replace(r#""refund":20000"#, r#""re fund":20000"#);
        assert_ne!(bad_price, text);
        assert_eq!(decode_definition(&bad_price, Labels::new()), Err(corrupt("the run's definition")));
    }

    #[test]
    fn definitions_round_trip_and_refuse_invalid_limits() {
        let grants: BTreeSet<String> = ["b.x", "a.y"].into_iter().map(str::to_owned).collect();
        let limits =
            Limits::default().with_tool_calls(0).with_deadline(std::time::Duration::from_millis(1500));
        let labels = Labels::new().with("tenant", "acme").unwrap();
        let text = encode_definition(&defined(&grants, limits.clone()));
        let decoded = decode_definition(&text, labels.clone()).unwrap().unwrap();
        assert_eq!(decoded, RunDefinition { labels, ..defined(&grants, limits) });
        assert_eq!(decode_definition("", Labels::new()), Ok(None));
        let zero = text.replace(r#""model_calls":6"#, r#""model_calls":0"#);
        assert_ne!(zero, text);
        assert_eq!(decode_definition(&zero, Labels::new()), Err(corrupt("the run's definition")));
        let twice = text.replace(r#"["a.y","b.x"]"#, r#"["a.y","a.y"]"#);
        assert_ne!(twice, text);
        assert_eq!(decode_definition(&twice, Labels::new()), Err(corrupt("the run's definition")));
    }

    #[test]
    fn a_definitions_spend_budgets_round_trip_and_one_without_them_decodes_as_unbudgeted() {
        let grants: BTreeSet<String> = ["payments.refund"].into_iter().map(str::to_owned).collect();
        let limits = Limits::default()
            .with_input_tokens(900)
            .with_output_tokens(300)
            .with_total_tokens(1000)
            .with_cost(Micros(2_500))
            .with_min_output_tokens(32)
            .with_wrap_up(64);
        let text = encode_definition(&defined(&grants, limits.clone()));
        let decoded = decode_definition(&text, Labels::new()).unwrap().unwrap();
        assert_eq!(decoded.limits, limits);
        let plain = encode_definition(&defined(&grants, Limits::default()));
        assert!(!plain.contains("tokens") && !plain.contains("cost"), "{plain}");
        assert_eq!(decode_definition(&plain, Labels::new()).unwrap().unwrap().limits, Limits::default());
    }

    #[test]
    fn counters_round_trip_and_refuse_duplicates() {
        let mut counters = Counters { model_calls: 2, tool_calls: 3, middleware: 3, ..Counters::default() };
        counters.repetitions.insert("t:{}".to_owned(), 2);
        assert_eq!(decode_counters(&encode_counters(&counters)), Ok(counters.clone()));
        assert!(!encode_counters(&counters).contains("below"), "a run without children stores no below");
        counters.below = Below { model_calls: 4, tool_calls: 1 };
        assert_eq!(decode_counters(&encode_counters(&counters)), Ok(counters));
        let duplicated = r#"{"model_calls":0,"tool_calls":0,"middleware":0,"repetitions":[["a",1],["a",1]]}"#;
        assert!(decode_counters(duplicated).is_err());
        assert!(
            decode_counters(r#"{"model_calls":-1,"tool_calls":0,"middleware":0,"repetitions":[]}"#).is_err()
        );
    }

    #[test]
    fn a_corrupt_message_names_the_field_and_not_the_text() {
        let error = decode_reply(r#"{"content":"secret-value","tool_calls":7}"#).err();
        assert_eq!(error, Some(JournalError::Corrupt("a recorded model reply".to_owned())));
    }

    #[test]
    fn deciders_round_trip() {
        for by in [Decider::Policy, Decider::Approver("alice".to_owned())] {
            assert_eq!(decode_decider(&encode_decider(&by)), Ok(by));
        }
        assert!(decode_decider("approver:").is_err());
        assert!(decode_decider("someone").is_err());
    }
}
