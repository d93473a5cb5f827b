use super::*;
use crate::cli::{Cli, CoordinatorCommand};
use crate::defaults::{
    DEFAULT_COORDINATOR_URL, DEFAULT_DATA_DIR, DEFAULT_HEARTBEAT_SECONDS, DEFAULT_LISTEN,
};
use clap::{CommandFactory, FromArgMatches};

fn parse_args(args: &[&str]) -> (Command, ArgMatches) {
    let matches = Cli::command().try_get_matches_from(args).unwrap();
    let cli = Cli::from_arg_matches(&matches).unwrap();
    (cli.command, matches)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn problems(text: &str) -> Vec<String> {
    match ConfigFile::parse(text, Path::new("/etc/abfleet/x.toml")) {
        Err(ConfigError::Invalid { problems, .. }) => problems,
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn defaults_match_the_flags() {
    // TLS flags read ABFLEET_TLS_*; only the settings with a default are compared.
    let (command, _) = parse_args(&["abfleet", "coordinator"]);
    let Command::Coordinator(CoordinatorCommand {
        listen,
        data_dir,
        lease_seconds,
        heartbeat_seconds,
        max_attempts,
        plaintext,
        milestone,
        ..
    }) = command
    else {
        unreachable!()
    };
    let defaults = CoordinatorSettings::default();
    assert_eq!(listen, defaults.listen);
    assert_eq!(data_dir, defaults.data_dir);
    assert_eq!(lease_seconds, defaults.lease_seconds);
    assert_eq!(heartbeat_seconds, defaults.heartbeat_seconds);
    assert_eq!(max_attempts, defaults.max_attempts);
    assert_eq!(plaintext, defaults.plaintext);
    assert_eq!(milestone.debounce_seconds, defaults.debounce_seconds);
    assert_eq!(milestone.perf_label, defaults.perf_label);
    assert_eq!(milestone.toolchain_bots, defaults.toolchain_bots);
    let (command, _) = parse_args(&["abfleet", "agent"]);
    let Command::Agent(AgentCommand {
        coordinator,
        work_dir,
        probes,
        policy,
        ..
    }) = command
    else {
        unreachable!()
    };
    let defaults = AgentSettings::default();
    assert_eq!(coordinator, defaults.coordinator);
    assert_eq!(work_dir, defaults.work_dir);
    assert_eq!(probes, defaults.probes);
    assert_eq!(policy, defaults.policy);
}

#[test]
fn every_unknown_key_and_wrong_type_is_named() {
    let found = problems(
        "[coordinator]\nlease = 3\nmax_attempts = \"three\"\nlisten = \"nowhere\"\n[agnet]\n",
    );
    assert_eq!(found.len(), 4, "{found:#?}");
    assert!(
        found.iter().any(|p| p.contains("unknown field `lease`")),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.contains("`max_attempts`") && p.contains("string")),
        "{found:#?}"
    );
    assert!(found.iter().any(|p| p.contains("`listen`")), "{found:#?}");
    assert!(found.iter().any(|p| p.contains("`agnet`")), "{found:#?}");
    let err = ConfigFile::parse("[agent]\nwork_dri = \"x\"\n", Path::new("a.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`a.toml`") && err.contains("work_dri"),
        "{err}"
    );
}

#[test]
fn syntax_errors_and_empty_files_are_refused() {
    assert!(matches!(
        ConfigFile::parse("[coordinator\n", Path::new("x.toml")),
        Err(ConfigError::Syntax { .. })
    ));
    assert_eq!(
        problems("# nothing\n"),
        ["it has neither a [coordinator] nor an [agent] table, nor a [profile.NAME]"]
    );
    assert!(problems("coordinator = 1\n")[0].contains("must be a table"));
}

#[test]
fn relative_paths_are_taken_from_the_file_directory() {
    let file = ConfigFile::parse(
        "[agent]\nwork_dir = \"work\"\npolicy = \"/abs/policy.toml\"\n",
        Path::new("/etc/abfleet/agent.toml"),
    )
    .unwrap();
    let agent = file.agent.unwrap();
    assert_eq!(agent.work_dir.unwrap(), Path::new("/etc/abfleet/work"));
    assert_eq!(agent.policy.unwrap(), Path::new("/abs/policy.toml"));
}

/// Issue 25: the cache budget, as bytes or with a suffix, in the file and by flag, for
/// the agent and for `abfleet agent gc`.
#[test]
fn the_cache_budget_reads_as_bytes_or_with_a_suffix_and_the_flag_wins() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write(
        tmp.path(),
        "a.toml",
        "[agent]\nwork_dir = \"w\"\nmax_cache_bytes = \"20G\"\n",
    );
    let config = path.to_str().unwrap();
    let (mut command, matches) = parse_args(&["abfleet", "agent", "--config", config]);
    apply(&mut command, &matches).unwrap();
    let Command::Agent(AgentCommand {
        max_cache_bytes, ..
    }) = command
    else {
        unreachable!()
    };
    assert_eq!(max_cache_bytes, Some(20 << 30));
    let (mut command, matches) = parse_args(&[
        "abfleet",
        "agent",
        "--config",
        config,
        "--max-cache-bytes",
        "500M",
    ]);
    apply(&mut command, &matches).unwrap();
    let Command::Agent(AgentCommand {
        max_cache_bytes, ..
    }) = command
    else {
        unreachable!()
    };
    assert_eq!(max_cache_bytes, Some(500 << 20), "the flag wins");

    let (mut command, matches) =
        parse_args(&["abfleet", "agent", "gc", "--config", config, "--dry-run"]);
    apply(&mut command, &matches).unwrap();
    let Command::Agent(AgentCommand {
        action:
            Some(crate::cli::AgentAction::Gc {
                work_dir,
                max_cache_bytes,
                dry_run,
                ..
            }),
        ..
    }) = command
    else {
        unreachable!()
    };
    assert_eq!(work_dir, tmp.path().join("w"), "gc reads the agent's file");
    assert_eq!(max_cache_bytes, Some(20 << 30));
    assert!(dry_run);

    let file = ConfigFile::parse("[agent]\nmax_cache_bytes = 1000\n", &path).unwrap();
    assert_eq!(file.agent.unwrap().max_cache_bytes, Some(CacheBytes(1000)));
    let found = problems("[agent]\nmax_cache_bytes = \"lots\"\n");
    assert!(
        found
            .iter()
            .any(|p| p.contains("`lots`") && p.contains("`20G`")),
        "{found:#?}"
    );
    let settings = AgentSettings {
        max_cache_bytes: Some(1000),
        ..AgentSettings::default()
    };
    assert!(settings.to_toml().contains("max_cache_bytes = 1000\n"));
}

#[test]
fn flags_override_the_file_and_the_file_overrides_defaults() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write(
        tmp.path(),
        "c.toml",
        "[coordinator]\nlisten = \"127.0.0.1:7811\"\nlease_seconds = 60\nmax_attempts = 5\nplaintext = true\n",
    );
    let config = path.to_str().unwrap();
    let (mut command, matches) = parse_args(&[
        "abfleet",
        "coordinator",
        "--config",
        config,
        "--lease-seconds",
        "45",
    ]);
    apply(&mut command, &matches).unwrap();
    let Command::Coordinator(CoordinatorCommand {
        listen,
        data_dir,
        lease_seconds,
        heartbeat_seconds,
        max_attempts,
        plaintext,
        ..
    }) = command
    else {
        unreachable!()
    };
    assert_eq!(listen, "127.0.0.1:7811".parse().unwrap(), "from the file");
    assert_eq!(lease_seconds, 45.0, "the flag wins over the file");
    assert_eq!(max_attempts, 5);
    assert!(plaintext);
    assert_eq!(heartbeat_seconds, DEFAULT_HEARTBEAT_SECONDS, "default");
    assert_eq!(data_dir, Path::new(DEFAULT_DATA_DIR), "default");

    // A flag given with its default's value still wins.
    let (mut command, matches) = parse_args(&[
        "abfleet",
        "coordinator",
        "--config",
        config,
        "--listen",
        DEFAULT_LISTEN,
    ]);
    apply(&mut command, &matches).unwrap();
    let Command::Coordinator(CoordinatorCommand { listen, .. }) = command else {
        unreachable!()
    };
    assert_eq!(listen, DEFAULT_LISTEN.parse().unwrap());
}

#[test]
fn a_file_without_the_table_is_refused_for_that_service() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write(tmp.path(), "a.toml", "[agent]\nwork_dir = \"w\"\n");
    let (mut command, matches) =
        parse_args(&["abfleet", "coordinator", "--config", path.to_str().unwrap()]);
    let err = apply(&mut command, &matches).unwrap_err().to_string();
    assert!(err.contains("no [coordinator] table"), "{err}");
    let (mut command, matches) =
        parse_args(&["abfleet", "agent", "--config", path.to_str().unwrap()]);
    apply(&mut command, &matches).unwrap();
    let Command::Agent(AgentCommand { work_dir, .. }) = command else {
        unreachable!()
    };
    assert_eq!(work_dir, tmp.path().join("w"));
}

#[test]
fn tls_files_come_as_one_from_flags_or_from_the_file() {
    let file = AgentFile {
        tls_cert: Some("/f/agent.pem".into()),
        tls_key: Some("/f/agent.key".into()),
        tls_ca: Some("/f/ca.pem".into()),
        ..AgentFile::default()
    };
    let mut settings = AgentSettings {
        tls_cert: Some("/flag/agent.pem".into()),
        ..AgentSettings::default()
    };
    settings.overlay(&file, |id| id == "tls_cert");
    assert_eq!(settings.tls_cert, Some("/flag/agent.pem".into()));
    assert_eq!(
        settings.tls_key, None,
        "never the file's key with a flag's cert"
    );
    let mut settings = AgentSettings::default();
    settings.overlay(&file, |_| false);
    assert_eq!(settings.tls_key, Some("/f/agent.key".into()));
}

#[test]
fn coordinator_checks_name_each_problem() {
    let settings = CoordinatorSettings {
        listen: "0.0.0.0:7700".parse().unwrap(),
        heartbeat_seconds: 30.0,
        lease_seconds: 30.0,
        max_attempts: 0,
        plaintext: true,
        ..CoordinatorSettings::default()
    };
    let found = settings.check().problems;
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(
        found[0].contains("shorter than `lease_seconds`"),
        "{found:#?}"
    );
    assert!(found[1].contains("at least 1"), "{found:#?}");
    assert!(found[2].contains("loopback only"), "{found:#?}");

    let tmp = tempfile::tempdir().unwrap();
    let settings = CoordinatorSettings {
        tls_cert: Some(tmp.path().join("missing.pem")),
        tls_key: Some(tmp.path().join("missing.key")),
        ..CoordinatorSettings::default()
    };
    let found = settings.check().problems;
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("`tls_ca` missing"), "{found:#?}");

    let settings = CoordinatorSettings {
        tls_ca: Some(tmp.path().join("missing-ca.pem")),
        ..settings
    };
    let found = settings.check().problems;
    assert!(found[0].contains("missing.key"), "{found:#?}");

    let key = write(tmp.path(), "open.key", "-----BEGIN PRIVATE KEY-----\n");
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let settings = CoordinatorSettings {
        tls_key: Some(key),
        ..settings
    };
    let found = settings.check().problems;
    assert!(found[0].contains("chmod 600"), "{found:#?}");

    let notes = CoordinatorSettings::default().check();
    assert!(notes.problems.is_empty());
    assert!(notes.notes[0].contains("--tls-cert"), "{:?}", notes.notes);
}

#[test]
fn a_plaintext_web_view_off_loopback_is_a_problem() {
    let settings = CoordinatorSettings {
        plaintext: true,
        web: Some("0.0.0.0:7703".parse().unwrap()),
        ..CoordinatorSettings::default()
    };
    let found = settings.check().problems;
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("`web = \"0.0.0.0:7703\"`") && found[0].contains("TLS files"),
        "{found:#?}"
    );
    let loopback = CoordinatorSettings {
        web: Some("127.0.0.1:7703".parse().unwrap()),
        ..settings
    };
    assert!(loopback.check().problems.is_empty());
    assert!(loopback.to_toml().contains("web = \"127.0.0.1:7703\""));
}

#[test]
fn agent_checks_name_each_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let settings = AgentSettings {
        coordinator: "http://coord.example:7700".to_string(),
        probes: Some(tmp.path().join("no-probes")),
        policy: Some(tmp.path().join("no-policy.toml")),
        ..AgentSettings::default()
    };
    let found = settings.check().problems;
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].contains("not loopback"), "{found:#?}");
    assert!(found[1].contains("no-probes"), "{found:#?}");
    assert!(found[2].contains("no-policy.toml"), "{found:#?}");
    assert!(AgentSettings::default().check().problems.is_empty());
}

#[test]
fn effective_settings_print_as_the_file_format() {
    // A file in the working directory: its relative paths mean what the defaults mean.
    let text = CoordinatorSettings::default().to_toml();
    let file = ConfigFile::parse(&text, Path::new("x.toml")).unwrap();
    let mut settings = CoordinatorSettings::default();
    settings.overlay(file.coordinator.as_ref().unwrap(), |_| false);
    assert_eq!(settings, CoordinatorSettings::default());
    assert!(text.contains("# tls_cert: not set"), "{text}");
    let text = AgentSettings::default().to_toml();
    let file = ConfigFile::parse(&text, Path::new("/x.toml")).unwrap();
    assert_eq!(
        file.agent.unwrap().coordinator.unwrap(),
        DEFAULT_COORDINATOR_URL
    );
}

/// One set of rules: what the coordinator refuses to start with is what `config check`
/// calls a problem, whether the settings came from flags or a file.
#[test]
fn the_coordinator_refuses_what_config_check_calls_a_problem() {
    let (command, _) = parse_args(&["abfleet", "coordinator", "--plaintext"]);
    let Command::Coordinator(args) = command else {
        unreachable!()
    };
    let given = CoordinatorSettings::from(&args);
    assert_eq!(
        given,
        CoordinatorSettings {
            plaintext: true,
            ..CoordinatorSettings::default()
        }
    );
    assert!(given.refusals().is_empty());
    let cases: Vec<(CoordinatorSettings, &str)> = vec![
        (
            CoordinatorSettings {
                max_attempts: 0,
                ..given.clone()
            },
            "a job needs at least 1 attempt",
        ),
        (
            CoordinatorSettings {
                heartbeat_seconds: 30.0,
                ..given.clone()
            },
            "must be shorter than `lease_seconds`",
        ),
        (
            CoordinatorSettings {
                lease_seconds: f64::INFINITY,
                ..given.clone()
            },
            "`lease_seconds` is inf",
        ),
        (
            CoordinatorSettings {
                debounce_seconds: -1.0,
                ..given.clone()
            },
            "`debounce_seconds` is -1",
        ),
        (
            CoordinatorSettings {
                watch_upstream_interval: Some(60.0),
                ..given.clone()
            },
            "the watcher polls the milestone spec's upstream",
        ),
        (
            CoordinatorSettings {
                perf_label: " ".into(),
                ..given.clone()
            },
            "`perf_label` is empty",
        ),
        (
            CoordinatorSettings {
                webhook_secret_file: Some("secret".into()),
                ..given.clone()
            },
            "webhooks arrive on the HTTP listener",
        ),
        (
            CoordinatorSettings {
                sweep_spec: Some("sweep.toml".into()),
                ..given.clone()
            },
            "a toolchain bump of the milestone spec starts the sweep",
        ),
        (
            CoordinatorSettings {
                tls_ca: Some("ca.pem".into()),
                ..given.clone()
            },
            "TLS files are both set",
        ),
    ];
    for (settings, why) in cases {
        let refusals = settings.refusals();
        assert!(
            refusals.iter().any(|r| r.contains(why)),
            "{why}: {refusals:?}"
        );
        let problems = settings.check().problems;
        for refusal in &refusals {
            assert!(problems.contains(refusal), "{refusal} not in {problems:?}");
        }
    }
}
