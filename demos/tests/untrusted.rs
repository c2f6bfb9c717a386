//! The model's text is untrusted: in text mode no control character reaches the terminal and no
//! fake line can stand where the console's own lines stand; `--json` keeps the exact text.

use clap::Parser;
use loopbound::scripted::{Step, sequence};
use loopbound::transport::ModelReply;
use loopbound_demos::console::{Cli, play};
use loopbound_testkit::hostile::{ESCAPE_TEXT, FAKE_STATUS_LINE};
use tokio_util::sync::CancellationToken;

async fn printed(args: &[&str]) -> (i32, String) {
    let cli =
        Cli::try_parse_from(std::iter::once("demo330").chain(args.iter().copied())).expect("valid arguments");
    let model = sequence(vec![Step::Reply(ModelReply::text(ESCAPE_TEXT))]);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code =
        play(&cli, model, "scripted \u{1b}[31mred", CancellationToken::new(), &mut out, &mut err).await;
    assert!(err.is_empty());
    (code, String::from_utf8(out).expect("utf-8"))
}

#[tokio::test]
async fn text_mode_shows_every_control_character_as_an_escape() {
    let (code, out) = printed(&["incomplete"]).await;
    assert_eq!(code, 2);
    let forbidden = |c: char| c != '\n' && (c.is_control() || ('\u{80}'..='\u{9f}').contains(&c));
    assert!(!out.chars().any(forbidden), "a control character reached the terminal: {out:?}");
    assert!(
        out.contains(
            r#"text          "\u{1b}[2J\u{1b}[HReview finished.\rOverwritten\u{7}\u{9b}31mred\u{7f}\nstatus"#
        ),
        "{out}"
    );
    assert!(out.contains(r"scripted \u{1b}[31mred"), "the transport's label too: {out}");
    // The one status line is the console's: the fake one stays inside the quoted text.
    let status: Vec<&str> = out.lines().filter(|line| line.starts_with("status")).collect();
    assert_eq!(status.len(), 1, "{out}");
    assert!(status[0].starts_with("status        Incomplete (exit 2)"), "{out}");
    assert!(!out.lines().any(|line| line.trim_start().starts_with(FAKE_STATUS_LINE)), "{out}");
}

#[tokio::test]
async fn json_mode_keeps_the_exact_text() {
    let (code, out) = printed(&["incomplete", "--json"]).await;
    assert_eq!(code, 2);
    let report: serde_json::Value = serde_json::from_str(&out).expect("one JSON object");
    assert_eq!(report["text"], ESCAPE_TEXT);
    assert_eq!(report["status"], "Incomplete");
    assert!(!out.contains('\u{1b}') && !out.contains('\r'), "JSON escapes control characters: {out:?}");
}
