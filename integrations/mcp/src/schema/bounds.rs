//! Sizes measured before the validator sees a value: how deep a JSON value nests, and how many
//! arrays and objects a schema holds.
//!
//! # Invariants
//!
//! - Nothing here recurses: every walk keeps its own stack on the heap, so a value of any depth
//!   is measured without growing the call stack.
//! - A walk stops as soon as it passes its limit, so its time is bounded by the limit, not by
//!   the value's size.

use serde_json::Value;

use super::{MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES, SchemaError};

/// The nesting depth of `value` (a scalar is 0, `[]` and `[1]` are 1, `[[1]]` is 2), or `None`
/// when it is deeper than `limit`.
pub(super) fn depth(value: &Value, limit: usize) -> Option<usize> {
    let mut deepest = 0;
    let mut stack = vec![(value, 0_usize)];
    while let Some((value, level)) = stack.pop() {
        if !(value.is_array() || value.is_object()) {
            continue;
        }
        let level = level + 1;
        if level > limit {
            return None;
        }
        deepest = deepest.max(level);
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|child| (child, level))),
            Value::Object(object) => stack.extend(object.values().map(|child| (child, level))),
            _ => {}
        }
    }
    Some(deepest)
}

/// Keywords whose values are data, not schemas: their arrays and objects are not schemas
/// applied to the arguments.
const DATA: &[&str] = &["enum", "const", "default", "examples"];

/// Keywords whose values map names (chosen by the server) to schemas.
const NAME_MAPS: &[&str] =
    &["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];

/// What a value of the schema is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// A schema, or a list or value that may hold schemas.
    Schema,
    /// An object whose keys are names and whose values are schemas.
    Names,
    /// Data: counted for depth only.
    Data,
}

/// The arrays and objects of `schema` outside data keywords (an upper bound on the schemas a
/// check can apply), after checking the bounds [`MAX_SCHEMA_DEPTH`] and [`MAX_SCHEMA_NODES`].
pub(super) fn schema_nodes(schema: &Value) -> Result<usize, SchemaError> {
    let mut nodes = 0_usize;
    let mut stack = vec![(schema, 0_usize, Role::Schema)];
    while let Some((value, level, role)) = stack.pop() {
        if !(value.is_array() || value.is_object()) {
            continue;
        }
        let level = level + 1;
        if level > MAX_SCHEMA_DEPTH {
            return Err(SchemaError::TooDeep { limit: MAX_SCHEMA_DEPTH });
        }
        if role != Role::Data {
            nodes += 1;
            if nodes > MAX_SCHEMA_NODES {
                return Err(SchemaError::TooLarge { limit: MAX_SCHEMA_NODES });
            }
        }
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|item| (item, level, role))),
            Value::Object(object) => stack.extend(object.iter().map(|(key, child)| {
                let child_role = match role {
                    Role::Data => Role::Data,
                    Role::Schema if DATA.contains(&key.as_str()) => Role::Data,
                    Role::Schema if NAME_MAPS.contains(&key.as_str()) => Role::Names,
                    Role::Schema | Role::Names => Role::Schema,
                };
                (child, level, child_role)
            })),
            _ => {}
        }
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(levels: usize) -> Value {
        let mut value = json!(1);
        for _ in 0..levels {
            value = Value::Array(vec![value]);
        }
        value
    }

    #[test]
    fn depth_counts_containers_and_stops_past_the_limit() {
        assert_eq!(depth(&json!(1), 4), Some(0));
        assert_eq!(depth(&json!([]), 4), Some(1));
        assert_eq!(depth(&json!({"a": [1, {"b": 2}]}), 4), Some(3));
        assert_eq!(depth(&nested(4), 4), Some(4));
        assert_eq!(depth(&nested(5), 4), None);
    }

    #[test]
    fn schema_nodes_skip_data_but_not_properties_named_like_data_keywords() {
        let schema = json!({
            "type": "object",
            "enum": [[1], {"a": [2]}],
            "properties": {"enum": {"type": "array", "items": {"const": {"x": 1}}}}
        });
        // The root, `properties`, its `enum` schema and `items`; not the data.
        assert_eq!(schema_nodes(&schema), Ok(4));
    }

    #[test]
    fn schema_bounds_are_typed_errors() {
        assert_eq!(schema_nodes(&nested(MAX_SCHEMA_DEPTH)), Ok(MAX_SCHEMA_DEPTH));
        assert_eq!(
            schema_nodes(&nested(MAX_SCHEMA_DEPTH + 1)),
            Err(SchemaError::TooDeep { limit: MAX_SCHEMA_DEPTH })
        );
        let wide = Value::Array(vec![json!({}); MAX_SCHEMA_NODES]);
        assert_eq!(schema_nodes(&wide), Err(SchemaError::TooLarge { limit: MAX_SCHEMA_NODES }));
    }
}
