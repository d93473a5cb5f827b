//! docs/first-fleet.md, run as written (issue 25): every ```` ```sh @HOST ```` block of the
//! walkthrough is run, in order, on its host — three network namespaces joined by veth
//! pairs, each with its own home directory and its own `/etc/hosts` (`ip netns exec` mounts
//! `/etc/netns/NS/hosts`), so `coordinator.lab` resolves as on a lab network. Blocks marked
//! `daemon` keep running (the coordinator, the agents, git's daemon) until the end, when they
//! are stopped with SIGTERM as systemd stops them, and must exit cleanly.
//!
//! Stand-ins, and only these: `scp` copies into the other host's home directory (there is no
//! SSH server); `~/abfleet` on the coordinator host is this checkout. Needs root (namespaces);
//! it fails, never skips, without them.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_abfleet");
const HOSTS: [&str; 3] = ["coordinator", "bench-1", "bench-2"];

/// One command block of the walkthrough.
#[derive(Debug)]
struct Block {
    host: String,
    daemon: bool,
    script: String,
    /// Its line in the document, for a failure's message.
    line: usize,
}

/// The ```` ```sh @HOST [daemon] ```` blocks, in order. Every `sh` block must name its host:
/// nothing a reader copies escapes the test.
fn blocks(doc: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = doc.lines().enumerate();
    while let Some((number, line)) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        let mut words = info.split_whitespace();
        let language = words.next();
        let host = words.next();
        let daemon = words.next() == Some("daemon");
        let mut script = String::new();
        for (_, line) in lines.by_ref() {
            if line.starts_with("```") {
                break;
            }
            script.push_str(line);
            script.push('\n');
        }
        if language != Some("sh") {
            continue;
        }
        let host = host
            .and_then(|host| host.strip_prefix('@'))
            .unwrap_or_else(|| {
                panic!(
                    "docs/first-fleet.md:{}: a ```sh block names no host (```sh @coordinator): every command there is run by this test",
                    number + 1
                )
            });
        assert!(HOSTS.contains(&host), "unknown host `{host}`");
        blocks.push(Block {
            host: host.to_string(),
            daemon,
            script,
            line: number + 1,
        });
    }
    blocks
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).output().unwrap()
}

fn must(program: &str, args: &[&str]) {
    let output = run(program, args);
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The three machines: namespaces, links, host files and home directories; every process
/// started on them stopped on drop.
struct Lab {
    root: PathBuf,
    tag: String,
    daemons: Vec<(String, Child)>,
}

impl Lab {
    fn namespace(&self, host: &str) -> String {
        format!("abf-ff-{host}-{}", self.tag)
    }

    fn home(&self, host: &str) -> PathBuf {
        self.root.join("hosts").join(host)
    }

    fn build(root: &Path) -> Lab {
        let tag = format!("{}", std::process::id() % 100_000);
        let lab = Lab {
            root: root.to_path_buf(),
            tag,
            daemons: Vec::new(),
        };
        for host in HOSTS {
            let ns = lab.namespace(host);
            let output = run("ip", &["netns", "add", &ns]);
            assert!(
                output.status.success(),
                "`ip netns add {ns}` failed (this test needs root and network namespaces): {}",
                String::from_utf8_lossy(&output.stderr)
            );
            must("ip", &["-n", &ns, "link", "set", "lo", "up"]);
            std::fs::create_dir_all(lab.home(host)).unwrap();
        }
        let coordinator = lab.namespace("coordinator");
        let mut coordinator_hosts =
            String::from("127.0.0.1 localhost\n10.78.1.1 coordinator.lab\n");
        for (n, bench) in [(1, "bench-1"), (2, "bench-2")] {
            let ns = lab.namespace(bench);
            let (c_end, b_end) = (format!("fc{n}{}", lab.tag), format!("fb{n}{}", lab.tag));
            must(
                "ip",
                &[
                    "link",
                    "add",
                    &c_end,
                    "netns",
                    &coordinator,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &b_end,
                    "netns",
                    &ns,
                ],
            );
            for (ns, end, address) in [
                (&coordinator, &c_end, format!("10.78.{n}.1/24")),
                (&ns, &b_end, format!("10.78.{n}.2/24")),
            ] {
                must("ip", &["-n", ns, "addr", "add", &address, "dev", end]);
                must("ip", &["-n", ns, "link", "set", end, "up"]);
            }
            coordinator_hosts.push_str(&format!("10.78.{n}.2 {bench}\n"));
            write_hosts(
                &ns,
                &format!("127.0.0.1 localhost\n10.78.{n}.1 coordinator.lab\n"),
            );
        }
        write_hosts(&coordinator, &coordinator_hosts);
        // `~/abfleet`: the checkout the walkthrough takes the demo subject from.
        std::os::unix::fs::symlink(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .canonicalize()
                .unwrap(),
            lab.home("coordinator").join("abfleet"),
        )
        .unwrap();
        // The commands the reader has: abfleet, and scp as a copy between the homes.
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(BIN, bin.join("abfleet")).unwrap();
        let scp = bin.join("scp");
        std::fs::write(
            &scp,
            format!(
                "#!/bin/bash\n# scp for the test: HOST: is {hosts}/HOST\nset -eu\n\
                 [ \"$1\" = -p ] && shift\nargs=(\"$@\")\ndest=\"${{args[-1]}}\"\n\
                 host=\"${{dest%%:*}}\"\npath=\"${{dest#*:}}\"\n\
                 mkdir -p \"{hosts}/$host/$path\"\n\
                 cp -p \"${{args[@]:0:${{#args[@]}}-1}}\" \"{hosts}/$host/$path\"\n",
                hosts = root.join("hosts").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&scp, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        lab
    }

    /// `bash -euo pipefail -c SCRIPT` on `host`, in its home, with the reader's PATH.
    fn command(&self, host: &str, script: &str) -> Command {
        let mut command = Command::new("ip");
        command
            .args([
                "netns",
                "exec",
                &self.namespace(host),
                "bash",
                "-euo",
                "pipefail",
                "-c",
            ])
            .arg(script)
            .current_dir(self.home(host))
            .env_clear()
            .env("HOME", self.home(host))
            .env(
                "PATH",
                format!(
                    "{}:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    self.root.join("bin").display()
                ),
            )
            .env("LANG", "C.UTF-8");
        command
    }

    fn operator_args(&self) -> Vec<String> {
        let certs = self.home("coordinator").join("abfleet-certs");
        let file = |name: &str| certs.join(name).display().to_string();
        vec![
            "--coordinator".into(),
            "https://coordinator.lab:7700".into(),
            "--tls-cert".into(),
            file("operator-alice.pem"),
            "--tls-key".into(),
            file("operator-alice.key"),
            "--tls-ca".into(),
            file("ca.pem"),
        ]
    }

    /// `abfleet ARGS` as the operator on the coordinator host, with explicit flags (the
    /// test's own checks do not lean on the profile the walkthrough writes).
    fn operator(&self, args: &[&str]) -> Output {
        let line: Vec<String> = args
            .iter()
            .map(|a| a.to_string())
            .chain(self.operator_args())
            .collect();
        self.command("coordinator", &format!("abfleet {}", line.join(" ")))
            .output()
            .unwrap()
    }

    fn start(&mut self, block: &Block, log: &Path) {
        let log = std::fs::File::create(log).unwrap();
        let child = self
            .command(&block.host, block.script.trim())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap();
        self.daemons.push((block.script.trim().to_string(), child));
    }

    /// Waits until what `block` started answers, the way its users would see it.
    fn wait_ready(&self, block: &Block) {
        let script = block.script.trim();
        let (what, check): (&str, Box<dyn Fn() -> bool>) = if script.starts_with("git daemon") {
            (
                "git's daemon serving the subject to bench-1",
                Box::new(|| {
                    self.command("bench-1", "git ls-remote git://coordinator.lab/subject")
                        .output()
                        .unwrap()
                        .status
                        .success()
                }),
            )
        } else if script.starts_with("abfleet coordinator") {
            (
                "the coordinator answering the operator",
                Box::new(|| self.operator(&["agents"]).status.success()),
            )
        } else if script.starts_with("abfleet agent ") {
            let host = block.host.clone();
            (
                "the agent registered under its certificate's name",
                Box::new(move || {
                    let listed = self.operator(&["agents", "--format", "json"]);
                    serde_json::from_slice::<serde_json::Value>(&listed.stdout).is_ok_and(
                        |listed| {
                            listed["agents"].as_array().is_some_and(|agents| {
                                agents
                                    .iter()
                                    .any(|agent| agent["certificate"]["name"] == host.as_str())
                            })
                        },
                    )
                }),
            )
        } else {
            panic!(
                "docs/first-fleet.md:{}: a daemon this test does not know how to wait for: {script}",
                block.line
            )
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !check() {
            assert!(
                Instant::now() < deadline,
                "docs/first-fleet.md:{}: timed out waiting for {what}\n{}",
                block.line,
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn logs(&self) -> String {
        let mut out = String::new();
        for entry in std::fs::read_dir(self.root.join("logs"))
            .into_iter()
            .flatten()
        {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(30).collect();
            out.push_str(&format!("--- {}\n", path.display()));
            for line in tail.into_iter().rev() {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// SIGTERM to each daemon, as systemd stops a service; their exit statuses.
    fn stop_daemons(&mut self) -> Vec<(String, Option<i32>)> {
        let mut stopped = Vec::new();
        for (script, child) in self.daemons.iter_mut().rev() {
            let group = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(30);
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status.code();
                }
                if Instant::now() > deadline {
                    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
                    break child.wait().unwrap().code();
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            stopped.push((script.clone(), status));
        }
        self.daemons.clear();
        stopped
    }
}

fn write_hosts(ns: &str, text: &str) {
    let dir = Path::new("/etc/netns").join(ns);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hosts"), text).unwrap();
}

impl Drop for Lab {
    fn drop(&mut self) {
        for (_, child) in &mut self.daemons {
            let group = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
        }
        for host in HOSTS {
            let ns = self.namespace(host);
            let _ = run("ip", &["netns", "del", &ns]);
            let _ = std::fs::remove_dir_all(Path::new("/etc/netns").join(&ns));
        }
    }
}

#[test]
fn the_first_fleet_walkthrough_runs_as_written() {
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/first-fleet.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let blocks = blocks(&doc);
    let on = |host: &str| blocks.iter().filter(|b| b.host == host).count();
    assert!(
        on("coordinator") >= 8 && on("bench-1") >= 2 && on("bench-2") >= 2,
        "the walkthrough lost its steps: {blocks:#?}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let mut lab = Lab::build(tmp.path());
    std::fs::create_dir_all(tmp.path().join("logs")).unwrap();
    let mut outputs: BTreeMap<usize, String> = BTreeMap::new();
    for block in &blocks {
        if block.daemon {
            let log = tmp
                .path()
                .join("logs")
                .join(format!("{}-line{}.log", block.host, block.line));
            lab.start(block, &log);
            lab.wait_ready(block);
            continue;
        }
        let started = Instant::now();
        let output = lab.command(&block.host, &block.script).output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "docs/first-fleet.md:{} on {} failed ({:?}):\n{}\n--- stdout\n{stdout}\n--- stderr\n{}\n{}",
            block.line,
            block.host,
            output.status,
            block.script,
            String::from_utf8_lossy(&output.stderr),
            lab.logs()
        );
        eprintln!(
            "docs/first-fleet.md:{} on {}: ok in {:.1?}",
            block.line,
            block.host,
            started.elapsed()
        );
        outputs.insert(block.line, stdout);
    }

    // What the reader should have seen.
    let agents_block = blocks
        .iter()
        .find(|b| b.script.trim() == "abfleet agents")
        .expect("the walkthrough lists the agents");
    let agents = &outputs[&agents_block.line];
    assert!(
        agents.contains("bench-1") && agents.contains("bench-2"),
        "both agents are listed by their certificates' names: {agents}"
    );
    let coordinator_home = lab.home("coordinator");
    let report = std::fs::read_to_string(coordinator_home.join("first-report/report.json"))
        .expect("the trigger wrote its report");
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["exit_code"], 0, "{report}");
    let markdown =
        std::fs::read_to_string(coordinator_home.join("first-report/report.md")).unwrap();
    assert!(
        markdown.contains("psnr")
            && markdown.contains("float_ssim")
            && markdown.contains("release"),
        "{markdown}"
    );
    // The bench hosts got their own key and the CA, never the CA's key.
    for bench in ["bench-1", "bench-2"] {
        let home = lab.home(bench);
        assert!(home.join(format!("agent-{bench}.key")).is_file());
        assert!(!home.join("ca.key").exists(), "{bench} has the CA's key");
        let mode = std::fs::metadata(home.join(format!("agent-{bench}.key")))
            .unwrap()
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o077,
            0,
            "{bench}'s key stayed private"
        );
    }

    // Stopped as systemd stops them: the coordinator and both agents exit cleanly.
    for (script, code) in lab.stop_daemons() {
        if script.starts_with("abfleet") {
            assert_eq!(code, Some(0), "`{script}` after SIGTERM\n{}", lab.logs());
        }
    }
}
