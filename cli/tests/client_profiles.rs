//! Client profiles (issue 25): the coordinator's URL and the three TLS files kept in one
//! file, so that an operator's commands need no flags. Real certificates from `abfleet certs`,
//! a real coordinator serving mutual TLS on loopback, the real binary reading the profile
//! file named by `ABFLEET_CLIENT_CONFIG`; the precedence is the config files' (a flag or its
//! variable wins), and `config check` checks a profile file as it checks the others.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use abfleet_coordinator::{CoordinatorConfig, ServerTransport};
use abfleet_proto::transport::TlsFiles;
use support::*;

/// `abfleet ARGS` in `dir` with the profile file `profiles` and `env` set, and no
/// coordinator or TLS variable of the calling shell.
fn abfleet_with(dir: &Path, profiles: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_abfleet"));
    command.current_dir(dir).args(args);
    for name in [
        "ABFLEET_COORDINATOR",
        "ABFLEET_PROFILE",
        "ABFLEET_TLS_CERT",
        "ABFLEET_TLS_KEY",
        "ABFLEET_TLS_CA",
    ] {
        command.env_remove(name);
    }
    command.env("ABFLEET_CLIENT_CONFIG", profiles);
    command.envs(env.iter().copied());
    command.output().unwrap()
}

fn succeeded(output: &Output) -> String {
    assert!(output.status.success(), "{}", output_text(output));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_names_the_coordinator_and_its_tls_files_and_flags_still_win() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    for args in [
        &["certs", "init"][..],
        &["certs", "issue", "--role", "coordinator", "--name", "coord"],
        &["certs", "issue", "--role", "operator", "--name", "alice"],
    ] {
        succeeded(&abfleet(root, args));
    }
    let certs = root.join("abfleet-certs");
    let coordinator = TestCoordinator::start_with_transport(
        &root.join("data"),
        CoordinatorConfig::default(),
        ServerTransport::MutualTls(
            TlsFiles::load(
                &certs.join("coordinator-coord.pem"),
                &certs.join("coordinator-coord.key"),
                &certs.join("ca.pem"),
            )
            .unwrap(),
        ),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;
    let url = coordinator.url().replace("http://", "https://");
    let spec = SpecOptions::path().write(root, "spec.toml");

    // The file lives in its own directory; its paths are taken from there.
    let config_dir = root.join("home/.config/abfleet");
    std::fs::create_dir_all(&config_dir).unwrap();
    let profiles = config_dir.join("client.toml");
    let tls = "tls_cert = \"../../../abfleet-certs/operator-alice.pem\"\n\
               tls_key = \"../../../abfleet-certs/operator-alice.key\"\n\
               tls_ca = \"../../../abfleet-certs/ca.pem\"\n";
    std::fs::write(
        &profiles,
        format!(
            "# the default points at a coordinator that is not there\n\
             [profile.default]\ncoordinator = \"https://127.0.0.1:9\"\n{tls}\n\
             [profile.lab]\ncoordinator = \"{url}\"\n{tls}"
        ),
    )
    .unwrap();

    // --profile: no other flag, over mutual TLS.
    let submitted = succeeded(&abfleet_with(
        root,
        &profiles,
        &[],
        &["submit", spec.to_str().unwrap(), "--profile", "lab"],
    ));
    let run_id = submitted.trim().to_string();
    let listed = succeeded(&abfleet_with(
        root,
        &profiles,
        &[],
        &["runs", "--profile", "lab", "--format", "json"],
    ));
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["runs"][0]["run_id"], run_id.as_str());

    // ABFLEET_PROFILE picks it as well.
    let agents = succeeded(&abfleet_with(
        root,
        &profiles,
        &[("ABFLEET_PROFILE", "lab")],
        &["agents", "--format", "json"],
    ));
    let agents: serde_json::Value = serde_json::from_str(&agents).unwrap();
    assert!(agents["agents"].is_array(), "{agents}");

    // No profile named: `default`, which points at the dead port.
    let refused = abfleet_with(root, &profiles, &[], &["runs"]);
    let text = output_text(&refused);
    assert_eq!(refused.status.code(), Some(3), "{text}");
    assert!(text.contains("127.0.0.1:9"), "{text}");

    // A flag wins over the profile; the profile still gives the TLS files no flag gave.
    let flagged = succeeded(&abfleet_with(
        root,
        &profiles,
        &[],
        &["runs", "--coordinator", &url],
    ));
    assert!(flagged.contains(&run_id), "{flagged}");
    // ... and so does the variable.
    let from_variable = succeeded(&abfleet_with(
        root,
        &profiles,
        &[("ABFLEET_COORDINATOR", &url)],
        &["runs"],
    ));
    assert!(from_variable.contains(&run_id), "{from_variable}");
    // One TLS flag keeps all three of the profile's out: they go together.
    let mixed = abfleet_with(
        root,
        &profiles,
        &[],
        &[
            "runs",
            "--profile",
            "lab",
            "--tls-cert",
            certs.join("operator-alice.pem").to_str().unwrap(),
        ],
    );
    let text = output_text(&mixed);
    assert_eq!(mixed.status.code(), Some(2), "{text}");
    assert!(text.contains("--tls-key"), "{text}");

    // A profile that is not there names those that are.
    let missing = abfleet_with(root, &profiles, &[], &["runs", "--profile", "prod"]);
    let text = output_text(&missing);
    assert_eq!(missing.status.code(), Some(2), "{text}");
    assert!(
        text.contains("has no [profile.prod]; it has default, lab"),
        "{text}"
    );
    // --profile without a file says where it looked.
    let nowhere = abfleet_with(
        root,
        &root.join("absent.toml"),
        &[],
        &["runs", "--profile", "lab"],
    );
    let text = output_text(&nowhere);
    assert_eq!(nowhere.status.code(), Some(2), "{text}");
    assert!(
        text.contains("no client profile file at") && text.contains("absent.toml"),
        "{text}"
    );

    // `config check` reads a profile file as it reads the others.
    let checked = succeeded(&abfleet_with(
        root,
        &profiles,
        &[],
        &["config", "check", profiles.to_str().unwrap()],
    ));
    assert!(checked.contains("[profile.lab]"), "{checked}");
    assert!(
        checked.contains(&format!("coordinator = \"{url}\"")),
        "{checked}"
    );
    let checked = succeeded(&abfleet_with(
        root,
        &profiles,
        &[],
        &[
            "config",
            "check",
            "--format",
            "json",
            profiles.to_str().unwrap(),
        ],
    ));
    let checked: serde_json::Value = serde_json::from_str(&checked).unwrap();
    assert_eq!(checked["valid"], true, "{checked}");
    let lab = checked["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|table| table["table"] == "profile.lab")
        .unwrap_or_else(|| panic!("{checked}"));
    assert_eq!(lab["settings"]["coordinator"], url.as_str(), "{checked}");
    assert_eq!(
        lab["settings"]["tls_ca"],
        config_dir
            .join("../../../abfleet-certs/ca.pem")
            .display()
            .to_string(),
        "{checked}"
    );

    // A key others can read is a problem of the profile, named with its table.
    std::fs::set_permissions(
        certs.join("operator-alice.key"),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let unsafe_key = abfleet_with(
        root,
        &profiles,
        &[],
        &[
            "config",
            "check",
            "--format",
            "json",
            profiles.to_str().unwrap(),
        ],
    );
    assert_eq!(
        unsafe_key.status.code(),
        Some(2),
        "{}",
        output_text(&unsafe_key)
    );
    let report: serde_json::Value = serde_json::from_slice(&unsafe_key.stdout).unwrap();
    assert_eq!(report["valid"], false);
    let problems = report["problems"].to_string();
    assert!(
        problems.contains("[profile.lab]") && problems.contains("operator-alice.key"),
        "{report}"
    );
}
