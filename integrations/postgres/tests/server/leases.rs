//! Leases: granted to one worker at a time, with a growing epoch; refused while live; taken
//! over once expired (by the database's clock), renewed, released; bad ids refused.

use std::sync::Arc;
use std::time::Duration;

use loopbound_postgres::{Error, MAX_LEASE, Store, WorkerId};
use tokio::sync::Barrier;

use crate::{fresh, worker};

const LONG: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_new_run_is_granted_epoch_one_and_a_live_lease_is_refused() {
    let Some((store, _)) = fresh("lease_live").await else { return };
    let lease = store.acquire("run-1", &worker("w1"), LONG).await.unwrap();
    assert_eq!(
        (lease.run(), lease.worker().as_str(), lease.epoch(), lease.duration()),
        ("run-1", "w1", 1, LONG)
    );

    let error = store.acquire("run-1", &worker("w2"), LONG).await.unwrap_err();
    let Error::LeaseHeld { run, holder, until, remaining } = &error else {
        panic!("expected LeaseHeld: {error:?}")
    };
    assert_eq!((run.as_str(), holder.as_str(), *until), ("run-1", "w1", lease.until()));
    assert!(*remaining > Duration::from_secs(50) && *remaining <= LONG, "{remaining:?}");

    let state = store.lease_state("run-1").await.unwrap().expect("the run exists");
    assert_eq!((state.epoch, state.attempts, state.holder, state.live), (1, 1, Some(worker("w1")), true));
    assert_eq!(store.lease_state("run-2").await.unwrap(), None);
}

#[tokio::test]
async fn the_holder_acquiring_again_gets_a_new_epoch_and_its_old_lease_is_lost() {
    let Some((store, _)) = fresh("lease_again").await else { return };
    let mut first = store.acquire("run-1", &worker("w1"), LONG).await.unwrap();
    let second = store.acquire("run-1", &worker("w1"), LONG).await.unwrap();
    assert_eq!((first.epoch(), second.epoch()), (1, 2));
    assert_eq!(
        store.renew(&mut first).await.unwrap_err(),
        Error::LeaseLost { run: "run-1".into(), epoch: 1 }
    );
    assert_eq!(store.lease_state("run-1").await.unwrap().unwrap().attempts, 2);
}

#[tokio::test]
async fn an_expired_lease_is_taken_over_with_the_next_epoch() {
    let Some((store, _)) = fresh("lease_expiry").await else { return };
    let mut stale = store.acquire("run-1", &worker("w1"), Duration::from_millis(300)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let state = store.lease_state("run-1").await.unwrap().unwrap();
    assert_eq!((state.holder, state.live), (Some(worker("w1")), false));

    let taken = store.acquire("run-1", &worker("w2"), LONG).await.unwrap();
    assert_eq!(taken.epoch(), 2);
    let lost = Error::LeaseLost { run: "run-1".into(), epoch: 1 };
    assert_eq!(store.renew(&mut stale).await.unwrap_err(), lost);
    assert_eq!(store.release(stale).await.unwrap_err(), lost);
    let state = store.lease_state("run-1").await.unwrap().unwrap();
    assert_eq!((state.epoch, state.holder, state.live), (2, Some(worker("w2")), true));
}

#[tokio::test]
async fn renewing_keeps_a_lease_past_its_first_expiry() {
    let Some((store, _)) = fresh("lease_renew").await else { return };
    let mut lease = store.acquire("run-1", &worker("w1"), Duration::from_millis(600)).await.unwrap();
    let granted_until = lease.until();
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        store.renew(&mut lease).await.unwrap();
    }
    assert!(lease.until() >= granted_until + Duration::from_millis(700), "{:?}", lease.until());
    let error = store.acquire("run-1", &worker("w2"), LONG).await.unwrap_err();
    assert!(matches!(error, Error::LeaseHeld { ref holder, .. } if holder == "w1"), "{error:?}");
    assert_eq!(lease.epoch(), 1);
}

#[tokio::test]
async fn a_released_lease_is_granted_at_once_with_the_next_epoch() {
    let Some((store, _)) = fresh("lease_release").await else { return };
    let lease = store.acquire("run-1", &worker("w1"), LONG).await.unwrap();
    store.release(lease).await.unwrap();
    let state = store.lease_state("run-1").await.unwrap().unwrap();
    assert_eq!((state.epoch, state.holder, state.until, state.live), (1, None, None, false));
    assert_eq!(store.acquire("run-1", &worker("w2"), LONG).await.unwrap().epoch(), 2);
}

#[tokio::test]
async fn bad_ids_and_durations_are_refused_before_anything_is_written() {
    let Some((store, database)) = fresh("lease_invalid").await else { return };
    for run in ["", "has space", "semi;colon", &"r".repeat(101)] {
        assert!(matches!(store.acquire(run, &worker("w1"), LONG).await, Err(Error::InvalidId(_))), "{run:?}");
    }
    assert!(store.acquire(&"r".repeat(100), &worker("w1"), LONG).await.is_ok());
    for duration in [Duration::ZERO, MAX_LEASE + Duration::from_secs(1)] {
        assert!(matches!(store.acquire("run-1", &worker("w1"), duration).await, Err(Error::Config(_))));
    }
    for name in [String::new(), "a\nb".to_owned(), "w".repeat(65)] {
        assert!(matches!(WorkerId::new(name), Err(Error::InvalidId(_))));
    }
    let cluster = crate::cluster().expect("running");
    assert_eq!(cluster.execute(&database.name, "SELECT count(*) FROM loopbound_runs"), "1");
}

/// Two workers of one process race for the same run `ROUNDS` times; each round exactly one is
/// granted and runs the round's effect, the other is told who holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tasks_racing_for_one_run_one_is_granted_every_round() {
    const ROUNDS: usize = 200;
    let Some((store, database)) = fresh("lease_race_tasks").await else { return };
    let cluster = crate::cluster().expect("running");
    let _ =
        cluster.execute(&database.name, "CREATE TABLE effects (run_id text NOT NULL, worker text NOT NULL)");
    let barrier = Arc::new(Barrier::new(2));
    let racer = |name: &'static str| {
        let (store, barrier): (Store, _) = (store.clone(), Arc::clone(&barrier));
        tokio::spawn(async move {
            let mut wins = Vec::new();
            for round in 0..ROUNDS {
                let run = format!("race-{round}");
                barrier.wait().await;
                match store.acquire(&run, &worker(name), LONG).await {
                    Ok(mut lease) => {
                        let (run, name) = (run.clone(), name.to_owned());
                        store
                            .fenced(&mut lease, |transaction| {
                                Box::pin(async move {
                                    Ok(transaction
                                        .execute("INSERT INTO effects VALUES ($1, $2)", &[&run, &name])
                                        .await?)
                                })
                            })
                            .await
                            .expect("the winner's effect is recorded");
                        wins.push((round, lease.epoch()));
                    }
                    Err(Error::LeaseHeld { holder, .. }) => assert_ne!(holder, name, "round {round}"),
                    Err(other) => panic!("round {round}: {other:?}"),
                }
            }
            wins
        })
    };
    let (first, second) = (racer("w1"), racer("w2"));
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    assert_eq!(first.len() + second.len(), ROUNDS, "exactly one winner per round");
    assert!(first.iter().chain(&second).all(|(_, epoch)| *epoch == 1));
    eprintln!("two tasks, {ROUNDS} rounds: w1 won {}, w2 won {}", first.len(), second.len());
    assert_eq!(
        cluster.execute(&database.name, "SELECT count(*), count(DISTINCT run_id) FROM effects"),
        format!("{ROUNDS}|{ROUNDS}")
    );
}
