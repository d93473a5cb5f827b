//! A fleet across a real network path: the coordinator and two agents each in their own
//! network namespace (`ip netns`), joined by veth pairs, speaking mutual TLS over 10.77.x.x
//! (the coordinator listens on 0.0.0.0, which it allows only with TLS). One agent is cut
//! off mid-job (its link taken down), then healed: both runs complete, every cell once.
//! Needs root (namespaces); it fails, never skips, without them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_abfleet");

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

/// The namespaces and links of one test; removed on drop, with every process started in them.
struct Topology {
    namespaces: Vec<String>,
    children: Vec<Child>,
}

impl Topology {
    /// `coord` with 10.77.1.1 and 10.77.2.1; `a1` at 10.77.1.2 and `a2` at 10.77.2.2.
    fn build(tag: &str) -> Topology {
        let coord = format!("abf-c-{tag}");
        let mut topology = Topology {
            namespaces: Vec::new(),
            children: Vec::new(),
        };
        for ns in [
            coord.clone(),
            format!("abf-a1-{tag}"),
            format!("abf-a2-{tag}"),
        ] {
            let output = run("ip", &["netns", "add", &ns]);
            assert!(
                output.status.success(),
                "`ip netns add {ns}` failed (this test needs root and network namespaces): {}",
                String::from_utf8_lossy(&output.stderr)
            );
            topology.namespaces.push(ns.clone());
            must("ip", &["-n", &ns, "link", "set", "lo", "up"]);
        }
        for n in ["1", "2"] {
            let agent_ns = format!("abf-a{n}-{tag}");
            let (c_end, a_end) = (format!("vc{n}{tag}"), format!("va{n}{tag}"));
            must(
                "ip",
                &[
                    "link", "add", &c_end, "netns", &coord, "type", "veth", "peer", "name", &a_end,
                    "netns", &agent_ns,
                ],
            );
            must(
                "ip",
                &[
                    "-n",
                    &coord,
                    "addr",
                    "add",
                    &format!("10.77.{n}.1/24"),
                    "dev",
                    &c_end,
                ],
            );
            must("ip", &["-n", &coord, "link", "set", &c_end, "up"]);
            must(
                "ip",
                &[
                    "-n",
                    &agent_ns,
                    "addr",
                    "add",
                    &format!("10.77.{n}.2/24"),
                    "dev",
                    &a_end,
                ],
            );
            must("ip", &["-n", &agent_ns, "link", "set", &a_end, "up"]);
        }
        topology
    }

    fn spawn(&mut self, ns: &str, args: &[String], log: &Path) -> usize {
        let log = std::fs::File::create(log).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", ns, BIN])
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children.push(child);
        self.children.len() - 1
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for ns in &self.namespaces {
            let _ = run("ip", &["netns", "del", ns]);
        }
    }
}

fn abfleet_in(ns: &str, args: &[String]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", ns, BIN])
        .args(args)
        .output()
        .unwrap()
}

fn wait_until<T>(timeout: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn spec(dir: &Path) -> PathBuf {
    let subject = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/subject");
    let subject = subject.canonicalize().unwrap();
    let text = format!(
        r#"name = "netns"

[upstream]
path = "{subject}"
[upstream.build]
commands = [["make", "-s", "VARIANT=upstream"]]

[fork]
path = "{subject}"
[fork.build]
commands = [["make", "-s", "VARIANT=fork"]]

[build]
commands = [["make", "-s"]]
binary = "build/vmaf"

[command]
template = ["{{binary}}", "-r", "{{reference}}", "-d", "{{distorted}}", "-w", "{{width}}", "-h", "{{height}}",
            "-p", "{{pixel_format}}", "-b", "{{bitdepth}}", "--threads", "{{threads}}", "-o", "{{output}}", "--json"]

[[fixtures]]
name = "clip"
width = 320
height = 240
bitdepth = 8
pixel_format = "420"
frames = 240
reference = {{ generate = "moving-pattern", seed = 5 }}
distorted = {{ generate = "moving-pattern-distorted", seed = 5 }}

[[workloads]]
name = "psnr"
args = ["--feature", "psnr"]

[[workloads]]
name = "float_ssim"
args = ["--feature", "float_ssim"]

[[workloads]]
name = "motion"
args = ["--feature", "motion"]

[measure]
runs = 5
timeout_seconds = 120

[parity.renames]
VMAF_integer_feature_motion_sad_score = "integer_motion"
"#,
        subject = subject.display()
    );
    let path = dir.join("spec.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_fleet_over_tls_across_namespaces_survives_a_partition_of_one_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let tag = format!("{}", std::process::id() % 100_000);
    let mut net = Topology::build(&tag);
    let (coord_ns, a1_ns, a2_ns) = (
        format!("abf-c-{tag}"),
        format!("abf-a1-{tag}"),
        format!("abf-a2-{tag}"),
    );
    let root = tmp.path();
    let certs = root.join("abfleet-certs");
    let certs_cmd = |args: &[&str]| {
        let output = Command::new(BIN)
            .current_dir(root)
            .args(["certs"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    certs_cmd(&["init"]);
    certs_cmd(&[
        "issue",
        "--role",
        "coordinator",
        "--name",
        "coord",
        "--san",
        "10.77.1.1",
        "--san",
        "10.77.2.1",
    ]);
    for (role, name) in [("agent", "a1"), ("agent", "a2"), ("operator", "ops")] {
        certs_cmd(&["issue", "--role", role, "--name", name]);
    }
    let tls = |stem: &str| -> Vec<String> {
        vec![
            "--tls-cert".into(),
            certs.join(format!("{stem}.pem")).display().to_string(),
            "--tls-key".into(),
            certs.join(format!("{stem}.key")).display().to_string(),
            "--tls-ca".into(),
            certs.join("ca.pem").display().to_string(),
        ]
    };
    let s = |v: &str| v.to_string();

    let mut coordinator_args = vec![
        s("coordinator"),
        s("--listen"),
        s("0.0.0.0:7700"),
        s("--data-dir"),
        root.join("data").display().to_string(),
        s("-v"),
    ];
    coordinator_args.extend(tls("coordinator-coord"));
    net.spawn(&coord_ns, &coordinator_args, &root.join("coordinator.log"));
    let url = s("https://10.77.1.1:7700");
    let operator = |args: &[&str]| -> Output {
        let mut full: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        full.extend([s("--coordinator"), url.clone()]);
        full.extend(tls("operator-ops"));
        abfleet_in(&coord_ns, &full)
    };
    wait_until(
        Duration::from_secs(30),
        "the coordinator to answer over TLS",
        || operator(&["runs"]).status.success().then_some(()),
    );
    let start_agent = |net: &mut Topology, ns: &str, n: &str| {
        let mut args = vec![
            s("agent"),
            s("--coordinator"),
            format!("https://10.77.{n}.1:7700"),
            s("--work-dir"),
            root.join(format!("agent{n}")).display().to_string(),
            s("-v"),
        ];
        args.extend(tls(&format!("agent-a{n}")));
        net.spawn(ns, &args, &root.join(format!("agent{n}.log")));
    };
    let agents_listed = |count: usize| {
        let output = operator(&["agents"]);
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        (text
            .lines()
            .filter(|l| l.contains(" idle ") || l.contains(" busy "))
            .count()
            >= count)
            .then_some(text)
    };
    let spec = spec(root);
    let spec_arg = spec.display().to_string();
    let submit = || -> String {
        let output = operator(&["submit", &spec_arg]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    let run_state = |run_id: &str| -> String {
        let output = operator(&["runs"]);
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .find(|l| l.starts_with(run_id))
            .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
            .unwrap_or_default()
    };

    // Agent 1 takes run 1; then agent 2 comes up and takes run 2.
    start_agent(&mut net, &a1_ns, "1");
    wait_until(Duration::from_secs(60), "agent 1 to register", || {
        agents_listed(1)
    });
    let run1 = submit();
    wait_until(Duration::from_secs(60), "run 1 to start", || {
        (run_state(&run1) == "running").then_some(())
    });
    start_agent(&mut net, &a2_ns, "2");
    wait_until(Duration::from_secs(60), "agent 2 to register", || {
        agents_listed(2)
    });
    let run2 = submit();
    wait_until(Duration::from_secs(60), "run 2 to start", || {
        (run_state(&run2) == "running").then_some(())
    });

    // Cut agent 2 off for 6 s while it works on run 2, then heal the link.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        run_state(&run2),
        "running",
        "run 2 ended before the partition; the spec must run longer than that"
    );
    let a2_link = format!("va2{tag}");
    must("ip", &["-n", &a2_ns, "link", "set", &a2_link, "down"]);
    std::thread::sleep(Duration::from_secs(6));
    must("ip", &["-n", &a2_ns, "link", "set", &a2_link, "up"]);

    for run_id in [&run1, &run2] {
        wait_until(Duration::from_secs(300), "both runs to finish", || {
            matches!(run_state(run_id).as_str(), "done" | "failed" | "cancelled").then_some(())
        });
        let output = operator(&["report", run_id, "--format", "json"]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["status"], "done", "{run_id}: {}", report["errors"]);
        let mut indexes: Vec<u64> = report["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["index"].as_u64().unwrap())
            .collect();
        indexes.sort_unstable();
        assert_eq!(indexes, vec![0, 1, 2], "{run_id}: every cell exactly once");
    }
    let agent2_log = std::fs::read_to_string(root.join("agent2.log")).unwrap();
    assert!(
        agent2_log.contains("10.77.2.1"),
        "agent 2 dialled the coordinator across its link:\n{agent2_log}"
    );
    // Both agents are back and idle after the heal.
    wait_until(Duration::from_secs(60), "both agents idle again", || {
        agents_listed(2)
    });
}
