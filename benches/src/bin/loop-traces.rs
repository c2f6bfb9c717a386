//! `loop-traces`: runs every scripted loop trace under every policy and prints the tables
//! (Markdown): correct halts, false halts, and model calls and estimated tokens before each
//! halt, then each trace's ending under each policy.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    let policies = loopbound_benches::traces::policies();
    let endings = runtime.block_on(loopbound_benches::traces::run_all(&policies))?;
    print!("{}", loopbound_benches::traces::table(&policies, &endings));
    Ok(())
}
