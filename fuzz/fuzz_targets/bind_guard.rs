//! Fuzz target `bind_guard`: see `loopbound_testkit::fuzz::bind_guard` (testkit/src/fuzz/).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loopbound_testkit::fuzz::bind_guard(data));
