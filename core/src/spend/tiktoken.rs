//! The exact counter of OpenAI's encodings, behind the `tiktoken` feature.
//!
//! # Invariants
//!
//! - A count is the encoding's own, of the text alone; the per-message and per-request overheads
//!   are the default counter's, so a request's estimate is the text's exact count plus the
//!   chat template's framing.
//! - It is an estimate of what the provider bills, not a bound: the provider's own template may
//!   add tokens this count does not see, and its report settles the call.

use super::{ByteCounter, TokenCounter};

/// Which of OpenAI's encodings to count with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Encoding {
    /// `cl100k_base`: GPT-4 and GPT-3.5 models.
    Cl100k,
    /// `o200k_base`: GPT-4o, GPT-4.1, GPT-5 and the `o` models.
    O200k,
}

/// Counts tokens exactly as one of OpenAI's encodings does (an estimate of the bill, see the
/// module's docs). Its vocabulary loads on first use.
///
/// ```
/// use loopbound::spend::{ByteCounter, Encoding, TiktokenCounter, TokenCounter};
///
/// let exact = TiktokenCounter::new(Encoding::O200k);
/// let text = "The review of ticket 42 is finished.";
/// assert!(exact.count(text) <= ByteCounter.count(text));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TiktokenCounter {
    encoding: Encoding,
}

impl TiktokenCounter {
    /// A counter of `encoding`.
    #[must_use]
    pub const fn new(encoding: Encoding) -> Self {
        Self { encoding }
    }
}

impl TokenCounter for TiktokenCounter {
    fn count(&self, text: &str) -> u64 {
        let bpe = match self.encoding {
            Encoding::Cl100k => tiktoken_rs::cl100k_base_singleton(),
            Encoding::O200k => tiktoken_rs::o200k_base_singleton(),
        };
        bpe.encode_ordinary(text).len() as u64
    }

    fn max_token_bytes(&self) -> u64 {
        ByteCounter::MAX_TOKEN_BYTES
    }
}
