//! Property tests of loopbound, and the fuzz targets' checks replayed on stable.
//!
//! The properties live in `tests/`; this library holds what they share:
//!
//! - [`harness`]: the fuzz targets' plain check functions (`loopbound_testkit::fuzz`, shared with
//!   `fuzz/` as a normal dependency), with the reference canonical form, the reference guard model
//!   and the structured fuzz inputs;
//! - [`journal_model`]: the reference model of the journal protocol;
//! - [`pool_model`]: the reference model of shared pools;
//! - [`config`]: proptest configuration with committed failure persistence;
//! - [`numbers`]: numbers as (sign, digits, exponent), their spellings and expected forms.

pub use loopbound_testkit::fuzz as harness;

pub mod config;
pub mod journal_model;
pub mod numbers;
pub mod pool_model;
