//! One running postmaster: started by a keeper thread, watched until ready, stopped by its PID.
//!
//! # Invariants
//!
//! - The keeper thread spawns the server and is the only one that reaps it, and every signal
//!   is sent from that thread between two checks that the child has not exited: a signal can
//!   never reach a recycled PID.
//! - The keeper thread lives exactly as long as the server (the server's parent-death signal is
//!   tied to it): it ends only after the server has exited.
//! - Stopping sends SIGINT (fast shutdown), then SIGKILL after [`GRACE`]; a crash is SIGQUIT
//!   (immediate shutdown: no checkpoint, WAL recovery at the next start).

use std::fs::File;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long a fast shutdown may take before the server is killed.
pub(crate) const GRACE: Duration = Duration::from_secs(10);

/// How often the keeper checks on the server and the readiness wait reads `postmaster.pid`.
const POLL: Duration = Duration::from_millis(10);

/// A running postmaster.
#[derive(Debug)]
pub(crate) struct Server {
    pid: u32,
    signals: Option<Sender<Signal>>,
    // In a mutex only so that a cluster can live in a `static`; `stop` takes `&mut self`.
    exited: Mutex<Receiver<ExitStatus>>,
    keeper: Option<JoinHandle<()>>,
    status: Option<ExitStatus>,
}

/// Why a server did not become ready.
#[derive(Debug)]
pub(crate) enum StartError {
    /// The server exited before it was ready, e.g. because its port was taken.
    Exited(ExitStatus),
    /// It was not ready within the time allowed (and has been stopped).
    TimedOut(Duration),
    /// It could not be spawned at all.
    Spawn(std::io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exited(status) => write!(f, "it exited before it was ready ({status})"),
            Self::TimedOut(within) => write!(f, "it was not ready within {} s", within.as_secs()),
            Self::Spawn(error) => write!(f, "it could not be spawned: {error}"),
        }
    }
}

impl Server {
    /// Spawns `command` (whose output goes to `log`) from a new keeper thread and waits until
    /// the `postmaster.pid` in `data` says it is ready.
    pub(crate) fn start(
        mut command: Command,
        log: &Path,
        data: &Path,
        within: Duration,
    ) -> Result<Self, StartError> {
        let log = File::options().create(true).append(true).open(log).map_err(StartError::Spawn)?;
        command.stdin(Stdio::null()).stdout(log.try_clone().map_err(StartError::Spawn)?).stderr(log);
        let (pid_tx, pid_rx) = mpsc::channel();
        let (signal_tx, signal_rx) = mpsc::channel();
        let (exit_tx, exit_rx) = mpsc::channel();
        let keeper = std::thread::Builder::new()
            .name("postgres-keeper".into())
            .spawn(move || keep(command, &pid_tx, &signal_rx, &exit_tx))
            .map_err(StartError::Spawn)?;
        let pid = match pid_rx.recv() {
            Ok(Ok(pid)) => pid,
            Ok(Err(error)) => return Err(StartError::Spawn(error)),
            Err(_) => return Err(StartError::Spawn(std::io::Error::other("the keeper thread died"))),
        };
        let mut server = Self {
            pid,
            signals: Some(signal_tx),
            exited: Mutex::new(exit_rx),
            keeper: Some(keeper),
            status: None,
        };
        let deadline = Instant::now() + within;
        loop {
            if let Ok(status) = server.exited().try_recv() {
                server.status = Some(status);
                return Err(StartError::Exited(status));
            }
            if ready(data, pid) {
                return Ok(server);
            }
            if Instant::now() >= deadline {
                server.stop(Signal::SIGINT);
                return Err(StartError::TimedOut(within));
            }
            std::thread::sleep(POLL);
        }
    }

    fn exited(&mut self) -> &Receiver<ExitStatus> {
        self.exited.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The postmaster's PID.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends `first` (SIGINT for a fast shutdown, SIGQUIT for a crash), then SIGKILL if the
    /// server is still running after [`GRACE`]; returns once it has exited.
    pub(crate) fn stop(&mut self, first: Signal) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        let signals = self.signals.take();
        let exited = self.exited();
        let status = signals.as_ref().map_or_else(
            || exited.recv().ok(),
            |signals| {
                let _ = signals.send(first);
                exited.recv_timeout(GRACE).ok().or_else(|| {
                    let _ = signals.send(Signal::SIGKILL);
                    exited.recv().ok()
                })
            },
        );
        drop(signals);
        if let Some(keeper) = self.keeper.take() {
            let _ = keeper.join();
        }
        let status = status.expect("the keeper thread reports the server's exit");
        self.status = Some(status);
        status
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop(Signal::SIGINT);
    }
}

/// The keeper thread: spawns, forwards signals while the child runs, reports its exit. If its
/// owner goes away without a word, it shuts the server down itself.
fn keep(
    mut command: Command,
    pid: &Sender<std::io::Result<u32>>,
    signals: &Receiver<Signal>,
    exited: &Sender<ExitStatus>,
) {
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            let _ = pid.send(Err(error));
            return;
        }
    };
    let _ = pid.send(Ok(child.id()));
    let mut orphaned_since = None;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let _ = exited.send(status);
                return;
            }
            Ok(None) => {}
            Err(error) => panic!("waiting for the PostgreSQL server failed: {error}"),
        }
        match signals.recv_timeout(POLL) {
            Ok(sig) => signal(child.id(), sig),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => match orphaned_since {
                None => {
                    signal(child.id(), Signal::SIGINT);
                    orphaned_since = Some(Instant::now());
                }
                Some(since) if since.elapsed() > GRACE => signal(child.id(), Signal::SIGKILL),
                Some(_) => std::thread::sleep(POLL),
            },
        }
    }
}

/// Sends `sig` to process `pid`, ignoring a process that has already gone.
pub(crate) fn signal(pid: u32, sig: Signal) {
    // Zero or a negative number would signal a whole process group.
    let Some(pid) = i32::try_from(pid).ok().filter(|&pid| pid > 0).map(Pid::from_raw) else { return };
    let _ = kill(pid, sig);
}

/// The postmaster's PID, from the first line of `data/postmaster.pid`.
pub(crate) fn postmaster_pid(data: &Path) -> Option<u32> {
    std::fs::read_to_string(data.join("postmaster.pid")).ok()?.lines().next()?.trim().parse().ok()
}

/// Whether `data/postmaster.pid` is that of `pid` and its status line (the eighth) says `ready`.
fn ready(data: &Path, pid: u32) -> bool {
    let Ok(text) = std::fs::read_to_string(data.join("postmaster.pid")) else { return false };
    let lines: Vec<&str> = text.lines().collect();
    lines.first().is_some_and(|first| first.trim() == pid.to_string())
        && lines.get(7).is_some_and(|status| status.trim() == "ready")
}
