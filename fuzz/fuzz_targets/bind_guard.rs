//! Fuzz target `bind_guard`: see `loopbound_fuzz::bind_guard` in `fuzz/harness.rs`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loopbound_fuzz::bind_guard(data));
