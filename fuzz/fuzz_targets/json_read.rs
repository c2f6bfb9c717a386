//! Fuzz target `json_read`: see `loopbound_testkit::fuzz::json_read` (testkit/src/fuzz/).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loopbound_testkit::fuzz::json_read(data));
