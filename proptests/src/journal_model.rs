//! A reference model of the journal protocol (SPEC §15), written from the contract, for the
//! state machine in `tests/journal_protocol.rs`.
//!
//! The run is the refund task's long script: replies 1 to 4 each ask for one call (op 1
//! `lookup_order`, a read; ops 2 and 3 `refund`, effects under the chosen policy; op 4
//! `send_receipt`, idempotent), reply 5 is the closing text. The model tracks what is durable
//! (what the last commit wrote) and what an attempt holds in memory, commit by commit, so that a
//! crash before or after any commit, or inside an effect's body, leaves exactly what was
//! committed.
//!
//! # Invariants
//!
//! - The model never reads the library's code paths: it only follows the contract's commit
//!   grouping (an allowed effect: `started` with everything buffered, then the result; a read:
//!   nothing of its own; the end of an attempt: one commit with its state) and its states (an
//!   acquisition keeps the run's state; every commit of an attempt records `open`, or
//!   `ambiguous` on an effect between its `started` commit and its result; a decision or a
//!   reconciliation of the op the state names makes it `open`).

/// What a tool does to the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `read`.
    Read,
    /// `effect`.
    Effect,
    /// `idempotent`.
    Idempotent,
}

/// The kind of op `i` (1-based).
#[must_use]
pub fn kind(op: usize) -> Kind {
    match op {
        1 => Kind::Read,
        4 => Kind::Idempotent,
        _ => Kind::Effect,
    }
}

/// The refunds' policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Run without asking.
    Allow,
    /// Wait for an approver.
    Ask,
    /// Refuse.
    Deny,
}

/// How a reconciliation settled a start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// It ran.
    Ran,
    /// It did not run.
    NotRun,
}

/// One operation's durable record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Op {
    /// Proposed.
    pub proposed: bool,
    /// `Some((allowed, by an approver))`.
    pub decision: Option<(bool, bool)>,
    /// Starts of its body.
    pub starts: u32,
    /// Its result is recorded.
    pub result: bool,
    /// Reconciliations, by start.
    pub reconciled: Vec<(u32, Settled)>,
}

/// Where an operation stands (as `loopbound::journal::OperationStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// No proposal yet.
    Unknown,
    /// Proposed, undecided.
    Awaiting,
    /// Denied.
    Denied,
    /// Ready for this start.
    Ready(u32),
    /// Started, no result.
    Started(u32),
    /// Result known.
    Settled,
}

impl Op {
    /// Where it stands.
    #[must_use]
    pub fn status(&self) -> Status {
        if !self.proposed {
            return Status::Unknown;
        }
        if self.result {
            return Status::Settled;
        }
        match self.decision {
            None => return Status::Awaiting,
            Some((false, _)) => return Status::Denied,
            Some((true, _)) => {}
        }
        if self.starts == 0 {
            return Status::Ready(1);
        }
        match self.reconciled.iter().find(|(start, _)| *start == self.starts) {
            None => Status::Started(self.starts),
            Some((_, Settled::NotRun)) => Status::Ready(self.starts + 1),
            Some((_, Settled::Ran)) => Status::Settled,
        }
    }
}

/// Where the run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunState {
    /// Open.
    Open,
    /// Waiting for a decision on this op.
    Awaiting(usize),
    /// Stopped on this ambiguous op.
    Ambiguous(usize),
    /// Ended: `Completed` or `Denied`.
    Finished(&'static str),
}

/// What the journal holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Durable {
    /// Attempts that took the run (0: the run does not exist).
    pub attempts: u32,
    /// Recorded replies.
    pub replies: usize,
    /// Ops 1 to 4 (index 0 to 3).
    pub ops: [Op; 4],
    /// The run's state.
    pub state: RunState,
    /// Persisted model calls.
    pub model_calls: u32,
    /// Persisted tool calls.
    pub tool_calls: u32,
}

impl Default for Durable {
    fn default() -> Self {
        Self {
            attempts: 0,
            replies: 0,
            ops: Default::default(),
            state: RunState::Open,
            model_calls: 0,
            tool_calls: 0,
        }
    }
}

/// Where an attempt dies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crash {
    /// It does not.
    Never,
    /// At its n-th commit (1-based, the acquisition excluded), before anything is written.
    BeforeCommit(u8),
    /// Right after its n-th commit is written.
    AfterCommit(u8),
    /// Inside its n-th effect body (1-based), after the effect was applied.
    InBody(u8),
}

/// What an attempt or a host command reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reported {
    /// An outcome: its status and the operation it names.
    Outcome(&'static str, Option<usize>),
    /// The process died.
    Crashed,
    /// The run had ended: refused.
    Finished(&'static str),
    /// A host command succeeded.
    Done,
    /// A host command was refused with this error (its variant's name).
    Refused(&'static str),
}

/// The model: the refunds' policy, the journal, and the effects applied outside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Model {
    /// The refunds' policy.
    pub policy: Policy,
    /// What the journal holds.
    pub durable: Durable,
    /// Body executions of ops 2, 3, 4 (index 1 to 3; index 0 unused).
    pub effects: [u32; 4],
}

/// One attempt's progress.
struct Attempt {
    memory: Durable,
    crash: Crash,
    commits: u8,
    bodies: u8,
}

/// The attempt died.
struct Died;

impl Model {
    /// A run that does not exist yet.
    #[must_use]
    pub fn new(policy: Policy) -> Self {
        Self { policy, durable: Durable::default(), effects: [0; 4] }
    }

    fn policy_of(&self, op: usize) -> Policy {
        if kind(op) == Kind::Effect { self.policy } else { Policy::Allow }
    }

    fn commit(&mut self, attempt: &mut Attempt) -> Result<(), Died> {
        attempt.commits += 1;
        if attempt.crash == Crash::BeforeCommit(attempt.commits) {
            return Err(Died);
        }
        self.durable = attempt.memory.clone();
        if attempt.crash == Crash::AfterCommit(attempt.commits) {
            return Err(Died);
        }
        Ok(())
    }

    /// Ends the attempt with `state`, reporting `status` on `op`.
    fn end(
        &mut self,
        attempt: &mut Attempt,
        state: RunState,
        status: &'static str,
        op: Option<usize>,
    ) -> Result<Reported, Died> {
        attempt.memory.state = state;
        self.commit(attempt)?;
        Ok(Reported::Outcome(status, op))
    }

    /// Runs start `start` of op `op`'s body.
    fn execute(&mut self, attempt: &mut Attempt, op: usize, start: u32) -> Result<(), Died> {
        if kind(op) == Kind::Read {
            attempt.memory.ops[op - 1].result = true;
            return Ok(());
        }
        attempt.memory.ops[op - 1].starts = start;
        if kind(op) == Kind::Effect {
            attempt.memory.state = RunState::Ambiguous(op);
        }
        self.commit(attempt)?;
        attempt.bodies += 1;
        self.effects[op - 1] += 1;
        if attempt.crash == Crash::InBody(attempt.bodies) {
            return Err(Died);
        }
        attempt.memory.ops[op - 1].result = true;
        attempt.memory.state = RunState::Open;
        self.commit(attempt)
    }

    /// One attempt that dies at `crash`.
    pub fn attempt(&mut self, crash: Crash) -> Reported {
        if let RunState::Finished(status) = self.durable.state {
            return Reported::Finished(status);
        }
        self.durable.attempts += 1;
        let mut attempt = Attempt { memory: self.durable.clone(), crash, commits: 0, bodies: 0 };
        attempt.memory.state = RunState::Open;
        self.steps(&mut attempt).unwrap_or(Reported::Crashed)
    }

    fn steps(&mut self, attempt: &mut Attempt) -> Result<Reported, Died> {
        for reply in 1..=5 {
            if reply > attempt.memory.replies {
                attempt.memory.model_calls += 1;
                attempt.memory.replies = reply;
            }
            if reply == 5 {
                return self.end(attempt, RunState::Finished("Completed"), "Completed", None);
            }
            let op = reply;
            let index = op - 1;
            match attempt.memory.ops[index].status() {
                Status::Settled => attempt.memory.ops[index].result = true,
                Status::Unknown => {
                    attempt.memory.tool_calls += 1;
                    attempt.memory.ops[index].proposed = true;
                    match self.policy_of(op) {
                        Policy::Ask => {
                            return self.end(attempt, RunState::Awaiting(op), "AwaitingApproval", Some(op));
                        }
                        Policy::Deny => {
                            attempt.memory.ops[index].decision = Some((false, false));
                            return self.end(attempt, RunState::Finished("Denied"), "Denied", Some(op));
                        }
                        Policy::Allow => {
                            attempt.memory.ops[index].decision = Some((true, false));
                            self.execute(attempt, op, 1)?;
                        }
                    }
                }
                Status::Awaiting => {
                    return self.end(attempt, RunState::Awaiting(op), "AwaitingApproval", Some(op));
                }
                Status::Denied => return self.end(attempt, RunState::Finished("Denied"), "Denied", Some(op)),
                Status::Ready(start) => self.execute(attempt, op, start)?,
                Status::Started(start) => {
                    if kind(op) == Kind::Effect {
                        return self.end(attempt, RunState::Ambiguous(op), "Ambiguous", Some(op));
                    }
                    self.execute(attempt, op, start + 1)?;
                }
            }
        }
        unreachable!("reply 5 ends the attempt")
    }

    /// An approver decides op `op`, presenting the right digest or not.
    pub fn decide(&mut self, op: usize, allow: bool, right_digest: bool) -> Reported {
        if self.durable.attempts == 0 {
            return Reported::Refused("UnknownRun");
        }
        let record = &mut self.durable.ops[op - 1];
        if !record.proposed {
            return Reported::Refused("UnknownOperation");
        }
        if !right_digest {
            return Reported::Refused("SignatureMismatch");
        }
        if record.decision.is_some() {
            return Reported::Refused("AlreadyDecided");
        }
        record.decision = Some((allow, true));
        if self.durable.state == RunState::Awaiting(op) {
            self.durable.state = RunState::Open;
        }
        Reported::Done
    }

    /// The host reconciles op `op`.
    pub fn reconcile(&mut self, op: usize, settled: Settled) -> Reported {
        if self.durable.attempts == 0 {
            return Reported::Refused("UnknownRun");
        }
        let record = &mut self.durable.ops[op - 1];
        if !record.proposed {
            return Reported::Refused("UnknownOperation");
        }
        if kind(op) != Kind::Effect {
            return Reported::Refused("NotAnEffect");
        }
        let Status::Started(start) = record.status() else {
            return Reported::Refused("NotAmbiguous");
        };
        record.reconciled.push((start, settled));
        if self.durable.state == RunState::Ambiguous(op) {
            self.durable.state = RunState::Open;
        }
        Reported::Done
    }
}
