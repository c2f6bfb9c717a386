//! Fuzz target `run`: see `loopbound_testkit::fuzz::run` (testkit/src/fuzz/).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loopbound_testkit::fuzz::run(data));
