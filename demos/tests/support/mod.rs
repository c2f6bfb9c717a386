//! What the service's end-to-end tests share: the `service` binary (or the offline script that
//! starts it) as a child process, stopped by its PID.

#![allow(dead_code, reason = "each test file that includes this module uses a part of it")]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use loopbound_testkit::aimock::Aimock;
use loopbound_testkit::mcp;

/// The service (or the script that starts it), stopped by its PID when dropped: SIGTERM, which
/// the offline script turns into stopping its own servers, then SIGKILL after 10 s.
pub(crate) struct Service {
    child: Child,
    /// Its address, `http://127.0.0.1:port`.
    pub(crate) base: String,
    /// What it printed before its address.
    pub(crate) before: Vec<String>,
}

impl Service {
    pub(crate) fn start(model: &Aimock, files: &Path, journal: &Path, database: Option<&str>) -> Self {
        Self::start_on("127.0.0.1:0", model, files, journal, database, &[])
    }

    /// As [`start`](Self::start), listening on `listen` (port 0: any free port), with `extra`
    /// arguments.
    pub(crate) fn start_on(
        listen: &str,
        model: &Aimock,
        files: &Path,
        journal: &Path,
        database: Option<&str>,
        extra: &[&str],
    ) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_service"));
        match database {
            Some(url) => command.env("LOOPBOUND_DATABASE_URL", url),
            None => command.env_remove("LOOPBOUND_DATABASE_URL"),
        };
        command
            .args(["--listen", listen, "--deadline-secs", "30", "--mcp-program", "node", "--files"])
            .arg(files)
            .arg("--journal")
            .arg(journal)
            .arg("--mcp-arg")
            .arg(mcp::filesystem_js())
            .args(extra)
            .env_remove("LOOPBOUND_APPROVER_TOKEN")
            .env("LOOPBOUND_OPENAI_BASE_URL", model.base_url())
            .env("LOOPBOUND_OPENAI_MODEL", "aimock");
        Self::spawn(command, Duration::from_secs(60))
    }

    /// Starts `command` and waits up to `patience` for its `listening on` line.
    pub(crate) fn spawn(mut command: Command, patience: Duration) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the service starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        // Built first, so that a panic below stops the process (`Drop`).
        let mut service = Self { child, base: String::new(), before: Vec::new() };
        loop {
            let line = lines.recv_timeout(patience).unwrap_or_else(|error| {
                panic!("no address within {patience:?} ({error}); printed {:?}", service.before)
            });
            if let Some(base) = line.strip_prefix("listening on ") {
                service.base = base.to_owned();
                return service;
            }
            service.before.push(line);
        }
    }

    /// Sends SIGTERM and waits up to `patience` for the process to exit; its status, or `None`
    /// if it did not exit in time.
    pub(crate) fn terminate(&mut self, patience: Duration) -> Option<std::process::ExitStatus> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Some(status);
        }
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = std::time::Instant::now() + patience;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if self.terminate(Duration::from_secs(10)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
