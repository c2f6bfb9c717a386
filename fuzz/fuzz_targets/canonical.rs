//! Fuzz target `canonical`: see `loopbound_fuzz::canonical` in `fuzz/harness.rs`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loopbound_fuzz::canonical(data));
