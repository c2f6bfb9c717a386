//! Every relative link of the README and of the pages under `docs/` resolves: the file or folder
//! exists, and an anchor names a heading of the page it points to (GitHub's rule: lower case,
//! punctuation dropped, spaces to hyphens). Links inside code blocks and to other sites are left
//! alone.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the testkit is one folder down").to_path_buf()
}

/// The text of `markdown` outside its fenced code blocks.
fn prose(markdown: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// A heading's anchor, as GitHub makes it.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(page: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(page).unwrap_or_else(|error| panic!("{}: {error}", page.display()));
    prose(&text)
        .lines()
        .filter(|line| line.starts_with('#'))
        .map(|line| anchor(line.trim_start_matches('#')))
        .collect()
}

/// The `(text, target)` of every inline link `[text](target)` in `prose`.
fn links(prose: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = prose;
    while let Some(open) = rest.find("](") {
        let text_start = rest[..open].rfind('[').map_or(open, |start| start + 1);
        let after = &rest[open + 2..];
        let Some(close) = after.find(')') else { break };
        let target = &after[..close];
        if !target.contains(char::is_whitespace) {
            out.push((rest[text_start..open].to_owned(), target.to_owned()));
        }
        rest = &after[close..];
    }
    out
}

fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("README.md")];
    let docs = root.join("docs");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&docs)
        .unwrap_or_else(|error| panic!("{}: {error}", docs.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    found.sort();
    pages.extend(found);
    pages
}

#[test]
fn every_relative_link_of_the_readme_and_the_docs_resolves() {
    let root = repository();
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages(&root) {
        let text = std::fs::read_to_string(&page).expect("a page");
        for (text, target) in links(&prose(&text)) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = target.split_once('#').unwrap_or((target.as_str(), ""));
            let dest =
                if path.is_empty() { page.clone() } else { page.parent().expect("a folder").join(path) };
            if !dest.exists() {
                broken.push(format!("{}: [{text}]({target}): no such file", page.display()));
                continue;
            }
            if !fragment.is_empty()
                && dest.extension().is_some_and(|ext| ext == "md")
                && !anchors(&dest).contains(fragment)
            {
                broken.push(format!("{}: [{text}]({target}): no such heading", page.display()));
            }
        }
    }
    assert!(checked > 40, "the pages link to the rest of the repository: {checked} links");
    assert!(broken.is_empty(), "{} broken links:\n{}", broken.len(), broken.join("\n"));
}

#[test]
fn the_link_reader_sees_a_broken_link_and_an_anchor() {
    let found =
        links(&prose("see [the page](docs/x.md#a-b) and [site](https://e.x)\n```\n[code](nowhere)\n```\n"));
    assert_eq!(
        found,
        [("the page".to_owned(), "docs/x.md#a-b".to_owned()), ("site".to_owned(), "https://e.x".to_owned())]
    );
    assert_eq!(anchor(" Many workers (PostgreSQL)"), "many-workers-postgresql");
    assert_eq!(anchor(" `demo330` at a glance"), "demo330-at-a-glance");
}
