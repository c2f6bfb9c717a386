//! Fuzz target `canonical`: see `loopbound_testkit::fuzz::canonical` (testkit/src/fuzz/).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loopbound_testkit::fuzz::canonical(data));
