//! Fuzz target `mcp_arguments`: see `loopbound_testkit::fuzz::mcp_arguments` (testkit/src/fuzz/).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loopbound_testkit::fuzz::mcp_arguments(data));
