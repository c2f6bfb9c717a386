//! The options a run sends with each model call: the output cap, the budgets' notice, and the
//! sampling options users set on every provider (temperature, top-p, stop sequences, seed).
//!
//! # Invariants
//!
//! - A [`ChatOptions`] holds only values some provider accepts: a temperature is finite and in
//!   `0..=2`, a top-p in `(0, 1]`, at most [`ChatOptions::MAX_STOP_SEQUENCES`] stop sequences and
//!   none of them empty. The setters refuse anything else with an [`OptionError`], and so does
//!   deserialising; nothing panics.
//! - An option that is not set is not sent: each transport leaves its field out of the request.
//! - A transport that cannot send an option the run set refuses it (a
//!   [`TransportErrorKind::Unsupported`](super::TransportErrorKind::Unsupported) error from
//!   [`Transport::check_options`](super::Transport::check_options)) rather than drop it: the
//!   runtime asks before anything runs, and the transport asks again before it sends a call.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// Per-call options passed to the provider.
///
/// `max_output_tokens` bounds the length of one reply where the provider supports it. It is not
/// a price, not a token budget over the run and not a financial circuit breaker.
///
/// The sampling options are validated when they are set; which of them a provider accepts is the
/// transport's to say (see [`Transport::check_options`](super::Transport::check_options)).
///
/// ```
/// use loopbound::transport::{ChatOptions, OptionError};
///
/// let options = ChatOptions::default()
///     .with_temperature(0.2)?
///     .with_top_p(0.9)?
///     .with_stop_sequences(["\n\nUser:"])?
///     .with_seed(7);
/// assert_eq!((options.temperature(), options.top_p(), options.seed()), (Some(0.2), Some(0.9), Some(7)));
/// assert_eq!(options.stop_sequences(), ["\n\nUser:"]);
///
/// assert_eq!(ChatOptions::default().with_temperature(2.5), Err(OptionError::Temperature(2.5)));
/// assert_eq!(ChatOptions::default().with_stop_sequences([""]), Err(OptionError::EmptyStopSequence));
/// # Ok::<(), OptionError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChatOptions {
    /// Longest reply, in tokens, the provider should produce.
    pub max_output_tokens: Option<u32>,
    /// A note for the model that a transport appends to the request as its last instruction
    /// (a system message, or the system prompt's end): the runtime's disclosure of the
    /// remaining budgets, when the host asks for it
    /// ([`Runner::disclose_budgets`](crate::Runner::disclose_budgets)).
    pub notice: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "checked_temperature")]
    temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "checked_top_p")]
    top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "checked_stop_sequences")]
    stop_sequences: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seed: Option<i64>,
}

// Every float a `ChatOptions` holds is finite (its setters and its deserialiser refuse the
// rest), so equality is reflexive and `Eq` holds.
impl Eq for ChatOptions {}

impl ChatOptions {
    /// The most stop sequences a request may carry: OpenAI's chat completions accept at most 4,
    /// the strictest limit of the providers loopbound speaks to, so a run's options mean the
    /// same on each of them.
    pub const MAX_STOP_SEQUENCES: usize = 4;

    /// The highest temperature accepted here (OpenAI's limit; Anthropic's is 1, and its
    /// transport refuses more).
    pub const MAX_TEMPERATURE: f64 = 2.0;

    /// Options with `notice` appended to the request.
    #[must_use]
    pub fn with_notice(mut self, notice: impl Into<String>) -> Self {
        self.notice = Some(notice.into());
        self
    }

    /// Options with a per-call output cap.
    #[must_use]
    pub fn with_max_output_tokens(mut self, tokens: u32) -> Self {
        self.max_output_tokens = Some(tokens);
        self
    }

    /// Options with the sampling temperature `temperature`.
    ///
    /// # Errors
    ///
    /// [`OptionError::Temperature`] unless `temperature` is finite and in `0..=2`.
    pub fn with_temperature(mut self, temperature: f64) -> Result<Self, OptionError> {
        self.temperature = Some(check_temperature(temperature)?);
        Ok(self)
    }

    /// Options with nucleus sampling over the tokens of probability mass `top_p`.
    ///
    /// # Errors
    ///
    /// [`OptionError::TopP`] unless `top_p` is above 0 and at most 1.
    pub fn with_top_p(mut self, top_p: f64) -> Result<Self, OptionError> {
        self.top_p = Some(check_top_p(top_p)?);
        Ok(self)
    }

    /// Options whose replies end before the first of `sequences` the model would write (in
    /// place of any set before; none clears them).
    ///
    /// # Errors
    ///
    /// [`OptionError::TooManyStopSequences`] for more than
    /// [`MAX_STOP_SEQUENCES`](Self::MAX_STOP_SEQUENCES), [`OptionError::EmptyStopSequence`] for
    /// an empty one.
    pub fn with_stop_sequences<I>(mut self, sequences: I) -> Result<Self, OptionError>
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.stop_sequences = check_stop_sequences(sequences.into_iter().map(Into::into))?;
        Ok(self)
    }

    /// Options that ask the provider to sample deterministically from `seed`, where it can.
    #[must_use]
    pub fn with_seed(mut self, seed: i64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The sampling temperature, when set.
    #[must_use]
    pub fn temperature(&self) -> Option<f64> {
        self.temperature
    }

    /// The nucleus sampling mass, when set.
    #[must_use]
    pub fn top_p(&self) -> Option<f64> {
        self.top_p
    }

    /// The stop sequences (empty when none is set).
    #[must_use]
    pub fn stop_sequences(&self) -> &[String] {
        &self.stop_sequences
    }

    /// The sampling seed, when set.
    #[must_use]
    pub fn seed(&self) -> Option<i64> {
        self.seed
    }
}

/// A request option's value that no provider accepts.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum OptionError {
    /// A temperature that is not a finite number in `0..=2`.
    Temperature(f64),
    /// A top-p that is not above 0 and at most 1.
    TopP(f64),
    /// More stop sequences than [`ChatOptions::MAX_STOP_SEQUENCES`].
    TooManyStopSequences {
        /// How many were given.
        count: usize,
    },
    /// An empty stop sequence.
    EmptyStopSequence,
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Temperature(value) => {
                write!(
                    f,
                    "invalid request option: temperature must be a finite number from 0 to 2, not {value}"
                )
            }
            Self::TopP(value) => {
                write!(f, "invalid request option: top_p must be above 0 and at most 1, not {value}")
            }
            Self::TooManyStopSequences { count } => write!(
                f,
                "invalid request option: at most {} stop sequences, not {count}",
                ChatOptions::MAX_STOP_SEQUENCES
            ),
            Self::EmptyStopSequence => {
                f.write_str("invalid request option: a stop sequence must not be empty")
            }
        }
    }
}

impl std::error::Error for OptionError {}

fn check_temperature(value: f64) -> Result<f64, OptionError> {
    if value.is_finite() && (0.0..=ChatOptions::MAX_TEMPERATURE).contains(&value) {
        Ok(value)
    } else {
        Err(OptionError::Temperature(value))
    }
}

fn check_top_p(value: f64) -> Result<f64, OptionError> {
    if value > 0.0 && value <= 1.0 { Ok(value) } else { Err(OptionError::TopP(value)) }
}

fn check_stop_sequences(mut sequences: impl Iterator<Item = String>) -> Result<Vec<String>, OptionError> {
    let mut kept = Vec::new();
    while let Some(sequence) = sequences.next() {
        if kept.len() == ChatOptions::MAX_STOP_SEQUENCES {
            // Counted, not kept: the error says how many were given.
            return Err(OptionError::TooManyStopSequences { count: kept.len() + 1 + sequences.count() });
        }
        if sequence.is_empty() {
            return Err(OptionError::EmptyStopSequence);
        }
        kept.push(sequence);
    }
    Ok(kept)
}

fn checked_temperature<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    Option::<f64>::deserialize(deserializer)?
        .map(check_temperature)
        .transpose()
        .map_err(serde::de::Error::custom)
}

fn checked_top_p<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    Option::<f64>::deserialize(deserializer)?.map(check_top_p).transpose().map_err(serde::de::Error::custom)
}

fn checked_stop_sequences<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    check_stop_sequences(Vec::<String>::deserialize(deserializer)?.into_iter())
        .map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temperatures_from_0_to_2_are_kept_and_the_rest_refused() {
        for value in [0.0, 0.7, 1.0, 2.0] {
            assert_eq!(
                ChatOptions::default().with_temperature(value).map(|o| o.temperature()),
                Ok(Some(value))
            );
        }
        for value in [-0.1, 2.01, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(ChatOptions::default().with_temperature(value), Err(OptionError::Temperature(value)));
        }
        let nan = ChatOptions::default().with_temperature(f64::NAN).map(|_| ()).unwrap_err();
        assert!(matches!(nan, OptionError::Temperature(value) if value.is_nan()));
        assert_eq!(
            nan.to_string(),
            "invalid request option: temperature must be a finite number from 0 to 2, not NaN"
        );
    }

    #[test]
    fn top_p_above_0_and_at_most_1_is_kept_and_the_rest_refused() {
        for value in [1e-9, 0.5, 1.0] {
            assert_eq!(ChatOptions::default().with_top_p(value).map(|o| o.top_p()), Ok(Some(value)));
        }
        for value in [0.0, -0.5, 1.000_001, f64::INFINITY] {
            assert_eq!(ChatOptions::default().with_top_p(value), Err(OptionError::TopP(value)));
        }
        assert!(
            matches!(ChatOptions::default().with_top_p(f64::NAN), Err(OptionError::TopP(v)) if v.is_nan())
        );
        assert_eq!(
            OptionError::TopP(0.0).to_string(),
            "invalid request option: top_p must be above 0 and at most 1, not 0"
        );
    }

    #[test]
    fn at_most_four_stop_sequences_none_empty() {
        let four = ChatOptions::default().with_stop_sequences(["a", "b", "c", "d"]).unwrap();
        assert_eq!(four.stop_sequences(), ["a", "b", "c", "d"]);
        assert_eq!(
            ChatOptions::default().with_stop_sequences(["a", "b", "c", "d", "e", "f"]),
            Err(OptionError::TooManyStopSequences { count: 6 })
        );
        assert_eq!(
            OptionError::TooManyStopSequences { count: 6 }.to_string(),
            "invalid request option: at most 4 stop sequences, not 6"
        );
        assert_eq!(
            ChatOptions::default().with_stop_sequences(["a", ""]),
            Err(OptionError::EmptyStopSequence)
        );
        let cleared = four.with_stop_sequences(Vec::<String>::new()).unwrap();
        assert_eq!(cleared.stop_sequences(), [] as [String; 0]);
    }

    #[test]
    fn unset_options_serialise_as_before_and_deserialising_validates() {
        let plain = ChatOptions::default().with_max_output_tokens(5);
        assert_eq!(serde_json::to_string(&plain).unwrap(), r#"{"max_output_tokens":5,"notice":null}"#);
        let set = plain.with_temperature(0.5).unwrap().with_top_p(1.0).unwrap().with_seed(-1);
        let set = set.with_stop_sequences(["END"]).unwrap();
        let text = serde_json::to_string(&set).unwrap();
        assert_eq!(
            text,
            r#"{"max_output_tokens":5,"notice":null,"temperature":0.5,"top_p":1.0,"stop_sequences":["END"],"seed":-1}"#
        );
        assert_eq!(serde_json::from_str::<ChatOptions>(&text).unwrap(), set);
        let hot = serde_json::from_str::<ChatOptions>(
            r#"{"max_output_tokens":null,"notice":null,"temperature":3}"#,
        );
        assert_eq!(
            hot.map_err(|error| error.to_string()),
            Err("invalid request option: temperature must be a finite number from 0 to 2, not 3 at line 1 column 56"
                .to_owned())
        );
        let empty = serde_json::from_str::<ChatOptions>(
            r#"{"max_output_tokens":null,"notice":null,"stop_sequences":[""]}"#,
        );
        assert_eq!(
            empty.map_err(|error| error.to_string()),
            Err("invalid request option: a stop sequence must not be empty at line 1 column 62".to_owned())
        );
    }
}
