//! The console's spend-budget flags: token and cost budgets for a review scenario, scripted or
//! `--live`, and the price of the run's model.
//!
//! # Invariants
//!
//! - Every budget that is set is a positive integer: clap refuses zero, a sign, a fraction or
//!   text before anything runs (exit 64, with the usage line).
//! - A cost budget needs the model's price (`--cost` requires `--price-per-million`): nothing
//!   is guessed. A price alone is allowed: the run's cost is then reported, not bounded.
//! - The price table the flags build names one model, the run's, and prices every tool at zero
//!   (the review's tools are free); no other model has a price, so a transport that names
//!   another model under a cost budget is refused before anything runs.

use std::fmt;
use std::sync::Arc;

use clap::Args;
use loopbound::Limits;
use loopbound::spend::{Micros, Price, Prices};

/// The spend budgets of one review run, from the command line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Args)]
#[command(next_help_heading = "Spend budgets (a review scenario, scripted or --live)")]
pub struct BudgetArgs {
    /// At most N input tokens over the run, reserved before each model call.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub input_tokens: Option<u64>,

    /// At most N output tokens over the run: each call is sent with its output cap set to what
    /// is left.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub output_tokens: Option<u64>,

    /// At most N input and output tokens together over the run.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub total_tokens: Option<u64>,

    /// At most MICROS micro-units of money over the run (50000 = $0.05 in micro-dollars),
    /// reserved before each model call at the model's price.
    #[arg(
        long,
        value_name = "MICROS",
        value_parser = clap::value_parser!(u64).range(1..),
        requires = "price_per_million"
    )]
    pub cost: Option<u64>,

    /// The run's model's price, in micro-units per million input and output tokens, e.g.
    /// 3000000,15000000 ($3 and $15 per million).
    #[arg(long, value_name = "IN,OUT", value_parser = parse_price)]
    pub price_per_million: Option<Price>,
}

impl BudgetArgs {
    /// Whether no budget flag was given.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// `limits` with the budgets these flags set.
    #[must_use]
    pub fn apply(&self, mut limits: Limits) -> Limits {
        if let Some(tokens) = self.input_tokens {
            limits = limits.with_input_tokens(tokens);
        }
        if let Some(tokens) = self.output_tokens {
            limits = limits.with_output_tokens(tokens);
        }
        if let Some(tokens) = self.total_tokens {
            limits = limits.with_total_tokens(tokens);
        }
        if let Some(cost) = self.cost {
            limits = limits.with_cost(Micros(cost));
        }
        limits
    }

    /// The price of `model`, if a price was given.
    #[must_use]
    pub fn price_of(&self, model: &str) -> Option<ModelPrice> {
        self.price_per_million.map(|price| ModelPrice { model: model.to_owned(), price })
    }
}

/// One model's price, as the header states it and the price table holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelPrice {
    /// The model id, as the transport names it.
    pub model: String,
    /// Its price.
    pub price: Price,
}

impl ModelPrice {
    /// Micro-units per million input tokens (the dearest input price).
    #[must_use]
    pub fn input_per_million(&self) -> Micros {
        self.price.worst_input(1_000_000)
    }

    /// Micro-units per million output tokens.
    #[must_use]
    pub fn output_per_million(&self) -> Micros {
        self.price.output(1_000_000)
    }
}

impl fmt::Display for ModelPrice {
    /// `hostile: input 3000000µ, output 15000000µ per million tokens`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: input {}, output {} per million tokens",
            self.model,
            self.input_per_million(),
            self.output_per_million()
        )
    }
}

/// The price table of `prices`: each model's price, every tool free.
#[must_use]
pub fn table<'a>(prices: impl IntoIterator<Item = &'a ModelPrice>) -> Arc<Prices> {
    prices
        .into_iter()
        .fold(Prices::new(), |table, price| table.model(price.model.clone(), price.price))
        .other_tools(Micros::ZERO)
        .shared()
}

/// Why a `--price-per-million` value was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadPrice;

impl fmt::Display for BadPrice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "expected IN,OUT: two whole numbers of micro-units per million tokens, e.g. 3000000,15000000",
        )
    }
}

impl std::error::Error for BadPrice {}

/// Reads `IN,OUT`: two unsigned integers, input then output micro-units per million tokens.
///
/// # Errors
///
/// [`BadPrice`] for anything else (a missing part, a sign, a fraction, spaces, a third part).
pub fn parse_price(text: &str) -> Result<Price, BadPrice> {
    let (input, output) = text.split_once(',').ok_or(BadPrice)?;
    let whole = |part: &str| {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(BadPrice);
        }
        part.parse::<u64>().map_err(|_| BadPrice)
    };
    Ok(Price::per_million(Micros(whole(input)?), Micros(whole(output)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_price_is_two_whole_numbers() {
        let price = parse_price("3000000,15000000").unwrap();
        assert_eq!(price, Price::per_million(Micros(3_000_000), Micros(15_000_000)));
        assert_eq!(parse_price("0,0"), Ok(Price::per_million(Micros::ZERO, Micros::ZERO)));
        for bad in
            ["", "3", "3,", ",3", "3,4,5", "-1,2", "1.5,2", " 1,2", "1,2 ", "+1,2", "1,99999999999999999999"]
        {
            assert_eq!(parse_price(bad), Err(BadPrice), "{bad:?}");
        }
    }

    #[test]
    fn the_flags_set_only_the_budgets_given() {
        let flags = BudgetArgs { total_tokens: Some(5_000), cost: Some(20_000), ..BudgetArgs::default() };
        let limits = flags.apply(Limits::default());
        assert_eq!(limits, Limits::default().with_total_tokens(5_000).with_cost(Micros(20_000)));
        assert!(BudgetArgs::default().is_empty());
        assert_eq!(BudgetArgs::default().apply(Limits::default()), Limits::default());
    }

    #[test]
    fn a_model_price_reads_as_the_header_prints_it() {
        let price = ModelPrice {
            model: "m".to_owned(),
            price: Price::per_million(Micros(3_000_000), Micros(15_000_000)),
        };
        assert_eq!(price.to_string(), "m: input 3000000µ, output 15000000µ per million tokens");
        let table = table([&price]);
        assert_eq!(table.model_price("m"), Some(price.price));
        assert_eq!(table.tool_price("read_ticket"), Some(Micros::ZERO));
        assert_eq!(table.model_price("other"), None);
    }
}
