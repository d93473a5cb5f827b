//! `abfleet coordinator` and `abfleet agent`: long-running services until Ctrl-C.

use std::net::SocketAddr;
use std::time::Duration;

use abfleet_agent::policy::AgentPolicy;
use abfleet_agent::{run_agent, AgentConfig, AgentError};
use abfleet_coordinator::{serve, Coordinator, CoordinatorConfig, ServerTransport};

use crate::cli::{AgentCommand, CoordinatorCommand};
use crate::config::{AgentSettings, CoordinatorSettings};
use crate::failure::{Classify, Failure};

/// `abfleet coordinator`, flags and config file together (`config::apply` filled in what
/// the flags did not give): serves until a stop signal.
pub async fn coordinator(args: CoordinatorCommand) -> Result<i32, Failure> {
    let settings = CoordinatorSettings::from(&args);
    refuse_unless_coherent(&settings)?;
    let notify = crate::config::notify_of(args.config.as_deref()).usage()?;
    let github =
        crate::config::github_of(args.config.as_deref(), settings.milestone_spec.as_deref())
            .usage()?;
    let CoordinatorSettings {
        listen,
        data_dir,
        lease_seconds,
        heartbeat_seconds,
        max_attempts,
        plaintext,
        http,
        web,
        milestone_spec,
        retune_spec,
        sweep_spec,
        webhook_secret_file,
        debounce_seconds,
        watch_upstream_interval,
        perf_label,
        toolchain_bots,
        tls_cert,
        tls_key,
        tls_ca,
    } = settings;
    let data_dir = data_dir.as_path();
    let stop = stop_signal("coordinator");
    let tls_files = abfleet_proto::transport::TlsFiles::from_paths(
        tls_cert.as_deref(),
        tls_key.as_deref(),
        tls_ca.as_deref(),
    )
    .usage()?;
    let transport = transport_of(tls_files.clone(), plaintext, listen)?;
    let secure = matches!(transport, ServerTransport::MutualTls(_));
    let watch_interval = watch_upstream_interval.map(Duration::from_secs_f64);
    let webhook = match &webhook_secret_file {
        Some(path) => Some(
            abfleet_coordinator::webhook::WebhookConfig::load(path)
                .map_err(|err| anyhow::anyhow!(err))
                .usage()?
                .with_perf_label(perf_label.trim())
                .with_toolchain_bots(&toolchain_bots),
        ),
        None => None,
    };
    warn_about_specs(milestone_spec.as_deref(), sweep_spec.as_deref());
    let config = CoordinatorConfig {
        lease: Duration::from_secs_f64(lease_seconds),
        heartbeat_interval: Duration::from_secs_f64(heartbeat_seconds),
        max_attempts,
        agent_lost_after: Duration::from_secs_f64(heartbeat_seconds * 5.0),
        milestone_spec,
        retune_spec,
        sweep_spec,
        trigger_debounce: Duration::from_secs_f64(debounce_seconds),
        notify,
        github,
        ..CoordinatorConfig::default()
    };
    let coordinator = Coordinator::open(data_dir, config).infra()?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|err| anyhow::anyhow!("failed to listen on {listen}: {err}; is the port in use?"))
        .usage()?;
    eprintln!(
        "abfleet coordinator listening on {listen} ({}), store in {}",
        if secure {
            "mutual TLS"
        } else {
            "plaintext, loopback only: every local process may submit jobs and act as an agent"
        },
        data_dir.display()
    );
    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let http_task = match http {
        Some(addr) => Some(
            start_http(&coordinator, addr, secure, webhook, async {
                let _ = http_stopped.await;
            })
            .await?,
        ),
        None => None,
    };
    let (stop_web, web_stopped) = tokio::sync::oneshot::channel::<()>();
    let web_task = match web {
        Some(addr) => Some(
            start_web(&coordinator, addr, tls_files.as_ref(), async {
                let _ = web_stopped.await;
            })
            .await?,
        ),
        None => None,
    };
    let (stop_watcher, watcher_stopped) = tokio::sync::oneshot::channel::<()>();
    let watcher_task = watch_interval.map(|interval| {
        start_watcher(&coordinator, interval, async {
            let _ = watcher_stopped.await;
        })
    });
    let result = serve(coordinator, listener, transport, stop).await;
    let _ = stop_http.send(());
    let _ = stop_web.send(());
    let _ = stop_watcher.send(());
    if let Some(task) = http_task {
        let _ = task.await;
    }
    if let Some(task) = watcher_task {
        let _ = task.await;
    }
    if let Some(task) = web_task {
        let _ = task.await;
    }
    result.infra()?;
    Ok(0)
}

/// `config check`'s rules: what it calls a problem, the coordinator refuses to start with.
fn refuse_unless_coherent(settings: &CoordinatorSettings) -> Result<(), Failure> {
    let refusals = settings.refusals();
    if refusals.is_empty() {
        return Ok(());
    }
    Err(Failure::usage(anyhow::anyhow!(
        "the coordinator's settings do not work together (`abfleet config check FILE` checks a config file): {}",
        refusals.join("; ")
    )))
}

/// The gRPC listener's transport: mutual TLS with the three files, or plaintext on a
/// loopback `--listen` only.
fn transport_of(
    tls_files: Option<abfleet_proto::transport::TlsFiles>,
    plaintext: bool,
    listen: SocketAddr,
) -> Result<ServerTransport, Failure> {
    Ok(match (tls_files, plaintext) {
        (Some(files), _) => ServerTransport::MutualTls(files),
        (None, true) => {
            abfleet_proto::transport::check_plaintext_listen(listen)
                .usage()?;
            ServerTransport::LoopbackPlaintext
        }
        (None, false) => {
            return Err(Failure::usage(anyhow::anyhow!(
                "the coordinator needs --tls-cert, --tls-key and --tls-ca (mutual TLS; make them with `abfleet certs init` and `abfleet certs issue --role coordinator --name NAME`), or --plaintext on a loopback --listen"
            )))
        }
    })
}

/// `--watch-upstream-interval`: polls the milestone spec's upstream for new tags.
fn start_watcher(
    coordinator: &Coordinator,
    interval: Duration,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    eprintln!("abfleet coordinator watching the milestone spec's upstream every {interval:?}");
    tokio::spawn(abfleet_coordinator::watcher::watch_upstream(
        coordinator.fleet.clone(),
        interval,
        shutdown,
    ))
}

/// `--http ADDR`: `/metrics`, `/healthz`, `POST /hooks/github` when webhooks are on, and
/// the web view where it needs no authentication (plaintext on loopback).
async fn start_http(
    coordinator: &Coordinator,
    addr: SocketAddr,
    secure: bool,
    webhook: Option<abfleet_coordinator::webhook::WebhookConfig>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<tokio::task::JoinHandle<Result<(), abfleet_coordinator::CoordinatorError>>, Failure> {
    let http_listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|err| {
            anyhow::anyhow!("failed to listen on {addr} (--http): {err}; is the port in use?")
        })
        .usage()?;
    // The web view rides on --http only where it needs no authentication.
    let web_here = !secure && addr.ip().is_loopback();
    eprintln!(
        "abfleet coordinator serving /metrics and /healthz{}{} on http://{addr}",
        if webhook.is_some() {
            ", POST /hooks/github"
        } else {
            ""
        },
        if web_here {
            " and the web view with /api (loopback only, no authentication)"
        } else {
            ""
        }
    );
    if !web_here {
        eprintln!(
            "abfleet coordinator: no web view on http://{addr} ({}); serve it with --web ADDR",
            if secure {
                "the coordinator has TLS, and the web view is then HTTPS with operator or viewer certificates"
            } else {
                "it is not loopback, and a plaintext web view has no authentication"
            }
        );
    }
    Ok(tokio::spawn(abfleet_coordinator::http::serve_http_with(
        coordinator.fleet.clone(),
        http_listener,
        abfleet_coordinator::http::HttpConfig {
            webhook,
            web: web_here,
            limits: Default::default(),
        },
        shutdown,
    )))
}

/// The milestone and sweep specs are read again at each trigger: one that does not load (or
/// a sweep spec that is no sweep) is worth a warning at start, not a refusal.
fn warn_about_specs(
    milestone_spec: Option<&std::path::Path>,
    sweep_spec: Option<&std::path::Path>,
) {
    if let Some(path) = milestone_spec {
        // Read again at each trigger; a broken file is worth knowing about now.
        if let Err(err) = abfleet_core::spec::JobSpec::load(path) {
            eprintln!(
                "warning: the milestone spec {} does not load yet ({err:#}); triggers without a spec fail until it does",
                path.display()
            );
        }
    }
    if let Some(path) = sweep_spec {
        match abfleet_core::spec::JobSpec::load(path) {
            Err(err) => eprintln!(
                "warning: the sweep spec {} does not load yet ({err:#}); toolchain bumps fail to start it until it does",
                path.display()
            ),
            Ok(spec) if !spec.is_sweep() => eprintln!(
                "warning: the sweep spec {} has no [sweep] table; toolchain bumps fail to start it (docs/sweeps.md)",
                path.display()
            ),
            Ok(_) => {}
        }
    }
}

/// `--web ADDR`: HTTPS with client certificates under TLS, loopback plaintext otherwise.
async fn start_web(
    coordinator: &Coordinator,
    addr: SocketAddr,
    tls: Option<&abfleet_proto::transport::TlsFiles>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<tokio::task::JoinHandle<Result<(), abfleet_coordinator::CoordinatorError>>, Failure> {
    if tls.is_none() {
        abfleet_proto::transport::check_plaintext_listen(addr)
            .map_err(|_| {
                anyhow::anyhow!(
                    "--web {addr} is not loopback, and a plaintext coordinator's web view has no authentication; bind it to 127.0.0.1, or give the coordinator --tls-cert, --tls-key and --tls-ca (the web view is then HTTPS for operator and viewer certificates)"
                )
            })
            .usage()?;
    }
    let web_tls = match tls {
        Some(files) => Some(
            abfleet_coordinator::web::tls::WebTls::new(files)
                .map_err(|err| anyhow::anyhow!(err))
                .usage()?,
        ),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|err| {
            anyhow::anyhow!("failed to listen on {addr} (--web): {err}; is the port in use?")
        })
        .usage()?;
    let fleet = coordinator.fleet.clone();
    Ok(match web_tls {
        Some(web_tls) => {
            eprintln!(
                "abfleet coordinator serving the web view and /api on https://{addr} (mutual TLS: operator or viewer certificates of the fleet CA only)"
            );
            tokio::spawn(abfleet_coordinator::web::tls::serve_web_tls(
                fleet, listener, web_tls, shutdown,
            ))
        }
        None => {
            eprintln!(
                "abfleet coordinator serving the web view and /api on http://{addr} (loopback only, no authentication)"
            );
            tokio::spawn(abfleet_coordinator::web::serve_web_plaintext(
                fleet, listener, shutdown,
            ))
        }
    })
}

/// `abfleet agent`, flags and config file together: dials the coordinator and takes jobs
/// until a stop signal.
pub async fn agent(args: AgentCommand) -> Result<i32, Failure> {
    let stop = stop_signal("agent");
    let settings = AgentSettings::from(&args);
    let (findings, start) = settings.checked();
    let Some(start) = start else {
        return Err(Failure::usage(anyhow::anyhow!(
            "the agent cannot start with these settings (`abfleet config check FILE` checks a config file): {}",
            findings.problems.join("; ")
        )));
    };
    let AgentSettings {
        coordinator,
        work_dir,
        probes,
        max_cache_bytes,
        ..
    } = settings;
    let coordinator = coordinator.as_str();
    let mut config = AgentConfig::new(coordinator, &work_dir);
    config.tls = start.tls;
    config.max_cache_bytes = max_cache_bytes;
    let policy = match start.policy {
        Some(policy) => Some(policy),
        None => AgentPolicy::load_default().usage()?,
    };
    match &policy {
        Some(policy) => eprintln!(
            "abfleet agent policy {}: {} source pattern(s), {} program pattern(s)",
            policy.origin.display(),
            policy.allowed_sources.len(),
            policy.allowed_build_programs.len()
        ),
        None => eprintln!(
            "abfleet agent has no policy (--policy FILE, or {}): it trusts the coordinator fully, and whoever can submit a job can run programs on this host",
            abfleet_agent::policy::DEFAULT_POLICY_PATH
        ),
    }
    config.policy = policy.map(std::sync::Arc::new);
    if let Some(file) = &args.emulate {
        let emulation = abfleet_agent::emulation::Emulation::load(file)
            .map_err(|err| anyhow::anyhow!(err))
            .usage()?;
        eprintln!(
            "abfleet agent emulates {} with {}: cells gate parity and are not timed",
            emulation.arch, emulation.description
        );
        config.emulation = Some(std::sync::Arc::new(emulation));
    }
    let source = match probes {
        Some(dir) => abfleet_agent::config::InventorySource::Recorded(dir),
        None if config.emulation.is_some() => abfleet_agent::config::InventorySource::Emulated(
            config.emulation.clone().expect("checked"),
        ),
        None if !args.gpu_probes.is_empty() => {
            abfleet_agent::config::InventorySource::LiveWithRecordedGpus(args.gpu_probes)
        }
        None => abfleet_agent::config::InventorySource::Live,
    };
    config.inventory_source = Some(source.clone());
    // The probes run external tools (nvidia-smi, rocminfo, …): off the async runtime.
    let inventory = tokio::task::spawn_blocking(move || source.read())
        .await
        .map_err(|err| anyhow::anyhow!("the probe task failed: {err}"))
        .infra()?
        .usage()?;
    let keys: Vec<&str> = inventory
        .generations
        .iter()
        .map(|g| g.key.as_str())
        .collect();
    eprintln!(
        "abfleet agent dialing {coordinator}, work dir {}, generations {}, cache budget {}",
        work_dir.display(),
        keys.join(", "),
        max_cache_bytes.map_or("none (--max-cache-bytes)".to_string(), |bytes| {
            abfleet_agent::cache::show_bytes(bytes)
        })
    );
    run_agent(config, inventory, stop)
        .await
        .map_err(|err| match err {
            // A configuration mistake (two agents on one --work-dir), not the infrastructure.
            AgentError::WorkDirLocked { .. } => Failure::usage(err),
            other => Failure::infra(other),
        })?;
    Ok(0)
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM — what systemd, Kubernetes and `docker stop`
/// send — whichever comes first: both stop a daemon the same clean way. The handlers are
/// installed when this is called, not when the future is first polled: a daemon stopped while
/// it starts up (the agent probing its hardware, the coordinator opening its store) stops
/// cleanly once started instead of dying by the signal (found by cli/tests/deb_package.rs: an
/// agent restarted by the package's upgrade and stopped at once was killed by SIGINT).
fn stop_signal(daemon: &'static str) -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, Signal, SignalKind};
    let interrupt = signal(SignalKind::interrupt());
    let terminate = signal(SignalKind::terminate());
    async move {
        // Without a handler for one of them, only the other stops it cleanly.
        async fn received(handler: std::io::Result<Signal>) {
            match handler {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        }
        let name = tokio::select! {
            () = received(interrupt) => "SIGINT",
            () = received(terminate) => "SIGTERM",
        };
        eprintln!("abfleet {daemon}: {name}, stopping");
    }
}
