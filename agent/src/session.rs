//! The agent's life: dial the coordinator, register, keep a session (heartbeats out, offers
//! and cancellations in), run one job at a time, and reconnect with jittered backoff whenever the
//! connection breaks. A running job survives reconnects: its events wait in the spool.

use std::future::Future;
use std::time::Duration;

use abfleet_core::events::{JobEventPayload, JobOutcome};
use abfleet_core::inventory::Inventory;
use abfleet_core::session::{AgentCacheUsage, AgentMessage, JobOffer, SessionMessage};
use abfleet_core::spec::JobSpec;
use abfleet_proto::agent_link::{
    AgentLink, LinkError, LinkErrorKind, Received, SessionReceiver, SessionSender,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::backoff::Backoff;
use crate::config::AgentConfig;
use crate::error::AgentError;
use crate::job::{run_job, JobContext};
use crate::sink::EventSink;
use crate::upload_gate::UploadGate;
use crate::{identity, spool};

/// What every job of this agent process shares: the uploaders' gate (a timed cell hushes
/// them all) and the cache (its budget, pins and measured size).
struct Shared {
    gate: UploadGate,
    cache: crate::cache::AgentCache,
}

struct RunningJob {
    job_id: String,
    attempt: u32,
    cancel: watch::Sender<bool>,
    /// Set when the agent stops with the job unfinished (`JobContext::handing_back`).
    handing_back: std::sync::Arc<std::sync::atomic::AtomicBool>,
    sink: EventSink,
    handle: JoinHandle<JobOutcome>,
}

/// Runs the agent until `shutdown` resolves. A job in flight is cancelled then.
pub async fn run_agent(
    mut config: AgentConfig,
    mut inventory: Inventory,
    shutdown: impl Future<Output = ()>,
) -> Result<(), AgentError> {
    let (_work_dir_lock, agent_id) = claim_work_dir(&mut config)?;
    let client =
        AgentLink::connect_lazy(&config.coordinator_url, config.tls.as_ref()).map_err(|err| {
            AgentError::Connect {
                url: config.coordinator_url.clone(),
                message: err.to_string(),
            }
        })?;
    let spool_dir = config.spool_dir();
    info!(agent_id = %agent_id, coordinator = %config.coordinator_url, work_dir = %config.work_dir.display(), "agent starting");
    // One for the whole agent: a timed cell hushes every uploader, a leftover spool's too.
    let gate = UploadGate::new();
    // The attempt this agent's last process left running goes on where it stopped, once the
    // events it spooled have all arrived (`running_marker`).
    let left_running = crate::running_marker::take(&config.work_dir);
    let drained = drain_leftover_spools(&spool_dir, &agent_id, &client, &gate).await;
    let mut resume = left_running.filter(|(job_id, attempt)| {
        drained
            .iter()
            .all(|(spooled, delivered)| *delivered || *spooled != (job_id.to_string(), *attempt))
    });
    if let Some((job_id, attempt)) = resume {
        info!(job_id = %job_id, attempt, "the last process of this agent left this attempt running: asking to resume it");
    }
    // The cache is measured (and brought under its budget) before the first job.
    let cache = crate::cache::AgentCache::new(&config.work_dir, config.max_cache_bytes);
    cache.pass_blocking().await;
    let shared = Shared { gate, cache };

    let mut running: Option<RunningJob> = None;
    // Jittered, so a fleet whose coordinator restarts does not come back in lockstep.
    let mut backoff = Backoff::new(Duration::from_millis(100), config.max_backoff);
    tokio::pin!(shutdown);
    loop {
        let session = tokio::select! {
            session = open_session(&client, &agent_id, &inventory, running.as_ref(), &shared.cache, resume) => session,
            _ = &mut shutdown => break,
        };
        let (outgoing, mut incoming, heartbeat_interval) = match session {
            Ok(parts) => {
                backoff.reset();
                resume = None;
                parts
            }
            Err(status) if is_refused_certificate(&status) => {
                refused_certificate(&agent_id, &status, &mut running).await;
                tokio::select! {
                    _ = tokio::time::sleep(config.max_backoff) => {}
                    _ = &mut shutdown => break,
                }
                continue;
            }
            Err(status) => {
                warn!(agent_id = %agent_id, %status, "cannot reach the coordinator; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(backoff.next_delay()) => {}
                    _ = &mut shutdown => break,
                }
                continue;
            }
        };
        info!(agent_id = %agent_id, "session open");
        let mut beat = tokio::time::interval(heartbeat_interval);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut reprobe = tokio::time::interval_at(
            tokio::time::Instant::now() + config.reprobe_interval,
            config.reprobe_interval,
        );
        reprobe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = &mut shutdown => {
                    hand_back(&mut running, outgoing, &mut incoming).await;
                    return Ok(());
                }
                _ = beat.tick() => {
                    if outgoing.send(heartbeat(running.as_ref(), &shared.cache)).await.is_err() {
                        break;
                    }
                }
                message = incoming.next() => match message {
                    Ok(Some(message)) => {
                        handle_message(message, &config, &agent_id, &inventory, &client, &shared, &mut running);
                    }
                    Ok(None) => { warn!("coordinator closed the session"); break; }
                    Err(status) if status.kind() == LinkErrorKind::FailedPrecondition => {
                        // The coordinator does not know this agent (its store was replaced):
                        // the next session registers again, before anything else.
                        warn!(agent_id = %agent_id, reason = %status.message(), "the coordinator ended the session; registering again");
                        break;
                    }
                    Err(status) if is_refused_certificate(&status) => {
                        refused_certificate(&agent_id, &status, &mut running).await;
                        break;
                    }
                    Err(status) => { warn!(%status, "session broke"); break; }
                },
                _ = reprobe.tick(), if running.is_none() && config.inventory_source.is_some() => {
                    if let Some(fresh) = reread_inventory(&config, &inventory).await {
                        info!(agent_id = %agent_id, "the inventory changed; registering again");
                        inventory = fresh;
                        if let Err(status) = register(&client, &agent_id, &inventory).await {
                            warn!(%status, "re-registering failed; the next session sends it");
                        }
                    }
                }
                outcome = wait_for(&mut running), if running.is_some() => {
                    let job = running.take().expect("guarded by is_some");
                    crate::running_marker::clear(&config.work_dir);
                    info!(job_id = %job.job_id, ?outcome, "ready for the next job");
                    if outgoing.send(AgentMessage::Ready { resume: None }).await.is_err() {
                        break;
                    }
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff.next_delay()) => {}
            _ = &mut shutdown => break,
        }
    }
    stop_running(&mut running).await;
    Ok(())
}

/// Makes the work dir absolute (builds and timed runs change directory; every path the
/// agent hands out is absolute), locks it for this agent until the lock is dropped, reads or
/// makes the agent's id, and kills what children of an earlier agent on it left running.
fn claim_work_dir(
    config: &mut AgentConfig,
) -> Result<(crate::work_dir_lock::WorkDirLock, String), AgentError> {
    config.work_dir = std::path::absolute(&config.work_dir).map_err(|source| AgentError::Io {
        what: format!("resolve the work directory `{}`", config.work_dir.display()),
        source,
    })?;
    // Held until the agent returns: a second agent on this work dir stops here, before it
    // reads the id, the spool or the list of running children.
    let lock = crate::work_dir_lock::WorkDirLock::acquire(&config.work_dir)?;
    let agent_id = identity::load_or_create(&config.work_dir)?.to_string();
    // What children of an earlier agent on this work dir left running (it was killed) must
    // not compete with the timed runs to come.
    match crate::runner::kill_leftovers(&config.work_dir) {
        Ok(killed) if !killed.is_empty() => {
            warn!(work_dir = %config.work_dir.display(), ?killed, "killed processes an earlier agent on this work dir left running");
        }
        Ok(_) => {}
        Err(err) => {
            return Err(AgentError::Io {
                what: format!(
                    "look for processes left running in `{}`",
                    config.work_dir.display()
                ),
                source: err,
            })
        }
    }
    Ok((lock, agent_id))
}

/// The coordinator refuses this agent's certificate (revoked, or no longer trusted): no
/// retry soon will change that.
fn is_refused_certificate(status: &LinkError) -> bool {
    status.kind() == LinkErrorKind::Unauthenticated
}

/// Says so loudly and stops the job it runs: nothing it measures would be accepted. The agent
/// keeps trying at its longest backoff (a coordinator restored from before a revocation, or
/// a CA put back, lets it in again); a new certificate needs a restart to be read.
async fn refused_certificate(agent_id: &str, status: &LinkError, running: &mut Option<RunningJob>) {
    tracing::error!(
        agent_id,
        reason = status.message(),
        "the coordinator refuses this agent's certificate; install a new one (`abfleet certs issue --role agent`) and restart the agent"
    );
    stop_running(running).await;
}

/// The inventory read again from its source, when it differs from `current`.
async fn reread_inventory(config: &AgentConfig, current: &Inventory) -> Option<Inventory> {
    let source = config.inventory_source.clone()?;
    let fresh = tokio::task::spawn_blocking(move || source.read())
        .await
        .ok()?;
    match fresh {
        Ok(fresh) if &fresh != current => Some(fresh),
        Ok(_) => None,
        Err(err) => {
            warn!(%err, "cannot read the inventory again; keeping the registered one");
            None
        }
    }
}

async fn register(
    client: &AgentLink,
    agent_id: &str,
    inventory: &Inventory,
) -> Result<abfleet_proto::agent_link::Registration, LinkError> {
    client
        .register(agent_id, inventory, env!("CARGO_PKG_VERSION"))
        .await
}

async fn open_session(
    client: &AgentLink,
    agent_id: &str,
    inventory: &Inventory,
    running: Option<&RunningJob>,
    cache: &crate::cache::AgentCache,
    resume: Option<(abfleet_core::JobId, u32)>,
) -> Result<(SessionSender, SessionReceiver, Duration), LinkError> {
    let registered = register(client, agent_id, inventory).await?;
    // The first message names the agent; an idle agent also asks for work at once (for the
    // attempt it can resume first).
    let mut first = vec![heartbeat(running, cache)];
    if running.is_none() {
        first.push(AgentMessage::Ready { resume });
    }
    let (outgoing, incoming) = client.open_session(agent_id, first).await?;
    Ok((outgoing, incoming, registered.heartbeat_interval))
}

/// A heartbeat: the running job, and the cache's size at its last pass and its budget.
fn heartbeat(running: Option<&RunningJob>, cache: &crate::cache::AgentCache) -> AgentMessage {
    // A job id that does not parse was refused when the job was offered (`check_job_id`):
    // what runs always has one.
    let running = running.and_then(|job| Some((job.job_id.parse().ok()?, job.attempt)));
    AgentMessage::Heartbeat {
        running,
        cache: AgentCacheUsage {
            bytes: cache.measured_bytes(),
            max_bytes: cache.max_bytes(),
        },
    }
}

async fn wait_for(running: &mut Option<RunningJob>) -> JobOutcome {
    match running {
        Some(job) => (&mut job.handle).await.unwrap_or(JobOutcome::Failed),
        None => std::future::pending().await,
    }
}

/// The agent is stopping with its session open: the job it runs is stopped, what it
/// measured uploaded, and the coordinator told the job is handed back (`Leaving`), so that
/// another agent takes it at once instead of after `agent_lost_after`. Waits briefly for the
/// coordinator to close the session, so the message is not lost with the process.
async fn hand_back(
    running: &mut Option<RunningJob>,
    outgoing: SessionSender,
    incoming: &mut SessionReceiver,
) {
    let Some(job) = running.take() else {
        return;
    };
    info!(job_id = %job.job_id, attempt = job.attempt, "stopping the running job and handing it back");
    job.handing_back
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (job_id, attempt) = job.stop().await;
    let Ok(typed_id) = job_id.parse() else {
        return;
    };
    let leaving = AgentMessage::Leaving {
        job_id: typed_id,
        attempt,
    };
    if outgoing.send(leaving).await.is_err() {
        return;
    }
    drop(outgoing);
    let closed = async { while let Ok(Some(_)) = incoming.next().await {} };
    if tokio::time::timeout(Duration::from_secs(3), closed)
        .await
        .is_err()
    {
        warn!(job_id = %job_id, "the coordinator did not close the session; it requeues the job after agent_lost_after");
    }
}

async fn stop_running(running: &mut Option<RunningJob>) {
    if let Some(job) = running.take() {
        info!(job_id = %job.job_id, "stopping the running job");
        job.stop().await;
    }
}

impl RunningJob {
    /// Cancels the job and waits for it to end (15 s at most); its id and attempt.
    async fn stop(self) -> (String, u32) {
        let RunningJob {
            job_id,
            attempt,
            cancel,
            handle,
            ..
        } = self;
        let _ = cancel.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(15), handle).await;
        (job_id, attempt)
    }
}

/// An offer as the agent starts it: read, or not (then it is refused through its events).
struct Offered {
    job_id: String,
    run_id: String,
    attempt: u32,
    next_seq: u64,
    /// The generation key; empty when the spec names no targets.
    generation: String,
    kept_cells: Vec<u32>,
    /// The spec, or why the agent cannot read the offer (it refuses it through its events).
    spec: Result<JobSpec, String>,
}

impl Offered {
    fn read(offer: JobOffer) -> Offered {
        Offered {
            job_id: offer.job_id.to_string(),
            run_id: offer.run_id.to_string(),
            attempt: offer.attempt,
            next_seq: offer.next_seq,
            generation: offer.generation.unwrap_or_default(),
            kept_cells: offer.kept_cells.into_iter().collect(),
            spec: Ok(offer.spec),
        }
    }
}

fn handle_message(
    message: Received,
    config: &AgentConfig,
    agent_id: &str,
    inventory: &Inventory,
    client: &AgentLink,
    shared: &Shared,
    running: &mut Option<RunningJob>,
) {
    let offered = match message {
        Received::Message(SessionMessage::Offer(offer)) => Offered::read(*offer),
        Received::UnreadableOffer {
            job_id,
            run_id,
            attempt,
            next_seq,
            error,
        } => Offered {
            job_id,
            run_id,
            attempt,
            next_seq,
            generation: String::new(),
            kept_cells: Vec::new(),
            spec: Err(error),
        },
        Received::Message(SessionMessage::Cancel { job_id, reason }) => {
            let job_id = job_id.to_string();
            if let Some(job) = running.as_ref().filter(|j| j.job_id == job_id) {
                info!(job_id = %job.job_id, reason = %reason, "job cancelled by the coordinator");
                let _ = job.cancel.send(true);
            }
            return;
        }
        Received::Message(SessionMessage::LeaseLost { job_id, attempt }) => {
            let job_id = job_id.to_string();
            if let Some(job) = running
                .as_ref()
                .filter(|j| j.job_id == job_id && j.attempt == attempt)
            {
                warn!(job_id = %job.job_id, attempt = job.attempt, "lease lost; stopping the job");
                job.sink.mark_lost("the lease expired");
                let _ = job.cancel.send(true);
            }
            return;
        }
        Received::Unreadable { error } => {
            warn!(%error, "ignoring a message from the coordinator that names no job of this agent");
            return;
        }
    };
    if let Some(job) = running {
        warn!(offered = %offered.job_id, running = %job.job_id, "offer while busy; ignoring it (its lease will expire)");
        return;
    }
    let spool_dir = config.spool_dir();
    match start_job(
        offered, config, agent_id, inventory, client, &spool_dir, shared,
    ) {
        Ok(job) => *running = Some(job),
        Err(err) => warn!(error = %err, "cannot start the offered job"),
    }
}

fn start_job(
    offer: Offered,
    config: &AgentConfig,
    agent_id: &str,
    inventory: &Inventory,
    client: &AgentLink,
    spool_dir: &std::path::Path,
    shared: &Shared,
) -> Result<RunningJob, AgentError> {
    let Offered {
        job_id,
        run_id,
        attempt,
        next_seq,
        generation,
        kept_cells,
        spec,
    } = offer;
    // The job id names the spool file and the job's directories: checked before either exists.
    crate::input_checks::check_job_id(&job_id).map_err(AgentError::BadOffer)?;
    let sink = EventSink::open(
        spool_dir,
        agent_id,
        &job_id,
        attempt,
        next_seq,
        shared.gate.clone(),
    )
    .map_err(|source| AgentError::Io {
        what: format!("open the spool in `{}`", spool_dir.display()),
        source,
    })?;
    tokio::spawn(sink.clone().upload(client.clone()));
    if let Err(err) = crate::running_marker::write(&config.work_dir, &job_id, attempt) {
        warn!(job_id = %job_id, error = %err, "cannot note the running attempt; a restart will not resume it");
    }
    let (cancel, cancel_rx) = watch::channel(false);
    let handing_back = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    info!(job_id = %job_id, attempt, run_id = %run_id, "job accepted");
    // An offer the agent cannot read carries its refusal (`Received::UnreadableOffer`).
    let checked = spec.and_then(|spec| check_offer(&job_id, &generation, config, spec));
    let handle = match checked {
        // Children of the job carry the work dir's marker and are listed in it (runner).
        Ok(spec) => tokio::spawn(crate::runner::CHILD_OWNER.scope(
            config.work_dir.clone(),
            run_job(JobContext {
                job_id: job_id.clone(),
                attempt,
                spec,
                work_dir: config.work_dir.clone(),
                host: inventory.clone(),
                generation,
                kept_cells: kept_cells.into_iter().collect(),
                sink: sink.clone(),
                cancel: cancel_rx,
                handing_back: handing_back.clone(),
                cache: shared.cache.for_job(),
                emulation: config.emulation.clone(),
            }),
        )),
        Err(error) => {
            warn!(job_id = %job_id, %error, "refusing the offered job");
            tokio::spawn(refuse(sink.clone(), error))
        }
    };
    Ok(RunningJob {
        job_id,
        attempt,
        cancel,
        handing_back,
        sink,
        handle,
    })
}

/// The agent's own checks on an offer, before anything is fetched or run: the input checks
/// that always hold, then the policy, when there is one.
fn check_offer(
    job_id: &str,
    generation: &str,
    config: &AgentConfig,
    spec: JobSpec,
) -> Result<JobSpec, String> {
    crate::input_checks::check_job_inputs(job_id, generation, &spec)
        .map_err(|err| format!("the agent refuses the job: {err}"))?;
    if let Some(policy) = &config.policy {
        policy
            .check(&spec, generation)
            .map_err(|refusal| refusal.to_string())?;
    }
    Ok(spec)
}

/// A job refused before it started: its reason as an error line and as the `done` event's
/// error; nothing was fetched, built or run.
async fn refuse(sink: EventSink, error: String) -> JobOutcome {
    let _ = sink.emit(&JobEventPayload::Log {
        level: abfleet_core::events::LogLevel::Error,
        line: error.clone(),
    });
    let _ = sink.emit(&JobEventPayload::Done {
        outcome: JobOutcome::Failed,
        error: Some(error),
    });
    let _ = sink.flush().await;
    sink.close();
    JobOutcome::Failed
}

/// How long a starting agent waits for the events an earlier process left to arrive, before
/// it asks for work: an attempt whose events all arrived is one it may resume.
const RESUME_DRAIN_WAIT: Duration = Duration::from_secs(5);

/// Sends what an earlier agent process left in the spool; the coordinator keeps what still
/// belongs to a live lease and refuses the rest, which is then dropped. Waits up to
/// [`RESUME_DRAIN_WAIT`] for them (the rest goes on sending): each leftover (job, attempt)
/// and whether all its events were delivered — an attempt may be resumed only then.
async fn drain_leftover_spools(
    spool_dir: &std::path::Path,
    agent_id: &str,
    client: &AgentLink,
    gate: &UploadGate,
) -> Vec<((String, u32), bool)> {
    let mut drains = Vec::new();
    for (_, job_id, attempt) in spool::leftovers(spool_dir) {
        match EventSink::open(spool_dir, agent_id, &job_id, attempt, 0, gate.clone()) {
            Ok(sink) => {
                info!(job_id = %job_id, attempt, "re-sending events left by an earlier agent process");
                sink.close();
                let upload = tokio::spawn(sink.clone().upload(client.clone()));
                drains.push((job_id, attempt, sink, upload));
            }
            Err(err) => warn!(job_id = %job_id, error = %err, "cannot read a leftover spool"),
        }
    }
    let deadline = tokio::time::Instant::now() + RESUME_DRAIN_WAIT;
    let mut drained = Vec::new();
    for (job_id, attempt, sink, upload) in drains {
        let delivered =
            tokio::time::timeout_at(deadline, upload).await.is_ok() && sink.delivered_all();
        drained.push(((job_id, attempt), delivered));
    }
    drained
}
