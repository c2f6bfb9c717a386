//! The stored text of every value the journal writes, pinned: a change to what is stored shows
//! here as a failing test, and then needs a new fixture beside `testkit/fixtures/` (see the
//! journal's module docs, "Stored format"). The conversation and definition texts are those
//! of the `done` run in `testkit/fixtures/journal-2026-12-06/journal.db`, as written there.

use std::sync::Arc;
use std::time::Duration;

use super::codec::{
    decode_conversation, decode_counters, decode_definition, decode_reply, encode_conversation,
    encode_counters, encode_definition, encode_reply,
};
use super::definition::RunDefinition;
use super::error::JournalError;
use super::label::Labels;
use crate::Scope;
use crate::guard::{Below, Counters};
use crate::limits::Limits;
#[cfg(feature = "pools")]
use crate::pool::{PoolName, PoolTerms};
use crate::progress::Progress;
use crate::spend::{Micros, Price, Prices, Reserved};
use crate::transport::{Message, ModelReply, ToolCall, Usage};

/// The `done` run's conversation in the fixture: every kind of message, nested JSON arguments,
/// escapes and text beyond ASCII.
fn conversation() -> Vec<Message> {
    let earlier = ToolCall::new(
        "call-0",
        "lookup_order",
        r#"{"order":41,"filter":{"items":[{"sku":"Ä-1","qty":2}],"note":"«fragile» \"glass\"\n🚚"}}"#,
    );
    vec![
        Message::system("You handle refunds for Zoë's shop (東京). Be brief.\tThanks."),
        Message::user("Was order 41 delivered?"),
        Message::assistant_parts(Some("Let me look.".to_owned()), vec![earlier]),
        Message::tool_result("call-0", "Order 41: delivered, 12.00 €."),
        Message::tool_error("call-x", "unknown tool: \"teleport\""),
        Message::user("Order 42 arrived damaged: refund it and e-mail the receipt."),
    ]
}

const CONVERSATION: &str = r#"[{"role":"system","content":"You handle refunds for Zoë's shop (東京). Be brief.\tThanks."},{"role":"user","content":"Was order 41 delivered?"},{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"call-0","name":"lookup_order","arguments":"{\"order\":41,\"filter\":{\"items\":[{\"sku\":\"Ä-1\",\"qty\":2}],\"note\":\"«fragile» \\\"glass\\\"\\n🚚\"}}"}]},{"role":"tool","call_id":"call-0","content":"Order 41: delivered, 12.00 €.","is_error":false},{"role":"tool","call_id":"call-x","content":"unknown tool: \"teleport\"","is_error":true},{"role":"user","content":"Order 42 arrived damaged: refund it and e-mail the receipt."}]"#;

#[test]
fn a_conversation_is_stored_as_the_fixture_holds_it_and_reads_back() {
    assert_eq!(encode_conversation(&conversation()), CONVERSATION);
    assert_eq!(decode_conversation(CONVERSATION), Ok(conversation()));
    assert_eq!(encode_conversation(&[]), "[]");
}

#[test]
fn an_assistant_message_without_text_is_stored_with_a_null_and_read_without_one() {
    let message = Message::assistant_parts(None, Vec::new());
    let text = r#"[{"role":"assistant","content":null,"tool_calls":[]}]"#;
    assert_eq!(encode_conversation(std::slice::from_ref(&message)), text);
    assert_eq!(decode_conversation(r#"[{"role":"assistant","tool_calls":[]}]"#), Ok(vec![message]));
    let unknown = r#"[{"role":"user","content":"hi","name":"zoë"}]"#;
    assert_eq!(decode_conversation(unknown), Ok(vec![Message::user("hi")]), "a field not named is skipped");
    let corrupt = Err(JournalError::Corrupt("the run's initial conversation".to_owned()));
    for text in [r#"[{"role":"robot","content":"hi"}]"#, r#"[{"content":"hi"}]"#, r#"{"role":"user"}"#] {
        assert_eq!(decode_conversation(text), corrupt, "{text}");
    }
}

#[test]
fn a_reply_is_stored_with_its_calls_and_every_usage_count() {
    let reply = ModelReply::calls(vec![
        ToolCall::new("call-b", "refund", r#"{"order":42,"amount_cents":1500}"#),
        ToolCall::new("call-é", "note", r#"{"text":"«ok» 🚚"}"#),
    ])
    .with_usage(Usage::new(20, 10).with_cached_input(8).with_cache_write(4));
    let text = r#"{"content":null,"tool_calls":[{"id":"call-b","name":"refund","arguments":"{\"order\":42,\"amount_cents\":1500}"},{"id":"call-é","name":"note","arguments":"{\"text\":\"«ok» 🚚\"}"}],"usage":{"input_tokens":20,"cached_input_tokens":8,"cache_write_tokens":4,"output_tokens":10}}"#;
    assert_eq!(encode_reply(&reply), text);
    assert_eq!(decode_reply(text), Ok(reply));
    let closing = ModelReply::text("Remboursé: 15,00 € ✓");
    let text = r#"{"content":"Remboursé: 15,00 € ✓","tool_calls":[],"usage":null}"#;
    assert_eq!(encode_reply(&closing), text);
    assert_eq!(decode_reply(text), Ok(closing));
    let corrupt = Err(JournalError::Corrupt("a recorded model reply".to_owned()));
    let short = r#"{"content":null,"tool_calls":[],"usage":{"input_tokens":1,"output_tokens":1}}"#;
    assert_eq!(decode_reply(short), corrupt, "every usage count is stored");
    assert_eq!(decode_reply(r#"{"content":null,"tool_calls":[],"usage":null,"extra":1}"#), corrupt);
}

#[test]
fn counters_are_stored_with_their_spend_and_children() {
    let mut counters = Counters { model_calls: 5, tool_calls: 4, middleware: 4, ..Counters::default() };
    counters.repetitions.insert(r#"refund:{"amount_cents":1500,"order":42}"#.to_owned(), 1);
    counters.per_tool.insert("refund".to_owned(), 2);
    let reserved = Reserved { input_tokens: 7, output_tokens: 50, cost: Micros(900) };
    counters.spend =
        (Usage::new(100, 50).with_cached_input(40).with_cache_write(20), Micros(1200), reserved, 1);
    counters.below = Below { model_calls: 3, tool_calls: 2 };
    let text = r#"{"model_calls":5,"tool_calls":4,"middleware":4,"repetitions":[["refund:{\"amount_cents\":1500,\"order\":42}",1]],"per_tool":[["refund",2]],"spend":{"input":100,"cached":40,"written":20,"output":50,"cost":1200,"reserved_input":7,"reserved_output":50,"reserved_cost":900,"over":1},"below_model_calls":3,"below_tool_calls":2}"#;
    assert_eq!(encode_counters(&counters), text);
    assert_eq!(decode_counters(text), Ok(counters));
}

/// The definition of a run of the refund task's scope under `limits`.
fn definition(limits: Limits) -> RunDefinition {
    let grants = ["payments.refund", "orders.read", "mail.send"];
    let scope = Scope::builder().grants(grants).limits(limits).build();
    RunDefinition::of(&scope.unwrap_or_else(|error| panic!("the scope builds: {error}")))
}

#[test]
fn a_definition_is_stored_as_the_fixture_holds_it_and_reads_back() {
    let done = definition(Limits::default().with_output_tokens(100));
    let text = r#"{"grants":["mail.send","orders.read","payments.refund"],"model_calls":6,"tool_calls":4,"repetitions":1,"deadline":{"secs":120,"nanos":0},"calls_per_reply":16,"reply_bytes":16777216,"output_tokens":100}"#;
    assert_eq!(encode_definition(&done), text);
    assert_eq!(decode_definition(text, Labels::new()), Ok(Some(done)));
}

#[test]
fn a_definition_with_every_term_is_stored_with_each_and_reads_back() {
    let limits = Limits::default()
        .with_deadline(Duration::from_millis(1500))
        .with_input_tokens(900)
        .with_total_tokens(1000)
        .with_cost(Micros(2500))
        .with_min_output_tokens(32)
        .with_wrap_up(64)
        .with_tool_calls_of("refund", 1);
    let prices = Prices::new()
        .model("m", Price::per_million(Micros(3), Micros(15)).with_cached_input(Micros(1)))
        .tool("refund", Micros(20_000))
        .other_tools(Micros::ZERO);
    #[cfg(feature = "pools")]
    let names = [PoolName::new("tenant:acme").unwrap(), PoolName::new("user:7").unwrap()];
    let full = RunDefinition {
        prices: Some(Arc::new(prices)),
        #[cfg(feature = "pools")]
        pools: Some(PoolTerms::new(names, Duration::from_millis(2500), 300)),
        records_stream: true,
        progress: Progress::recommended().by_result("poll", 9).nudge(true),
        limits,
        ..definition(Limits::default())
    };
    let text = r#"{"grants":["mail.send","orders.read","payments.refund"],"model_calls":6,"tool_calls":4,"repetitions":1,"deadline":{"secs":1,"nanos":500000000},"calls_per_reply":16,"reply_bytes":16777216,"input_tokens":900,"total_tokens":1000,"cost":2500,"min_output_tokens":32,"wrap_up_tokens":64,"tool_limits":{"refund":1},"prices":{"models":{"m":[3,1,3,15]},"tools":{"refund":20000},"other_tools":0},"pools":{"names":["tenant:acme","user:7"],"lease_micros":2500000,"output_cap":300},"stream":true,"progress":{"by_result":{"poll":9},"cycles":[3,3],"error_streak":3,"nudge":true}}"#;
    // Without the pools, every other term is stored just the same.
    #[cfg(not(feature = "pools"))]
    let text = text.replace(
        r#""pools":{"names":["tenant:acme","user:7"],"lease_micros":2500000,"output_cap":300},"#,
        "",
    );
    #[cfg(not(feature = "pools"))]
    let text = text.as_str();
    assert_eq!(encode_definition(&full), text);
    assert_eq!(decode_definition(text, Labels::new()), Ok(Some(full)));
}

#[test]
fn a_deadline_is_read_in_either_form_serde_gave_it_and_an_overflowing_one_is_corrupt() {
    let plain = encode_definition(&definition(Limits::default()));
    let as_pair = plain.replace(r#"{"secs":120,"nanos":0}"#, "[120,0]");
    assert_ne!(as_pair, plain);
    assert_eq!(decode_definition(&as_pair, Labels::new()), decode_definition(&plain, Labels::new()));
    let carried = plain.replace(r#""nanos":0"#, r#""nanos":2500000000"#);
    let read = decode_definition(&carried, Labels::new()).unwrap().unwrap();
    assert_eq!(read.limits.deadline(), Duration::from_millis(122_500));
    let corrupt = Err(JournalError::Corrupt("the run's definition".to_owned()));
    for (from, to) in [
        (r#""secs":120"#, r#""secs":18446744073709551615,"nanos":1000000000"#),
        (r#""nanos":0"#, r#""nanos":0,"millis":1"#),
    ] {
        let bad = plain.replace(from, to);
        assert_ne!(bad, plain);
        assert_eq!(decode_definition(&bad, Labels::new()), corrupt, "{bad}");
    }
}
