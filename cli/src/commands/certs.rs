//! `abfleet certs init|issue|show` (`revoke` and `list` ask the coordinator: `certificates.rs`): the fleet CA and the certificates it signs, as files in
//! one directory (`ca.pem`, `ca.key`, `ROLE-NAME.pem`, `ROLE-NAME.key`). The certificates
//! themselves come from `core::certs`; this module only writes and reads the files. Keys are
//! created with mode 0600 (never chmod-ed after), certificates 0644; nothing is overwritten
//! without `--force`, and a forced write replaces the file by a rename, so a reader never
//! sees half a key.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use abfleet_core::certs::{self, IssuedCert, Role};

use crate::cli::{CertRole, CertsCommand, CoordinatorArgs, ListFormat};
use crate::failure::{Classify, Failure};

const KEY_MODE: u32 = 0o600;
const CERT_MODE: u32 = 0o644;

pub async fn run(command: CertsCommand) -> Result<i32, Failure> {
    match command {
        CertsCommand::Init { dir, force } => init(&dir.dir, force),
        CertsCommand::Issue {
            role,
            name,
            san,
            dir,
            force,
        } => issue(&dir.dir, role_of(role), &name, san, force),
        CertsCommand::Show { cert, dir, format } => show(&dir.dir, &cert, format),
        CertsCommand::Revoke {
            serial_or_fingerprint,
            cert,
            reason,
            to: CoordinatorArgs {
                coordinator, tls, ..
            },
        } => {
            super::certificates::revoke(
                serial_or_fingerprint.as_deref(),
                cert.as_deref(),
                &reason,
                &coordinator,
                &tls,
            )
            .await
        }
        CertsCommand::List {
            to: CoordinatorArgs {
                coordinator, tls, ..
            },
            format,
        } => super::certificates::list(&coordinator, &tls, format).await,
    }
}

fn role_of(role: CertRole) -> Role {
    match role {
        CertRole::Agent => Role::Agent,
        CertRole::Operator => Role::Operator,
        CertRole::Coordinator => Role::Coordinator,
        CertRole::Viewer => Role::Viewer,
    }
}

/// The certificate and key paths of a CA or leaf: `DIR/STEM.pem`, `DIR/STEM.key`.
pub fn paths(dir: &Path, stem: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{stem}.pem")),
        dir.join(format!("{stem}.key")),
    )
}

fn init(dir: &Path, force: bool) -> Result<i32, Failure> {
    let (cert_path, key_path) = paths(dir, "ca");
    refuse_existing(&[&cert_path, &key_path], force)?;
    let ca = certs::new_ca("abfleet fleet CA").usage()?;
    write_pair(dir, &ca, &cert_path, &key_path, force)?;
    println!(
        "fleet CA written: {} (give it to every host) and {} (keep it off the bench hosts)",
        cert_path.display(),
        key_path.display()
    );
    Ok(abfleet_core::exit::OK)
}

fn issue(
    dir: &Path,
    role: Role,
    name: &str,
    sans: Vec<String>,
    force: bool,
) -> Result<i32, Failure> {
    certs::check_name(name).usage()?;
    let sans = match role {
        Role::Coordinator if sans.is_empty() => vec!["localhost".into(), "127.0.0.1".into()],
        Role::Coordinator => sans,
        _ if !sans.is_empty() => {
            return Err(Failure::usage(anyhow::anyhow!(
            "--san is for coordinator certificates only; agents and operators are named by --name"
        )))
        }
        _ => sans,
    };
    let ca = read_ca(dir)?;
    let (cert_path, key_path) = paths(dir, &format!("{role}-{name}"));
    refuse_existing(&[&cert_path, &key_path], force)?;
    let leaf = certs::issue(&ca, role, name, &sans).usage()?;
    write_pair(dir, &leaf, &cert_path, &key_path, force)?;
    println!(
        "{role} certificate for `{name}` written: {} and {}",
        cert_path.display(),
        key_path.display()
    );
    Ok(abfleet_core::exit::OK)
}

fn show(dir: &Path, cert: &Path, format: ListFormat) -> Result<i32, Failure> {
    let ca = read_ca_cert(dir)?;
    let text = std::fs::read_to_string(cert)
        .map_err(|err| anyhow::anyhow!("failed to read `{}`: {err}", cert.display()))
        .usage()?;
    let peer = certs::der_from_pem("certificate", &text).usage()?;
    let ca_der = certs::der_from_pem("CA certificate", &ca).usage()?;
    let identity = certs::peer_identity(&ca_der, &peer)
        .map_err(|err| anyhow::anyhow!("`{}`: {err}", cert.display()))
        .usage()?;
    let facts = certs::certificate_facts(&text).usage()?;
    let expires_ms = facts.not_after_s.saturating_mul(1000);
    let expires = abfleet_core::report::format_utc(expires_ms);
    match format {
        ListFormat::Text => {
            println!("role {} name {}", identity.role, identity.name);
            println!("serial {}", identity.certificate.serial);
            println!("sha256 {}", identity.certificate.fingerprint);
            println!("expires {expires}");
        }
        ListFormat::Json => println!(
            "{}",
            serde_json::json!({
                "file": cert.display().to_string(),
                "role": identity.role.to_string(),
                "name": identity.name,
                "serial": identity.certificate.serial,
                "sha256": identity.certificate.fingerprint,
                "expires": expires,
                "expires_ms": expires_ms,
            })
        ),
    }
    Ok(abfleet_core::exit::OK)
}

fn read_ca_cert(dir: &Path) -> Result<String, Failure> {
    let (cert_path, _) = paths(dir, "ca");
    std::fs::read_to_string(&cert_path)
        .map_err(|err| {
            anyhow::anyhow!(
                "failed to read the fleet CA `{}`: {err}; make one with `abfleet certs init --dir {}`",
                cert_path.display(),
                dir.display()
            )
        })
        .usage()
}

fn read_ca(dir: &Path) -> Result<IssuedCert, Failure> {
    let cert_pem = read_ca_cert(dir)?;
    let (_, key_path) = paths(dir, "ca");
    let key_pem = std::fs::read_to_string(&key_path)
        .map_err(|err| {
            anyhow::anyhow!(
                "failed to read the fleet CA key `{}`: {err}; issue certificates where the CA key is",
                key_path.display()
            )
        })
        .usage()?;
    Ok(IssuedCert { cert_pem, key_pem })
}

fn refuse_existing(paths: &[&Path], force: bool) -> Result<(), Failure> {
    if force {
        return Ok(());
    }
    if let Some(existing) = paths.iter().find(|p| p.exists() || p.is_symlink()) {
        return Err(Failure::usage(anyhow::anyhow!(
            "`{}` already exists; refusing to overwrite it (pass --force to replace it)",
            existing.display()
        )));
    }
    Ok(())
}

fn write_pair(
    dir: &Path,
    issued: &IssuedCert,
    cert_path: &Path,
    key_path: &Path,
    force: bool,
) -> Result<(), Failure> {
    std::fs::create_dir_all(dir)
        .map_err(|err| anyhow::anyhow!("failed to create `{}`: {err}", dir.display()))
        .infra()?;
    // The key first: a certificate without its key is useless, a key without its
    // certificate is re-issued.
    write_file(key_path, &issued.key_pem, KEY_MODE, force)?;
    write_file(cert_path, &issued.cert_pem, CERT_MODE, force)
}

/// Writes a new file created with `mode`; with `force`, through a fresh file renamed over
/// the old one, so the mode is the new file's, not whatever the old one had.
fn write_file(path: &Path, contents: &str, mode: u32, force: bool) -> Result<(), Failure> {
    let target = if force {
        path.with_extension(format!("tmp-{}", std::process::id()))
    } else {
        path.to_path_buf()
    };
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&target)?;
        file.write_all(contents.as_bytes())?;
        file.sync_all()?;
        if force {
            std::fs::rename(&target, path)?;
        }
        Ok::<(), std::io::Error>(())
    })();
    written.map_err(|err| {
        if force {
            let _ = std::fs::remove_file(&target);
        }
        let failure = anyhow::anyhow!("failed to write `{}`: {err}", path.display());
        if err.kind() == std::io::ErrorKind::AlreadyExists {
            Failure::usage(failure.context("pass --force to replace it"))
        } else {
            Failure::infra(failure)
        }
    })
}
