//! What deploy/ ships, checked against the real binary: the example config files pass
//! `abfleet config check` and list every key with its real default, a bad file is refused
//! naming each problem, and a coordinator started with `--config` listens where the file says;
//! the Containerfile has the stages, user, volume, port and entrypoint it should (it is not
//! built here: no image registry), the Kubernetes manifests hold together (labels, volumes,
//! ports, images, flags, configs that pass the check with real certificates), and the systemd
//! units pass `systemd-analyze verify` with flags the binary has.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn deploy(path: &str) -> PathBuf {
    repo_root().join("deploy").join(path)
}

fn abfleet(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .current_dir(dir)
        .args(args)
        .env_remove("ABFLEET_TLS_CERT")
        .env_remove("ABFLEET_TLS_KEY")
        .env_remove("ABFLEET_TLS_CA")
        .output()
        .unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The `--long` flags `abfleet <subcommand…> --help` lists.
fn flags_of(subcommand: &[&str]) -> BTreeSet<String> {
    let mut args = subcommand.to_vec();
    args.push("--help");
    let output = abfleet(Path::new("."), &args);
    assert!(output.status.success(), "{}", text(&output));
    let help = String::from_utf8_lossy(&output.stdout).to_string();
    let flags = long_flags(&help);
    assert!(flags.contains("--help"), "{help}");
    flags
}

/// Every `--flag` word in `text` (up to `=`, a space or punctuation).
fn long_flags(text: &str) -> BTreeSet<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | '[' | ']' | '`'))
        .filter(|word| word.starts_with("--") && word.len() > 2)
        .map(|word| {
            word.split(['=', ')', '<'])
                .next()
                .unwrap()
                .trim_end_matches(['.', ';', ':'])
                .to_string()
        })
        .collect()
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `# key = value` lines of an example file, and `key = value` lines of `config check`'s output.
fn assignments(text: &str, commented: bool) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let line = if commented {
                line.strip_prefix("# ")?
            } else {
                line
            };
            let (key, value) = line.split_once(" = ")?;
            let key = key.trim();
            key.chars()
                .all(|c| c.is_ascii_lowercase() || c == '_')
                .then(|| (key.to_string(), value.trim().to_string()))
        })
        .collect()
}

#[test]
fn example_config_files_pass_the_check_and_list_every_key_with_its_default() {
    for (name, table) in [
        ("coordinator.toml", "[coordinator]"),
        ("agent.toml", "[agent]"),
    ] {
        let path = deploy(name);
        let output = abfleet(Path::new("."), &["config", "check", path.to_str().unwrap()]);
        assert!(output.status.success(), "{name}: {}", text(&output));
        let effective = String::from_utf8_lossy(&output.stdout).to_string();
        assert!(effective.contains(table), "{effective}");
        // The table's own part: the coordinator's optional [notify] and [github] tables
        // follow it, commented out whole (their keys are checked by `notify_config` and
        // `github_config`'s tests and shown in docs/operations.md and docs/milestone.md).
        let whole = std::fs::read_to_string(&path).unwrap();
        let example = match whole.find("\n# [") {
            Some(end) => whole[..end].to_string(),
            None => whole.clone(),
        };
        let shown = assignments(&example, true);
        // Each key with a default: the example shows exactly that default.
        for (key, value) in assignments(&effective, false) {
            assert!(
                shown.contains(&(key.clone(), value.clone())),
                "deploy/{name} does not show `# {key} = {value}`, the default `config check` prints"
            );
        }
        // Each key without one ("# tls_cert: not set"): the example shows an example value.
        for line in effective.lines() {
            if let Some(key) = line
                .strip_prefix("# ")
                .and_then(|l| l.strip_suffix(": not set"))
            {
                assert!(
                    shown.iter().any(|(k, _)| k == key),
                    "deploy/{name} does not mention `{key}`"
                );
            }
        }
        // And nothing else: every key the example shows is one the table has.
        for (key, _) in &shown {
            assert!(
                effective.contains(&format!("{key} = "))
                    || effective.contains(&format!("# {key}: not set")),
                "deploy/{name} shows `{key}`, which `config check` does not know"
            );
        }
        // Uncommented, the defaults parse as themselves (types included).
        let tmp = tempfile::tempdir().unwrap();
        let uncommented: String = example
            .lines()
            .map(|line| match line.strip_prefix("# ") {
                Some(rest)
                    if assignments(rest, false)
                        .first()
                        .is_some_and(|(key, _)| effective.contains(&format!("{key} = "))) =>
                {
                    rest.to_string()
                }
                _ => line.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n");
        let copy = tmp.path().join(name);
        std::fs::write(&copy, uncommented).unwrap();
        let output = abfleet(tmp.path(), &["config", "check", name]);
        assert!(
            output.status.success(),
            "{name} uncommented: {}",
            text(&output)
        );
        assert_eq!(
            assignments(&String::from_utf8_lossy(&output.stdout), false),
            assignments(&effective, false),
            "{name}: the uncommented defaults are not the defaults"
        );
    }
}

#[test]
fn config_check_names_each_problem_and_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[coordinator]\nlisten = \"10.0.0.5:7700\"\nleese_seconds = 10\nmax_attempts = \"three\"\n",
    )
    .unwrap();
    let output = abfleet(tmp.path(), &["config", "check", "bad.toml"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("`bad.toml`"), "names the file: {stderr}");
    assert!(stderr.contains("unknown field `leese_seconds`"), "{stderr}");
    assert!(
        stderr.contains("`max_attempts`") && stderr.contains("expected u32"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "no settings for a bad file");

    // Well-formed, but it could not start: each reason is named.
    std::fs::write(
        &bad,
        "[coordinator]\nlisten = \"10.0.0.5:7700\"\nplaintext = true\nheartbeat_seconds = 30\n\
         [agent]\ntls_cert = \"agent.pem\"\ntls_key = \"agent.key\"\n",
    )
    .unwrap();
    let output = abfleet(tmp.path(), &["config", "check", "bad.toml"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    for expected in [
        "must be shorter than `lease_seconds`",
        "plaintext is allowed on loopback only",
        "`tls_ca` missing",
    ] {
        assert!(stderr.contains(expected), "`{expected}` in {stderr}");
    }

    // The coordinator itself refuses the file before it listens, naming key and file.
    std::fs::write(&bad, "[coordinator]\nlisten_on = \"127.0.0.1:1\"\n").unwrap();
    let output = abfleet(tmp.path(), &["coordinator", "--config", "bad.toml"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("`bad.toml`") && stderr.contains("unknown field `listen_on`"),
        "{stderr}"
    );

    // What `config check` calls a problem, the coordinator refuses too (it used to run with
    // `max_attempts = 0` clamped to 1).
    std::fs::write(
        &bad,
        "[coordinator]\nplaintext = true\nmax_attempts = 0\ndata_dir = \"data\"\n",
    )
    .unwrap();
    let checked = abfleet(tmp.path(), &["config", "check", "bad.toml"]);
    assert_eq!(checked.status.code(), Some(2), "{}", text(&checked));
    assert!(
        String::from_utf8_lossy(&checked.stderr).contains("a job needs at least 1 attempt"),
        "{}",
        text(&checked)
    );
    let output = abfleet(tmp.path(), &["coordinator", "--config", "bad.toml"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("a job needs at least 1 attempt"),
        "{}",
        text(&output)
    );
    assert!(
        !tmp.path().join("data").exists(),
        "refused before the store opens"
    );
}

#[test]
fn a_coordinator_started_with_config_listens_where_the_file_says() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let etc = tmp.path().join("etc");
    std::fs::create_dir(&etc).unwrap();
    // `data_dir` is relative: it is taken from the file's directory, not the working one.
    std::fs::write(
        etc.join("coordinator.toml"),
        format!("[coordinator]\nlisten = \"127.0.0.1:{port}\"\ndata_dir = \"store\"\nplaintext = true\n"),
    )
    .unwrap();
    let _coordinator = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .current_dir(tmp.path())
            .args(["coordinator", "--config", "etc/coordinator.toml"])
            .env_remove("ABFLEET_TLS_CERT")
            .env_remove("ABFLEET_TLS_KEY")
            .env_remove("ABFLEET_TLS_CA")
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let listed = loop {
        let output = abfleet(tmp.path(), &["agents", "--coordinator", &url]);
        if output.status.success() || Instant::now() > deadline {
            break output;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(listed.status.success(), "{}", text(&listed));
    assert!(
        etc.join("store").join("abfleet.sqlite3").is_file(),
        "the store is in the file's data_dir"
    );
    assert!(
        !tmp.path().join("abfleet-data").exists(),
        "not the default data dir"
    );
}

/// The Containerfile's instructions, continuation lines joined, comments dropped.
fn containerfile() -> Vec<(String, String)> {
    containerfile_at(&deploy("Containerfile"))
}

/// A Containerfile's instructions, continuation lines joined, comments dropped.
fn containerfile_at(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("failed to read {}: {err}", path.display()));
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                let (word, rest) = current.split_once(' ').unwrap_or((&current, ""));
                instructions.push((word.to_ascii_uppercase(), rest.trim().to_string()));
                current.clear();
            }
        }
    }
    instructions
}

/// The newest `rust-version` of any dependency in Cargo.lock that a Linux build uses (not
/// abfleet's own crates), as (major, minor). Filtered to the image's platform: crates only Windows or the web need are neither
/// built in the image nor in the offline registry cache of a machine that only built for Linux.
fn newest_rust_version_locked() -> (u32, u32) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .current_dir(repo_root())
        .args(["metadata", "--locked", "--offline", "--format-version", "1"])
        .args(["--filter-platform", "x86_64-unknown-linux-gnu"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let ours = metadata["workspace_members"].as_array().unwrap();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|package| !ours.contains(&package["id"]))
        .filter_map(|package| package["rust_version"].as_str())
        .map(major_minor)
        .max()
        .unwrap()
}

/// `1.95` or `1.95.0` as (1, 95).
fn major_minor(version: &str) -> (u32, u32) {
    let mut parts = version.split('.').map(|part| part.parse::<u32>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap_or(0))
}

/// The workspace's declared `rust-version` (the MSRV its crates inherit).
fn declared_rust_version() -> (u32, u32) {
    let manifest = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    major_minor(
        toml_value(&manifest, "workspace", "package")["rust-version"]
            .as_str()
            .expect("[workspace.package] rust-version"),
    )
}

#[test]
fn the_declared_rust_version_builds_the_locked_dependencies() {
    let (declared, needed) = (declared_rust_version(), newest_rust_version_locked());
    assert!(
        declared >= needed,
        "Cargo.toml declares rust-version {declared:?}, but a locked dependency needs {needed:?}: raise it"
    );
}

fn toml_value(text: &str, table: &str, key: &str) -> toml::Value {
    let parsed: toml::Table = text.parse().unwrap();
    parsed[table][key].clone()
}

#[test]
fn containerfile_builds_the_binary_and_runs_the_coordinator_unprivileged() {
    // Not built by this test: there is no image registry to pull the base images from here.
    let instructions = containerfile();
    let all = |word: &str| -> Vec<String> {
        instructions
            .iter()
            .filter(|(w, _)| w == word)
            .map(|(_, rest)| rest.clone())
            .collect()
    };
    let from = all("FROM");
    assert_eq!(from.len(), 2, "a build stage and a runtime stage: {from:?}");
    let builder: Vec<&str> = from[0].split_whitespace().collect();
    assert!(
        builder.len() == 3 && builder[1].eq_ignore_ascii_case("AS") && builder[2] == "builder",
        "the first stage is `FROM … AS builder`: {builder:?}"
    );
    let (rust, release) = builder[0]
        .rsplit('/')
        .next()
        .unwrap()
        .strip_prefix("rust:")
        .and_then(|tag| tag.split_once("-slim-"))
        .expect("the builder is rust:X.Y-slim-RELEASE");
    let mut parts = rust.split('.').map(|part| part.parse::<u32>().unwrap());
    let rust = (parts.next().unwrap(), parts.next().unwrap());
    let needed = newest_rust_version_locked().max(declared_rust_version());
    assert!(
        rust >= needed,
        "the builder's Rust {rust:?} is older than abfleet or a locked dependency needs ({needed:?})"
    );
    assert_eq!(
        from[1].rsplit('/').next().unwrap(),
        format!("debian:{release}-slim"),
        "the runtime is the builder's Debian release, slim (same glibc)"
    );
    let run = all("RUN").join("\n");
    assert!(
        run.contains("cargo build --release --locked -p abfleet"),
        "{run}"
    );
    let copies = all("COPY");
    assert!(
        copies.contains(
            &"--from=builder /src/target/release/abfleet /usr/local/bin/abfleet".to_string()
        ),
        "{copies:?}"
    );
    for copy in &copies {
        if !copy.starts_with("--from") {
            let source = copy.split_whitespace().next().unwrap();
            assert!(
                repo_root().join(source).exists(),
                "COPY of a missing `{source}`"
            );
        }
    }
    assert!(
        std::fs::read_to_string(repo_root().join(".dockerignore"))
            .unwrap()
            .lines()
            .any(|line| line.trim() == "target/"),
        ".dockerignore keeps target/ out of the build context"
    );

    let user = all("USER");
    assert_eq!(user.len(), 1, "{user:?}");
    let uid = user[0].split(':').next().unwrap();
    assert!(
        uid.parse::<u32>().is_ok_and(|uid| uid != 0),
        "USER is a numeric non-root uid (runAsNonRoot can check it): {uid}"
    );
    assert_eq!(uid, "10001", "the uid the Kubernetes manifests run as");

    // The baked-in config: its data_dir is the VOLUME, its port the EXPOSE.
    let config = std::fs::read_to_string(deploy("container/coordinator.toml")).unwrap();
    assert_eq!(all("VOLUME"), ["/var/lib/abfleet"]);
    assert_eq!(
        toml_value(&config, "coordinator", "data_dir").as_str(),
        Some("/var/lib/abfleet")
    );
    assert_eq!(all("EXPOSE"), ["7700"]);
    let listen: std::net::SocketAddr = toml_value(&config, "coordinator", "listen")
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(listen.port(), 7700);
    assert!(
        listen.ip().is_unspecified(),
        "reachable from outside the container"
    );
    assert_eq!(
        all("STOPSIGNAL"),
        ["SIGINT"],
        "the coordinator's clean stop"
    );

    let entrypoint: Vec<String> = serde_json::from_str(&all("ENTRYPOINT")[0])
        .expect("ENTRYPOINT in exec form (a JSON array), no shell");
    assert_eq!(entrypoint[..2], ["/usr/local/bin/abfleet", "coordinator"]);
    let known = flags_of(&["coordinator"]);
    for flag in entrypoint.iter().filter(|arg| arg.starts_with("--")) {
        assert!(
            known.contains(flag),
            "ENTRYPOINT uses `{flag}`, which `abfleet coordinator` does not have"
        );
    }
    let config_path = &entrypoint[entrypoint.iter().position(|a| a == "--config").unwrap() + 1];
    assert!(
        copies.contains(&format!("deploy/container/coordinator.toml {config_path}")),
        "the ENTRYPOINT's config is the one copied in: {copies:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    check_with_certs(tmp.path(), "coordinator", &config);
}

/// The glibc of each runtime base image the agent images may use (matched in the image's name
/// without dashes: `dev-ubuntu-24.04` is `ubuntu24.04`). The builder links against Debian 12's
/// (2.36): a runtime with an older one cannot start the binary.
const RUNTIME_GLIBC: &[(&str, (u32, u32))] = &[
    ("debian:bookworm", (2, 36)),
    ("ubuntu24.04", (2, 39)),
    ("ubuntu22.04", (2, 35)),
];

#[test]
fn agent_containerfiles_build_the_image_each_agent_pool_runs() {
    // Not built by this test: there is no image registry to pull the base images from here.
    let coordinator_builder = containerfile()
        .into_iter()
        .find(|(word, _)| word == "FROM")
        .unwrap()
        .1;
    let agent_flags = flags_of(&["agent"]);
    let documents = k8s_documents();
    let mut pools = BTreeSet::new();
    for daemonset in documents
        .iter()
        .map(|(_, d)| d)
        .filter(|d| d["kind"] == "DaemonSet")
    {
        let pool = str_of(daemonset, "/metadata/labels/abfleet.dev~1pool");
        pools.insert(format!("agent-{pool}.Containerfile"));
        let path = deploy(&format!("container/agent-{pool}.Containerfile"));
        let main = array_of(daemonset, "/spec/template/spec/containers")[0];
        let image = str_of(main, "/image");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("pool {pool} runs `{image}`; {}: {err}", path.display()));
        assert!(
            text.contains(&format!("-t {image} ")),
            "{pool}: the image `{image}` is the tag {} says to build",
            path.display()
        );
        let instructions = containerfile_at(&path);
        let all = |word: &str| -> Vec<String> {
            instructions
                .iter()
                .filter(|(w, _)| w == word)
                .map(|(_, rest)| rest.clone())
                .collect()
        };
        let from = all("FROM");
        assert_eq!(from.len(), 2, "{pool}: a build stage and a runtime stage");
        assert_eq!(
            from[0], coordinator_builder,
            "{pool}: the coordinator image's builder"
        );
        let runtime = from[1].as_str();
        let glibc = RUNTIME_GLIBC
            .iter()
            .find(|(name, _)| runtime.replace('-', "").contains(name))
            .unwrap_or_else(|| {
                panic!("{pool}: the glibc of `{runtime}` is not known; add it to RUNTIME_GLIBC")
            })
            .1;
        assert!(
            glibc >= (2, 36),
            "{pool}: `{runtime}` has glibc {glibc:?}, older than the builder's Debian 12 (2.36)"
        );
        let vendor_base = match pool {
            "nvidia" => "/nvidia/cuda:",
            "amd" => "/rocm/dev-",
            "intel" => "/intel/oneapi-basekit:",
            "cpu" => "/library/debian:bookworm-slim",
            other => panic!("a pool `{other}` this test does not know"),
        };
        assert!(runtime.contains(vendor_base), "{pool}: runtime `{runtime}`");
        let run = all("RUN").join("\n");
        assert!(
            run.contains("cargo build --release --locked -p abfleet"),
            "{pool}: {run}"
        );
        for package in [
            "git",
            "curl",
            "gcc",
            "make",
            "meson",
            "ninja-build",
            "nasm",
            "xxd",
        ] {
            assert!(
                run.split_whitespace().any(|word| word == package),
                "{pool}: the image installs {package}, which jobs run"
            );
        }
        let env = all("ENV").join("\n");
        match pool {
            // The NVIDIA Container Toolkit brings nvidia-smi only with the `utility` capability.
            "nvidia" => assert!(
                env.contains("NVIDIA_DRIVER_CAPABILITIES=compute,utility"),
                "{env}"
            ),
            "amd" => assert!(
                env.contains("/opt/rocm/bin"),
                "rocminfo and hipcc on PATH: {env}"
            ),
            "intel" => assert!(run.split_whitespace().any(|w| w == "clinfo"), "{run}"),
            _ => {}
        }
        let copies = all("COPY");
        assert!(
            copies.contains(
                &"--from=builder /src/target/release/abfleet /usr/local/bin/abfleet".to_string()
            ),
            "{pool}: {copies:?}"
        );
        for copy in copies.iter().filter(|c| !c.starts_with("--from")) {
            let source = copy.split_whitespace().next().unwrap();
            assert!(
                repo_root().join(source).exists(),
                "{pool}: COPY of a missing `{source}`"
            );
        }
        assert_eq!(
            all("USER"),
            ["10001:10001"],
            "{pool}: the uid the DaemonSets run as"
        );
        let work_mount = array_of(main, "/volumeMounts")
            .into_iter()
            .find(|m| str_of(m, "/name") == "work")
            .map(|m| str_of(m, "/mountPath").to_string())
            .unwrap();
        assert_eq!(all("VOLUME"), [work_mount], "{pool}: the work dir");
        assert_eq!(
            all("STOPSIGNAL"),
            ["SIGINT"],
            "{pool}: the agent's clean stop"
        );
        let entrypoint: Vec<String> = serde_json::from_str(&all("ENTRYPOINT")[0])
            .expect("ENTRYPOINT in exec form (a JSON array), no shell");
        assert_eq!(
            entrypoint[..2],
            ["/usr/local/bin/abfleet", "agent"],
            "{pool}"
        );
        let command = array_of(main, "/command");
        assert_eq!(
            command,
            [&serde_json::json!("/usr/local/bin/abfleet")],
            "{pool}: the binary the DaemonSet runs"
        );
        for flag in entrypoint.iter().filter(|arg| arg.starts_with("--")) {
            assert!(
                agent_flags.contains(flag),
                "{pool}: ENTRYPOINT uses `{flag}`, which `abfleet agent` does not have"
            );
        }
        let config_path = &entrypoint[entrypoint.iter().position(|a| a == "--config").unwrap() + 1];
        assert!(
            copies.contains(&format!("deploy/container/agent.toml {config_path}")),
            "{pool}: the ENTRYPOINT's config is the one copied in: {copies:?}"
        );
    }
    let files: BTreeSet<String> = std::fs::read_dir(deploy("container"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("agent-") && name.ends_with(".Containerfile"))
        .collect();
    assert_eq!(
        files, pools,
        "one agent Containerfile per DaemonSet pool, no other"
    );

    // The baked-in config: its work dir is the VOLUME; it passes the check with real files.
    let config = std::fs::read_to_string(deploy("container/agent.toml")).unwrap();
    assert_eq!(
        toml_value(&config, "agent", "work_dir").as_str(),
        Some("/var/lib/abfleet-agent")
    );
    let tmp = tempfile::tempdir().unwrap();
    check_with_certs(tmp.path(), "agent", &config);
}

/// Runs `abfleet config check` on `config` with its /etc/abfleet paths moved to real files:
/// certificates made by `abfleet certs` for `role`, and the agent policy when there is one.
fn check_with_certs(dir: &Path, role: &str, config: &str) -> String {
    check_with_files(dir, role, config, None)
}

fn check_with_files(dir: &Path, role: &str, config: &str, policy: Option<&str>) -> String {
    let certs = dir.join("abfleet-certs");
    if !certs.join("ca.pem").exists() {
        assert!(abfleet(dir, &["certs", "init"]).status.success());
    }
    let issued = abfleet(
        dir,
        &[
            "certs",
            "issue",
            "--role",
            role,
            "--name",
            "deploy-test",
            "--force",
        ],
    );
    assert!(issued.status.success(), "{}", text(&issued));
    let etc = dir.join(format!("etc-{role}"));
    std::fs::create_dir_all(etc.join("tls")).unwrap();
    for (from, to) in [
        (format!("{role}-deploy-test.pem"), format!("{role}.pem")),
        (format!("{role}-deploy-test.key"), format!("{role}.key")),
        ("ca.pem".to_string(), "ca.pem".to_string()),
    ] {
        // fs::copy keeps the mode: the key stays 0600.
        std::fs::copy(certs.join(from), etc.join("tls").join(to)).unwrap();
    }
    if let Some(policy) = policy {
        std::fs::write(etc.join("agent-policy.toml"), policy).unwrap();
    }
    let moved = config.replace("/etc/abfleet/", &format!("{}/", etc.display()));
    let file = etc.join(format!("{role}.toml"));
    std::fs::write(&file, moved).unwrap();
    let output = abfleet(dir, &["config", "check", file.to_str().unwrap()]);
    assert!(output.status.success(), "{role} config: {}", text(&output));
    String::from_utf8_lossy(&output.stdout).to_string()
}

/// Every YAML document of a file, as JSON values.
fn yaml_documents(path: &Path) -> Vec<serde_json::Value> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(path).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|document| {
            serde_json::Value::deserialize(document)
                .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
        })
        .collect()
}

fn k8s_documents() -> Vec<(String, serde_json::Value)> {
    let dir = deploy("k8s");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    let mut documents = Vec::new();
    for file in files {
        let name = file.file_name().unwrap().to_str().unwrap().to_string();
        assert!(
            name.ends_with(".yaml"),
            "deploy/k8s/{name} is not a .yaml file"
        );
        for document in yaml_documents(&file) {
            documents.push((name.clone(), document));
        }
    }
    documents
}

fn str_of<'a>(value: &'a serde_json::Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(|v| v.as_str())
        .unwrap_or_else(|| panic!("no string at {pointer} in {value}"))
}

fn array_of<'a>(value: &'a serde_json::Value, pointer: &str) -> Vec<&'a serde_json::Value> {
    value
        .pointer(pointer)
        .and_then(|v| v.as_array())
        .map(|items| items.iter().collect())
        .unwrap_or_default()
}

#[test]
fn kubernetes_manifests_hold_together() {
    let documents = k8s_documents();
    let version = env!("CARGO_PKG_VERSION");
    let by_kind = |kind: &str| -> Vec<&serde_json::Value> {
        documents
            .iter()
            .map(|(_, d)| d)
            .filter(|d| d["kind"] == kind)
            .collect()
    };

    // Every document has its type and a name; all but the Namespace live in it.
    let namespace = str_of(by_kind("Namespace")[0], "/metadata/name");
    for (file, document) in &documents {
        assert!(document["apiVersion"].is_string(), "{file}: no apiVersion");
        let kind = str_of(document, "/kind");
        if kind == "Kustomization" {
            let listed: BTreeSet<String> = array_of(document, "/resources")
                .iter()
                .map(|r| r.as_str().unwrap().to_string())
                .collect();
            let present: BTreeSet<String> = documents
                .iter()
                .map(|(f, _)| f.clone())
                .filter(|f| f != file)
                .collect();
            assert_eq!(listed, present, "kustomization.yaml lists every manifest");
            continue;
        }
        str_of(document, "/metadata/name");
        if kind != "Namespace" {
            assert_eq!(
                str_of(document, "/metadata/namespace"),
                namespace,
                "{file} {kind}"
            );
        }
    }
    let config_maps: BTreeMap<&str, &serde_json::Value> = by_kind("ConfigMap")
        .into_iter()
        .map(|c| (str_of(c, "/metadata/name"), &c["data"]))
        .collect();

    let coordinator_flags = flags_of(&["coordinator"]);
    let agent_flags = flags_of(&["agent"]);
    let statefulsets = by_kind("StatefulSet");
    let daemonsets = by_kind("DaemonSet");
    assert_eq!(statefulsets.len(), 1);
    assert_eq!(
        daemonsets.len(),
        4,
        "nvidia, amd, intel and cpu-only agents"
    );
    let mut host_paths = BTreeSet::new();
    let mut agent_secrets = BTreeSet::new();
    for workload in statefulsets.iter().chain(&daemonsets) {
        let name = str_of(workload, "/metadata/name");
        let labels = workload.pointer("/spec/template/metadata/labels").unwrap();
        for (key, value) in workload
            .pointer("/spec/selector/matchLabels")
            .and_then(|m| m.as_object())
            .unwrap()
        {
            assert_eq!(
                &labels[key], value,
                "{name}: the selector matches the template's labels"
            );
        }
        let pod = workload.pointer("/spec/template/spec").unwrap();
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{name}");
        assert_eq!(
            pod["securityContext"]["runAsUser"], 10001,
            "{name}: the image's USER"
        );
        let mut volumes: BTreeMap<&str, &serde_json::Value> = array_of(pod, "/volumes")
            .into_iter()
            .map(|v| (str_of(v, "/name"), v))
            .collect();
        for claim in array_of(workload, "/spec/volumeClaimTemplates") {
            volumes.insert(str_of(claim, "/metadata/name"), claim);
        }
        let containers: Vec<&serde_json::Value> = array_of(pod, "/initContainers")
            .into_iter()
            .chain(array_of(pod, "/containers"))
            .collect();
        let main = array_of(pod, "/containers")[0];
        let image = str_of(main, "/image");
        assert!(
            image.ends_with(&format!(":{version}")),
            "{name}: image `{image}` is tagged with the crate version {version}"
        );
        let mut mounted = BTreeSet::new();
        for container in &containers {
            let cname = str_of(container, "/name");
            assert_eq!(
                str_of(container, "/image"),
                image,
                "{name}/{cname}: one image per pod"
            );
            let security = &container["securityContext"];
            assert_eq!(security["readOnlyRootFilesystem"], true, "{name}/{cname}");
            assert_eq!(
                security["allowPrivilegeEscalation"], false,
                "{name}/{cname}"
            );
            assert_eq!(
                security["capabilities"]["drop"],
                serde_json::json!(["ALL"]),
                "{name}/{cname}"
            );
            for mount in array_of(container, "/volumeMounts") {
                let volume = str_of(mount, "/name");
                assert!(
                    volumes.contains_key(volume),
                    "{name}/{cname} mounts `{volume}`, which is no volume"
                );
                mounted.insert(volume);
            }
        }
        assert_eq!(
            mounted,
            volumes.keys().copied().collect::<BTreeSet<_>>(),
            "{name}: every volume is mounted"
        );
        for (volume, spec) in &volumes {
            if let Some(map) = spec.get("configMap") {
                let data = config_maps.get(str_of(map, "/name")).unwrap_or_else(|| {
                    panic!("{name}: volume {volume} names a ConfigMap that is not here")
                });
                for item in array_of(map, "/items") {
                    assert!(data.get(str_of(item, "/key")).is_some(), "{name}: {item}");
                }
            }
            if let Some(secret) = spec.get("secret") {
                assert_eq!(secret["defaultMode"], 0o440, "{name}: {volume}");
                if name.starts_with("abfleet-agent-") {
                    agent_secrets.insert(str_of(secret, "/secretName").to_string());
                }
                // Only the init container that copies the files sees the Secret.
                assert!(
                    !array_of(main, "/volumeMounts")
                        .iter()
                        .any(|m| m["name"] == *volume),
                    "{name}: the main container does not mount the Secret itself"
                );
            }
            if let Some(path) = spec.pointer("/hostPath/path") {
                host_paths.insert(path.as_str().unwrap().to_string());
            }
        }

        // The main container runs abfleet with flags it has and a config that passes the check.
        assert_eq!(
            main["command"],
            serde_json::json!(["/usr/local/bin/abfleet"]),
            "{name}"
        );
        let args: Vec<&str> = array_of(main, "/args")
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let (role, known) = match args[0] {
            "coordinator" => ("coordinator", &coordinator_flags),
            "agent" => ("agent", &agent_flags),
            other => panic!("{name} runs `abfleet {other}`"),
        };
        for flag in args.iter().filter(|a| a.starts_with("--")) {
            assert!(
                known.contains(*flag),
                "{name}: `abfleet {role}` has no `{flag}`"
            );
        }
        let config_path = args[args.iter().position(|a| *a == "--config").unwrap() + 1];
        let mount = array_of(main, "/volumeMounts")
            .into_iter()
            .find(|m| m["mountPath"] == config_path)
            .unwrap_or_else(|| panic!("{name}: nothing is mounted at {config_path}"));
        let volume = volumes[str_of(mount, "/name")];
        let config = config_maps[str_of(volume, "/configMap/name")][str_of(mount, "/subPath")]
            .as_str()
            .unwrap();
        // The TLS files the config names are where the copied files are mounted.
        let tls_mount = array_of(main, "/volumeMounts")
            .into_iter()
            .find(|m| m["name"] == "tls")
            .unwrap();
        let secret = volumes["tls-secret"];
        let items: BTreeSet<&str> = array_of(secret, "/secret/items")
            .iter()
            .map(|i| str_of(i, "/path"))
            .collect();
        for key in ["tls_cert", "tls_key", "tls_ca"] {
            let path = PathBuf::from(toml_value(config, role, key).as_str().unwrap().to_string());
            assert_eq!(
                path.parent().unwrap(),
                Path::new(str_of(tls_mount, "/mountPath")),
                "{name}: {key}"
            );
            assert!(
                items.contains(path.file_name().unwrap().to_str().unwrap()),
                "{name}: {key} {path:?} is not in the Secret's items"
            );
        }
        if role == "agent" {
            let work_dir = toml_value(config, "agent", "work_dir");
            assert!(
                array_of(main, "/volumeMounts")
                    .iter()
                    .any(|m| m["name"] == "work" && m["mountPath"] == work_dir.as_str().unwrap()),
                "{name}: the work dir is the `work` volume"
            );
        }
    }
    assert_eq!(host_paths.len(), 4, "one work dir per pool: {host_paths:?}");
    assert_eq!(
        agent_secrets.len(),
        4,
        "one agent certificate per pool: {agent_secrets:?}"
    );

    // GPU pools: the node label and the device plugin's resource go together.
    for (vendor, resource) in [
        ("nvidia", Some("nvidia.com/gpu")),
        ("amd", Some("amd.com/gpu")),
        ("intel", Some("gpu.intel.com/i915")),
        ("none", None),
    ] {
        let pool = daemonsets
            .iter()
            .find(|d| {
                d.pointer("/spec/template/spec/nodeSelector/abfleet.dev~1gpu-vendor")
                    == Some(&serde_json::json!(vendor))
            })
            .unwrap_or_else(|| panic!("no DaemonSet for gpu-vendor {vendor}"));
        let limits = pool
            .pointer("/spec/template/spec/containers/0/resources/limits")
            .cloned()
            .unwrap_or_default();
        match resource {
            Some(resource) => assert_eq!(limits[resource], 1, "{vendor}: {limits}"),
            None => assert!(
                limits
                    .as_object()
                    .is_none_or(|l| l.keys().all(|k| !k.contains("gpu"))),
                "cpu-only: {limits}"
            ),
        }
        assert!(
            limits.get("cpu").is_none(),
            "{vendor}: no CPU limit (throttling would show in the timings)"
        );
    }

    // The coordinator: Service, StatefulSet and config agree on name and port.
    let service = by_kind("Service")[0];
    let coordinator = statefulsets[0];
    assert_eq!(coordinator["spec"]["replicas"], 1);
    assert_eq!(
        coordinator["spec"]["serviceName"],
        service["metadata"]["name"]
    );
    let labels = &coordinator["spec"]["template"]["metadata"]["labels"];
    for (key, value) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(
            &labels[key], value,
            "the Service selects the coordinator's pods"
        );
    }
    let container = &coordinator["spec"]["template"]["spec"]["containers"][0];
    let port = &service["spec"]["ports"][0];
    let container_port = array_of(container, "/ports")
        .into_iter()
        .find(|p| p["name"] == port["targetPort"])
        .expect("the Service's targetPort names a container port");
    assert_eq!(container_port["containerPort"], 7700);
    assert_eq!(port["port"], 7700);
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(
            container[probe]["tcpSocket"]["port"], port["targetPort"],
            "{probe}"
        );
    }
    let coordinator_config = config_maps["abfleet-coordinator-config"]["coordinator.toml"]
        .as_str()
        .unwrap();
    assert_eq!(
        coordinator_config,
        std::fs::read_to_string(deploy("container/coordinator.toml")).unwrap(),
        "the ConfigMap holds the image's own config"
    );
    let image = str_of(container, "/image");
    let containerfile = std::fs::read_to_string(deploy("Containerfile")).unwrap();
    assert!(
        containerfile.contains(&format!("-t {image} ")),
        "the coordinator's image `{image}` is the tag deploy/Containerfile says to build"
    );
    let agent_config = config_maps["abfleet-agent-config"]["agent.toml"]
        .as_str()
        .unwrap();
    let url = toml_value(agent_config, "agent", "coordinator");
    assert_eq!(
        url.as_str().unwrap(),
        format!(
            "https://{}.{namespace}.svc:{}",
            str_of(service, "/metadata/name"),
            port["port"]
        ),
        "agents dial the Service, over TLS"
    );

    // Both configs pass `abfleet config check` with real certificates in place of the Secret.
    let tmp = tempfile::tempdir().unwrap();
    check_with_certs(tmp.path(), "coordinator", coordinator_config);
    let policy = config_maps["abfleet-agent-config"]["agent-policy.toml"]
        .as_str()
        .unwrap();
    check_with_files(tmp.path(), "agent", agent_config, Some(policy));
}

#[test]
fn systemd_units_verify_and_use_flags_the_binary_has() {
    let found = Command::new("systemd-analyze").arg("--version").output();
    assert!(
        found.is_ok_and(|output| output.status.success()),
        "systemd-analyze is missing; install it with `scripts/test --install-only` (Debian package systemd)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let mut units = 0;
    for entry in std::fs::read_dir(deploy("")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "service") {
            continue;
        }
        units += 1;
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let unit = std::fs::read_to_string(&path).unwrap();
        let exec: Vec<&str> = unit
            .lines()
            .filter_map(|line| line.strip_prefix("ExecStart="))
            .collect();
        assert_eq!(exec.len(), 1, "{name}: one ExecStart");
        let words: Vec<&str> = exec[0].split_whitespace().collect();
        assert_eq!(words[0], "/usr/local/bin/abfleet", "{name}");
        let known = flags_of(&[words[1]]);
        for flag in words.iter().filter(|w| w.starts_with("--")) {
            assert!(
                known.contains(*flag),
                "{name}: `abfleet {}` has no `{flag}`",
                words[1]
            );
        }
        // systemd-analyze refuses a unit whose binary is missing: point it at the built one.
        let copy = tmp.path().join(&name);
        std::fs::write(
            &copy,
            unit.replace("/usr/local/bin/abfleet", env!("CARGO_BIN_EXE_abfleet")),
        )
        .unwrap();
        let output = Command::new("systemd-analyze")
            .args(["verify", copy.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(output.status.success(), "{name}: {}", text(&output));
        // Unknown keys and bad values are warnings ("…, ignoring") with exit 0: none allowed.
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            !said.lines().any(|line| line.contains(&name)),
            "systemd-analyze warns about {name}:\n{said}"
        );
    }
    assert_eq!(units, 2, "the coordinator and the agent unit");
}
