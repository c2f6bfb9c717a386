//! `pool-worker`: one worker process of the shared-pool races (`testkit/tests/pool_processes.rs`).
//!
//! ```text
//! pool-worker <store> <pool> <tasks> <runs> <seed> <lease-ms> <pause-min-ms> <pause-max-ms>
//! ```
//!
//! `<store>` is `sqlite:<file>` or `postgres:<url>`. The worker runs `<tasks>` concurrent tasks,
//! each `<runs>` runs one after another, every run drawing from `<pool>` (see
//! `loopbound_testkit::pool`). It prints `billed <tokens>` as each call is billed (before the
//! run settles it), and at the end `done <completed> <refused>`, or `error <message>`.

use std::sync::Arc;
use std::time::Duration;

use loopbound::pool::PoolName;
use loopbound_testkit::pool::{Billing, draw, open, race};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(work(&args)) {
        Ok(line) => println!("{line}"),
        Err(message) => {
            println!("error {message}");
            std::process::exit(1);
        }
    }
}

async fn work(args: &[String]) -> Result<String, String> {
    let [store, pool, tasks, runs, seed, lease, min, max] = args else {
        return Err(
            "usage: pool-worker <store> <pool> <tasks> <runs> <seed> <lease-ms> <min-ms> <max-ms>".into()
        );
    };
    let number = |text: &str| text.parse::<u64>().map_err(|error| format!("{text}: {error}"));
    let store = open(store).await?;
    let pool = PoolName::new(pool).map_err(|error| error.to_string())?;
    let holder = format!("pool-worker-{}", std::process::id());
    let draw = draw(store, &[pool.as_str()], Duration::from_millis(number(lease)?), &holder);
    let model = Arc::new(Billing::new(number(min)?, number(max)?, number(seed)?).reporting());
    let tally = race(&draw, &model, number(tasks)?, number(runs)?).await;
    Ok(format!("done {} {}", tally.completed, tally.refused))
}
