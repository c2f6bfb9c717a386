//! Fuzz target `openai_parse`: see `loopbound_fuzz::openai_parse` in `fuzz/harness.rs`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loopbound_fuzz::openai_parse(data));
