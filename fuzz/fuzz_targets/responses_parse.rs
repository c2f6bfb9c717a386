//! Fuzz target `responses_parse`: see `loopbound_testkit::fuzz::responses_parse` (testkit/src/fuzz/).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loopbound_testkit::fuzz::responses_parse(data));
