//! Running the validator with the stack it may need.
//!
//! The validator recurses once per schema it applies: through the arguments' levels and, at
//! each level, through the schemas that apply there (`allOf`, `anyOf`, `$ref`, …). Each of a
//! schema's arrays and objects is applied at most once per level along one path (a `$ref`
//! cycle that never descends is cut), so one path is at most `nodes × (depth + 1)`
//! applications long. Measured on the validator's worst shapes (chains of `$ref`s under
//! `anyOf` or beside other keywords, re-entered at every level of the arguments), one
//! application takes about 70 bytes of stack in a release build and 290 in a debug build;
//! [`UNIT_STACK`] allows 1 KiB.
//!
//! # Invariants
//!
//! - A check that may need at most [`INLINE_STACK`] bytes runs on the caller's stack, which
//!   has at least that much to spare (a tokio worker or a std thread has 2 MiB).
//! - A larger one runs on a thread of its own, with a stack of the size it may need plus
//!   [`BASE_STACK`], and the caller waits for it; a panic there is resumed in the caller.
//! - Nothing needing more than [`MAX_CHECK_STACK`] bytes runs.

use std::thread;

/// Stack allowed for one schema applied at one level of the arguments.
pub(super) const UNIT_STACK: usize = 1024;

/// The most stack, in bytes, that a check may need and still run on the caller's stack.
pub(super) const INLINE_STACK: usize = 1 << 20;

/// Stack added, on a thread of its own, to what the applications may need.
const BASE_STACK: usize = 256 << 10;

/// The most stack, in bytes, that a check may need and still run: past it, the arguments are
/// refused as too deep for the schema.
pub const MAX_CHECK_STACK: usize = 256 << 20;

/// Stack for compiling: the compiler recurses through the schema's nesting (at most
/// [`MAX_SCHEMA_DEPTH`](super::MAX_SCHEMA_DEPTH) levels) and through the meta-schema.
pub(super) const COMPILE_STACK: usize = 64 << 20;

/// Runs `work` with `need` bytes of stack to spare: on this thread when `need` is at most
/// [`INLINE_STACK`], else on a thread of its own.
///
/// # Errors
///
/// When the thread cannot be started.
pub(super) fn run<T: Send>(need: usize, work: impl FnOnce() -> T + Send) -> std::io::Result<T> {
    if need <= INLINE_STACK {
        return Ok(work());
    }
    thread::scope(|scope| {
        let handle = thread::Builder::new()
            .name("loopbound-mcp-schema".to_owned())
            .stack_size(need.saturating_add(BASE_STACK))
            .spawn_scoped(scope, work)?;
        Ok(handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
}
