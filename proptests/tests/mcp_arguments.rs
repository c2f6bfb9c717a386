//! The MCP arguments path as a property: arbitrary schemas and arguments, built from random
//! bytes like the `mcp_arguments` fuzz target's, through the same check function.

use loopbound_proptests::harness;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn schema_checks_and_binding_of_mcp_arguments_hold(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
        harness::mcp_arguments(&data);
    }
}
