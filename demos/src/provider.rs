//! The live providers the consoles talk to with `--live`: which one (`--provider`), its transport
//! configured by the environment, and how the header names it.
//!
//! # Invariants
//!
//! - Each provider reads only its own variables (`LOOPBOUND_*` for the OpenAI-compatible
//!   endpoint, whether it speaks chat completions or the Responses API; `LOOPBOUND_ANTHROPIC_*`
//!   for the Messages API): one provider's key is never sent to the other.
//! - Nothing is guessed: an unconfigured provider gives a transport that fails every call as
//!   unavailable, sending nothing, so the run ends as `ProviderUnavailable`; the console says
//!   which variables to set, in the same words for both consoles ([`Provider::connect`]).
//! - Every provider goes through one [`BoxTransport`], so the consoles run the same scope, tools,
//!   budget and loop whatever the provider.

use std::io::Write;

use clap::{Args, ValueEnum};
use loopbound::transport::{BoxTransport, ChatRequest, ModelReply, Transport, TransportError};
use loopbound_anthropic::Anthropic;
use loopbound_openai::{OpenAi, Responses};
use loopbound_provider::{Api, ConfigError, Connection, HttpTransport};

use crate::vocabulary::chained;

/// `--live` and `--provider`, as both consoles take them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct Live {
    /// Talk to a live endpoint configured by the environment.
    #[arg(
        long,
        help = "Talk to a live endpoint: OpenAI-compatible, configured by LOOPBOUND_OPENAI_BASE_URL and \
                LOOPBOUND_OPENAI_MODEL (optional: LOOPBOUND_OPENAI_API_KEY, LOOPBOUND_OPENAI_TIMEOUT_SECS), with \
                --provider responses the same endpoint's Responses API, or with \
                --provider anthropic the Anthropic Messages API, configured by \
                LOOPBOUND_ANTHROPIC_BASE_URL and LOOPBOUND_ANTHROPIC_MODEL (optional: \
                LOOPBOUND_ANTHROPIC_API_KEY, LOOPBOUND_ANTHROPIC_TIMEOUT_SECS, \
                LOOPBOUND_ANTHROPIC_MAX_TOKENS). No default endpoint. The scenario sets the \
                capabilities and limits; the model's replies are its own"
    )]
    pub live: bool,

    /// The API `--live` talks to (default openai).
    #[arg(long, value_enum, requires = "live", value_name = "PROVIDER")]
    pub provider: Option<Provider>,
}

/// The API a live run talks to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, ValueEnum)]
pub enum Provider {
    /// OpenAI-compatible chat completions, configured by the `LOOPBOUND_*` variables.
    #[default]
    #[value(help = "OpenAI-compatible chat completions, configured by the LOOPBOUND_* variables")]
    Openai,
    /// The Anthropic Messages API, configured by the `LOOPBOUND_ANTHROPIC_*` variables.
    #[value(help = "the Anthropic Messages API, configured by the LOOPBOUND_ANTHROPIC_* variables")]
    Anthropic,
    /// The OpenAI Responses API, configured by the `LOOPBOUND_*` variables.
    #[value(help = "the OpenAI Responses API (/responses), configured by the LOOPBOUND_* variables")]
    Responses,
}

impl Provider {
    /// How the header names the provider's transport.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::Openai => "openai-compatible",
            Self::Anthropic => "anthropic-messages",
            Self::Responses => "openai-responses",
        }
    }

    /// What to set, as the consoles' messages say it.
    #[must_use]
    pub const fn variables(self) -> &'static str {
        match self {
            Self::Openai | Self::Responses => {
                "LOOPBOUND_OPENAI_BASE_URL (e.g. http://127.0.0.1:8080/v1) and LOOPBOUND_OPENAI_MODEL, optionally \
                 LOOPBOUND_OPENAI_API_KEY and LOOPBOUND_OPENAI_TIMEOUT_SECS"
            }
            Self::Anthropic => {
                "LOOPBOUND_ANTHROPIC_BASE_URL (e.g. https://api.anthropic.com/v1) and \
                 LOOPBOUND_ANTHROPIC_MODEL, optionally LOOPBOUND_ANTHROPIC_API_KEY, \
                 LOOPBOUND_ANTHROPIC_TIMEOUT_SECS and LOOPBOUND_ANTHROPIC_MAX_TOKENS"
            }
        }
    }

    /// The provider's transport, configured by the environment, and its header label (model
    /// and base URL); or why the environment does not configure it.
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] naming the variable that is missing or invalid.
    pub fn from_env(self) -> Result<(BoxTransport, String), ConfigError> {
        match self {
            Self::Openai => self.connected::<OpenAi>(),
            Self::Anthropic => self.connected::<Anthropic>(),
            Self::Responses => self.connected::<Responses>(),
        }
    }

    /// The transport of API `A`, configured by the environment, and its header label.
    fn connected<A: Api>(self) -> Result<(BoxTransport, String), ConfigError> {
        let transport = HttpTransport::<A>::from_env()?;
        let label = self.describe(A::connection(transport.config()));
        Ok((BoxTransport::new(transport), label))
    }

    /// The header's label when the environment does not configure the provider.
    #[must_use]
    pub fn unconfigured(self) -> String {
        format!("{} (not configured)", self.label())
    }

    /// What `console` prints when the environment does not configure the provider.
    #[must_use]
    pub fn unconfigured_message(self, console: &str) -> String {
        format!(
            "{console}: --live needs an endpoint: set {}. Nothing was sent anywhere; the run ends \
             as ProviderUnavailable.",
            self.variables()
        )
    }

    /// The transport a `--live` run of `console` talks to, and its header label: the
    /// provider's, configured by the environment; else one that fails every call as
    /// unavailable, after saying on `err` what to set and why.
    pub fn connect(self, console: &str, err: &mut impl Write) -> (BoxTransport, String) {
        match self.from_env() {
            Ok(connected) => connected,
            Err(error) => {
                let message = format!("{}\n  ({})\n", self.unconfigured_message(console), chained(&error));
                // A closed stream is ignored on purpose: the exit code still carries the outcome.
                let _ = err.write_all(message.as_bytes()).and_then(|()| err.flush());
                (BoxTransport::new(Unconfigured(error.into())), self.unconfigured())
            }
        }
    }

    fn describe(self, connection: &Connection) -> String {
        format!("{}, model {} at {}", self.label(), connection.model(), connection.base_url())
    }
}

/// The live transport when the environment does not configure one: every call fails as
/// unreachable, so the run ends as `ProviderUnavailable` without sending anything.
#[derive(Debug)]
struct Unconfigured(TransportError);

impl Transport for Unconfigured {
    async fn complete<'a>(&'a self, _request: ChatRequest<'a>) -> Result<ModelReply, TransportError> {
        Err(self.0.clone())
    }
}
