//! Fuzz target `progress`: see `loopbound_testkit::fuzz::progress` (testkit/src/fuzz/).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loopbound_testkit::fuzz::progress(data));
