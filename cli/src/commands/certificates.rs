//! `abfleet certs revoke` and `abfleet certs list`: the running coordinator's deny list
//! (`certs init|issue|show`, in `certs.rs`, only touch files). A revocation is sent to the
//! coordinator, which stores it and applies it at once; these commands print what it did.

use std::path::Path;

use abfleet_core::report::format_utc;
use abfleet_proto::control_link::{CertificateListing, RevokeTarget, RevokedCertificate};

use super::{control_client, link_error};
use crate::cli::{ListFormat, TlsArgs};
use crate::failure::{Classify, Failure};
use crate::terminal_text::visible_cell;
use crate::text_table::TextTable;

pub async fn revoke(
    serial_or_fingerprint: Option<&str>,
    cert: Option<&Path>,
    reason: &str,
    coordinator: &str,
    tls: &TlsArgs,
) -> Result<i32, Failure> {
    let target = match cert {
        Some(path) => {
            let pem = std::fs::read_to_string(path)
                .map_err(|err| anyhow::anyhow!("failed to read `{}`: {err}", path.display()))
                .usage()?;
            // Said here, before the coordinator is asked, with the file's name.
            abfleet_core::certs::certificate_facts(&pem)
                .map_err(|err| anyhow::anyhow!("`{}`: {err}", path.display()))
                .usage()?;
            RevokeTarget::CertificatePem(pem)
        }
        None => {
            RevokeTarget::SerialOrFingerprint(serial_or_fingerprint.unwrap_or_default().to_string())
        }
    };
    let response = control_client(coordinator, tls)
        .await?
        .revoke(target, reason)
        .await
        .map_err(|err| link_error("failed to revoke the certificate", err))?;
    let revoked = response.revoked;
    let described = describe(&revoked);
    let who = visible_cell(&described);
    if response.added {
        println!("revoked {who}: refused from now on");
    } else {
        println!(
            "{who} was already revoked at {} by {} ({}); nothing changed",
            format_utc(revoked.revoked_ms),
            visible_cell(&revoked.revoked_by),
            visible_cell(&revoked.reason)
        );
    }
    if !response.sessions_ended.is_empty() {
        let agents: Vec<String> = response
            .sessions_ended
            .iter()
            .map(ToString::to_string)
            .collect();
        println!("ended the session of agent {}", agents.join(", "));
    }
    if response.jobs_requeued > 0 {
        println!(
            "{} job(s) it held went back to the queue",
            response.jobs_requeued
        );
    }
    Ok(abfleet_core::exit::OK)
}

pub async fn list(coordinator: &str, tls: &TlsArgs, format: ListFormat) -> Result<i32, Failure> {
    let listing = control_client(coordinator, tls)
        .await?
        .certificates()
        .await
        .map_err(|err| link_error("failed to list certificates", err))?;
    if format == ListFormat::Json {
        println!("{}", listing_json(&listing));
        return Ok(abfleet_core::exit::OK);
    }
    println!("revoked certificates: {}", listing.revoked.len());
    for revoked in &listing.revoked {
        println!(
            "  {}  revoked {} by {}: {}",
            visible_cell(&describe(revoked)),
            format_utc(revoked.revoked_ms),
            visible_cell(&revoked.revoked_by),
            visible_cell(&revoked.reason)
        );
    }
    println!("agent ids and the certificate each last registered with:");
    let mut table = TextTable::new(["agent", "certificate", "serial", "registered", "state"]);
    for agent in &listing.agents {
        table.row([
            agent.agent_id.to_string(),
            agent.cert_name.clone(),
            or_dash(&agent.serial).to_string(),
            agent.registered_ms.map_or("-".into(), format_utc),
            (if agent.revoked { "revoked" } else { "valid" }).to_string(),
        ]);
    }
    for line in table.render().lines() {
        println!("  {line}");
    }
    Ok(abfleet_core::exit::OK)
}

/// `certs list --format json`: the deny list and each agent id's certificate
/// (docs/operations.md, "Lists for scripts"); an unknown value is `null`, not `""`.
fn listing_json(listing: &CertificateListing) -> serde_json::Value {
    let text = |value: &str| (!value.is_empty()).then(|| value.to_string());
    let revoked: Vec<serde_json::Value> = listing
        .revoked
        .iter()
        .map(|revoked| {
            serde_json::json!({
                "key": revoked.key,
                "name": text(&revoked.name),
                "role": text(&revoked.role),
                "serial": text(&revoked.serial),
                "sha256": text(&revoked.fingerprint),
                "revoked": format_utc(revoked.revoked_ms),
                "revoked_ms": revoked.revoked_ms,
                "revoked_by": revoked.revoked_by,
                "reason": revoked.reason,
            })
        })
        .collect();
    let agents: Vec<serde_json::Value> = listing
        .agents
        .iter()
        .map(|agent| {
            serde_json::json!({
                "agent_id": agent.agent_id.to_string(),
                "certificate": agent.cert_name,
                "serial": text(&agent.serial),
                "registered_ms": agent.registered_ms,
                "revoked": agent.revoked,
            })
        })
        .collect();
    serde_json::json!({ "revoked": revoked, "agents": agents })
}

/// A revoked certificate as one phrase: name and role when known, serial, fingerprint.
fn describe(revoked: &RevokedCertificate) -> String {
    let mut out = if revoked.name.is_empty() {
        format!("certificate {}", revoked.key)
    } else {
        format!("`{}` ({})", revoked.name, revoked.role)
    };
    if !revoked.serial.is_empty() {
        out.push_str(&format!(" serial {}", revoked.serial));
    }
    if !revoked.fingerprint.is_empty() {
        out.push_str(&format!(" sha256 {}", revoked.fingerprint));
    }
    out
}

fn or_dash(text: &str) -> &str {
    if text.is_empty() {
        "-"
    } else {
        text
    }
}
