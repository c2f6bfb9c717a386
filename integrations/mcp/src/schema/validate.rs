//! Checking arguments against a compiled schema: the first violation, with where and what.
//!
//! # Invariants
//!
//! - A message names a place (a JSON pointer) and a constraint taken from the schema; no
//!   argument value is ever written into it.
//! - Every nested application of a schema counts towards [`MAX_DEPTH`]; past it the check
//!   refuses instead of recursing further.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::compile::{Node, Rules, Types};
use super::number::{compare, is_integer, is_multiple, json_equal};
use super::{InputSchema, MAX_DEPTH, Violation, push_token, short};

pub(super) fn check(schema: &InputSchema, arguments: &Value) -> Result<(), Violation> {
    let mut at = String::new();
    Checker { nodes: &schema.nodes }.node(schema.root, arguments, &mut at, 0)
}

struct Checker<'s> {
    nodes: &'s [Node],
}

type Outcome = Result<(), Violation>;

fn refuse(at: &str, expected: impl Into<String>) -> Outcome {
    Err(Violation::new(at.to_owned(), expected.into()))
}

impl Checker<'_> {
    fn node(&self, index: usize, value: &Value, at: &mut String, depth: usize) -> Outcome {
        if depth >= MAX_DEPTH {
            return refuse(
                at,
                format!("the schema nests too deeply to check here (at most {MAX_DEPTH} levels)"),
            );
        }
        match &self.nodes[index] {
            Node::Bool(true) => Ok(()),
            Node::Bool(false) => refuse(at, "expected nothing here (the schema accepts no value)"),
            Node::Rules(rules) => self.rules(rules, value, at, depth + 1),
        }
    }

    /// Checks `value` against the node `index`, one level down at `token` (if any); `at` is
    /// given back unchanged.
    fn child(
        &self,
        index: usize,
        value: &Value,
        at: &mut String,
        token: Option<&str>,
        depth: usize,
    ) -> Outcome {
        let length = at.len();
        if let Some(token) = token {
            push_token(at, token);
        }
        let outcome = self.node(index, value, at, depth);
        at.truncate(length);
        outcome
    }

    fn matches(&self, index: usize, value: &Value, at: &mut String, depth: usize) -> bool {
        self.child(index, value, at, None, depth).is_ok()
    }

    fn rules(&self, rules: &Rules, value: &Value, at: &mut String, depth: usize) -> Outcome {
        if let Some(types) = rules.types {
            check_type(types, value, at)?;
        }
        if let Some(allowed) = &rules.enumeration
            && !allowed.iter().any(|candidate| json_equal(candidate, value))
        {
            return refuse(at, format!("expected one of {}", listed(allowed)));
        }
        if let Some(constant) = &rules.constant
            && !json_equal(constant, value)
        {
            return refuse(at, format!("expected the value {}", listed(std::slice::from_ref(constant))));
        }
        match value {
            Value::Object(object) => self.object(rules, object, at, depth)?,
            Value::Array(items) => self.array(rules, items, at, depth)?,
            Value::String(text) => string(rules, text, at)?,
            Value::Number(number) => self::number(rules, number, at)?,
            Value::Null | Value::Bool(_) => {}
        }
        self.combinators(rules, value, at, depth)
    }

    fn object(&self, rules: &Rules, object: &Map<String, Value>, at: &mut String, depth: usize) -> Outcome {
        for name in &rules.required {
            if !object.contains_key(name) {
                return refuse(at, format!("missing required property `{}`", short(name)));
            }
        }
        let size = object.len() as u64;
        if let Some(min) = rules.min_properties
            && size < min
        {
            return refuse(at, format!("expected an object with at least {min} properties"));
        }
        if let Some(max) = rules.max_properties
            && size > max
        {
            return refuse(at, format!("expected an object with at most {max} properties"));
        }
        for (name, value) in object {
            if let Some(names) = rules.property_names
                && !self.matches(names, &Value::String(name.clone()), at, depth)
            {
                return refuse(
                    at,
                    format!("expected property name `{}` to match `propertyNames`", short(name)),
                );
            }
            match (rules.properties.get(name), rules.additional) {
                (Some(&schema), _) => self.child(schema, value, at, Some(name), depth)?,
                (None, Some(additional)) if matches!(self.nodes[additional], Node::Bool(false)) => {
                    return refuse(
                        at,
                        format!(
                            "unexpected property `{}` (the schema allows no other properties)",
                            short(name)
                        ),
                    );
                }
                (None, Some(additional)) => self.child(additional, value, at, Some(name), depth)?,
                (None, None) => {}
            }
        }
        Ok(())
    }

    fn array(&self, rules: &Rules, items: &[Value], at: &mut String, depth: usize) -> Outcome {
        let size = items.len() as u64;
        if let Some(min) = rules.min_items
            && size < min
        {
            return refuse(at, format!("expected an array of at least {min} items"));
        }
        if let Some(max) = rules.max_items
            && size > max
        {
            return refuse(at, format!("expected an array of at most {max} items"));
        }
        for (position, item) in items.iter().enumerate() {
            let schema = rules.prefix.get(position).copied().or(rules.items);
            if let Some(schema) = schema {
                self.child(schema, item, at, Some(&position.to_string()), depth)?;
            }
        }
        if rules.unique {
            for (position, item) in items.iter().enumerate() {
                if items[..position].iter().any(|earlier| json_equal(earlier, item)) {
                    return refuse(at, "expected an array of unique items");
                }
            }
        }
        if let Some(contains) = rules.contains
            && !items.iter().any(|item| self.matches(contains, item, at, depth))
        {
            return refuse(at, "expected an array with at least one item matching `contains`");
        }
        Ok(())
    }

    fn combinators(&self, rules: &Rules, value: &Value, at: &mut String, depth: usize) -> Outcome {
        if let Some(reference) = rules.reference {
            self.child(reference, value, at, None, depth)?;
        }
        for &schema in &rules.all_of {
            self.child(schema, value, at, None, depth)?;
        }
        if !rules.any_of.is_empty()
            && !rules.any_of.iter().any(|&schema| self.matches(schema, value, at, depth))
        {
            return refuse(
                at,
                format!("expected a match for at least one of the {} schemas of `anyOf`", rules.any_of.len()),
            );
        }
        if !rules.one_of.is_empty() {
            let matched =
                rules.one_of.iter().filter(|&&schema| self.matches(schema, value, at, depth)).count();
            if matched != 1 {
                return refuse(
                    at,
                    format!(
                        "expected a match for exactly one of the {} schemas of `oneOf` (matched {matched})",
                        rules.one_of.len()
                    ),
                );
            }
        }
        if let Some(not) = rules.not
            && self.matches(not, value, at, depth)
        {
            return refuse(at, "expected no match for the schema of `not`");
        }
        if let Some((condition, then, otherwise)) = rules.condition {
            let branch = if self.matches(condition, value, at, depth) { then } else { otherwise };
            if let Some(branch) = branch {
                self.child(branch, value, at, None, depth)?;
            }
        }
        Ok(())
    }
}

fn check_type(types: Types, value: &Value, at: &str) -> Outcome {
    let fits = match value {
        Value::Null => types.contains(Types::NULL),
        Value::Bool(_) => types.contains(Types::BOOLEAN),
        Value::Object(_) => types.contains(Types::OBJECT),
        Value::Array(_) => types.contains(Types::ARRAY),
        Value::String(_) => types.contains(Types::STRING),
        Value::Number(number) => {
            types.contains(Types::NUMBER) || (types.contains(Types::INTEGER) && is_integer(number))
        }
    };
    if fits {
        return Ok(());
    }
    let names: Vec<&str> = types.names().collect();
    match names.as_slice() {
        [one] => refuse(at, format!("expected {}", article(one))),
        many => refuse(at, format!("expected one of the types {}", many.join(", "))),
    }
}

fn article(name: &str) -> String {
    match name {
        "null" => "null".to_owned(),
        "integer" | "object" | "array" => format!("an {name}"),
        _ => format!("a {name}"),
    }
}

fn string(rules: &Rules, text: &str, at: &str) -> Outcome {
    let length = || text.chars().count() as u64;
    if let Some(min) = rules.min_length
        && length() < min
    {
        return refuse(at, format!("expected a string of at least {min} characters"));
    }
    if let Some(max) = rules.max_length
        && length() > max
    {
        return refuse(at, format!("expected a string of at most {max} characters"));
    }
    Ok(())
}

fn number(rules: &Rules, number: &serde_json::Number, at: &str) -> Outcome {
    use std::cmp::Ordering::{Equal, Greater, Less};
    if let Some(minimum) = &rules.minimum {
        let order = compare(number, &minimum.value);
        if order == Less || (minimum.exclusive && order == Equal) {
            let sign = if minimum.exclusive { ">" } else { ">=" };
            return refuse(at, format!("expected a number {sign} {}", minimum.value));
        }
    }
    if let Some(maximum) = &rules.maximum {
        let order = compare(number, &maximum.value);
        if order == Greater || (maximum.exclusive && order == Equal) {
            let sign = if maximum.exclusive { "<" } else { "<=" };
            return refuse(at, format!("expected a number {sign} {}", maximum.value));
        }
    }
    if let Some(divisor) = &rules.multiple_of
        && !is_multiple(number, divisor)
    {
        return refuse(at, format!("expected a multiple of {divisor}"));
    }
    Ok(())
}

/// The schema's own values, as JSON, cut to about 160 bytes.
fn listed(values: &[Value]) -> String {
    let mut out = String::new();
    for (i, value) in values.iter().enumerate() {
        if out.len() > 160 {
            let _ = write!(out, ", … ({} more)", values.len() - i);
            break;
        }
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(short(&value.to_string()));
    }
    out
}
