//! `abfleet certs init` and `issue` as a person runs them: the files, their modes, the
//! refusal to overwrite, and the role and name read back by `core::certs::peer_identity`
//! (what the coordinator's TLS layer will call) and by `abfleet certs show`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use abfleet_core::certs::{der_from_pem, peer_identity, Role};

fn abfleet(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).to_string()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn der(path: &Path) -> Vec<u8> {
    der_from_pem("certificate", &std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn init_and_issue_write_the_files_refuse_to_overwrite_and_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("abfleet-certs");
    ok(&abfleet(tmp.path(), &["certs", "init"]));
    assert_eq!(mode(&dir.join("ca.key")), 0o600);
    assert_eq!(mode(&dir.join("ca.pem")), 0o644);

    ok(&abfleet(
        tmp.path(),
        &["certs", "issue", "--role", "agent", "--name", "bench-7"],
    ));
    ok(&abfleet(
        tmp.path(),
        &["certs", "issue", "--role", "operator", "--name", "ci"],
    ));
    ok(&abfleet(
        tmp.path(),
        &[
            "certs",
            "issue",
            "--role",
            "coordinator",
            "--name",
            "coord",
            "--san",
            "coord.lab.example",
            "--san",
            "10.0.0.5",
        ],
    ));
    let ca = der(&dir.join("ca.pem"));
    for (stem, role, name) in [
        ("agent-bench-7", Role::Agent, "bench-7"),
        ("operator-ci", Role::Operator, "ci"),
        ("coordinator-coord", Role::Coordinator, "coord"),
    ] {
        let cert = dir.join(format!("{stem}.pem"));
        assert_eq!(mode(&dir.join(format!("{stem}.key"))), 0o600, "{stem}");
        assert_eq!(mode(&cert), 0o644, "{stem}");
        let identity = peer_identity(&ca, &der(&cert)).unwrap();
        assert_eq!((identity.role, identity.name.as_str()), (role, name));
        let shown = ok(&abfleet(
            tmp.path(),
            &["certs", "show", cert.to_str().unwrap()],
        ));
        assert_eq!(
            shown.lines().next().unwrap(),
            format!("role {role} name {name}")
        );
        let identity = peer_identity(&ca, &der(&cert)).unwrap();
        assert!(
            shown.contains(&format!("serial {}", identity.certificate.serial))
                && shown.contains(&format!("sha256 {}", identity.certificate.fingerprint)),
            "{shown}"
        );
        let json: serde_json::Value = serde_json::from_str(&ok(&abfleet(
            tmp.path(),
            &["certs", "show", "--format", "json", cert.to_str().unwrap()],
        )))
        .unwrap();
        assert_eq!(
            (
                &json["role"],
                &json["name"],
                &json["serial"],
                &json["sha256"]
            ),
            (
                &serde_json::json!(role.to_string()),
                &serde_json::json!(name),
                &serde_json::json!(identity.certificate.serial),
                &serde_json::json!(identity.certificate.fingerprint)
            ),
            "{json}"
        );
        assert!(json["expires_ms"].as_i64().unwrap() > 0, "{json}");
    }
    let coordinator = std::fs::read_to_string(dir.join("coordinator-coord.pem")).unwrap();
    let parsed = der_from_pem("c", &coordinator).unwrap();
    let text = String::from_utf8_lossy(&parsed);
    assert!(
        text.contains("coord.lab.example"),
        "the DNS SAN is in the cert"
    );

    // Nothing is overwritten without --force, and the old files stay as they were.
    let key_before = std::fs::read(dir.join("agent-bench-7.key")).unwrap();
    for args in [
        &["certs", "init"][..],
        &["certs", "issue", "--role", "agent", "--name", "bench-7"][..],
    ] {
        let refused = abfleet(tmp.path(), args);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("already exists") && stderr.contains("--force"),
            "{stderr}"
        );
    }
    assert_eq!(
        std::fs::read(dir.join("agent-bench-7.key")).unwrap(),
        key_before
    );

    // Rotation: a forced re-issue makes a new key, still 0600, still trusted by the same CA.
    ok(&abfleet(
        tmp.path(),
        &[
            "certs", "issue", "--role", "agent", "--name", "bench-7", "--force",
        ],
    ));
    assert_ne!(
        std::fs::read(dir.join("agent-bench-7.key")).unwrap(),
        key_before
    );
    assert_eq!(mode(&dir.join("agent-bench-7.key")), 0o600);
    assert!(peer_identity(&ca, &der(&dir.join("agent-bench-7.pem"))).is_ok());

    // A certificate from another CA is not trusted by this one.
    let other = tmp.path().join("other");
    ok(&abfleet(
        tmp.path(),
        &["certs", "init", "--dir", other.to_str().unwrap()],
    ));
    ok(&abfleet(
        tmp.path(),
        &[
            "certs",
            "issue",
            "--dir",
            other.to_str().unwrap(),
            "--role",
            "operator",
            "--name",
            "mallory",
        ],
    ));
    let forged = other.join("operator-mallory.pem");
    assert!(peer_identity(&ca, &der(&forged)).is_err());
    let shown = abfleet(tmp.path(), &["certs", "show", forged.to_str().unwrap()]);
    assert_eq!(shown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&shown.stderr).contains("not signed by the fleet CA"));

    // Usage mistakes are named.
    let no_ca = abfleet(
        tmp.path(),
        &[
            "certs", "issue", "--dir", "nowhere", "--role", "agent", "--name", "x",
        ],
    );
    assert_eq!(no_ca.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_ca.stderr).contains("abfleet certs init"));
    let san = abfleet(
        tmp.path(),
        &[
            "certs",
            "issue",
            "--role",
            "agent",
            "--name",
            "b",
            "--san",
            "x.example",
        ],
    );
    assert_eq!(san.status.code(), Some(2));
    let bad_name = abfleet(
        tmp.path(),
        &["certs", "issue", "--role", "agent", "--name", "../x"],
    );
    assert_eq!(bad_name.status.code(), Some(2));
}
