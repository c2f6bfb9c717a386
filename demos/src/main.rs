//! `demo330`: the bounded-harness console. Parses the arguments, links Ctrl-C to the caller's
//! cancellation, and hands over to [`loopbound_demos::console`].

#![forbid(unsafe_code)]

use std::future::{Future, poll_fn};
use std::process::ExitCode;
use std::task::Poll;

use clap::Parser;
use loopbound_demos::console::{self, Cli, EXIT_INTERNAL};
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            return exit(console::parse_error(&error, &mut std::io::stdout(), &mut std::io::stderr()));
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("demo330: could not start the async runtime: {error}");
            return exit(EXIT_INTERNAL);
        }
    };
    let code = runtime.block_on(async {
        let caller = CancellationToken::new();
        cancel_on_ctrl_c(caller.clone()).await;
        console::execute(&cli, caller, &mut std::io::stdout().lock(), &mut std::io::stderr().lock()).await
    });
    // The outcome is printed. A reply still being parsed on the blocking pool when the run ended
    // (its deadline passed mid-parse) is abandoned rather than waited for: dropping the runtime
    // would wait for it, and the process would exit after its deadline.
    runtime.shutdown_background();
    exit(code)
}

/// Cancels `caller` on Ctrl-C (SIGINT). The handler is registered before this returns, so an
/// interrupt that arrives once the header is printed always reaches the run.
async fn cancel_on_ctrl_c(caller: CancellationToken) {
    let mut ctrl_c = Box::pin(tokio::signal::ctrl_c());
    // The first poll registers the handler.
    match poll_fn(|cx| Poll::Ready(ctrl_c.as_mut().poll(cx))).await {
        Poll::Ready(Ok(())) => caller.cancel(),
        Poll::Ready(Err(error)) => eprintln!("demo330: Ctrl-C will not cancel the run: {error}"),
        Poll::Pending => {
            tokio::spawn(async move {
                if ctrl_c.await.is_ok() {
                    caller.cancel();
                }
            });
        }
    }
}

fn exit(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
