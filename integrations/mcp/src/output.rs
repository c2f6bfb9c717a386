//! A tool's result as the text handed to the model.
//!
//! # Invariants
//!
//! - The text is at most the mapping's byte limit plus a short note saying how much was cut:
//!   a server that answers megabytes does not grow the conversation past it.
//! - Binary content (images, audio, blobs) is described, never inlined.

use std::fmt::Write as _;

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// The text of `result`: its text blocks, one per line; other blocks described; the structured
/// content when there is no block at all. Cut to `max` bytes.
pub(crate) fn render(result: &CallToolResult, max: usize) -> String {
    let mut text = String::new();
    for (i, block) in result.content.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        describe(&mut text, block);
        if text.len() > max {
            break;
        }
    }
    if result.content.is_empty()
        && let Some(structured) = &result.structured_content
    {
        text = structured.to_string();
    }
    cut(text, max)
}

fn describe(text: &mut String, block: &ContentBlock) {
    // Writing to a String cannot fail.
    let _ = match block {
        ContentBlock::Text(content) => {
            text.push_str(&content.text);
            Ok(())
        }
        ContentBlock::Image(image) => {
            write!(text, "[image {}, {} bytes of base64]", image.mime_type, image.data.len())
        }
        ContentBlock::Audio(audio) => {
            write!(text, "[audio {}, {} bytes of base64]", audio.mime_type, audio.data.len())
        }
        ContentBlock::ResourceLink(link) => write!(text, "[resource link {}]", link.uri),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { text: body, .. } => {
                text.push_str(body);
                Ok(())
            }
            ResourceContents::BlobResourceContents { uri, blob, .. } => {
                write!(text, "[resource {uri}, {} bytes of base64]", blob.len())
            }
            _ => write!(text, "[resource of a kind this client does not read]"),
        },
        _ => write!(text, "[content of a kind this client does not read]"),
    };
}

/// `text` cut to `max` bytes on a character boundary, with a note of what was cut.
pub(crate) fn cut(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text.len() - end;
    text.truncate(end);
    let _ = write!(text, "\n[{cut} more bytes cut by loopbound-mcp]");
    text
}
