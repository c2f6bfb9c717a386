//! `mcp330`: a bounded loop over a real MCP server's tools. Parses the arguments, links Ctrl-C
//! to the caller's cancellation, and hands over to [`loopbound_demos::mcp`].

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use loopbound_demos::mcp::{self, McpCli};
use loopbound_demos::vocabulary::EXIT_INTERNAL;
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    let cli = match McpCli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return exit(mcp::parse_error(&error, &mut std::io::stdout(), &mut std::io::stderr())),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("mcp330: could not start the async runtime: {error}");
            return exit(EXIT_INTERNAL);
        }
    };
    let code = runtime.block_on(async {
        let caller = CancellationToken::new();
        let on_interrupt = caller.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                on_interrupt.cancel();
            }
        });
        mcp::execute(&cli, caller, &mut std::io::stdout().lock(), &mut std::io::stderr().lock()).await
    });
    // The outcome is printed. A reply still being parsed on the blocking pool when the run ended
    // (its deadline passed mid-parse) is abandoned rather than waited for: dropping the runtime
    // would wait for it, and the process would exit after its deadline.
    runtime.shutdown_background();
    exit(code)
}

fn exit(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
