//! The deny list and the cap on agent ids per certificate (`fleet::revocations`,
//! `fleet::certificates`), driven through the fleet on a manual clock: what a revocation
//! does to a session and a lease that are live when it comes.

use abfleet_core::certs::{self, CertificateId, Role};
use abfleet_core::lifecycle::JobState;
use abfleet_core::session::SessionMessage;
use abfleet_core::AgentId;
use tokio::sync::mpsc;

use super::{inventory, spec, Harness};
use crate::fleet::{FleetError, RevokeTarget};

/// A real certificate of the fleet CA, as the coordinator reads it.
fn agent_certificate(name: &str) -> certs::CertificateFacts {
    let ca = certs::new_ca("fleet").unwrap();
    certs::certificate_facts(&certs::issue(&ca, Role::Agent, name, &[]).unwrap().cert_pem).unwrap()
}

#[tokio::test]
async fn a_revocation_ends_the_live_session_requeues_its_job_and_refuses_the_certificate() {
    let mut h = Harness::new(3).await;
    let stolen = agent_certificate("bench-7");
    let thief = AgentId::new_random();
    h.fleet.register(thief, &inventory()).await.unwrap();
    h.fleet
        .trust()
        .bind_agent_certificate(thief, "bench-7", &stolen.identity.certificate)
        .await
        .unwrap();
    let (sender, mut session) = mpsc::unbounded_channel();
    let (_, mut ended) = h
        .fleet
        .scheduling()
        .open_session(thief, sender, Some(stolen.identity.certificate.clone()))
        .unwrap();
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    h.fleet.scheduling().ready(thief, None).await.unwrap();
    let Ok(SessionMessage::Offer(offer)) = session.try_recv() else {
        panic!("the agent with the certificate was offered nothing");
    };
    assert_eq!(h.job_state(run_id).await, JobState::Leased);

    let outcome = h
        .fleet
        .trust()
        .revoke_certificate(
            RevokeTarget::Certificate(stolen.clone()),
            "the key of bench-7 was copied off the host",
            "operator/ops",
        )
        .await
        .unwrap();
    assert!(outcome.added);
    assert_eq!(outcome.sessions_ended, vec![thief]);
    assert_eq!(outcome.jobs_requeued, 1);
    // The session's end is told why; its message channel is closed.
    let reason = ended
        .try_recv()
        .expect("the session was ended with a reason");
    assert!(
        reason.contains("revoked") && reason.contains("copied off the host"),
        "{reason}"
    );
    assert!(session.try_recv().is_err());
    // The job went back to the queue and the other (unrevoked) agent gets it.
    let retry = h.ready_and_take_offer().await;
    assert_eq!(retry.job_id, offer.job_id);
    assert_eq!(retry.attempt, offer.attempt + 1);
    // The certificate is refused from now on; a re-issued one of the same name is not.
    assert!(matches!(
        h.fleet
            .trust()
            .check_not_revoked(&stolen.identity.certificate),
        Err(FleetError::Revoked(_))
    ));
    let reissued = agent_certificate("bench-7");
    h.fleet
        .trust()
        .check_not_revoked(&reissued.identity.certificate)
        .unwrap();
    // Revoking it again changes nothing and says so.
    let again = h
        .fleet
        .trust()
        .revoke_certificate(RevokeTarget::Certificate(stolen), "twice", "operator/ops")
        .await
        .unwrap();
    assert!(!again.added);
    assert_eq!(again.jobs_requeued, 0);
}

#[tokio::test]
async fn a_serial_or_fingerprint_as_typed_is_resolved_against_the_agents_certificates() {
    let h = Harness::new(3).await;
    let seen = agent_certificate("bench-8");
    let agent = AgentId::new_random();
    h.fleet.register(agent, &inventory()).await.unwrap();
    h.fleet
        .trust()
        .bind_agent_certificate(agent, "bench-8", &seen.identity.certificate)
        .await
        .unwrap();
    // openssl's spelling of the fingerprint: upper case with colons.
    let typed = seen
        .identity
        .certificate
        .fingerprint
        .to_uppercase()
        .as_bytes()
        .chunks(2)
        .map(|pair| std::str::from_utf8(pair).unwrap())
        .collect::<Vec<_>>()
        .join(":");
    let outcome = h
        .fleet
        .trust()
        .revoke_certificate(RevokeTarget::Named(typed), "retired host", "loopback")
        .await
        .unwrap();
    assert_eq!(outcome.revocation.name, "bench-8");
    assert_eq!(outcome.revocation.certificate, seen.identity.certificate);
    // Known now by its serial too.
    let by_serial = CertificateId {
        serial: seen.identity.certificate.serial.clone(),
        fingerprint: String::new(),
    };
    assert!(h.fleet.trust().check_not_revoked(&by_serial).is_err());
    // A restarted coordinator (a new fleet on the same store) loads the list.
    let reopened = super::super::Fleet::new(
        crate::store::Store::open(h._dir.path()).unwrap(),
        Default::default(),
    );
    reopened.trust().check_not_revoked(&by_serial).unwrap();
    reopened.trust().load_deny_list().await.unwrap();
    assert!(reopened.trust().check_not_revoked(&by_serial).is_err());
    // Nonsense and an empty reason are refused, saying what to pass.
    for (named, reason, needle) in [
        ("bench-8", "x", "neither a certificate serial nor"),
        ("abcd", " ", "say why"),
    ] {
        let err = h
            .fleet
            .trust()
            .revoke_certificate(RevokeTarget::Named(named.into()), reason, "loopback")
            .await
            .unwrap_err();
        assert!(
            matches!(&err, FleetError::BadRevocation(m) if m.contains(needle)),
            "{err}"
        );
    }
}

#[tokio::test]
async fn one_certificate_brings_at_most_the_cap_of_new_agent_ids_an_hour() {
    let h = Harness::new(3).await;
    let most = h.fleet.config().max_agent_ids_per_certificate;
    assert!(most > 0);
    let certificate = agent_certificate("bench-9").identity.certificate;
    let mut ids = Vec::new();
    for _ in 0..most {
        let id = AgentId::new_random();
        h.fleet
            .trust()
            .bind_agent_certificate(id, "bench-9", &certificate)
            .await
            .unwrap();
        ids.push(id);
    }
    let err = h
        .fleet
        .trust()
        .bind_agent_certificate(AgentId::new_random(), "bench-9", &certificate)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FleetError::TooManyAgentIds { ids, .. } if ids == most as usize),
        "{err}"
    );
    // An id it already has registers again; another certificate is not affected.
    h.fleet
        .trust()
        .bind_agent_certificate(ids[0], "bench-9", &certificate)
        .await
        .unwrap();
    h.fleet
        .trust()
        .bind_agent_certificate(
            AgentId::new_random(),
            "bench-10",
            &agent_certificate("bench-10").identity.certificate,
        )
        .await
        .unwrap();
    // An hour later the window has moved on.
    h.clock
        .advance(super::super::certificates::AGENT_ID_WINDOW + std::time::Duration::from_secs(1));
    h.fleet
        .trust()
        .bind_agent_certificate(AgentId::new_random(), "bench-9", &certificate)
        .await
        .unwrap();
}

/// A certificate revoked by a fingerprint that starts with 0, typed with colons as openssl
/// prints it, before any agent registered with it: refused all the same (the deny list kept
/// the typed form without its leading zero and looked the presented one up with it).
#[tokio::test]
async fn a_fingerprint_with_a_leading_zero_revokes_its_certificate() {
    let h = Harness::new(3).await;
    let ca = certs::new_ca("fleet").unwrap();
    let facts = (0..400)
        .map(|_| {
            certs::certificate_facts(
                &certs::issue(&ca, Role::Viewer, "dash", &[])
                    .unwrap()
                    .cert_pem,
            )
            .unwrap()
        })
        .find(|facts| facts.identity.certificate.fingerprint.starts_with('0'))
        .expect("one certificate in 16 has a fingerprint starting with 0");
    let certificate = facts.identity.certificate.clone();
    let typed: Vec<String> = certificate
        .fingerprint
        .as_bytes()
        .chunks(2)
        .map(|pair| std::str::from_utf8(pair).unwrap().to_uppercase())
        .collect();
    h.fleet
        .trust()
        .revoke_certificate(
            RevokeTarget::Named(typed.join(":")),
            "dashboard retired",
            "ops",
        )
        .await
        .unwrap();
    assert!(
        matches!(
            h.fleet.trust().check_not_revoked(&certificate),
            Err(FleetError::Revoked(_))
        ),
        "{}",
        certificate.fingerprint
    );
    let other = agent_certificate("bench-1").identity.certificate;
    assert!(h.fleet.trust().check_not_revoked(&other).is_ok());
}
