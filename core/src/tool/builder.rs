//! The type parameters of a [`ToolBuilder`]: what it checks after binding ([`Check`]: nothing,
//! [`NoCheck`], or the host's closure, [`CheckWith`]) and where the schema shown to the model
//! comes from ([`Parameters`]: [`Derived`] from the input type, or [`Given`] by the host).
//!
//! A host never writes these types when defining a tool: [`ToolBuilder::validate`] and
//! [`ToolBuilder::parameters`] choose them. They are nameable here for code that stores or passes
//! a builder between those steps.
//!
//! # Invariants
//!
//! - [`Check`] and [`Parameters`] are sealed: a check is nothing or the host's closure, and
//!   nothing else can stand between binding and the guard; a schema is derived or given.
//! - A derived schema is computed once, at definition, with sub-schemas inlined and without a
//!   `$schema` key, as tool-calling APIs expect for a function's parameters.

use schemars::JsonSchema;

#[cfg(doc)]
use super::ToolBuilder;
use super::pipeline::CheckFn;

mod sealed {
    /// Seals [`Check`](super::Check) and [`Parameters`](super::Parameters): the definition
    /// relies on what their implementations do.
    pub trait Sealed {}
}

/// What a tool checks in its bound input after binding and before the guard: nothing
/// ([`NoCheck`]), or a closure `Fn(&T) -> Result<(), String>` given to
/// [`ToolBuilder::validate`]. Sealed: those are its only implementations.
pub trait Check<T>: sealed::Sealed + Send + Sync + 'static {
    /// The check as the definition keeps it, or `None` when there is nothing to check.
    #[doc(hidden)]
    fn into_check(self) -> Option<CheckFn<T>>;
}

/// No check beyond binding: the default of a [`ToolBuilder`].
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCheck;

impl sealed::Sealed for NoCheck {}

impl<T> Check<T> for NoCheck {
    fn into_check(self) -> Option<CheckFn<T>> {
        None
    }
}

/// A closure given to [`ToolBuilder::validate`].
#[derive(Clone, Copy, Debug)]
pub struct CheckWith<F>(F);

impl<F> CheckWith<F> {
    pub(super) fn new(check: F) -> Self {
        Self(check)
    }
}

impl<F> sealed::Sealed for CheckWith<F> {}

impl<T, F> Check<T> for CheckWith<F>
where
    F: Fn(&T) -> Result<(), String> + Send + Sync + 'static,
{
    fn into_check(self) -> Option<CheckFn<T>> {
        Some(Box::new(self.0))
    }
}

/// Where the JSON schema a tool shows the model comes from: derived from the input type
/// ([`Derived`], which needs `T: JsonSchema`) or given by the host ([`Given`], any `T`). Sealed.
pub trait Parameters<T>: sealed::Sealed {
    /// The schema.
    #[doc(hidden)]
    fn into_schema(self) -> serde_json::Value;
}

/// The schema derived from the input type with `schemars`, once, at definition: the default.
#[derive(Clone, Copy, Debug, Default)]
pub struct Derived;

impl sealed::Sealed for Derived {}

impl<T: JsonSchema> Parameters<T> for Derived {
    fn into_schema(self) -> serde_json::Value {
        parameters_schema::<T>()
    }
}

/// A schema given by the host with [`ToolBuilder::parameters`].
#[derive(Clone, Debug)]
pub struct Given(serde_json::Value);

impl Given {
    pub(super) fn new(schema: serde_json::Value) -> Self {
        Self(schema)
    }
}

impl sealed::Sealed for Given {}

impl<T> Parameters<T> for Given {
    fn into_schema(self) -> serde_json::Value {
        self.0
    }
}

/// The JSON schema of `T`, with sub-schemas inlined and without a `$schema` key, as tool-calling
/// APIs expect for a function's parameters. Called once per definition.
fn parameters_schema<T: JsonSchema>() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator();
    let mut schema = serde_json::Value::from(generator.into_root_schema_for::<T>());
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
    }
    schema
}
