//! The input of every MCP tool: a JSON object, bound by loopbound and checked against the
//! tool's schema before the guard.
//!
//! # Invariants
//!
//! - An [`Arguments`] always holds a JSON object: deserializing anything else fails, so the
//!   guard never sees arguments that are not an object.
//! - Its `Debug` form names how many properties it has and nothing of their values.
//! - What the server receives is exactly this object, and the guard's signature is its
//!   canonical JSON: two spellings of the same arguments (`{"a":1,"b":2}` and
//!   `{"b":2.0,"a":1e0}`) have one signature.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// The arguments of one MCP tool call: a JSON object.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Arguments(Value);

impl Arguments {
    /// Arguments made of `object`'s properties.
    #[must_use]
    pub fn new(object: Map<String, Value>) -> Self {
        Self(Value::Object(object))
    }

    /// The arguments as a JSON value (always an object).
    #[must_use]
    pub fn as_value(&self) -> &Value {
        &self.0
    }

    /// The properties.
    #[must_use]
    pub fn into_map(self) -> Map<String, Value> {
        match self.0 {
            Value::Object(object) => object,
            // `new` and `deserialize` only ever build objects.
            _ => Map::new(),
        }
    }
}

impl From<Map<String, Value>> for Arguments {
    fn from(object: Map<String, Value>) -> Self {
        Self::new(object)
    }
}

impl fmt::Debug for Arguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let properties = self.0.as_object().map_or(0, Map::len);
        f.debug_struct("Arguments").field("properties", &properties).finish_non_exhaustive()
    }
}

impl Serialize for Arguments {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Arguments {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Map::deserialize(deserializer).map(Self::new)
    }
}

impl JsonSchema for Arguments {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Arguments".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        Map::<String, Value>::json_schema(generator)
    }
}
