//! Test support: real git repositories of the demo subject, specs pointing at them, an
//! in-process fleet (coordinator and agents on 127.0.0.1:0 with temp dirs), a TCP proxy that
//! can cut connections, and `wait_until` instead of sleeps.
#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abfleet_agent::{inventory, run_agent, AgentConfig};
use abfleet_coordinator::{serve, Coordinator, CoordinatorConfig, ServerTransport};
use abfleet_core::report::Report;
use abfleet_proto::pb;
use abfleet_proto::pb::control_service_client::ControlServiceClient;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tonic::transport::Channel;

pub fn subject_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/subject")
}

/// `git -C dir args…` with a fixed author, which must succeed; its stdout, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "abfleet test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "abfleet test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// An "upstream" repository (the subject, tagged v1.0.0) and a "fork" cloned from it with
/// one commit on top that makes the fork variant the default.
pub struct Repos {
    pub upstream: PathBuf,
    pub fork: PathBuf,
    pub upstream_tag_commit: String,
    pub fork_commit: String,
}

pub fn make_repos(root: &Path) -> Repos {
    let upstream = root.join("upstream.git-src");
    copy_tree(&subject_dir(), &upstream);
    git(&upstream, &["init", "-q", "-b", "main"]);
    git(&upstream, &["add", "."]);
    git(&upstream, &["commit", "-q", "-m", "upstream v1.0.0"]);
    git(&upstream, &["tag", "v1.0.0"]);
    let upstream_tag_commit = git(&upstream, &["rev-parse", "v1.0.0^{commit}"]);
    // Upstream moves on after the tag; the spec pins the tag.
    std::fs::write(upstream.join("NEWS"), "after the tag\n").unwrap();
    git(&upstream, &["add", "NEWS"]);
    git(&upstream, &["commit", "-q", "-m", "post-release work"]);

    let fork = root.join("fork.git-src");
    let status = Command::new("git")
        .args(["clone", "-q"])
        .arg(&upstream)
        .arg(&fork)
        .status()
        .unwrap();
    assert!(status.success());
    git(&fork, &["checkout", "-q", "v1.0.0"]);
    git(&fork, &["checkout", "-q", "-b", "perf"]);
    let makefile = std::fs::read_to_string(fork.join("Makefile")).unwrap();
    std::fs::write(
        fork.join("Makefile"),
        makefile.replace("VARIANT ?= upstream", "VARIANT ?= fork"),
    )
    .unwrap();
    git(
        &fork,
        &["commit", "-q", "-am", "fork: build the fork variant"],
    );
    let fork_commit = git(&fork, &["rev-parse", "HEAD"]);
    Repos {
        upstream,
        fork,
        upstream_tag_commit,
        fork_commit,
    }
}

/// Eight commits on the fork after `fork_commit`, the fifth making psnr much slower (the
/// subject repeats it 3000 times), the others touching notes only: what a bisect must find.
/// Their hashes, oldest first.
pub fn commit_a_slowdown_fifth_of_eight(repos: &Repos) -> Vec<String> {
    let mut commits = Vec::new();
    for i in 1..=8 {
        if i == 5 {
            let makefile = std::fs::read_to_string(repos.fork.join("Makefile")).unwrap();
            std::fs::write(
                repos.fork.join("Makefile"),
                makefile.replace(
                    "EXTRA_CFLAGS ?=",
                    "EXTRA_CFLAGS ?= -DABFLEET_PSNR_REPEAT=3000",
                ),
            )
            .unwrap();
        } else {
            std::fs::write(repos.fork.join(format!("NOTES-{i}")), format!("note {i}\n")).unwrap();
        }
        git(&repos.fork, &["add", "-A"]);
        git(
            &repos.fork,
            &["commit", "-q", "-m", &format!("fork: change {i}")],
        );
        commits.push(git(&repos.fork, &["rev-parse", "HEAD"]));
    }
    commits
}

fn copy_tree(from: &Path, to: &Path) {
    for file in ["Makefile", "README.md", ".gitignore"] {
        std::fs::create_dir_all(to).unwrap();
        std::fs::copy(from.join(file), to.join(file)).unwrap();
    }
    std::fs::create_dir_all(to.join("src")).unwrap();
    for entry in std::fs::read_dir(from.join("src")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join("src").join(entry.file_name())).unwrap();
    }
}

/// What varies between the specs the tests write.
pub struct SpecOptions<'a> {
    pub upstream_source: String,
    pub fork_source: String,
    pub fork_build: &'a str,
    pub extra: &'a str,
    pub workloads: &'a [&'a str],
    pub runs: u32,
    /// `[measure] max_runs`; `None`: `runs` (a fixed count).
    pub max_runs: Option<u32>,
    /// Frames of the 96x64 fixture; more frames make a longer job.
    pub frames: u32,
}

impl<'a> SpecOptions<'a> {
    pub fn git(repos: &Repos) -> SpecOptions<'a> {
        SpecOptions {
            upstream_source: format!("git = \"{}\"\nrev = \"v1.0.0\"", repos.upstream.display()),
            fork_source: format!(
                "git = \"{}\"\nrev = \"{}\"",
                repos.fork.display(),
                repos.fork_commit
            ),
            fork_build: "",
            extra: "",
            workloads: &["psnr", "float_ssim", "motion", "motion_v2"],
            runs: 3,
            max_runs: None,
            frames: 6,
        }
    }

    /// Both sides from the subject directory of this checkout.
    pub fn path() -> SpecOptions<'a> {
        let dir = subject_dir();
        SpecOptions {
            upstream_source: format!("path = \"{}\"\n[upstream.build]\ncommands = [[\"make\", \"-s\", \"VARIANT=upstream\"]]", dir.display()),
            fork_source: format!("path = \"{}\"", dir.display()),
            fork_build: "commands = [[\"make\", \"-s\", \"VARIANT=fork\"]]",
            extra: "",
            workloads: &["psnr", "float_ssim"],
            runs: 3,
            max_runs: None,
            frames: 6,
        }
    }

    pub fn render(&self) -> String {
        let workloads: String = self
            .workloads
            .iter()
            .map(|w| format!("[[workloads]]\nname = \"{w}\"\nargs = [\"--feature\", \"{w}\"]\n\n"))
            .collect();
        let fork_build = if self.fork_build.is_empty() {
            String::new()
        } else {
            format!("[fork.build]\n{}\n", self.fork_build)
        };
        format!(
            r#"name = "test"

[upstream]
{upstream}

[fork]
{fork}
{fork_build}
[build]
commands = [["make", "-s"]]
binary = "build/vmaf"

[command]
template = ["{{binary}}", "-r", "{{reference}}", "-d", "{{distorted}}", "-w", "{{width}}", "-h", "{{height}}",
            "-p", "{{pixel_format}}", "-b", "{{bitdepth}}", "--threads", "{{threads}}", "-o", "{{output}}", "--json"]

[[fixtures]]
name = "tiny"
width = 96
height = 64
bitdepth = 8
pixel_format = "420"
frames = {frames}
reference = {{ generate = "moving-pattern", seed = 3 }}
distorted = {{ generate = "moving-pattern-distorted", seed = 3 }}

{workloads}[measure]
runs = {runs}
max_runs = {max_runs}
timeout_seconds = 60

[parity.renames]
VMAF_integer_feature_motion_sad_score = "integer_motion"
{extra}
"#,
            upstream = self.upstream_source,
            fork = self.fork_source,
            runs = self.runs,
            max_runs = self.max_runs.unwrap_or(self.runs),
            frames = self.frames,
            extra = self.extra,
        )
    }

    pub fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, self.render()).unwrap();
        path
    }
}

/// Polls `check` until it yields a value or `timeout` passes.
pub async fn wait_until<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A coordinator on 127.0.0.1:0 over a data dir, stoppable and restartable.
pub struct TestCoordinator {
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    /// Serving mutual TLS (its URL is https://).
    pub tls: bool,
    /// The web view and `/api/` on loopback HTTP, when started with [`Self::start_with_web`].
    pub web: Option<SocketAddr>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl TestCoordinator {
    pub async fn start(data_dir: &Path, config: CoordinatorConfig) -> TestCoordinator {
        TestCoordinator::start_with_transport(
            data_dir,
            config,
            ServerTransport::LoopbackPlaintext,
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
    }

    /// A loopback coordinator that also serves the web view and `/api/` on 127.0.0.1:0
    /// (`web`), until the test ends.
    pub async fn start_with_web(data_dir: &Path, config: CoordinatorConfig) -> TestCoordinator {
        let coordinator = Coordinator::open(data_dir, config).unwrap();
        let fleet = coordinator.fleet.clone();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let web = http.local_addr().unwrap();
        tokio::spawn(abfleet_coordinator::http::serve_http_with(
            fleet,
            http,
            abfleet_coordinator::http::HttpConfig {
                webhook: None,
                web: true,
                limits: Default::default(),
            },
            std::future::pending(),
        ));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            serve(
                coordinator,
                listener,
                ServerTransport::LoopbackPlaintext,
                async {
                    let _ = stopped.await;
                },
            )
            .await
            .unwrap();
        });
        TestCoordinator {
            addr,
            data_dir: data_dir.to_path_buf(),
            tls: false,
            web: Some(web),
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// A coordinator serving `transport` on `listen` (port 0: any free port).
    pub async fn start_with_transport(
        data_dir: &Path,
        config: CoordinatorConfig,
        transport: ServerTransport,
        listen: SocketAddr,
    ) -> TestCoordinator {
        let coordinator = Coordinator::open(data_dir, config).unwrap();
        let listener = TcpListener::bind(listen).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tls = matches!(transport, ServerTransport::MutualTls(_));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            serve(coordinator, listener, transport, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        TestCoordinator {
            addr,
            data_dir: data_dir.to_path_buf(),
            tls,
            web: None,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    pub async fn control(&self) -> ControlServiceClient<Channel> {
        ControlServiceClient::connect(self.url()).await.unwrap()
    }

    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take() {
            if tokio::time::timeout(Duration::from_secs(10), &mut task)
                .await
                .is_err()
            {
                task.abort();
                let _ = task.await;
            }
        }
    }
}

/// An agent in this process with its own work dir.
pub struct TestAgent {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub task: JoinHandle<()>,
    pub work_dir: PathBuf,
}

impl TestAgent {
    pub fn start(url: &str, work_dir: &Path) -> TestAgent {
        TestAgent::start_with_inventory(url, work_dir, inventory::probe_host())
    }

    /// An agent that reports `inventory` (e.g. recorded probes of another kind of host).
    pub fn start_with_inventory(
        url: &str,
        work_dir: &Path,
        inventory: abfleet_core::inventory::Inventory,
    ) -> TestAgent {
        TestAgent::start_with_config(AgentConfig::new(url, work_dir), inventory)
    }

    /// An agent with its own configuration (e.g. an inventory source it re-reads).
    pub fn start_with_config(
        config: AgentConfig,
        inventory: abfleet_core::inventory::Inventory,
    ) -> TestAgent {
        let work_dir = config.work_dir.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            run_agent(config, inventory, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        TestAgent {
            stop: Some(stop),
            task,
            work_dir,
        }
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(20), self.task).await;
    }
}

/// Submits a spec file (loaded and resolved like `abfleet submit` does) and waits for the
/// run to finish; returns the run id and its report.
pub async fn submit_and_wait(
    client: &mut ControlServiceClient<Channel>,
    spec_path: &Path,
) -> (String, Report) {
    let run_id = submit(client, spec_path).await;
    let report = wait_for_report(client, &run_id, Duration::from_secs(240)).await;
    (run_id, report)
}

pub async fn submit(client: &mut ControlServiceClient<Channel>, spec_path: &Path) -> String {
    let spec = abfleet_core::spec::JobSpec::load(spec_path).unwrap();
    client
        .submit_run(pb::SubmitRunRequest {
            spec_json: spec.to_json(),
            trigger: "manual".into(),
            spec_origin: spec_path.display().to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .run_id
}

pub async fn report(client: &mut ControlServiceClient<Channel>, run_id: &str) -> Report {
    let json = client
        .get_report(pb::GetReportRequest {
            run_id: run_id.to_string(),
        })
        .await
        .unwrap()
        .into_inner()
        .report_json;
    Report::from_json(&json).unwrap()
}

pub async fn wait_for_report(
    client: &mut ControlServiceClient<Channel>,
    run_id: &str,
    timeout: Duration,
) -> Report {
    let client = client.clone();
    wait_until(timeout, "the run to finish", || {
        let mut client = client.clone();
        let run_id = run_id.to_string();
        async move {
            let report = report(&mut client, &run_id).await;
            matches!(report.status.as_str(), "done" | "failed" | "cancelled").then_some(report)
        }
    })
    .await
}

/// A TCP proxy whose connections can be cut and whose target can move: how a test makes an
/// agent lose its coordinator mid-job without touching the agent.
pub struct Proxy {
    pub addr: SocketAddr,
    target: Arc<Mutex<SocketAddr>>,
    /// While set, every new connection is closed as soon as it is accepted.
    refusing: Arc<std::sync::atomic::AtomicBool>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let target = Arc::new(Mutex::new(target));
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let refusing: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let accept = {
            let target = target.clone();
            let connections = connections.clone();
            let refusing = refusing.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((mut inbound, _)) = listener.accept().await else {
                        return;
                    };
                    if refusing.load(std::sync::atomic::Ordering::SeqCst) {
                        drop(inbound);
                        continue;
                    }
                    let to = *target.lock().unwrap();
                    let handle = tokio::spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(to).await {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                    connections.lock().unwrap().push(handle);
                }
            })
        };
        Proxy {
            addr,
            target,
            refusing,
            connections,
            accept,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Drops every open connection (both directions, at once).
    pub fn cut(&self) {
        for handle in self.connections.lock().unwrap().drain(..) {
            handle.abort();
        }
    }

    /// A network outage: every open connection cut, and new ones closed at once, until
    /// [`Proxy::restore`].
    pub fn outage(&self) {
        self.refusing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.cut();
    }

    pub fn restore(&self) {
        self.refusing
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn retarget(&self, target: SocketAddr) {
        *self.target.lock().unwrap() = target;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

/// The agents the coordinator knows, as `abfleet agents` lists them.
pub async fn list_agents(
    client: &ControlServiceClient<Channel>,
) -> Vec<abfleet_proto::pb::AgentSummary> {
    client
        .clone()
        .list_agents(abfleet_proto::pb::ListAgentsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .agents
}

/// The runs the coordinator knows, as `abfleet runs` lists them.
pub async fn list_runs(
    client: &ControlServiceClient<Channel>,
) -> Vec<abfleet_proto::pb::RunSummary> {
    client
        .clone()
        .list_runs(abfleet_proto::pb::ListRunsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .runs
}

/// Waits until at least `count` agents have registered.
pub async fn wait_for_agents(client: &ControlServiceClient<Channel>, count: usize) {
    wait_until(
        Duration::from_secs(30),
        "the agents to register",
        || async { (list_agents(client).await.len() >= count).then_some(()) },
    )
    .await;
}

/// A git repository made from a source tarball (`tar -xJf` into `dir`, `git init`, every file
/// committed, optionally tagged): a real tree as a git source like any other. Returns the
/// commit.
pub fn repo_from_tarball(tarball: &Path, dir: &Path, tag: Option<&str>) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let output = Command::new("tar")
        .arg("-xJf")
        .arg(tarball)
        .arg("-C")
        .arg(dir)
        .output()
        .expect("tar runs");
    assert!(
        output.status.success(),
        "tar -xJf {}: {}",
        tarball.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "-f", "."]);
    git(dir, &["commit", "-q", "-m", "unpacked from the tarball"]);
    if let Some(tag) = tag {
        git(dir, &["tag", tag]);
    }
    git(dir, &["rev-parse", "HEAD"])
}

/// `abfleet ARGS` run to its end in `dir`.
pub fn abfleet(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("abfleet runs")
}

/// A finished process's status, stdout and stderr, for an assertion's message.
pub fn output_text(output: &std::process::Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A child process that dies with the test, even when an assertion fails first.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.1 request on loopback (`Connection: close`): the status code and the body.
/// `Host` is the address dialled unless `headers` name one.
pub fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        request.push_str(&format!("Host: {addr}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A loopback port free now (for a process that must be given its address up front).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Commits `EXTRA_CFLAGS ?= FLAGS` into the fork's Makefile; returns the new commit.
pub fn commit_fork_flags(fork: &Path, flags: &str, message: &str) -> String {
    let makefile = std::fs::read_to_string(fork.join("Makefile")).unwrap();
    let line = makefile
        .lines()
        .find(|l| l.starts_with("EXTRA_CFLAGS ?="))
        .unwrap()
        .to_string();
    std::fs::write(
        fork.join("Makefile"),
        makefile.replace(&line, &format!("EXTRA_CFLAGS ?= {flags}")),
    )
    .unwrap();
    git(fork, &["commit", "-q", "-am", message]);
    git(fork, &["rev-parse", "HEAD"])
}

/// A control client of the coordinator at `url`, once it listens (30 s at most).
pub async fn control_at(url: &str) -> ControlServiceClient<Channel> {
    wait_until(Duration::from_secs(30), "the coordinator to listen", || {
        let url = url.to_string();
        async move { ControlServiceClient::connect(url).await.ok() }
    })
    .await
}

/// `abfleet coordinator --plaintext` on 127.0.0.1:`port` with `data_dir`, its default lease
/// and heartbeat, to spawn (add stdio as the test wants it).
pub fn coordinator_command(port: u16, data_dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_abfleet"));
    command
        .args(["coordinator", "--plaintext", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(data_dir);
    command
}
