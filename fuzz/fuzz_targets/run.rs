//! Fuzz target `run`: see `loopbound_fuzz::run` in `fuzz/harness.rs`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loopbound_fuzz::run(data));
