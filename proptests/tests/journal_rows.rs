//! The `journal_rows` fuzz target's check on random inputs, on stable: rows of real journaled
//! runs corrupted field by field decode to a consistent record or a typed `Corrupt` error, and a
//! resume over them never runs an effect twice (see `loopbound_testkit::fuzz::journal_case`).

use loopbound_proptests::config::with_cases;
use loopbound_proptests::harness::journal_case::{JournalCase, check};
use loopbound_proptests::regressions;
use proptest::prelude::*;

proptest! {
    #![proptest_config(with_cases(128, regressions!("journal_rows")))]

    #[test]
    fn corrupted_rows_are_typed_errors_or_consistent_and_never_run_an_effect_twice(
        bytes in prop::collection::vec(any::<u8>(), 0..160)
    ) {
        let mut input = arbitrary::Unstructured::new(&bytes);
        if let Ok(case) = <JournalCase as arbitrary::Arbitrary>::arbitrary(&mut input) {
            check(&case);
        }
    }
}

#[test]
fn the_uncorrupted_bases_decode_and_resume_without_a_second_effect() {
    for base in 0..3 {
        assert!(check(&JournalCase { base, mutations: Vec::new() }), "base {base} decodes");
    }
}
