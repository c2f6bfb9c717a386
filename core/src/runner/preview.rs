//! What a model call would reserve, asked before anything is sent: for a host sizing a budget
//! or a pool, or deciding whether a request is worth starting.
//!
//! # Invariants
//!
//! - A preview changes nothing: no call is counted, nothing is reserved, no store is asked.
//! - Its input is counted exactly as the run's first call counts it (the runtime's counter, the
//!   tools the scope is offered, the budget notice when the runtime discloses one), so the run's
//!   first call reserves that input; its output is what the scope's own budgets would grant now,
//!   at most the options' cap and a pool draw's cap.
//! - What it does not ask: the shared pools' figures (a store call), so a preview that fits may
//!   still be refused by a pool.

use crate::budgeted::Budgeted;
use crate::scope::Scope;
use crate::spend::Micros;
use crate::transport::{Message, Transport};

use super::Runner;

/// What a model call of a scope would reserve now ([`Runner::preview`]).
///
/// ```
/// use loopbound::scripted::{Step, sequence};
/// use loopbound::transport::ModelReply;
/// use loopbound::{Limits, Message, Runner, Scope, ToolSet};
///
/// let runtime = Runner::new(&ToolSet::default(), sequence(vec![Step::Reply(ModelReply::text("Hi."))]));
/// let scope = Scope::builder().limits(Limits::default().with_total_tokens(1_000)).build()?;
/// let preview = runtime.preview(&scope, &[Message::user("Hello.")]);
/// // 6 bytes of text, 8 for the message's framing, 16 for the request's.
/// assert_eq!(preview.input_tokens(), 30);
/// assert_eq!(preview.output_tokens(), Some(970), "what the total budget leaves");
/// assert!(preview.fits());
/// # Ok::<(), loopbound::LimitsError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Preview {
    input_tokens: u64,
    output_tokens: Option<u64>,
    cost: Option<Micros>,
    fits: bool,
}

impl Preview {
    /// An upper bound of the request's input tokens, as the run's reservation counts it.
    #[must_use]
    pub fn input_tokens(&self) -> u64 {
        self.input_tokens
    }

    /// The output the request would go out with (the options' cap, clamped by what the scope's
    /// budgets leave and a pool draw's cap); `None` when nothing bounds it.
    #[must_use]
    pub fn output_tokens(&self) -> Option<u64> {
        self.output_tokens
    }

    /// What the reservation would hold in money at the model's price, when the scope prices
    /// the model and the output is bounded.
    #[must_use]
    pub fn cost(&self) -> Option<Micros> {
        self.cost
    }

    /// Whether the scope's own budgets (and its tree's) would admit the call now; the shared
    /// pools are not asked.
    #[must_use]
    pub fn fits(&self) -> bool {
        self.fits
    }
}

impl<T: Transport, S: Send + Sync + 'static> Runner<T, S> {
    /// What the next model call of a run in `scope` on `conversation` would reserve, without
    /// sending or reserving anything (see [`Preview`]).
    #[must_use]
    pub fn preview(&self, scope: &Scope<S>, conversation: &[Message]) -> Preview {
        let model = Budgeted::with_counter(scope, &self.transport, &*self.counter).disclosing(self.disclose);
        let (input_tokens, output_tokens, cost) =
            model.preview(conversation, &self.offered(scope), &self.options);
        Preview {
            input_tokens,
            output_tokens: output_tokens.filter(|output| *output != u64::MAX),
            cost,
            fits: output_tokens.is_some(),
        }
    }
}
