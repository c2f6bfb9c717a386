//! Fuzz target `journal_rows`: see `loopbound_testkit::fuzz::journal_rows` (testkit/src/fuzz/).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loopbound_testkit::fuzz::journal_rows(data));
