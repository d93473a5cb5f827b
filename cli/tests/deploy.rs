//! What deploy/ ships, checked against the real binary: the example config files pass
//! `abfleet config check` and list every key with its real default, a bad file is refused
//! naming each problem, and a coordinator started with `--config` listens where the file says.

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
        let example = std::fs::read_to_string(&path).unwrap();
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
