//! The default token counter bounds a real tokenizer's count from above, and a streamed reply's
//! tokens from below, on random text of every kind (ASCII, accented, CJK, emoji, whitespace
//! runs, code). Needs the `tiktoken` feature (`cargo test -p loopbound --features tiktoken --test
//! counters`); without it this file holds no test.

#![cfg(feature = "tiktoken")]

use loopbound::spend::{ByteCounter, Encoding, TiktokenCounter, TokenCounter};

/// A deterministic generator of text mixing every kind of character (xorshift).
fn texts(count: usize) -> Vec<String> {
    const PIECES: [&str; 14] = [
        "the ",
        "review",
        " 42",
        "é",
        "ß",
        "日本語",
        "🦀",
        "   ",
        "\n\n",
        "{\"input\":42}",
        "fn main() {}",
        "\t",
        "ü",
        "…",
    ];
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..count)
        .map(|_| {
            let len = (next() % 400) as usize;
            let mut text = String::new();
            for _ in 0..len {
                let byte = (next() % 97) as u8;
                if byte < 83 {
                    text.push_str(PIECES[(next() % PIECES.len() as u64) as usize]);
                } else {
                    text.push(char::from(b' ' + byte % 90));
                }
            }
            text
        })
        .collect()
}

#[test]
fn the_default_counter_never_counts_fewer_tokens_than_the_exact_encodings() {
    for encoding in [Encoding::Cl100k, Encoding::O200k] {
        let exact = TiktokenCounter::new(encoding);
        for text in texts(500) {
            let tokens = exact.count(&text);
            assert!(
                ByteCounter.count(&text) >= tokens,
                "{encoding:?}: {tokens} tokens in {} bytes",
                text.len()
            );
            // The lower bound used to cut a stream: never above the real count.
            let floor = (text.len() as u64).div_ceil(ByteCounter.max_token_bytes());
            assert!(
                floor <= tokens.max(u64::from(!text.is_empty())),
                "{encoding:?}: floor {floor} > {tokens}"
            );
        }
    }
}

#[test]
fn the_longest_token_of_each_encoding_fits_the_lower_bound() {
    // A run of one character is where tokenizers merge the most: still at most 128 bytes a token.
    for encoding in [Encoding::Cl100k, Encoding::O200k] {
        let exact = TiktokenCounter::new(encoding);
        for piece in [" ", "=", "-", "0", "a", "\n", "日"] {
            let text = piece.repeat(4096);
            let tokens = exact.count(&text);
            assert!(
                (text.len() as u64).div_ceil(ByteCounter::MAX_TOKEN_BYTES) <= tokens,
                "{encoding:?} {piece:?}"
            );
        }
    }
}
