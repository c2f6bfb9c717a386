//! A tracing layer that records what a run emits, for the tests that check that no span field,
//! event or log line carries a tool argument's value or the API key (SPEC §10).
//!
//! # Invariants
//!
//! - Every span's name, and every field value of spans, span records and events, is recorded as
//!   text (`name=value` with `Debug` formatting), in the order the subscriber saw them.
//! - Installing it is scoped: [`Capture::install`] returns a guard; the layer is the thread's
//!   default subscriber until the guard drops.

use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::DefaultGuard;
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Records every span name and every field value, of spans and events. Clones share one record.
#[derive(Clone, Debug, Default)]
pub struct Capture(Arc<Mutex<Vec<String>>>);

impl Capture {
    /// Makes a registry with this layer the current thread's default subscriber, until the
    /// returned guard drops.
    #[must_use = "the capture stops when the guard drops"]
    pub fn install(&self) -> DefaultGuard {
        tracing::subscriber::set_default(tracing_subscriber::registry().with(self.clone()))
    }

    /// What was recorded so far, in order.
    #[must_use]
    pub fn seen(&self) -> Vec<String> {
        self.lines().clone()
    }

    fn lines(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct Fields<'a>(&'a mut Vec<String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.push(format!("{}={value:?}", field.name()));
    }
}

impl<S: Subscriber> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        let mut seen = self.lines();
        seen.push(format!("span {}", attrs.metadata().name()));
        attrs.record(&mut Fields(&mut seen));
    }

    fn on_record(&self, _id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        values.record(&mut Fields(&mut self.lines()));
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        event.record(&mut Fields(&mut self.lines()));
    }
}
