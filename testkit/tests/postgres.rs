//! The throwaway PostgreSQL cluster: it answers SQL with the settings it announces, survives an
//! immediate shutdown when durable, and never outlives its owner (drop, panic, killed process).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use loopbound_testkit::postgres::{self, Cluster, Durability};

/// Whether process `pid` still exists (a reaped server's PID does not).
fn alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Waits up to `within` for process `pid` to be gone.
fn gone_within(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while alive(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// The real user ID a process runs as, from `/proc/PID/status`.
fn uid_of(pid: u32) -> u32 {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the server's status is readable");
    let line = status.lines().find(|line| line.starts_with("Uid:")).expect("a Uid line");
    line.split_whitespace().nth(1).and_then(|uid| uid.parse().ok()).expect("a numeric uid")
}

#[test]
fn the_shared_cluster_answers_sql_with_the_settings_it_announces() {
    let Some(cluster) = Cluster::shared(Durability::Fast) else { return };
    let startup = cluster.startup();
    eprintln!(
        "PostgreSQL cluster: data folder {} ms ({}), server ready {} ms",
        startup.data.as_millis(),
        if startup.initdb { "initdb and copy" } else { "copy of the cached template" },
        startup.server.as_millis()
    );
    let database = cluster.create_database("Settings-Check!");
    assert!(database.name.starts_with("settingscheck_"), "{}", database.name);
    assert_eq!(database.url, format!("postgres://postgres@127.0.0.1:{}/{}", cluster.port(), database.name));
    assert_eq!(
        cluster.execute(
            &database.name,
            "SELECT current_database(), current_setting('listen_addresses'), current_setting('port'), \
             current_setting('fsync'), current_setting('synchronous_commit'), current_setting('full_page_writes')"
        ),
        format!("{}|127.0.0.1|{}|off|off|off", database.name, cluster.port())
    );
    let pid = cluster.pid().expect("running");
    let ours = uid_of(std::process::id());
    assert_ne!(uid_of(pid), 0, "the server never runs as root");
    if ours != 0 {
        assert_eq!(uid_of(pid), ours, "unprivileged tests run the server as themselves");
    }
    assert!(cluster.folder().join("data/postmaster.pid").is_file());
}

#[test]
fn each_test_gets_a_fresh_database_of_its_own() {
    let Some(cluster) = Cluster::shared(Durability::Fast) else { return };
    let (first, second) = (cluster.create_database("fresh"), cluster.create_database("fresh"));
    assert_ne!(first.name, second.name);
    cluster.execute(&first.name, "CREATE TABLE marks (n int); INSERT INTO marks VALUES (7)");
    assert_eq!(cluster.execute(&first.name, "SELECT n FROM marks"), "7");
    let missing = cluster.try_execute(&second.name, "SELECT n FROM marks").unwrap_err();
    assert!(missing.contains("relation \"marks\" does not exist"), "{missing}");
}

#[test]
fn a_durable_cluster_keeps_its_commits_through_an_immediate_shutdown() {
    let Some(mut cluster) = Cluster::start(Durability::Durable) else { return };
    let database = cluster.create_database("durable");
    assert_eq!(cluster.execute(&database.name, "SHOW fsync"), "on");
    assert_eq!(cluster.execute(&database.name, "SHOW synchronous_commit"), "on");
    cluster.execute(&database.name, "CREATE TABLE ledger (n int); INSERT INTO ledger VALUES (1), (2)");
    let before = cluster.pid().expect("running");

    cluster.crash();
    assert!(!alive(before), "an immediate shutdown ends the postmaster");
    assert_eq!(cluster.pid(), None);
    let refused = cluster.try_execute(&database.name, "SELECT 1").unwrap_err();
    assert!(refused.contains("Connection refused"), "{refused}");

    let recovery = cluster.recover();
    eprintln!("PostgreSQL recovery after an immediate shutdown: {} ms", recovery.as_millis());
    assert_ne!(cluster.pid(), Some(before));
    assert!(cluster.log().contains("database system was interrupted"), "{}", cluster.log());
    assert_eq!(cluster.execute(&database.name, "SELECT sum(n) FROM ledger"), "3");
}

#[test]
fn dropping_a_cluster_stops_its_server_and_removes_its_folder() {
    let Some(cluster) = Cluster::start(Durability::Fast) else { return };
    let (pid, folder) = (cluster.pid().expect("running"), cluster.folder().to_path_buf());
    assert!(alive(pid) && folder.is_dir());
    drop(cluster);
    assert!(!alive(pid), "the server is stopped and reaped by the time drop returns");
    assert!(!folder.exists(), "{} is removed", folder.display());
}

#[test]
fn a_test_that_panics_still_stops_its_server() {
    if Cluster::shared(Durability::Fast).is_none() {
        return;
    }
    let (sender, receiver) = std::sync::mpsc::channel();
    let outcome = std::thread::spawn(move || {
        let cluster = Cluster::start(Durability::Fast).expect("PostgreSQL is installed");
        sender
            .send((cluster.pid().expect("running"), cluster.folder().to_path_buf()))
            .expect("receiver waits");
        panic!("a failing assertion in a test that owns a cluster");
    })
    .join();
    assert!(outcome.is_err(), "the thread panicked");
    let (pid, folder): (u32, PathBuf) = receiver.recv().expect("the cluster had started");
    assert!(!alive(pid), "unwinding stopped the server");
    assert!(!folder.exists());
}

/// Set in the child processes of the next two tests: `kill` or `exit`.
const CHILD: &str = "LOOPBOUND_POSTGRES_CHILD";

/// Held by the tests whose child processes start a cluster: a child sweeps the folders that
/// dead processes left before its first cluster, so one test's child would remove the folder
/// that the other test checks a killed child left behind.
static CHILDREN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `test` again as a child that starts the shared cluster and reports it; returns the child,
/// the server's PID and the cluster's folder.
fn child_with_shared_cluster(test: &str, mode: &str) -> (std::process::Child, u32, PathBuf) {
    let mut child = Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the test binary runs again");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    // libtest prints the test's name on the same line, before the child's report.
    let report = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| line.split_once("cluster ").map(|(_, report)| report.to_owned()))
        .expect("the child reports its cluster");
    // Keep reading, so that the child's last lines do not meet a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    let mut words = report.split(' ');
    let pid: u32 = words.next().and_then(|pid| pid.parse().ok()).expect("a PID");
    let folder = PathBuf::from(words.next().expect("a folder"));
    (child, pid, folder)
}

/// The child's part: start the shared cluster (a static, never dropped), report it, and either
/// wait to be killed (bounded) or return at once.
fn child_part() -> bool {
    let Some(mode) = std::env::var_os(CHILD) else { return false };
    let cluster = Cluster::shared(Durability::Fast).expect("PostgreSQL is installed");
    println!("cluster {} {}", cluster.pid().expect("running"), cluster.folder().display());
    if mode == "kill" {
        std::thread::sleep(Duration::from_secs(120));
    }
    true
}

#[test]
fn a_killed_test_process_leaves_no_server_running() {
    if child_part() || Cluster::shared(Durability::Fast).is_none() {
        return;
    }
    let _serial = CHILDREN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (mut child, pid, folder) =
        child_with_shared_cluster("a_killed_test_process_leaves_no_server_running", "kill");
    assert!(alive(pid));
    child.kill().expect("the child can be killed");
    let _ = child.wait();
    assert!(gone_within(pid, Duration::from_secs(15)), "the orphaned server shut itself down");
    assert!(folder.is_dir(), "a killed process cannot clean up after itself");
    postgres::remove_leftovers().expect("the common folder is readable");
    assert!(!folder.exists(), "the next process removes what the killed one left");
}

#[test]
fn a_shared_cluster_stops_when_its_test_process_exits() {
    if child_part() || Cluster::shared(Durability::Fast).is_none() {
        return;
    }
    let _serial = CHILDREN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (mut child, pid, _) =
        child_with_shared_cluster("a_shared_cluster_stops_when_its_test_process_exits", "exit");
    assert!(child.wait().expect("the child exits").success());
    assert!(gone_within(pid, Duration::from_secs(15)), "the server shut down when its process ended");
}

#[test]
fn without_postgresql_a_test_prints_skipped_and_passes_unless_servers_are_required() {
    if Cluster::shared(Durability::Fast).is_none() {
        return;
    }
    let run = |required: &str| {
        Command::new(std::env::current_exe().expect("the test binary"))
            .args(["--exact", "each_test_gets_a_fresh_database_of_its_own", "--nocapture"])
            .env("PATH", "/nonexistent")
            .env(loopbound_testkit::skip::REQUIRE_SERVERS, required)
            .output()
            .expect("the test binary runs again")
    };
    let skipped = run("0");
    let stderr = String::from_utf8_lossy(&skipped.stderr);
    assert!(skipped.status.success(), "{stderr}");
    assert!(
        stderr.contains("SKIPPED: PostgreSQL's `initdb` is neither on PATH nor in `pg_config --bindir`"),
        "{stderr}"
    );

    let required = run("1");
    let stderr = String::from_utf8_lossy(&required.stderr);
    assert_eq!(required.status.code(), Some(101), "{stderr}");
    assert!(stderr.contains("LOOPBOUND_REQUIRE_SERVERS=1, but a required server is missing"), "{stderr}");
}
