//! Where a run and each of its jobs are in their lives: queued, leased or running, and how
//! they ended. The coordinator's store keeps these states (as the names `as_str` gives), the
//! fleet moves them, the report shows them.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    Queued,
    Running,
    Done,
    Failed,
    Cancelled,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Done => "done",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
        }
    }

    /// Every state, in lifecycle order.
    pub const ALL: [RunState; 5] = [
        RunState::Queued,
        RunState::Running,
        RunState::Done,
        RunState::Failed,
        RunState::Cancelled,
    ];

    pub fn is_finished(self) -> bool {
        matches!(
            self,
            RunState::Done | RunState::Failed | RunState::Cancelled
        )
    }
}

impl std::str::FromStr for RunState {
    type Err = crate::names::UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        crate::names::UnknownName::parse("run state", text, RunState::ALL, RunState::as_str)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Queued,
    Leased,
    Done,
    Failed,
    Cancelled,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Leased => "leased",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Every state, in lifecycle order.
    pub const ALL: [JobState; 5] = [
        JobState::Queued,
        JobState::Leased,
        JobState::Done,
        JobState::Failed,
        JobState::Cancelled,
    ];

    pub fn is_finished(self) -> bool {
        matches!(
            self,
            JobState::Done | JobState::Failed | JobState::Cancelled
        )
    }
}

impl std::str::FromStr for JobState {
    type Err = crate::names::UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        crate::names::UnknownName::parse("job state", text, JobState::ALL, JobState::as_str)
    }
}

/// Where an agent stands, as the coordinator judges it from its heartbeats, its lease and
/// its drain flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentState {
    /// Heard from lately, holds no lease, takes jobs.
    Idle,
    /// Holds a lease.
    Busy,
    /// Drained while busy: finishes its job and is offered nothing after.
    Draining,
    /// Drained and idle: offered nothing until resumed.
    Drained,
    /// Silent longer than `agent_lost_after`.
    Lost,
}

impl AgentState {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentState::Idle => "idle",
            AgentState::Busy => "busy",
            AgentState::Draining => "draining",
            AgentState::Drained => "drained",
            AgentState::Lost => "lost",
        }
    }

    /// Every state, in the order lists and metrics show them.
    pub const ALL: [AgentState; 5] = [
        AgentState::Idle,
        AgentState::Busy,
        AgentState::Draining,
        AgentState::Drained,
        AgentState::Lost,
    ];

    /// An agent's state from what the coordinator knows of it.
    pub fn of(lost: bool, draining: bool, busy: bool) -> AgentState {
        match (lost, draining, busy) {
            (true, _, _) => AgentState::Lost,
            (false, true, true) => AgentState::Draining,
            (false, true, false) => AgentState::Drained,
            (false, false, true) => AgentState::Busy,
            (false, false, false) => AgentState::Idle,
        }
    }
}

impl std::fmt::Display for AgentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for AgentState {
    type Err = crate::names::UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        crate::names::UnknownName::parse("agent state", text, AgentState::ALL, AgentState::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_agent_is_lost_whatever_else_holds_and_draining_needs_a_job() {
        for (draining, busy) in [(false, false), (true, true), (true, false), (false, true)] {
            assert_eq!(AgentState::of(true, draining, busy), AgentState::Lost);
        }
        assert_eq!(AgentState::of(false, true, true), AgentState::Draining);
        assert_eq!(AgentState::of(false, true, false), AgentState::Drained);
        assert_eq!(AgentState::of(false, false, true), AgentState::Busy);
        assert_eq!(AgentState::of(false, false, false), AgentState::Idle);
    }
}
