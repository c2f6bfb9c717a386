//! Checking arguments against a compiled schema: the first violation, with where and what.
//!
//! # Invariants
//!
//! - The arguments' depth is measured (without recursion) before the validator sees them:
//!   past [`MAX_DEPTH`] they are refused unchecked.
//! - The validator runs with the stack its worst path may need ([`stack`](super::stack)), or
//!   not at all when that is more than [`MAX_CHECK_STACK`].
//! - A violation's place is the validator's instance path, rebuilt token by token; its words
//!   come from [`describe`](super::describe), never from the validator's messages.

use jsonschema::ValidationError;
use jsonschema::paths::LocationSegment;
use serde_json::Value;

use super::stack::{self, MAX_CHECK_STACK, UNIT_STACK};
use super::{InputSchema, MAX_DEPTH, Violation, bounds, describe, push_token};

pub(super) fn check(schema: &InputSchema, arguments: &Value) -> Result<(), Violation> {
    let Some(depth) = bounds::depth(arguments, MAX_DEPTH) else {
        return Err(Violation::new(
            String::new(),
            format!("the arguments nest deeper than {MAX_DEPTH} levels, which is not checked here"),
        ));
    };
    let need = schema.nodes.max(1).saturating_mul(depth + 1).saturating_mul(UNIT_STACK);
    if need > MAX_CHECK_STACK {
        return Err(Violation::new(
            String::new(),
            "the arguments nest too deeply for a schema this large to check here",
        ));
    }
    let validator = &*schema.validator;
    stack::run(need, || validator.validate(arguments).map_err(|error| violation(&error))).unwrap_or_else(
        |_| {
            Err(Violation::new(
                String::new(),
                "the arguments were not checked: no thread could be started for a deep check",
            ))
        },
    )
}

fn violation(error: &ValidationError<'_>) -> Violation {
    let mut at = String::new();
    for segment in error.instance_path() {
        match segment {
            LocationSegment::Property(name) => push_token(&mut at, &name),
            LocationSegment::Index(index) => push_token(&mut at, &index.to_string()),
        }
    }
    Violation::new(at, describe::constraint(error))
}
