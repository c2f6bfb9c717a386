//! loopbound with its default features leaves serde_json as the user configured it: serde_json's
//! own deserialization of numbers inside `#[serde(untagged)]` enums and `#[serde(flatten)]`
//! fields works (serde_json's `arbitrary_precision`, which breaks both, is off), while loopbound
//! binds the same types with its own reader.

use loopbound::tool::ToolBuilder;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
enum IdOrName {
    N(u64),
    S(String),
}

#[derive(Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
struct Limits {
    max: u32,
    ratio: f64,
}

#[derive(Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
struct Query {
    id: IdOrName,
    #[serde(flatten)]
    limits: Limits,
}

const TEXT: &str = r#"{"id":42,"max":7,"ratio":0.5}"#;

fn expected() -> Query {
    Query { id: IdOrName::N(42), limits: Limits { max: 7, ratio: 0.5 } }
}

#[test]
fn serde_json_still_reads_numbers_in_untagged_enums_and_flattened_fields() {
    assert_eq!(serde_json::from_str::<IdOrName>("42").ok(), Some(IdOrName::N(42)));
    assert_eq!(
        serde_json::from_str::<IdOrName>(r#""forty-two""#).ok(),
        Some(IdOrName::S("forty-two".into()))
    );
    assert_eq!(serde_json::from_str::<Query>(TEXT).ok(), Some(expected()));
}

#[test]
fn serde_json_numbers_are_not_arbitrary_precision() {
    // With `arbitrary_precision`, serde_json would keep this number's text instead of refusing it.
    assert!(serde_json::from_str::<serde_json::Value>("1e400").is_err());
}

#[test]
fn loopbound_binds_the_same_types_with_its_own_reader() {
    let tool = ToolBuilder::new("query", "query.run")
        .build(|_: Query, _: loopbound::ToolContext| async { Ok::<_, String>("") })
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(tool.bind(TEXT).ok(), Some(expected()));
    assert_eq!(tool.bind(r#"{"id":42.0,"max":7e0,"ratio":5e-1}"#).ok(), Some(expected()));
    assert_eq!(
        tool.bind(r#"{"id":"x","max":7,"ratio":0.5}"#).ok(),
        Some(Query { id: IdOrName::S("x".into()), limits: Limits { max: 7, ratio: 0.5 } })
    );
}
