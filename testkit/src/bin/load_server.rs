//! `load-server`: the testkit's load model server alone, for load tests of other frameworks.
//!
//! ```text
//! cargo run -p loopbound-testkit --bin load-server -- --latency-ms 200 [--stream | --whole]
//! ```
//!
//! It prints its base URL (`http://127.0.0.1:<port>/v1`) as the first line of its standard
//! output (and into `--url-file` if asked), then serves until it is killed. See the testkit's
//! `load` module for the script, the figures and the control routes.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use loopbound_testkit::load::{self, Mode, ServerConfig};

#[derive(Parser, Debug)]
#[command(about = "An OpenAI-compatible load model server on loopback that plays the review task")]
struct Cli {
    /// Time from a request's first byte to its reply, in milliseconds.
    #[arg(long, default_value_t = 200)]
    latency_ms: u64,
    /// Answer streamed requests only (others get 400).
    #[arg(long, conflicts_with = "whole")]
    stream: bool,
    /// Answer whole (not streamed) requests only (others get 400).
    #[arg(long)]
    whole: bool,
    /// Threads of the server's runtime.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Also write the base URL to this file.
    #[arg(long, value_name = "PATH")]
    url_file: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mode = match (cli.stream, cli.whole) {
        (true, _) => Mode::Stream,
        (_, true) => Mode::Whole,
        _ => Mode::Any,
    };
    let config = ServerConfig { latency: Duration::from_millis(cli.latency_ms), mode };
    let served = load::serve_forever(config, cli.workers, |server| {
        let url = server.base_url();
        if let Some(path) = &cli.url_file
            && let Err(error) = std::fs::write(path, format!("{url}\n"))
        {
            eprintln!("load-server: cannot write {}: {error}", path.display());
            std::process::exit(1);
        }
        println!("{url}");
        let _ = std::io::stdout().flush();
    });
    if let Err(error) = served {
        eprintln!("load-server: {error}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
