//! The Debian package on a fresh machine (issue 25): `scripts/build-deb` packs this build's
//! `abfleet` binary; a throwaway machine installs it with `dpkg -i`, gets the fleet's
//! certificates and the coordinator's URL as an operator would, starts both services with
//! `systemctl` and runs a job through them over mutual TLS; upgrades the package in place
//! (both services restarted, the edited conffile kept, the same agent back); then the services
//! are stopped (each must exit 0 on its stop signal), the package removed and purged, and
//! nothing of it may be left.
//!
//! The machine is systemd (`/lib/systemd/systemd`, the host's own) booted as PID 1 in new PID,
//! mount, UTS, IPC, network and cgroup namespaces (`unshare`), `container=` set as systemd
//! expects in a container. Its root is an overlay whose lower layer is the host's `/`, read
//! only, and whose upper layer is a temp dir: every write of the install lands there. Its
//! cgroup tree is a child of the host's cgroup2 hierarchy, removed afterwards. Its network is
//! its own loopback. The host is checked unchanged (users, groups, units, dpkg's database).
//! It boots `basic.target`, not the host's default target, so the host's own enabled services
//! do not start in it. Needs root; it fails, never skips, without it.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_abfleet");

/// Where the test's files (the .deb, certificates, the subject, the spec) appear inside the
/// machine: a bind mount of a temp dir.
const SHARE: &str = "/srv/abfleet-test";

/// Runs inside the new namespaces (argv: base dir, share dir): builds the overlay root, the
/// API file systems and /dev, pivots into the root and execs systemd as PID 1.
const BOOT: &str = r#"set -euo pipefail
base=$1 share=$2
root=$base/root
mount --make-rprivate /
mount -t overlay overlay -o "lowerdir=/,upperdir=$base/upper,workdir=$base/work" "$root"
mount -t proc proc "$root/proc"
mount -t sysfs -o ro sysfs "$root/sys"
mount -t cgroup2 cgroup2 "$root/sys/fs/cgroup"
mount -t tmpfs -o mode=0755 tmpfs "$root/dev"
for node in null zero full random urandom tty; do
  touch "$root/dev/$node"
  mount --bind "/dev/$node" "$root/dev/$node"
done
mkdir "$root/dev/pts" "$root/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
mount -t tmpfs tmpfs "$root/dev/shm"
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mkdir -p "$root/srv/abfleet-test" "$root/.old-root"
mount --bind "$share" "$root/srv/abfleet-test"
cd "$root"
pivot_root . .old-root
umount -l /.old-root
rmdir /.old-root
# systemd leaves / private in a container (nspawn makes its containers' root shared): the mounts
# a unit's set-up makes in a forked child, its credentials among them, would never reach it.
mount --make-rshared /
exec env -i container=abfleet-test /lib/systemd/systemd --unit=basic.target
"#;

fn output_text(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn must(command: &mut Command) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("failed to start {command:?}: {err}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        output_text(&output)
    );
    output
}

fn wait_until<T>(timeout: Duration, what: &str, check: impl FnMut() -> Option<T>) -> T {
    wait_or_explain(timeout, what, check, String::new)
}

/// `wait_until`, whose timeout message ends with `explain()` (the units' journal, say).
fn wait_or_explain<T>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> Option<T>,
    explain: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        if Instant::now() >= deadline {
            panic!("timed out waiting for {what}\n{}", explain());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The mount point of the host's cgroup2 hierarchy (`/sys/fs/cgroup` on a unified host,
/// `/sys/fs/cgroup/unified` on a hybrid one).
fn cgroup2_mount() -> PathBuf {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
    mounts
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(fields[1]))
        })
        .expect("no cgroup2 hierarchy is mounted; systemd needs one to boot the test machine: mount -t cgroup2 none /sys/fs/cgroup/unified")
}

/// What of the host the package must not touch: users, groups, units and their links,
/// dpkg's view of the package, and the package's paths.
fn host_state() -> String {
    let mut state = String::new();
    for file in ["/etc/passwd", "/etc/group", "/etc/shadow"] {
        state += &format!("== {file}\n{}\n", fs::read_to_string(file).unwrap());
    }
    let found = Command::new("find")
        .args([
            "/lib/systemd/system",
            "/etc/systemd/system",
            "/etc",
            "/var/lib",
            "/usr/bin",
            "-maxdepth",
            "3",
            "-name",
            "*abfleet*",
        ])
        .output()
        .unwrap();
    state += &format!("== paths\n{}\n", String::from_utf8_lossy(&found.stdout));
    let dpkg = Command::new("dpkg-query")
        .args(["-W", "-f", "${Status}", "abfleet"])
        .output()
        .unwrap();
    state += &format!("== dpkg\n{}\n", output_text(&dpkg));
    // The machine removes its own copy; the host's stays.
    state += &format!(
        "== policy-rc.d: {}\n",
        Path::new("/usr/sbin/policy-rc.d").exists()
    );
    state
}

/// The throwaway machine: systemd as PID 1 of its own namespaces, on an overlay of `/`.
/// Dropping it powers it off (SIGKILL if it does not go) and removes its cgroup.
struct Machine {
    unshare: Child,
    systemd_pid: u32,
    cgroup: PathBuf,
}

impl Machine {
    fn boot(base: &Path, share: &Path) -> Machine {
        for dir in ["upper", "work", "root"] {
            fs::create_dir(base.join(dir)).unwrap();
        }
        fs::write(base.join("boot.sh"), BOOT).unwrap();
        let cgroup = cgroup2_mount().join(format!("abfleet-deb-test-{}", std::process::id()));
        fs::create_dir(&cgroup).unwrap_or_else(|err| {
            panic!(
                "failed to create the cgroup {} (this test needs root): {err}",
                cgroup.display()
            )
        });
        // The shell moves itself into the machine's cgroup, then becomes `unshare`, whose
        // child (PID 1 of the new namespaces) runs the boot script and becomes systemd.
        let unshare = Command::new("bash")
            .args([
                "-c",
                r#"echo $$ > "$1/cgroup.procs" && exec unshare --mount --pid --fork --uts --ipc --net --cgroup --propagation private bash "$2/boot.sh" "$2" "$3""#,
                "machine",
            ])
            .arg(&cgroup)
            .arg(base)
            .arg(share)
            .stdin(Stdio::null())
            .stdout(fs::File::create(base.join("console.log")).unwrap())
            .stderr(fs::File::create(base.join("boot.log")).unwrap())
            .spawn()
            .unwrap();
        let mut machine = Machine {
            systemd_pid: 0,
            unshare,
            cgroup,
        };
        let unshare_pid = machine.unshare.id();
        machine.systemd_pid = wait_until(Duration::from_secs(60), "systemd to boot", || {
            if let Some(status) = machine.unshare.try_wait().unwrap() {
                panic!(
                    "the machine's boot failed ({status}): {}",
                    fs::read_to_string(base.join("boot.log")).unwrap_or_default()
                );
            }
            let children =
                fs::read_to_string(format!("/proc/{unshare_pid}/task/{unshare_pid}/children"))
                    .ok()?;
            let pid: u32 = children.split_whitespace().next()?.parse().ok()?;
            let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            (comm.trim() == "systemd").then_some(pid)
        });
        machine
    }

    /// A command run inside the machine (its namespaces and root), with a clean environment.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new("nsenter");
        command
            .args(["--target", &self.systemd_pid.to_string(), "--all"])
            .args(["--root", "--wd", "--", program])
            .env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null());
        command
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        self.command(program).args(args).output().unwrap()
    }

    fn must(&self, program: &str, args: &[&str]) -> String {
        let output = self.run(program, args);
        assert!(
            output.status.success(),
            "`{program} {}` in the machine failed: {}\n{}",
            args.join(" "),
            output_text(&output),
            self.journal()
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The journal of both units, for failure messages.
    fn journal(&self) -> String {
        let output = self.run(
            "journalctl",
            &[
                "--no-pager",
                "-n",
                "80",
                "-u",
                "abfleet-coordinator",
                "-u",
                "abfleet-agent",
            ],
        );
        format!("journal:\n{}", String::from_utf8_lossy(&output.stdout))
    }

    /// `systemctl show -p PROPERTY --value UNIT`.
    fn unit_property(&self, unit: &str, property: &str) -> String {
        self.must("systemctl", &["show", "-p", property, "--value", unit])
            .trim()
            .to_string()
    }

    fn exists(&self, path: &str) -> bool {
        self.run("test", &["-e", path]).status.success()
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        // SIGRTMIN+4 is a container's "power off" to systemd.
        let _ = Command::new("kill")
            .args(["-s", "SIGRTMIN+4", &self.systemd_pid.to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.unshare.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        // Killing PID 1 of a PID namespace kills every process in it.
        let _ = Command::new("kill")
            .args(["-KILL", &self.systemd_pid.to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.unshare.wait();
        // The machine's cgroups, deepest first (systemd removes its own when it powers off).
        let _ = Command::new("find")
            .arg(&self.cgroup)
            .args(["-depth", "-type", "d", "-exec", "rmdir", "{}", ";"])
            .status();
    }
}

/// A small job of the demo subject, as the machine sees it in the share: two builds, one
/// workload, three timed pairs.
fn write_spec(share: &Path) -> PathBuf {
    support::SpecOptions {
        upstream_source: format!(
            "path = \"{SHARE}/subject\"\n[upstream.build]\ncommands = [[\"make\", \"-s\", \"VARIANT=upstream\"]]"
        ),
        fork_source: format!("path = \"{SHARE}/subject\""),
        workloads: &["psnr"],
        frames: 24,
        ..support::SpecOptions::path()
    }
    .write(share, "spec.toml")
}

#[test]
fn the_deb_installs_and_runs_both_services_under_systemd_on_a_fresh_machine() {
    let uid = must(Command::new("id").arg("-u"));
    assert_eq!(
        String::from_utf8_lossy(&uid.stdout).trim(),
        "0",
        "this test needs root: it boots systemd in namespaces of its own and installs the package there"
    );
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let host_before = host_state();

    let tmp = tempfile::tempdir().unwrap();
    let share = tmp.path().join("share");
    fs::create_dir(&share).unwrap();
    // The agent's user reads the subject and the spec through the bind mount.
    must(
        Command::new("chmod")
            .arg("0755")
            .arg(tmp.path())
            .arg(&share),
    );

    // The package, from this build's binary (unstripped debug: packed uncompressed).
    let built = must(
        Command::new(repo.join("scripts/build-deb"))
            .args(["--binary", BIN, "--uncompressed", "--out"])
            .arg(&share),
    );
    let deb = PathBuf::from(String::from_utf8_lossy(&built.stdout).trim());
    let deb_name = deb.file_name().unwrap().to_str().unwrap().to_string();
    assert!(
        deb_name.starts_with("abfleet_") && deb_name.ends_with(".deb") && deb.is_file(),
        "scripts/build-deb printed {deb:?}"
    );
    let contents =
        String::from_utf8_lossy(&must(Command::new("dpkg-deb").arg("-c").arg(&deb)).stdout)
            .into_owned();
    for path in [
        "./usr/bin/abfleet",
        "./lib/systemd/system/abfleet-coordinator.service",
        "./lib/systemd/system/abfleet-agent.service",
        "./etc/abfleet/coordinator.toml",
        "./etc/abfleet/agent.toml",
        "./usr/share/man/man1/abfleet.1.gz",
        "./usr/share/man/man1/abfleet-agent-gc.1.gz",
        "./usr/share/bash-completion/completions/abfleet",
        "./usr/share/zsh/vendor-completions/_abfleet",
        "./usr/share/fish/vendor_completions.d/abfleet.fish",
    ] {
        assert!(
            contents.contains(path),
            "{path} is not in the .deb:\n{contents}"
        );
    }

    // The fleet's certificates, made here as an operator would, and the demo subject.
    let certs = |args: &[&str]| {
        must(
            Command::new(BIN)
                .current_dir(&share)
                .arg("certs")
                .args(args),
        );
    };
    certs(&["init"]);
    certs(&["issue", "--role", "coordinator", "--name", "coord"]);
    certs(&["issue", "--role", "agent", "--name", "bench1"]);
    certs(&["issue", "--role", "operator", "--name", "ops"]);
    must(
        Command::new("cp")
            .arg("-r")
            .arg(repo.join("fixtures/subject"))
            .arg(share.join("subject")),
    );
    must(
        Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(share.join("subject")),
    );
    write_spec(&share);

    let machine_dir = tmp.path().join("machine");
    fs::create_dir(&machine_dir).unwrap();
    let machine = Machine::boot(&machine_dir, &share);
    let state = wait_until(
        Duration::from_secs(120),
        "the machine to finish booting",
        || {
            let output = machine.run("systemctl", &["is-system-running", "--wait"]);
            let state = String::from_utf8_lossy(&output.stdout).trim().to_string();
            matches!(state.as_str(), "running" | "degraded").then_some(state)
        },
    );
    assert_eq!(
        state,
        "running",
        "the machine booted degraded: {}",
        machine.must("systemctl", &["--failed", "--no-pager"])
    );

    // A container image's policy-rc.d (Docker-built hosts have one that refuses every start)
    // would keep the postinst from starting anything; a fresh Debian machine has none. Removed
    // in the machine's upper layer only.
    machine.must("rm", &["-f", "/usr/sbin/policy-rc.d"]);

    // Install. The postinst enables and starts both units; without TLS files their conditions
    // skip them: evaluated, inactive, not failed, never restarted.
    machine.must("dpkg", &["-i", &format!("{SHARE}/{deb_name}")]);
    for unit in ["abfleet-coordinator.service", "abfleet-agent.service"] {
        assert_eq!(
            machine.must("systemctl", &["is-enabled", unit]).trim(),
            "enabled"
        );
        assert_ne!(
            machine.unit_property(unit, "ConditionTimestamp"),
            "",
            "the postinst did not try to start {unit}"
        );
        assert_eq!(
            machine.unit_property(unit, "ConditionResult"),
            "no",
            "{unit} started without its TLS files"
        );
        assert_eq!(
            machine.unit_property(unit, "ActiveState"),
            "inactive",
            "{unit}"
        );
        assert_eq!(machine.unit_property(unit, "Result"), "success", "{unit}");
        assert_eq!(machine.unit_property(unit, "NRestarts"), "0", "{unit}");
    }
    // The installed units as systemd reads them: unknown keys and bad values are warnings
    // naming the unit, with exit 0; none allowed.
    for unit in ["abfleet-coordinator.service", "abfleet-agent.service"] {
        let verified = machine.run(
            "systemd-analyze",
            &["verify", &format!("/lib/systemd/system/{unit}")],
        );
        let said = output_text(&verified);
        assert!(
            verified.status.success() && !said.contains(unit),
            "systemd-analyze verify {unit}: {said}"
        );
    }
    for (user, home) in [
        ("abfleet", "/var/lib/abfleet"),
        ("abfleet-agent", "/var/lib/abfleet-agent"),
    ] {
        let entry = machine.must("getent", &["passwd", user]);
        assert!(entry.contains(home), "{user}: {entry}");
        assert_eq!(
            machine.must("stat", &["-c", "%U %G %a", home]).trim(),
            format!("{user} {user} 700")
        );
    }
    assert_eq!(
        machine
            .must("abfleet", &["--version"])
            .split_whitespace()
            .next(),
        Some("abfleet")
    );

    // Configure as the unit files say: the TLS files, the agent's coordinator.
    let certs_in = format!("{SHARE}/abfleet-certs");
    for (from, to) in [
        ("coordinator-coord.pem", "coordinator.pem"),
        ("coordinator-coord.key", "coordinator.key"),
        ("agent-bench1.pem", "agent.pem"),
        ("agent-bench1.key", "agent.key"),
        ("ca.pem", "ca.pem"),
    ] {
        machine.must(
            "install",
            &[
                "-m",
                "0600",
                &format!("{certs_in}/{from}"),
                &format!("/etc/abfleet/tls/{to}"),
            ],
        );
    }
    machine.must(
        "sed",
        &[
            "-i",
            r#"s|^# coordinator = .*|coordinator = "https://127.0.0.1:7700"|"#,
            "/etc/abfleet/agent.toml",
        ],
    );
    machine.must("abfleet", &["config", "check", "/etc/abfleet/agent.toml"]);
    machine.must(
        "abfleet",
        &["config", "check", "/etc/abfleet/coordinator.toml"],
    );
    machine.must(
        "systemctl",
        &[
            "start",
            "abfleet-coordinator.service",
            "abfleet-agent.service",
        ],
    );

    // The operator's view, over mutual TLS to the packaged coordinator.
    let operator = |args: &[&str]| -> Output {
        let mut command = machine.command("abfleet");
        command.args(args).args([
            "--coordinator",
            "https://127.0.0.1:7700",
            "--tls-cert",
            &format!("{certs_in}/operator-ops.pem"),
            "--tls-key",
            &format!("{certs_in}/operator-ops.key"),
            "--tls-ca",
            &format!("{certs_in}/ca.pem"),
        ]);
        command.output().unwrap()
    };
    let agents = wait_or_explain(
        Duration::from_secs(120),
        "the agent to register",
        || {
            let text = String::from_utf8_lossy(&operator(&["agents"]).stdout).into_owned();
            text.lines().any(|l| l.contains(" idle ")).then_some(text)
        },
        || {
            format!(
                "{}\n{}",
                output_text(&operator(&["agents"])),
                machine.journal()
            )
        },
    );
    for unit in ["abfleet-coordinator.service", "abfleet-agent.service"] {
        assert_eq!(
            machine.must("systemctl", &["is-active", unit]).trim(),
            "active",
            "{unit}"
        );
    }
    assert!(
        machine.unit_property("abfleet-agent.service", "User") == "abfleet-agent",
        "{agents}"
    );

    // A run through the packaged services: built and timed by the agent as abfleet-agent.
    let submitted = operator(&["submit", &format!("{SHARE}/spec.toml")]);
    assert!(
        submitted.status.success(),
        "submit: {}\n{}",
        output_text(&submitted),
        machine.journal()
    );
    let run_id = String::from_utf8_lossy(&submitted.stdout)
        .trim()
        .to_string();
    let final_state = wait_or_explain(
        Duration::from_secs(600),
        "the run to finish",
        || {
            let text = String::from_utf8_lossy(&operator(&["runs"]).stdout).into_owned();
            let state = text
                .lines()
                .find(|l| l.starts_with(&run_id))
                .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))?;
            matches!(state.as_str(), "done" | "failed" | "cancelled").then_some(state)
        },
        || {
            format!(
                "{}\n{}",
                output_text(&operator(&["runs"])),
                machine.journal()
            )
        },
    );
    let report = operator(&["report", &run_id, "--format", "json"]);
    assert!(report.status.success(), "{}", output_text(&report));
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(
        (final_state.as_str(), &report["status"]),
        ("done", &serde_json::json!("done")),
        "errors: {}\n{}",
        report["errors"],
        machine.journal()
    );
    assert_eq!(
        report["cells"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    let workdir = machine.must(
        "find",
        &[
            "/var/lib/abfleet-agent",
            "-maxdepth",
            "1",
            "-user",
            "abfleet-agent",
        ],
    );
    assert!(workdir.contains("/var/lib/abfleet-agent"), "{workdir}");
    assert!(machine.exists("/var/lib/abfleet/abfleet.sqlite3"));

    // An upgrade (the same .deb again: dpkg runs the postinst with the old version) keeps the
    // edited conffile and restarts both running services, which come back to the same store
    // and agent id.
    let main_pids = |machine: &Machine| -> Vec<String> {
        ["abfleet-coordinator.service", "abfleet-agent.service"]
            .iter()
            .map(|unit| machine.unit_property(unit, "MainPID"))
            .collect()
    };
    let before_upgrade = main_pids(&machine);
    machine.must("dpkg", &["-i", &format!("{SHARE}/{deb_name}")]);
    let after_upgrade = main_pids(&machine);
    for (unit, (before, after)) in ["abfleet-coordinator.service", "abfleet-agent.service"]
        .iter()
        .zip(before_upgrade.iter().zip(&after_upgrade))
    {
        assert!(
            before != after && after != "0",
            "{unit} was not restarted by the upgrade (MainPID {before} then {after})\n{}",
            machine.journal()
        );
    }
    assert!(
        machine
            .must("cat", &["/etc/abfleet/agent.toml"])
            .contains("\ncoordinator = \"https://127.0.0.1:7700\"\n"),
        "the upgrade lost the edited conffile"
    );
    // Both old processes are gone by now: a heartbeat newer than this is the restarted
    // agent's, over a session with the restarted coordinator.
    let upgraded_at_ms: u64 = machine.must("date", &["+%s%3N"]).trim().parse().unwrap();
    let agents_json = || -> serde_json::Value {
        let output = operator(&["agents", "--format", "json"]);
        serde_json::from_slice(&output.stdout).unwrap_or_default()
    };
    let agent_after = wait_or_explain(
        Duration::from_secs(120),
        "the restarted agent to heartbeat to the restarted coordinator",
        || {
            let listed = agents_json();
            let agent = listed["agents"].as_array()?.first()?.clone();
            (agent["state"] == "idle" && agent["last_heartbeat_ms"].as_u64()? > upgraded_at_ms)
                .then_some(agent)
        },
        || format!("{}\n{}", agents_json(), machine.journal()),
    );
    let agent_id = agent_after["agent_id"].as_str().unwrap().to_string();
    assert!(
        agents.contains(&agent_id),
        "the upgraded agent is the same agent (its work dir kept): {agent_id} was not in\n{agents}"
    );
    let runs = operator(&["runs"]);
    assert!(
        String::from_utf8_lossy(&runs.stdout).contains(&run_id),
        "the upgraded coordinator lost the run: {}",
        output_text(&runs)
    );

    // A stop is clean: each main process exited by itself with 0 on its stop signal.
    machine.must(
        "systemctl",
        &[
            "stop",
            "abfleet-agent.service",
            "abfleet-coordinator.service",
        ],
    );
    for unit in ["abfleet-coordinator.service", "abfleet-agent.service"] {
        assert_eq!(
            machine.unit_property(unit, "ActiveState"),
            "inactive",
            "{unit}"
        );
        assert_eq!(machine.unit_property(unit, "Result"), "success", "{unit}");
        // 1 is CLD_EXITED: the process exited, it was not killed by the signal.
        assert_eq!(
            (
                machine.unit_property(unit, "ExecMainCode"),
                machine.unit_property(unit, "ExecMainStatus")
            ),
            ("1".to_string(), "0".to_string()),
            "{unit} did not exit 0 on its stop signal\n{}",
            machine.journal()
        );
    }

    // Remove keeps the conffiles and the data; purge removes them; no unit is left either way.
    machine.must("dpkg", &["-r", "abfleet"]);
    for path in [
        "/usr/bin/abfleet",
        "/lib/systemd/system/abfleet-coordinator.service",
        "/lib/systemd/system/abfleet-agent.service",
        "/etc/systemd/system/multi-user.target.wants/abfleet-coordinator.service",
        "/etc/systemd/system/multi-user.target.wants/abfleet-agent.service",
    ] {
        assert!(!machine.exists(path), "{path} is left after `dpkg -r`");
    }
    assert!(
        machine.exists("/etc/abfleet/agent.toml"),
        "`dpkg -r` keeps the conffiles"
    );
    assert!(
        machine.exists("/var/lib/abfleet/abfleet.sqlite3"),
        "`dpkg -r` keeps the store"
    );
    machine.must("dpkg", &["--purge", "abfleet"]);
    for path in [
        "/etc/abfleet",
        "/var/lib/abfleet",
        "/var/lib/abfleet-agent",
        "/var/lib/systemd/deb-systemd-helper-enabled/abfleet-agent.service.dsh-also",
    ] {
        assert!(!machine.exists(path), "{path} is left after `dpkg --purge`");
    }
    // The system users stay, as Debian does (deploy/README.md).
    machine.must("getent", &["passwd", "abfleet", "abfleet-agent"]);
    let units_left = machine.must(
        "find",
        &[
            "/etc/systemd",
            "/lib/systemd/system",
            "/run/systemd/system",
            "-name",
            "abfleet*",
        ],
    );
    assert_eq!(units_left, "", "unit files or links left after the purge");
    machine.must("systemctl", &["daemon-reload"]);
    // Exit 1 is "no unit file matched".
    let listed = machine.run("systemctl", &["list-unit-files", "--no-legend", "abfleet*"]);
    assert!(
        listed.status.code() == Some(1) && listed.stdout.is_empty(),
        "systemd still knows abfleet units after the purge: {}",
        output_text(&listed)
    );
    drop(machine);

    assert_eq!(
        host_state(),
        host_before,
        "the test machine changed the host"
    );
    let cgroup_left = fs::read_dir(cgroup2_mount())
        .unwrap()
        .filter_map(Result::ok)
        .any(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("abfleet-deb-test-{}", std::process::id()))
        });
    assert!(!cgroup_left, "the machine's cgroup is left behind");
}
