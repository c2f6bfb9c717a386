//! `service`: an HTTP service around bounded agent runs (see `loopbound_demos::service`).

use std::process::ExitCode;

use clap::Parser;
use loopbound_demos::service::start::{Config, serve};

fn main() -> ExitCode {
    let config = Config::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("service: no tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(serve(config));
    // Parsing a large reply may still run on the blocking pool; do not wait for it.
    runtime.shutdown_background();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("service: {error}");
            ExitCode::FAILURE
        }
    }
}
