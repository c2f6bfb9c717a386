//! Property tests of loopbound, and the fuzz targets' checks replayed on stable.
//!
//! The properties live in `tests/`; this library holds what they share:
//!
//! - [`harness`]: the fuzz targets' plain check functions (`fuzz/harness.rs`, included here by
//!   path), with the reference canonical form, the reference guard model and the structured
//!   fuzz inputs;
//! - [`config`]: proptest configuration with committed failure persistence;
//! - [`numbers`]: numbers as (sign, digits, exponent), their spellings and expected forms.

#[path = "../../fuzz/harness.rs"]
pub mod harness;

pub mod config;
pub mod numbers;
