//! The state machine alone, on simulated time: no gRPC, no reaper task, no sleeps. A
//! [`ManualClock`] moves only when a test says so; an agent's session is a channel the test
//! reads.

use std::path::Path;
use std::time::Duration;

use abfleet_core::events::{JobEventPayload, JobOutcome, LogLevel};
use abfleet_core::inventory::Inventory;
use abfleet_core::lifecycle::{AgentState, JobState, RunState};
use abfleet_core::progress::RunProgress;
use abfleet_core::session::{JobOffer, OutgoingMessage, SessionMessage};
use abfleet_core::spec::JobSpec;
use abfleet_core::spec::SpecJson;
use abfleet_core::{exit, AgentId, JobId, RunId};
use tokio::sync::{broadcast, mpsc};

use super::{CoordinatorConfig, Fleet, FleetError};
use crate::clock::ManualClock;
use crate::store::{Store, StoredEvent};

const LEASE: Duration = Duration::from_secs(30);

/// The demo spec with a fixed seed (a spec that names none gets a random one), so a cell
/// made here carries the seed the coordinator checks it against.
fn spec() -> JobSpec {
    let text = include_str!("../../../fixtures/jobs/demo.toml");
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
    let mut spec = JobSpec::from_toml(text, Path::new("demo.toml"), dir).unwrap();
    spec.measure.seed = 7;
    spec
}

fn inventory() -> Inventory {
    Inventory {
        hostname: "bench-1".into(),
        os: "Debian 12".into(),
        kernel: "6.1".into(),
        arch: "x86_64".into(),
        cpu_model: "test cpu".into(),
        physical_cores: 2,
        logical_cores: 4,
        memory_bytes: 1 << 30,
        generations: Vec::new(),
        hardware: None,
    }
}

/// A fleet on a manual clock, with one registered agent whose session the test holds.
struct Harness {
    fleet: Fleet,
    clock: ManualClock,
    agent: AgentId,
    session: mpsc::UnboundedReceiver<OutgoingMessage>,
    /// The number of the agent's session, to close it.
    session_number: u64,
    progress: broadcast::Receiver<RunProgress>,
    _dir: tempfile::TempDir,
}

impl Harness {
    async fn new(max_attempts: u32) -> Harness {
        Harness::with_config(CoordinatorConfig {
            lease: LEASE,
            heartbeat_interval: Duration::from_secs(2),
            max_attempts,
            agent_lost_after: Duration::from_secs(10),
            ..CoordinatorConfig::default()
        })
        .await
    }

    async fn with_config(config: CoordinatorConfig) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let clock = ManualClock::starting_at_ms(1_700_000_000_000);
        let fleet = Fleet::with_clock(store, config, std::sync::Arc::new(clock.clone()));
        let agent = AgentId::new_random();
        fleet.register(agent, &inventory()).await.unwrap();
        let (sender, session) = mpsc::unbounded_channel();
        let (session_number, _) = fleet
            .scheduling()
            .open_session(agent, sender, None)
            .unwrap();
        let progress = fleet.subscribe();
        Harness {
            fleet,
            clock,
            agent,
            session,
            session_number,
            progress,
            _dir: dir,
        }
    }

    /// The agent says it is idle and takes the offer that follows.
    async fn ready_and_take_offer(&mut self) -> JobOffer<SpecJson> {
        self.fleet
            .scheduling()
            .ready(self.agent, None)
            .await
            .unwrap();
        self.take_offer()
    }

    /// The offer waiting on the agent's session.
    fn take_offer(&mut self) -> JobOffer<SpecJson> {
        match self.session.try_recv() {
            Ok(SessionMessage::Offer(offer)) => *offer,
            other => panic!("expected an offer, got {other:?}"),
        }
    }

    /// The agent's connection breaks and it stays away past the restart grace: the lease
    /// reaper requeues its job.
    async fn break_past_the_grace(&mut self) {
        self.fleet
            .scheduling()
            .session_broke(self.agent, self.session_number, "connection reset")
            .await
            .unwrap();
        self.clock.advance(super::sessions::RESTART_GRACE);
        self.fleet.scheduling().reap_expired_leases().await.unwrap();
    }

    /// The agent opens a new session (after its old one broke).
    fn reconnect(&mut self) {
        let (sender, session) = mpsc::unbounded_channel();
        let (number, _) = self
            .fleet
            .scheduling()
            .open_session(self.agent, sender, None)
            .unwrap();
        (self.session, self.session_number) = (session, number);
    }

    /// The agent process restarts at once: its session breaks, it opens a new one and asks
    /// to resume `attempt`; the offer it gets.
    async fn restart_resuming(&mut self, attempt: (JobId, u32)) -> JobOffer<SpecJson> {
        self.fleet
            .scheduling()
            .session_broke(self.agent, self.session_number, "connection reset")
            .await
            .unwrap();
        self.ready_resuming(attempt).await
    }

    /// The agent opens a new session and asks to resume `attempt`; the offer it gets.
    async fn ready_resuming(&mut self, attempt: (JobId, u32)) -> JobOffer<SpecJson> {
        self.reconnect();
        self.fleet
            .scheduling()
            .ready(self.agent, Some(attempt))
            .await
            .unwrap();
        self.take_offer()
    }

    /// The agent's connection breaks and it opens a new session at once (a network blip).
    async fn break_and_reconnect(&mut self) {
        self.fleet
            .scheduling()
            .session_broke(self.agent, self.session_number, "reset")
            .await
            .unwrap();
        let (sender, session) = mpsc::unbounded_channel();
        let (number, _) = self
            .fleet
            .scheduling()
            .open_session(self.agent, sender, None)
            .unwrap();
        (self.session, self.session_number) = (session, number);
    }

    fn no_message(&mut self) {
        let next = self.session.try_recv();
        assert!(next.is_err(), "expected no message, got {next:?}");
    }

    /// The stored row of a job the test made.
    async fn job(&self, job_id: abfleet_core::JobId) -> crate::store::JobRow {
        self.fleet
            .store()
            .jobs()
            .job(job_id)
            .await
            .unwrap()
            .unwrap()
    }

    /// `events` pushed by this harness's agent as the attempt `offer` began.
    async fn push(
        &self,
        offer: &JobOffer<SpecJson>,
        events: Vec<impl Into<crate::store::IncomingEvent>>,
    ) -> Result<Vec<u64>, super::FleetError> {
        self.fleet
            .intake()
            .push_events(self.agent, offer.job_id, offer.attempt, events)
            .await
    }

    /// The cells stored for a job's current attempt.
    async fn cell_count(&self, job_id: abfleet_core::JobId) -> u64 {
        self.fleet
            .store()
            .events()
            .cell_count(job_id)
            .await
            .unwrap()
    }

    async fn job_state(&self, run_id: RunId) -> JobState {
        self.fleet.store().jobs().of_run(run_id).await.unwrap()[0].state
    }

    async fn run_state(&self, run_id: RunId) -> (RunState, Option<i32>) {
        let run = self
            .fleet
            .store()
            .runs()
            .run(run_id)
            .await
            .unwrap()
            .unwrap();
        (run.state, run.exit_code)
    }

    /// The last progress update published so far.
    fn last_progress(&mut self) -> RunProgress {
        let mut last = None;
        while let Ok(update) = self.progress.try_recv() {
            last = Some(update);
        }
        last.expect("some progress was published")
    }

    async fn done(&self, offer: &JobOffer<SpecJson>, seq: u64, outcome: JobOutcome) -> Vec<u64> {
        let done = StoredEvent {
            seq,
            at_ms: self.clock_ms(),
            payload: JobEventPayload::Done {
                outcome,
                error: None,
            },
        };
        self.fleet
            .intake()
            .push_events(self.agent, offer.job_id, offer.attempt, vec![done])
            .await
            .unwrap()
    }

    fn clock_ms(&self) -> i64 {
        use crate::clock::Clock;
        self.clock.now_ms()
    }
}

#[tokio::test]
async fn a_submitted_job_is_offered_to_the_waiting_agent_and_done_finishes_the_run() {
    let mut h = Harness::new(3).await;
    h.fleet.scheduling().ready(h.agent, None).await.unwrap();
    let spec = spec();
    let run_id = h
        .fleet
        .runs()
        .submit(spec.clone(), "manual", "test")
        .await
        .unwrap();
    let offer = match h.session.try_recv() {
        Ok(SessionMessage::Offer(offer)) => *offer,
        other => panic!("expected an offer, got {other:?}"),
    };
    assert_eq!(
        (offer.run_id, offer.attempt, offer.next_seq),
        (run_id, 1, 0)
    );
    assert_eq!(offer.lease, LEASE);
    assert_eq!(
        offer.spec.decode().unwrap(),
        spec,
        "the offer carries the run's spec"
    );
    assert_eq!(h.job_state(run_id).await, JobState::Leased);
    assert_eq!(h.run_state(run_id).await, (RunState::Running, None));
    let lease = h.job(offer.job_id).await;
    assert_eq!(
        lease.lease_expires_ms,
        Some(h.clock_ms() + LEASE.as_millis() as i64)
    );

    assert_eq!(h.done(&offer, 0, JobOutcome::Completed).await, vec![0]);
    let report = h.fleet.reports().report(run_id).await.unwrap();
    assert_eq!(h.job_state(run_id).await, JobState::Done);
    assert_eq!(
        h.run_state(run_id).await,
        (RunState::Done, Some(report.exit_code))
    );
    let last = h.last_progress();
    assert_eq!(last.exit_code, Some(report.exit_code));
    assert_eq!(last.state, "done");
    assert_eq!(
        h.fleet.reports().snapshot(run_id).await.unwrap().exit_code,
        Some(report.exit_code)
    );
}

#[tokio::test]
async fn a_queued_job_waits_until_an_agent_is_ready() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    h.no_message();
    assert_eq!(h.job_state(run_id).await, JobState::Queued);
    let offer = h.ready_and_take_offer().await;
    assert_eq!(offer.run_id, run_id);
}

#[tokio::test]
async fn a_lease_expires_only_after_its_duration_and_the_job_is_requeued() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let first = h.ready_and_take_offer().await;

    h.clock.advance(LEASE);
    h.fleet.scheduling().reap_expired_leases().await.unwrap();
    assert_eq!(
        h.job_state(run_id).await,
        JobState::Leased,
        "expiry is strict"
    );

    h.clock.advance(Duration::from_millis(1));
    h.fleet.scheduling().reap_expired_leases().await.unwrap();
    assert_eq!(h.job_state(run_id).await, JobState::Queued);
    assert_eq!(h.run_state(run_id).await, (RunState::Running, None));
    let job = h.job(first.job_id).await;
    assert!(job.error.unwrap().contains("lease of attempt 1 expired"));
    h.no_message();

    let second = h.ready_and_take_offer().await;
    assert_eq!((second.job_id, second.attempt), (first.job_id, 2));
}

#[tokio::test]
async fn the_last_heartbeat_of_a_fleet_that_falls_quiet_is_written_by_the_reaper_tick() {
    use crate::clock::Clock;
    let h = Harness::new(3).await;
    let stored = || async { h.fleet.store().agents().all().await.unwrap()[0].last_heartbeat_ms };
    h.fleet.scheduling().heartbeat(h.agent, None).await.unwrap();
    let first = h.clock.now_ms();
    assert_eq!(
        stored().await,
        first,
        "the first heartbeat is written at once"
    );
    h.clock.advance(Duration::from_millis(500));
    h.fleet.scheduling().heartbeat(h.agent, None).await.unwrap();
    let last = h.clock.now_ms();
    h.fleet.scheduling().write_heard().await.unwrap();
    assert_eq!(stored().await, first, "held in memory under a second");
    // No heartbeat follows: the reaper's tick writes it.
    h.clock.advance(Duration::from_millis(600));
    h.fleet.scheduling().write_heard().await.unwrap();
    assert_eq!(stored().await, last);
}

#[tokio::test]
async fn heartbeats_renew_the_lease_from_the_time_they_arrive() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    for _ in 0..4 {
        h.clock.advance(LEASE / 2);
        h.fleet
            .scheduling()
            .heartbeat(h.agent, Some((offer.job_id, offer.attempt)))
            .await
            .unwrap();
        h.fleet.scheduling().reap_expired_leases().await.unwrap();
        assert_eq!(h.job_state(run_id).await, JobState::Leased);
    }
    h.no_message();
    h.clock.advance(LEASE + Duration::from_millis(1));
    h.fleet.scheduling().reap_expired_leases().await.unwrap();
    assert_eq!(h.job_state(run_id).await, JobState::Queued);

    // Nobody took the job: the agent that comes back (cut off longer than its lease) gets
    // the lease back and the same attempt goes on.
    h.fleet
        .scheduling()
        .heartbeat(h.agent, Some((offer.job_id, offer.attempt)))
        .await
        .unwrap();
    h.no_message();
    assert_eq!(h.job_state(run_id).await, JobState::Leased);
    let job = h.job(offer.job_id).await;
    assert_eq!((job.attempt, job.error), (1, None));

    // Once another agent has taken the job, the old attempt learns it lost the lease, and
    // its events are refused.
    h.clock.advance(LEASE + Duration::from_millis(1));
    h.fleet.scheduling().reap_expired_leases().await.unwrap();
    let other = AgentId::new_random();
    h.fleet.register(other, &inventory()).await.unwrap();
    let (sender, mut other_session) = mpsc::unbounded_channel();
    h.fleet
        .scheduling()
        .open_session(other, sender, None)
        .unwrap();
    h.fleet.scheduling().ready(other, None).await.unwrap();
    match other_session.try_recv() {
        Ok(SessionMessage::Offer(second)) => assert_eq!(second.attempt, 2),
        other => panic!("expected an offer, got {other:?}"),
    }
    h.fleet
        .scheduling()
        .heartbeat(h.agent, Some((offer.job_id, offer.attempt)))
        .await
        .unwrap();
    match h.session.try_recv() {
        Ok(SessionMessage::LeaseLost { job_id, attempt }) => {
            assert_eq!((job_id, attempt), (offer.job_id, 1));
        }
        other => panic!("expected LeaseLost, got {other:?}"),
    }
    let late = h
        .fleet
        .intake()
        .push_events(h.agent, offer.job_id, 1, vec![cell(0, 0)])
        .await;
    assert!(
        matches!(late, Err(super::FleetError::LeaseLost { .. })),
        "{late:?}"
    );
}

#[tokio::test]
async fn a_resumed_attempt_is_offered_the_cells_earlier_attempts_stored() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let first = h.ready_and_take_offer().await;
    assert!(first.kept_cells.is_empty());
    h.fleet
        .intake()
        .push_events(h.agent, first.job_id, 1, vec![cell(0, 0), cell(2, 1)])
        .await
        .unwrap();
    h.clock.advance(LEASE + Duration::from_millis(1));
    h.fleet.scheduling().reap_expired_leases().await.unwrap();
    let second = h.ready_and_take_offer().await;
    assert_eq!(second.attempt, 2);
    assert_eq!(
        second.kept_cells.into_iter().collect::<Vec<_>>(),
        vec![0, 2]
    );
    h.fleet
        .intake()
        .push_events(h.agent, second.job_id, 2, vec![cell(1, 0)])
        .await
        .unwrap();
    // The agent restarts: attempt 3 keeps what both earlier attempts stored.
    h.fleet.scheduling().ready(h.agent, None).await.unwrap();
    let third = match h.session.try_recv() {
        Ok(SessionMessage::Offer(offer)) => *offer,
        other => panic!("expected an offer, got {other:?}"),
    };
    assert_eq!(third.attempt, 3);
    assert_eq!(
        third.kept_cells.into_iter().collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    let report = h.fleet.reports().report(run_id).await.unwrap();
    let lines: Vec<String> = report.attempt_history.iter().map(|a| a.line()).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines[0].contains("): 2 cells measured; agent")
            && lines[0].ends_with("lease of attempt 1 expired"),
        "{lines:?}"
    );
    assert!(
        lines[1].contains("resumed: 2 cells kept from attempt 1, 1 measured; agent")
            && lines[1].ends_with("restarted during attempt 2"),
        "{lines:?}"
    );
    assert!(
        lines[2].ends_with("resumed: 3 cells kept from attempts 1, 2, 0 measured; running"),
        "{lines:?}"
    );
    let attempts: Vec<(u32, Option<u32>)> =
        report.cells.iter().map(|c| (c.index, c.attempt)).collect();
    assert_eq!(attempts, vec![(0, Some(1)), (1, Some(2)), (2, Some(1))]);
}

#[tokio::test]
async fn a_job_that_loses_every_attempt_fails_the_run_as_agent_lost() {
    let mut h = Harness::new(2).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    for attempt in 1..=2 {
        let offer = h.ready_and_take_offer().await;
        assert_eq!(offer.attempt, attempt);
        h.clock.advance(LEASE + Duration::from_millis(1));
        h.fleet.scheduling().reap_expired_leases().await.unwrap();
    }
    assert_eq!(h.job_state(run_id).await, JobState::Failed);
    let job = &h.fleet.store().jobs().of_run(run_id).await.unwrap()[0];
    assert!(
        job.error
            .as_deref()
            .unwrap()
            .contains("gave up after 2 attempt(s)"),
        "{:?}",
        job.error
    );
    let (state, exit_code) = h.run_state(run_id).await;
    assert_eq!(state, RunState::Failed);
    assert_eq!(
        exit_code,
        Some(h.fleet.reports().report(run_id).await.unwrap().exit_code)
    );
    assert!(h.last_progress().is_finished());
    // Nothing is left to offer.
    h.fleet.scheduling().ready(h.agent, None).await.unwrap();
    h.no_message();
}

#[tokio::test]
async fn an_agent_that_comes_back_idle_gets_its_job_requeued_at_once() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let first = h.ready_and_take_offer().await;
    // No time passes: the restart, not the lease, frees the job, and it is offered again.
    let second = h.ready_and_take_offer().await;
    assert_eq!((second.job_id, second.attempt), (first.job_id, 2));
    assert_eq!(h.job_state(run_id).await, JobState::Leased);
}

/// Issue 15: a SIGKILLed agent's job waited out its whole lease (30 s) although its
/// connection closed at once. Now it is requeued once the agent has stayed away
/// `agent_lost_after` (10 s); one that comes back in time keeps it, and one that comes back
/// later gets the lapsed lease back if nobody took the job.
#[tokio::test]
async fn a_job_whose_agent_closed_its_session_and_stayed_away_is_requeued_before_the_lease_ends() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    h.fleet
        .scheduling()
        .close_session(h.agent, h.session_number);
    h.clock.advance(Duration::from_secs(9));
    h.fleet.scheduling().reap_expired_leases().await.unwrap();
    assert_eq!(
        h.job_state(run_id).await,
        JobState::Leased,
        "within the grace"
    );
    h.clock.advance(Duration::from_secs(1));
    h.fleet.scheduling().reap_expired_leases().await.unwrap();
    assert_eq!(
        h.job_state(run_id).await,
        JobState::Queued,
        "10 s, not the 30 s lease"
    );
    let job = h.job(offer.job_id).await;
    let reason = job.error.unwrap();
    assert!(
        reason.contains("session closed 10.0 s ago") && reason.contains("attempt 1"),
        "{reason}"
    );
    // It comes back while nobody has taken the job: the same attempt goes on.
    let (sender, _session) = mpsc::unbounded_channel();
    h.fleet
        .scheduling()
        .open_session(h.agent, sender, None)
        .unwrap();
    h.fleet
        .scheduling()
        .heartbeat(h.agent, Some((offer.job_id, offer.attempt)))
        .await
        .unwrap();
    let job = h.job(offer.job_id).await;
    assert_eq!(
        (job.state, job.attempt, job.error),
        (JobState::Leased, 1, None)
    );
}

/// Issue 23 (9c): a killed agent's job waited `agent_lost_after` although the coordinator
/// saw its session break. A broken session requeues at once; the agent, should it come back
/// before anyone took the job, gets its lease back; a job on its last attempt still waits the
/// grace rather than failing for good on one broken connection.
#[tokio::test]
async fn a_broken_session_requeues_its_job_after_the_restart_grace_unless_it_is_the_last_attempt() {
    let mut h = Harness::new(2).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    h.fleet
        .scheduling()
        .session_broke(h.agent, h.session_number, "connection reset")
        .await
        .unwrap();
    // Held for the agent a moment (a restarted agent resumes its attempt), then requeued.
    h.fleet.scheduling().reap_expired_leases().await.unwrap();
    assert_eq!(h.job_state(run_id).await, JobState::Leased);
    h.clock.advance(super::sessions::RESTART_GRACE);
    h.fleet.scheduling().reap_expired_leases().await.unwrap();
    assert_eq!(h.job_state(run_id).await, JobState::Queued);
    let job = h.job(offer.job_id).await;
    let reason = job.error.unwrap();
    assert!(
        reason.contains("session broke (connection reset)") && reason.contains("attempt 1"),
        "{reason}"
    );
    // It was only the connection: the agent comes back and its attempt goes on.
    let (sender, _session) = mpsc::unbounded_channel();
    let (number, _revoked) = h
        .fleet
        .scheduling()
        .open_session(h.agent, sender, None)
        .unwrap();
    h.fleet
        .scheduling()
        .heartbeat(h.agent, Some((offer.job_id, offer.attempt)))
        .await
        .unwrap();
    let job = h.job(offer.job_id).await;
    assert_eq!((job.state, job.attempt), (JobState::Leased, 1));

    // The last attempt (2 of 2): a broken session leaves it leased until the grace is over.
    h.fleet
        .scheduling()
        .session_broke(h.agent, number, "reset")
        .await
        .unwrap();
    let (sender, session) = mpsc::unbounded_channel();
    let (number, _revoked) = h
        .fleet
        .scheduling()
        .open_session(h.agent, sender, None)
        .unwrap();
    (h.session, h.session_number) = (session, number);
    let last = h.ready_and_take_offer().await;
    assert_eq!((last.job_id, last.attempt), (offer.job_id, 2));
    h.fleet
        .scheduling()
        .session_broke(h.agent, h.session_number, "reset")
        .await
        .unwrap();
    assert_eq!(h.job_state(run_id).await, JobState::Leased);
    h.clock.advance(super::sessions::RESTART_GRACE);
    h.fleet.scheduling().reap_expired_leases().await.unwrap();
    assert_eq!(
        h.job_state(run_id).await,
        JobState::Leased,
        "the last attempt waits agent_lost_after"
    );
    h.clock.advance(Duration::from_secs(10));
    h.fleet.scheduling().reap_expired_leases().await.unwrap();
    assert_eq!(h.job_state(run_id).await, JobState::Failed);
}

/// After a broken session the agent's heartbeat and its spooled upload both find the job
/// queued and both ask for the lease back; whichever comes second finds it already the
/// agent's and must be told so, not "lease lost" (which dropped the attempt: CI saw a resent
/// job measured twice).
#[tokio::test]
async fn a_lease_given_back_by_one_call_of_the_agent_is_held_for_its_other_call() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    h.break_past_the_grace().await;
    h.reconnect();
    assert_eq!(h.job_state(run_id).await, JobState::Queued);
    // The heartbeat's call gives the lease back; the upload's, a moment later, finds it held.
    assert!(h
        .fleet
        .scheduling()
        .reclaim_lapsed(offer.job_id, h.agent, offer.attempt)
        .await
        .unwrap());
    assert!(h
        .fleet
        .scheduling()
        .reclaim_lapsed(offer.job_id, h.agent, offer.attempt)
        .await
        .unwrap());
    // Held by this agent at this attempt only: another agent, or another attempt, is refused.
    let other = AgentId::new_random();
    assert!(!h
        .fleet
        .scheduling()
        .reclaim_lapsed(offer.job_id, other, offer.attempt)
        .await
        .unwrap());
    assert!(!h
        .fleet
        .scheduling()
        .reclaim_lapsed(offer.job_id, h.agent, offer.attempt + 1)
        .await
        .unwrap());
    let job = h.job(offer.job_id).await;
    assert_eq!((job.state, job.attempt), (JobState::Leased, 1));
}

/// The same race through the fleet's own doors: a heartbeat and an upload of the agent come
/// in together after each of many broken sessions, and neither is ever refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_heartbeat_and_an_upload_arriving_together_after_a_reconnect_both_keep_the_attempt() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    for seq in 0..40u64 {
        h.break_and_reconnect().await;
        let log = StoredEvent {
            seq,
            at_ms: h.clock_ms(),
            payload: JobEventPayload::Log {
                level: abfleet_core::events::LogLevel::Info,
                line: format!("spooled while away {seq}"),
            },
        };
        let (beat, pushed) = tokio::join!(
            h.fleet
                .scheduling()
                .heartbeat(h.agent, Some((offer.job_id, offer.attempt))),
            h.push(&offer, vec![log]),
        );
        beat.unwrap();
        assert_eq!(pushed.unwrap(), vec![seq], "reconnect {seq}");
        let job = h.job(offer.job_id).await;
        assert_eq!(
            (job.state, job.attempt),
            (JobState::Leased, 1),
            "reconnect {seq}"
        );
        // Nothing told the agent its lease was lost.
        h.no_message();
    }
    assert_eq!(h.job_state(run_id).await, JobState::Leased);
}

/// Issue 24: an agent lost mid-job is an alert when it happens, once per attempt, to each
/// endpoint that takes `agent_lost`; an endpoint that does not take it gets nothing.
#[tokio::test]
async fn a_lost_agent_queues_one_alert_per_attempt_for_the_endpoints_that_take_it() {
    use crate::outbound::notify::{AlertKind, Endpoint, NotifyConfig, PayloadFormat};
    let endpoint = |name: &str, events: Vec<AlertKind>| Endpoint {
        name: name.into(),
        url: "http://127.0.0.1:9/x".into(),
        format: PayloadFormat::Json,
        events,
        secret: None,
        ca_pem: None,
    };
    let mut h = Harness::with_config(CoordinatorConfig {
        lease: LEASE,
        max_attempts: 3,
        notify: NotifyConfig {
            endpoints: vec![
                endpoint("ops", vec![AlertKind::AgentLost]),
                endpoint("parity-only", vec![AlertKind::ParityFailure]),
            ],
            ..NotifyConfig::default()
        },
        ..CoordinatorConfig::default()
    })
    .await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    h.break_past_the_grace().await;
    let sent = h
        .fleet
        .store()
        .notifications()
        .notifications_of(run_id)
        .await
        .unwrap();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        (
            sent[0].kind.as_str(),
            sent[0].endpoint.as_str(),
            sent[0].state.as_str()
        ),
        ("agent_lost", "ops", "pending")
    );
    assert_eq!(sent[0].key, format!("{}/1", offer.job_id));
    assert!(
        sent[0].summary.contains("session broke (connection reset)"),
        "{sent:?}"
    );
    // The same loss seen again (the reaper after the grace) queues nothing new.
    h.fleet
        .alerts()
        .alert_agent_lost(run_id, offer.job_id, 1, "lease expired")
        .await;
    assert_eq!(
        h.fleet
            .store()
            .notifications()
            .notifications_of(run_id)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn an_agent_that_reconnects_within_agent_lost_after_keeps_its_job() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    h.fleet
        .scheduling()
        .close_session(h.agent, h.session_number);
    h.clock.advance(Duration::from_secs(4));
    let (sender, _session) = mpsc::unbounded_channel();
    h.fleet
        .scheduling()
        .open_session(h.agent, sender, None)
        .unwrap();
    h.fleet
        .scheduling()
        .heartbeat(h.agent, Some((offer.job_id, offer.attempt)))
        .await
        .unwrap();
    // An old session's late close changes nothing.
    h.fleet
        .scheduling()
        .close_session(h.agent, h.session_number);
    h.clock.advance(Duration::from_secs(20));
    h.fleet.scheduling().reap_expired_leases().await.unwrap();
    assert_eq!(h.job_state(run_id).await, JobState::Leased);
    // Only the lease decides for an agent whose session stays open but silent.
    h.clock.advance(LEASE);
    h.fleet.scheduling().reap_expired_leases().await.unwrap();
    assert_eq!(h.job_state(run_id).await, JobState::Queued);
    let job = h.job(offer.job_id).await;
    assert!(job.error.unwrap().contains("lease of attempt 1 expired"));
}

#[tokio::test]
async fn cancelling_a_run_tells_the_agent_and_ends_the_run_as_cancelled() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    assert!(h.fleet.runs().cancel(run_id, "by test").await.unwrap());
    match h.session.try_recv() {
        Ok(SessionMessage::Cancel { job_id, reason }) => {
            assert_eq!((job_id, reason.as_str()), (offer.job_id, "by test"));
        }
        other => panic!("expected Cancel, got {other:?}"),
    }
    assert_eq!(
        h.run_state(run_id).await,
        (RunState::Cancelled, Some(exit::CANCELLED))
    );
    assert_eq!(h.job_state(run_id).await, JobState::Cancelled);
    assert_eq!(h.last_progress().exit_code, Some(exit::CANCELLED));
    assert!(
        !h.fleet.runs().cancel(run_id, "again").await.unwrap(),
        "already over"
    );

    // The agent's done for the cancelled attempt is still accepted; the run stays cancelled.
    assert_eq!(h.done(&offer, 0, JobOutcome::Cancelled).await, vec![0]);
    assert_eq!(h.run_state(run_id).await.0, RunState::Cancelled);
    // After its done only re-sends are taken.
    assert_eq!(h.done(&offer, 0, JobOutcome::Cancelled).await, vec![0]);
    let late = StoredEvent {
        seq: 1,
        at_ms: h.clock_ms(),
        payload: JobEventPayload::Log {
            level: LogLevel::Info,
            line: "after done".into(),
        },
    };
    let refused = h.push(&offer, vec![late]).await.unwrap_err();
    assert!(
        matches!(
            refused,
            FleetError::Store(crate::CoordinatorError::LeaseLost { .. })
        ),
        "{refused:?}"
    );
    // A lease that was cancelled never expires into a requeue.
    h.clock.advance(LEASE * 2);
    h.fleet.scheduling().reap_expired_leases().await.unwrap();
    assert_eq!(h.job_state(run_id).await, JobState::Cancelled);
}

/// Issue 11: the session channel had 64 slots and messages were `try_send`: with it full, a
/// cancel (or a lost lease) was dropped silently and the agent timed on for a cancelled run.
#[tokio::test]
async fn a_cancel_is_delivered_behind_more_messages_than_the_old_channel_held() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let first = h.ready_and_take_offer().await;
    h.clock.advance(LEASE * 2);
    h.fleet.scheduling().reap_expired_leases().await.unwrap();
    let second = h.ready_and_take_offer().await;
    assert_eq!((second.job_id, second.attempt), (first.job_id, 2));
    // The agent never reads its session while it heartbeats its old attempt: each heartbeat
    // is answered with a lost lease, far more than 64 of them queue up.
    for _ in 0..200 {
        h.fleet
            .scheduling()
            .heartbeat(h.agent, Some((first.job_id, first.attempt)))
            .await
            .unwrap();
    }
    assert!(h.fleet.runs().cancel(run_id, "by test").await.unwrap());
    let mut lost = 0;
    loop {
        match h.session.try_recv() {
            Ok(SessionMessage::LeaseLost { job_id, attempt }) => {
                assert_eq!((job_id, attempt), (first.job_id, 1));
                lost += 1;
            }
            Ok(SessionMessage::Cancel { job_id, reason }) => {
                assert_eq!((job_id, reason.as_str()), (second.job_id, "by test"));
                break;
            }
            other => panic!("expected LeaseLost or Cancel, got {other:?}"),
        }
    }
    assert_eq!(lost, 200, "every lost-lease answer is delivered too");
    h.no_message();
}

#[tokio::test]
async fn an_agent_silent_longer_than_agent_lost_after_is_listed_as_lost() {
    let h = Harness::new(3).await;
    let state = |agents: Vec<(
        crate::store::AgentRow,
        AgentState,
        Option<abfleet_core::JobId>,
    )>| agents[0].1;
    assert_eq!(
        state(h.fleet.scheduling().agents().await.unwrap()),
        AgentState::Idle
    );
    h.clock.advance(Duration::from_secs(11));
    assert_eq!(
        state(h.fleet.scheduling().agents().await.unwrap()),
        AgentState::Lost
    );
    h.fleet.scheduling().heartbeat(h.agent, None).await.unwrap();
    assert_eq!(
        state(h.fleet.scheduling().agents().await.unwrap()),
        AgentState::Idle
    );
}

fn build(toolchain: &str) -> JobEventPayload {
    JobEventPayload::Build(abfleet_core::events::BuildRecord {
        side: abfleet_core::events::Side::Fork,
        status: abfleet_core::events::BuildStatus::Built,
        cache_key: format!("key-{toolchain}"),
        toolchain: toolchain.to_string(),
        seconds: 1.0,
        log_path: "build.log".into(),
        log_tail: None,
        error: None,
    })
}

impl Harness {
    /// A run of the demo spec that builds the fork with `toolchain` and ends as `outcome`.
    async fn run_with_toolchain(&mut self, toolchain: &str, outcome: JobOutcome) -> RunId {
        self.clock.advance(Duration::from_secs(60));
        let run_id = self
            .fleet
            .runs()
            .submit(spec(), "manual", "test")
            .await
            .unwrap();
        let offer = self.ready_and_take_offer().await;
        let events = vec![
            StoredEvent {
                seq: 0,
                at_ms: self.clock_ms(),
                payload: build(toolchain),
            },
            StoredEvent {
                seq: 1,
                at_ms: self.clock_ms(),
                payload: JobEventPayload::Done {
                    outcome,
                    error: None,
                },
            },
        ];
        self.fleet
            .intake()
            .push_events(self.agent, offer.job_id, offer.attempt, events)
            .await
            .unwrap();
        run_id
    }
}

#[tokio::test]
async fn a_report_compares_each_generation_with_the_latest_earlier_finished_run() {
    let mut h = Harness::new(3).await;
    let first = h.run_with_toolchain("cc 12", JobOutcome::Completed).await;
    let second = h.run_with_toolchain("cc 13", JobOutcome::Failed).await;
    let third = h.run_with_toolchain("cc 14", JobOutcome::Completed).await;
    // A run still going leaves nothing for later runs, whatever it built.
    h.clock.advance(Duration::from_secs(60));
    h.fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    let build_only = StoredEvent {
        seq: 0,
        at_ms: h.clock_ms(),
        payload: build("cc 99"),
    };
    h.push(&offer, vec![build_only]).await.unwrap();

    let report = h.fleet.reports().report(first).await.unwrap();
    assert_eq!(report.generations[0].previous_run, None);

    let report = h.fleet.reports().report(second).await.unwrap();
    let section = &report.generations[0];
    assert_eq!(section.previous_run, Some(first.to_string()));
    assert_eq!(section.previous_toolchain["fork"], "cc 12");
    assert_eq!(section.toolchain_changes(), vec!["fork: `cc 12` → `cc 13`"]);

    let report = h.fleet.reports().report(third).await.unwrap();
    assert_eq!(report.generations[0].previous_run, Some(second.to_string()));

    let latest = h
        .fleet
        .store()
        .reports()
        .previous_result(&report.name, "any", i64::MAX)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest.run_id, third);
    assert_eq!(latest.result.toolchain["fork"], "cc 14");
}

/// A data dir from before `generation_results` (migration 4) has finished runs with nothing
/// recorded: the first report that needs them records them, and finds the same previous run.
#[tokio::test]
async fn runs_finished_before_the_results_table_are_recorded_when_a_report_needs_them() {
    let mut h = Harness::new(3).await;
    let first = h.run_with_toolchain("cc 12", JobOutcome::Completed).await;
    let second = h.run_with_toolchain("cc 13", JobOutcome::Completed).await;
    {
        let conn = rusqlite::Connection::open(h.fleet.store().path()).unwrap();
        // Such a data dir has no stored reports either (migration 13).
        conn.execute_batch(
            "DELETE FROM generation_results; DELETE FROM run_reports; UPDATE runs SET results_recorded = 0;",
        )
        .unwrap();
    }
    let report = h.fleet.reports().report(second).await.unwrap();
    assert_eq!(report.generations[0].previous_run, Some(first.to_string()));
    assert_eq!(report.generations[0].previous_toolchain["fork"], "cc 12");
    // The earlier run is recorded now; the one reported on is before nothing it needed.
    assert_eq!(
        h.fleet
            .store()
            .reports()
            .unrecorded_runs_of(Some(&report.name))
            .await
            .unwrap(),
        vec![second]
    );
}

/// A cancelled run's agent may still upload its last events after the cancel: what the run
/// leaves for later runs is rewritten from them.
#[tokio::test]
async fn events_that_reach_a_cancelled_run_update_what_it_leaves_for_later_runs() {
    let mut h = Harness::new(3).await;
    h.clock.advance(Duration::from_secs(60));
    let cancelled = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    h.fleet.runs().cancel(cancelled, "by test").await.unwrap();
    assert!(matches!(
        h.session.try_recv(),
        Ok(SessionMessage::Cancel { .. })
    ));
    let late = StoredEvent {
        seq: 0,
        at_ms: h.clock_ms(),
        payload: build("cc 12"),
    };
    h.push(&offer, vec![late]).await.unwrap();
    // Not assembled again per batch: marked to be recorded when a report next needs it.
    let store = h.fleet.store().clone();
    let unrecorded = || async { store.reports().unrecorded_runs_of(None).await.unwrap() };
    assert_eq!(unrecorded().await, vec![cancelled]);
    let later = h.run_with_toolchain("cc 13", JobOutcome::Completed).await;
    let report = h.fleet.reports().report(later).await.unwrap();
    assert_eq!(
        report.generations[0].previous_run,
        Some(cancelled.to_string())
    );
    assert_eq!(report.generations[0].previous_toolchain["fork"], "cc 12");
    assert!(unrecorded().await.is_empty());
}

#[tokio::test]
async fn the_state_machine_says_which_run_or_lease_is_wrong() {
    let mut h = Harness::new(3).await;
    let unknown = RunId::new_random();
    assert!(matches!(
        h.fleet.reports().report(unknown).await,
        Err(super::FleetError::UnknownRun(id)) if id == unknown
    ));
    h.fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    let stale = h
        .fleet
        .intake()
        .push_events(
            h.agent,
            offer.job_id,
            offer.attempt + 1,
            Vec::<StoredEvent>::new(),
        )
        .await;
    assert!(matches!(
        stale,
        Err(super::FleetError::LeaseLost { job_id, attempt: 2 }) if job_id == offer.job_id
    ));
}

fn side() -> abfleet_core::cell::SideMeasurement {
    abfleet_core::cell::SideMeasurement {
        status: abfleet_core::cell::SideStatus::Ok,
        times: vec![1.0; 3],
        cpu_times: vec![1.0; 3],
        warmup_times: vec![1.0],
        scores: Some(abfleet_core::scores::Scores::default()),
        returncode: Some(0),
        error: None,
        stderr_tail: None,
        command: None,
    }
}

fn cell(index: u32, seq: u64) -> StoredEvent {
    let spec = spec();
    let workloads = spec.workloads.len();
    let cell = abfleet_core::cell::CellResult::evaluate(
        abfleet_core::cell::CellInput {
            index,
            // An index past the spec's cells (a test of its refusal) keeps the last names.
            fixture: spec.fixtures[(index as usize / workloads).min(spec.fixtures.len() - 1)]
                .name
                .clone(),
            workload: spec.workloads[index as usize % workloads].name.clone(),
            upstream: side(),
            fork: side(),
            load_avg_1min: [0.0, 0.0],
            idle_cores: 1.0,
            host_flags: Vec::new(),
            seed: abfleet_core::paired::cell_seed(spec.measure.seed, index),
            run_order: Vec::new(),
            stop_reason: abfleet_core::paired::StopReason::MaxPairs,
            overhead_seconds: None,
        },
        &spec,
    );
    StoredEvent {
        seq,
        at_ms: 0,
        payload: JobEventPayload::Cell(Box::new(cell)),
    }
}

#[tokio::test]
async fn sequence_numbers_above_i64_max_are_refused_and_nothing_of_the_batch_is_stored() {
    let mut h = Harness::new(3).await;
    h.fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    let huge = 1u64 << 63;
    let pushed = h.push(&offer, vec![cell(0, 0), cell(1, huge)]).await;
    match pushed {
        Err(super::FleetError::InvalidEvent { seq, reason, .. }) => {
            assert_eq!(seq, huge);
            assert!(reason.contains("sequence number"), "{reason}");
        }
        other => panic!("expected InvalidEvent, got {other:?}"),
    }
    assert_eq!(h.cell_count(offer.job_id).await, 0);
    // The largest storable number passes the range check; after 0 it is a gap (events are
    // stored contiguously), which names what is missing.
    let pushed = h
        .push(&offer, vec![cell(0, 0), cell(1, i64::MAX as u64)])
        .await;
    assert!(
        matches!(pushed, Err(super::FleetError::MissingEvents { first: 1, last, .. }) if last == i64::MAX as u64 - 1),
        "{pushed:?}"
    );
}

#[tokio::test]
async fn a_job_over_its_event_limit_fails_with_the_limit_named_and_stores_nothing_more() {
    let mut h = Harness::with_config(CoordinatorConfig {
        lease: LEASE,
        max_events_per_job: 5,
        ..CoordinatorConfig::default()
    })
    .await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    let acked = h.push(&offer, vec![cell(0, 0), cell(1, 1)]).await.unwrap();
    assert_eq!(acked, vec![0, 1]);
    let logs = (2..6)
        .map(|seq| StoredEvent {
            seq,
            at_ms: 0,
            payload: JobEventPayload::Log {
                level: abfleet_core::events::LogLevel::Info,
                line: "chatty".into(),
            },
        })
        .collect();
    match h.push(&offer, logs).await {
        Err(super::FleetError::TooManyEvents { limit, .. }) => assert_eq!(limit, 5),
        other => panic!("expected TooManyEvents, got {other:?}"),
    }
    assert_eq!(h.job_state(run_id).await, JobState::Failed);
    let job = h.job(offer.job_id).await;
    assert!(
        job.error
            .as_deref()
            .unwrap_or_default()
            .contains("more than 5 events"),
        "{:?}",
        job.error
    );
    assert_eq!(
        h.fleet
            .store()
            .events()
            .count_events(offer.job_id)
            .await
            .unwrap(),
        2
    );
    assert_eq!(h.run_state(run_id).await.0, RunState::Failed);
}

#[tokio::test]
async fn a_cell_index_outside_the_spec_is_refused_naming_the_index_and_the_count() {
    let mut h = Harness::new(3).await;
    h.fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    let count = spec().cell_count();
    for index in [count as u32, 99_999] {
        let pushed = h.push(&offer, vec![cell(index, 0)]).await;
        match pushed {
            Err(super::FleetError::InvalidEvent { reason, .. }) => {
                assert!(reason.contains(&format!("cell index {index}")), "{reason}");
                assert!(reason.contains(&format!("{count} cell(s)")), "{reason}");
            }
            other => panic!("expected InvalidEvent, got {other:?}"),
        }
    }
    assert_eq!(h.cell_count(offer.job_id).await, 0);
    let last = count as u32 - 1;
    h.push(&offer, vec![cell(last, 0)]).await.unwrap();
}

#[tokio::test]
async fn events_and_heartbeats_for_another_agents_lease_are_refused() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    let intruder = AgentId::new_random();
    h.fleet.register(intruder, &inventory()).await.unwrap();
    let forged = StoredEvent {
        seq: 0,
        at_ms: 0,
        payload: JobEventPayload::Done {
            outcome: JobOutcome::Completed,
            error: None,
        },
    };
    let pushed = h
        .fleet
        .intake()
        .push_events(intruder, offer.job_id, offer.attempt, vec![forged])
        .await;
    assert!(
        matches!(pushed, Err(super::FleetError::NotLeaseHolder { agent_id, .. }) if agent_id == intruder),
        "{pushed:?}"
    );
    let beat = h
        .fleet
        .scheduling()
        .heartbeat(intruder, Some((offer.job_id, offer.attempt)))
        .await;
    assert!(
        matches!(beat, Err(super::FleetError::NotLeaseHolder { .. })),
        "{beat:?}"
    );
    assert_eq!(h.job_state(run_id).await, JobState::Leased);
    assert_eq!(
        h.fleet
            .store()
            .events()
            .event_count(offer.job_id, offer.attempt)
            .await
            .unwrap(),
        0
    );
    // The holder's own events still go in.
    assert_eq!(h.done(&offer, 0, JobOutcome::Completed).await, vec![0]);
}

#[tokio::test]
async fn dispatch_offers_to_the_agent_idle_the_longest_not_the_smallest_id() {
    let mut h = Harness::new(3).await;
    let other = loop {
        // An id below the harness agent's: the old rule would have offered to it.
        let id = AgentId::new_random();
        if id < h.agent {
            break id;
        }
    };
    h.fleet.register(other, &inventory()).await.unwrap();
    let (sender, mut other_session) = mpsc::unbounded_channel();
    h.fleet
        .scheduling()
        .open_session(other, sender, None)
        .unwrap();
    h.fleet.scheduling().ready(h.agent, None).await.unwrap();
    h.fleet.scheduling().ready(other, None).await.unwrap();
    // A repeated "ready" does not move an agent to the back, nor to the front.
    h.fleet.scheduling().ready(other, None).await.unwrap();
    h.fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    assert!(matches!(h.session.try_recv(), Ok(SessionMessage::Offer(_))));
    assert!(other_session.try_recv().is_err());
    h.fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    assert!(matches!(
        other_session.try_recv(),
        Ok(SessionMessage::Offer(_))
    ));
}

#[tokio::test]
async fn an_inventory_over_the_limit_is_refused_at_register() {
    let h = Harness::new(3).await;
    let mut huge = inventory();
    huge.cpu_model = "x".repeat(super::sessions::MAX_INVENTORY_BYTES);
    let agent = AgentId::new_random();
    let registered = h.fleet.register(agent, &huge).await;
    match registered {
        Err(super::FleetError::InventoryTooLarge { bytes, limit, .. }) => {
            assert!(bytes > limit);
        }
        other => panic!("expected InventoryTooLarge, got {other:?}"),
    }
    assert_eq!(
        h.fleet.scheduling().agents().await.unwrap().len(),
        1,
        "nothing stored"
    );
}

#[tokio::test]
async fn a_second_session_under_a_live_agents_id_is_refused_and_its_job_survives() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    for _ in 0..3 {
        let (sender, _intruder) = mpsc::unbounded_channel();
        let opened = h.fleet.scheduling().open_session(h.agent, sender, None);
        assert!(
            matches!(opened, Err(super::FleetError::AgentConnected(id)) if id == h.agent),
            "{opened:?}"
        );
    }
    assert_eq!(h.job_state(run_id).await, JobState::Leased);
    let job = h.job(offer.job_id).await;
    assert_eq!(job.attempt, 1, "never requeued");
    // The victim's session is still the one messages go to.
    h.fleet.runs().cancel(run_id, "by test").await.unwrap();
    assert!(matches!(
        h.session.try_recv(),
        Ok(SessionMessage::Cancel { .. })
    ));
}

#[tokio::test]
async fn a_session_silent_past_agent_lost_after_may_be_replaced_by_the_restarted_agent() {
    let h = Harness::new(3).await;
    h.clock.advance(Duration::from_secs(11));
    let (sender, _new) = mpsc::unbounded_channel();
    h.fleet
        .scheduling()
        .open_session(h.agent, sender, None)
        .unwrap();
}

#[tokio::test]
async fn a_draining_agent_keeps_its_job_and_is_offered_nothing_until_resumed() {
    let mut h = Harness::new(3).await;
    let first = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    assert_eq!(
        h.fleet.scheduling().drain(h.agent, false).await.unwrap(),
        AgentState::Draining
    );
    let second = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    h.done(&offer, 0, JobOutcome::Completed).await;
    assert_eq!(h.run_state(first).await.0, RunState::Done);
    h.fleet.scheduling().ready(h.agent, None).await.unwrap();
    h.no_message();
    assert_eq!(h.job_state(second).await, JobState::Queued);
    let states: Vec<AgentState> = h
        .fleet
        .scheduling()
        .agents()
        .await
        .unwrap()
        .into_iter()
        .map(|(_, state, _)| state)
        .collect();
    assert_eq!(states, vec![AgentState::Drained]);
    assert_eq!(
        h.fleet.scheduling().drain(h.agent, true).await.unwrap(),
        AgentState::Busy
    );
    match h.session.try_recv() {
        Ok(SessionMessage::Offer(next)) => assert_eq!(next.run_id, second),
        other => panic!("expected an offer, got {other:?}"),
    }
    let unknown = h
        .fleet
        .scheduling()
        .drain(AgentId::new_random(), false)
        .await;
    assert!(
        matches!(unknown, Err(super::FleetError::UnknownAgent(_))),
        "{unknown:?}"
    );
}

mod cell_audit;
mod event_gaps;
mod revocations;
mod served_reports;

/// Issue 23: a run whose finish never happened (the coordinator killed after the last job's
/// end was stored, or the finish failing on a full disk) stayed `running` for good. The
/// reaper's pass finishes it; a run still working is left alone.
#[tokio::test]
async fn a_run_whose_finish_was_lost_is_finished_by_the_reapers_pass() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    // What the crash leaves: the job ended, the run not.
    let db = rusqlite::Connection::open(h.fleet.store().path()).unwrap();
    db.execute(
        "UPDATE jobs SET state = 'done' WHERE job_id = ?1",
        [offer.job_id.to_string()],
    )
    .unwrap();
    drop(db);
    assert_eq!(h.run_state(run_id).await, (RunState::Running, None));
    let working = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();

    assert_eq!(h.fleet.finishing().finish_stranded_runs().await.unwrap(), 1);
    let (state, exit_code) = h.run_state(run_id).await;
    assert_eq!(state, RunState::Done);
    let report = h.fleet.reports().report(run_id).await.unwrap();
    assert_eq!(exit_code, Some(report.exit_code));
    assert_eq!(h.last_progress().exit_code, Some(report.exit_code));
    // Nothing left to finish; the queued run is not touched.
    assert_eq!(h.fleet.finishing().finish_stranded_runs().await.unwrap(), 0);
    assert_eq!(h.run_state(working).await.0, RunState::Queued);
}

/// Issue 38: an agent process killed mid-job and started again at once names the attempt it
/// left running; the coordinator offers that same attempt back (no attempt charged), at most
/// `MAX_RESUMES_PER_ATTEMPT` times — an agent that dies on a job every time pays for it.
#[tokio::test]
async fn a_restarted_agent_resumes_its_attempt_a_bounded_number_of_times() {
    let mut h = Harness::new(6).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    assert_eq!(offer.attempt, 1);
    let attempt = (offer.job_id, offer.attempt);
    for restart in 1..=super::sessions::MAX_RESUMES_PER_ATTEMPT {
        let resumed = if restart < super::sessions::MAX_RESUMES_PER_ATTEMPT {
            // Back within the grace: the lease is still the agent's.
            h.restart_resuming(attempt).await
        } else {
            // Back after the grace, the job requeued but taken by nobody: given back.
            h.break_past_the_grace().await;
            assert_eq!(h.job_state(run_id).await, JobState::Queued);
            h.ready_resuming(attempt).await
        };
        assert_eq!((resumed.job_id, resumed.attempt), attempt);
        assert_eq!(h.job(offer.job_id).await.state, JobState::Leased);
    }
    // One restart more is over the bound: it costs the attempt.
    let next = h.restart_resuming(attempt).await;
    assert_eq!((next.job_id, next.attempt), (offer.job_id, 2));
}
