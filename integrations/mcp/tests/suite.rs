//! The official JSON Schema Test Suite through the schema check: every required test of drafts
//! 4, 6, 7, 2019-09 and 2020-12, compiled as an MCP tool's schema is, with the default
//! (refuse what is not checked here).

use std::collections::BTreeMap;

use loopbound_mcp::Unsupported;
use loopbound_mcp::schema::{InputSchema, SchemaError};
use loopbound_testkit::json_schema_suite::{self, DRAFTS, Group};

/// Where the suite's remote documents live: a web server the suite's runners start. The
/// check never fetches, so a schema that refers to one (or names one as its meta-schema) is
/// refused, as a tool's would be: those cases are left out, and counted.
const SUITE_REMOTE: &str = "http://localhost:1234/";

#[derive(Default)]
struct Tally {
    groups: usize,
    tests: usize,
    left_out: usize,
}

#[test]
fn the_json_schema_test_suite_passes_for_every_draft_claimed() {
    let groups = json_schema_suite::cases();
    if groups.is_empty() {
        return;
    }
    let mut tallies: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut failures = Vec::new();
    for group in &groups {
        let tally = tallies.entry(group.draft).or_default();
        tally.groups += 1;
        match InputSchema::compile(&group.schema, Unsupported::Refuse) {
            Ok(schema) => {
                for (description, data, valid) in &group.tests {
                    if schema.check(data).is_ok() == *valid {
                        tally.tests += 1;
                    } else {
                        failures.push(format!("{}: {description}: expected valid = {valid}", name(group)));
                    }
                }
            }
            Err(SchemaError::Unresolved { reference, .. }) if reference.starts_with(SUITE_REMOTE) => {
                assert!(group.schema.to_string().contains(SUITE_REMOTE), "{}", name(group));
                tally.left_out += 1;
            }
            // A meta-schema of the suite's own, on its remote server.
            Err(SchemaError::Unsupported { keyword, at })
                if keyword == "$schema"
                    && at.is_empty()
                    && group.schema["$schema"].as_str().is_some_and(|uri| uri.starts_with(SUITE_REMOTE)) =>
            {
                tally.left_out += 1;
            }
            Err(error) => failures.push(format!("{}: does not compile: {error}", name(group))),
        }
    }
    for (draft, _) in DRAFTS {
        let tally = &tallies[draft];
        eprintln!(
            "{draft}: {} schemas, {} tests pass, {} schemas naming the suite's remote server left out",
            tally.groups, tally.tests, tally.left_out
        );
        assert!(tally.tests > 0, "{draft}: no test ran");
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

fn name(group: &Group) -> String {
    format!("{}/{}: {}", group.draft, group.file, group.description)
}
