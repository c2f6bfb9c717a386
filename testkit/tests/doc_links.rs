//! Every relative link of every `README.md` of the repository (the root's, each crate's, each
//! folder's) and of the pages under `docs/` resolves: the file or folder exists, and an anchor
//! names a heading of the page it points to (GitHub's rule: lower case, punctuation dropped,
//! spaces to hyphens). Links inside code blocks and to other sites are left alone; inside a
//! shell block, every script it runs (a word ending in `.sh` with a folder in it) exists.

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

/// Every `README.md` under `folder` that the repository tracks: `git ls-files`, so that build
/// output, installed packages and downloaded suites (each ignored by a `.gitignore`) are not
/// checked as the project's pages.
fn readmes(folder: &Path, found: &mut Vec<PathBuf>) {
    let listed = std::process::Command::new("git")
        .args(["ls-files", "--cached", "--", ":(glob)**/README.md"])
        .current_dir(folder)
        .output()
        .unwrap_or_else(|error| panic!("git ls-files in {}: {error}", folder.display()));
    assert!(listed.status.success(), "git ls-files: {}", String::from_utf8_lossy(&listed.stderr));
    let listed = String::from_utf8(listed.stdout).expect("git lists UTF-8 paths");
    found.extend(listed.lines().map(|line| folder.join(line)));
}

fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = Vec::new();
    readmes(root, &mut pages);
    let docs = root.join("docs");
    pages.extend(
        std::fs::read_dir(&docs)
            .unwrap_or_else(|error| panic!("{}: {error}", docs.display()))
            .map(|entry| entry.expect("a directory entry").path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "md")),
    );
    pages.sort();
    pages.dedup();
    pages
}

/// Where a line of markdown is: outside a fenced block, in a shell block (with the folders an
/// earlier `cd` of the block moved to), or in another language's block.
enum Fence {
    Outside,
    Shell(Vec<String>),
    Other,
}

/// Each line of the shell blocks (` ```sh `, ` ```bash `) of `markdown`, with the folders that
/// an earlier `cd` of its block moved to.
fn shell_lines(markdown: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut fence = Fence::Outside;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            fence = match fence {
                Fence::Outside if matches!(info.trim(), "sh" | "bash" | "shell") => Fence::Shell(Vec::new()),
                Fence::Outside => Fence::Other,
                Fence::Shell(_) | Fence::Other => Fence::Outside,
            };
            continue;
        }
        if let Fence::Shell(folders) = &mut fence {
            out.push((trimmed.to_owned(), folders.clone()));
            if let Some(folder) = trimmed.strip_prefix("cd ") {
                folders.push(folder.split([' ', ';', '&']).next().unwrap_or_default().to_owned());
            }
        }
    }
    out
}

/// The scripts a shell line runs or names: its words that end in `.sh` and name a folder.
fn scripts(line: &str) -> Vec<String> {
    let code = line.split(" #").next().unwrap_or_default();
    code.split(|c: char| {
        c.is_whitespace() || matches!(c, '"' | '\'' | '(' | ')' | ';' | '&' | '|' | '<' | '>')
    })
    .filter(|word| {
        word.ends_with(".sh") && word.contains('/') && !word.contains("://") && !word.contains('$')
    })
    .map(str::to_owned)
    .collect()
}

#[test]
fn every_relative_link_of_every_readme_and_the_docs_resolves() {
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
fn every_script_a_shell_block_runs_exists() {
    let root = repository();
    let (mut missing, mut checked) = (Vec::new(), 0);
    for page in pages(&root) {
        let text = std::fs::read_to_string(&page).expect("a page");
        let folder = page.parent().expect("a folder");
        for (line, moved) in shell_lines(&text) {
            for script in scripts(&line) {
                checked += 1;
                let bases = [root.clone(), folder.to_path_buf()]
                    .into_iter()
                    .chain(moved.iter().map(|cd| root.join(cd)))
                    .chain(moved.iter().map(|cd| folder.join(cd)));
                if !bases.map(|base| base.join(&script)).any(|path| path.is_file()) {
                    missing.push(format!("{}: `{line}`: no script {script}", page.display()));
                }
            }
        }
    }
    assert!(checked > 10, "the pages run the repository's scripts: {checked} named");
    assert!(missing.is_empty(), "{} missing scripts:\n{}", missing.len(), missing.join("\n"));
}

#[test]
fn every_readme_of_the_repository_is_checked() {
    let names: Vec<String> = pages(&repository())
        .iter()
        .map(|page| page.strip_prefix(repository()).expect("inside").display().to_string())
        .collect();
    for expected in [
        "README.md",
        "docs/README.md",
        "docs/service.md",
        "integrations/openai/README.md",
        "benches/README.md",
    ] {
        assert!(names.iter().any(|name| name == expected), "{expected} is not checked: {names:?}");
    }
    assert!(
        !names.iter().any(|name| name.contains("node_modules") || name.starts_with("target")),
        "{names:?}"
    );
}

#[test]
fn the_script_reader_follows_cd_and_skips_other_blocks() {
    let page = "```sh\nbash testkit/aimock/setup.sh   # once\ncd fuzz\n./smoke.sh 30\n```\n```rust\nlet x = \"a/b.sh\";\n```\n";
    let lines = shell_lines(page);
    let found: Vec<(Vec<String>, Vec<String>)> =
        lines.iter().map(|(line, moved)| (scripts(line), moved.clone())).collect();
    assert_eq!(
        found,
        [
            (vec!["testkit/aimock/setup.sh".to_owned()], vec![]),
            (vec![], vec![]),
            (vec!["./smoke.sh".to_owned()], vec!["fuzz".to_owned()]),
        ]
    );
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
