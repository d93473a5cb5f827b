//! Conversions between wire messages and domain types, validating on the way in.

use std::time::Duration;

use abfleet_core::generation::Generation;
use abfleet_core::inventory::Inventory;
use abfleet_core::progress::RunProgress;
use abfleet_core::session::{
    AgentCacheUsage, AgentMessage, JobOffer, OutgoingMessage, SessionMessage,
};
use abfleet_core::spec::{JobSpec, SpecJson};

use crate::pb;

/// A wire message that does not make a valid domain value.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("field `{field}`: {source}")]
    BadId {
        field: &'static str,
        source: abfleet_core::ids::ParseIdError,
    },
    #[error("field `{field}` is missing")]
    Missing { field: &'static str },
    #[error(
        "field `{field}` does not parse: {message}; is the peer from another abfleet version?"
    )]
    BadDocument {
        field: &'static str,
        message: String,
    },
}

impl From<WireError> for tonic::Status {
    fn from(err: WireError) -> Self {
        tonic::Status::invalid_argument(err.to_string())
    }
}

/// Parses one of the uuid newtypes from a wire field, naming the field on failure.
pub fn parse_id<T>(field: &'static str, value: &str) -> Result<T, WireError>
where
    T: std::str::FromStr<Err = abfleet_core::ids::ParseIdError>,
{
    if value.is_empty() {
        return Err(WireError::Missing { field });
    }
    value
        .parse()
        .map_err(|source| WireError::BadId { field, source })
}

impl From<Inventory> for pb::Inventory {
    fn from(inv: Inventory) -> Self {
        pb::Inventory {
            hostname: inv.hostname,
            os: inv.os,
            kernel: inv.kernel,
            cpu_model: inv.cpu_model,
            physical_cores: inv.physical_cores,
            logical_cores: inv.logical_cores,
            memory_bytes: inv.memory_bytes,
            arch: inv.arch,
            hardware_json: inv
                .hardware
                .map(|value| value.to_string())
                .unwrap_or_default(),
            generations: inv
                .generations
                .into_iter()
                .map(|g| pb::Generation {
                    key: g.key,
                    backend: g.backend,
                    vendor: g.vendor,
                    silicon_id: g.silicon_id,
                    description: g.description,
                    simulated: g.simulated,
                    toolchain: g.toolchain.into_iter().collect(),
                    hardware_id: g.hardware_id,
                    emulator: g.emulator.unwrap_or_default(),
                })
                .collect(),
        }
    }
}

impl TryFrom<pb::Inventory> for Inventory {
    type Error = WireError;

    fn try_from(inv: pb::Inventory) -> Result<Self, Self::Error> {
        if inv.hostname.is_empty() {
            return Err(WireError::Missing {
                field: "inventory.hostname",
            });
        }
        Ok(Inventory {
            hostname: inv.hostname,
            os: inv.os,
            kernel: inv.kernel,
            cpu_model: inv.cpu_model,
            physical_cores: inv.physical_cores,
            logical_cores: inv.logical_cores,
            memory_bytes: inv.memory_bytes,
            arch: inv.arch,
            hardware: serde_json::from_str(&inv.hardware_json).ok(),
            generations: inv
                .generations
                .into_iter()
                .map(|g| {
                    if g.key.is_empty() {
                        return Err(WireError::Missing {
                            field: "inventory.generations.key",
                        });
                    }
                    Ok(Generation {
                        key: g.key,
                        backend: g.backend,
                        vendor: g.vendor,
                        silicon_id: g.silicon_id,
                        hardware_id: g.hardware_id,
                        description: g.description,
                        simulated: g.simulated,
                        emulator: non_empty(g.emulator),
                        toolchain: g.toolchain.into_iter().collect(),
                    })
                })
                .collect::<Result<_, _>>()?,
        })
    }
}

/// An optional wire string: empty means absent.
pub(crate) fn non_empty(value: String) -> Option<String> {
    (!value.is_empty()).then_some(value)
}

impl From<RunProgress> for pb::RunProgress {
    fn from(update: RunProgress) -> Self {
        pb::RunProgress {
            run_id: update.run_id.to_string(),
            job_id: update.job_id.map(|id| id.to_string()).unwrap_or_default(),
            state: update.state,
            message: update.message,
            cells_done: update.cells_done,
            cells_total: update.cells_total,
            current_cell: update.current_cell.unwrap_or_default(),
            finished: update.exit_code.is_some(),
            exit_code: update.exit_code.unwrap_or_default(),
        }
    }
}

impl TryFrom<pb::RunProgress> for RunProgress {
    type Error = WireError;

    fn try_from(update: pb::RunProgress) -> Result<Self, Self::Error> {
        Ok(RunProgress {
            run_id: parse_id("run_id", &update.run_id)?,
            job_id: non_empty(update.job_id)
                .map(|id| parse_id("job_id", &id))
                .transpose()?,
            state: update.state,
            message: update.message,
            cells_done: update.cells_done,
            cells_total: update.cells_total,
            current_cell: non_empty(update.current_cell),
            exit_code: update.finished.then_some(update.exit_code),
        })
    }
}

/// An offer as the coordinator sends it: the spec's stored JSON goes out as it is.
impl From<JobOffer<SpecJson>> for pb::JobOffer {
    fn from(offer: JobOffer<SpecJson>) -> Self {
        pb::JobOffer {
            job_id: offer.job_id.to_string(),
            run_id: offer.run_id.to_string(),
            attempt: offer.attempt,
            spec_json: offer.spec.into_string(),
            lease_ms: offer.lease.as_millis() as u64,
            next_seq: offer.next_seq,
            generation: offer.generation.unwrap_or_default(),
            kept_cells: offer.kept_cells.into_iter().collect(),
        }
    }
}

impl TryFrom<pb::JobOffer> for JobOffer {
    type Error = WireError;

    fn try_from(offer: pb::JobOffer) -> Result<Self, Self::Error> {
        Ok(JobOffer {
            job_id: parse_id("offer.job_id", &offer.job_id)?,
            run_id: parse_id("offer.run_id", &offer.run_id)?,
            attempt: offer.attempt,
            spec: JobSpec::from_json(&offer.spec_json).map_err(|err| WireError::BadDocument {
                field: "offer.spec_json",
                message: err.to_string(),
            })?,
            lease: Duration::from_millis(offer.lease_ms),
            next_seq: offer.next_seq,
            generation: non_empty(offer.generation),
            kept_cells: offer.kept_cells.into_iter().collect(),
        })
    }
}

impl From<OutgoingMessage> for pb::CoordinatorMessage {
    fn from(message: OutgoingMessage) -> Self {
        use pb::coordinator_message::Kind;
        let kind = match message {
            SessionMessage::Offer(offer) => Kind::Offer((*offer).into()),
            SessionMessage::Cancel { job_id, reason } => Kind::Cancel(pb::CancelJob {
                job_id: job_id.to_string(),
                reason,
            }),
            SessionMessage::LeaseLost { job_id, attempt } => Kind::LeaseLost(pb::LeaseLost {
                job_id: job_id.to_string(),
                attempt,
            }),
        };
        pb::CoordinatorMessage { kind: Some(kind) }
    }
}

impl TryFrom<pb::CoordinatorMessage> for SessionMessage {
    type Error = WireError;

    fn try_from(message: pb::CoordinatorMessage) -> Result<Self, Self::Error> {
        use pb::coordinator_message::Kind;
        Ok(match message.kind {
            Some(Kind::Offer(offer)) => SessionMessage::Offer(Box::new(offer.try_into()?)),
            Some(Kind::Cancel(cancel)) => SessionMessage::Cancel {
                job_id: parse_id("cancel.job_id", &cancel.job_id)?,
                reason: cancel.reason,
            },
            Some(Kind::LeaseLost(lost)) => SessionMessage::LeaseLost {
                job_id: parse_id("lease_lost.job_id", &lost.job_id)?,
                attempt: lost.attempt,
            },
            None => return Err(WireError::Missing { field: "kind" }),
        })
    }
}

/// What an agent says on its session, on the wire; `agent_id` names the sender.
pub fn agent_message(agent_id: &str, message: AgentMessage) -> pb::AgentMessage {
    use pb::agent_message::Kind;
    let kind = match message {
        AgentMessage::Heartbeat { running, cache } => Kind::Heartbeat(pb::Heartbeat {
            running_job_id: running
                .map(|(job_id, _)| job_id.to_string())
                .unwrap_or_default(),
            running_attempt: running.map_or(0, |(_, attempt)| attempt),
            cache_bytes: cache.bytes,
            max_cache_bytes: cache.max_bytes,
        }),
        AgentMessage::Ready { resume } => Kind::Ready(pb::Ready {
            resume_job_id: resume
                .map(|(job_id, _)| job_id.to_string())
                .unwrap_or_default(),
            resume_attempt: resume.map_or(0, |(_, attempt)| attempt),
        }),
        AgentMessage::Leaving { job_id, attempt } => Kind::Leaving(pb::Leaving {
            job_id: job_id.to_string(),
            attempt,
        }),
    };
    pb::AgentMessage {
        agent_id: agent_id.to_string(),
        kind: Some(kind),
    }
}

/// The message an agent sent; its `agent_id` is the session's business (the first message
/// names the agent), not the message's.
impl TryFrom<pb::AgentMessage> for AgentMessage {
    type Error = WireError;

    fn try_from(message: pb::AgentMessage) -> Result<Self, Self::Error> {
        use pb::agent_message::Kind;
        Ok(match message.kind {
            Some(Kind::Heartbeat(beat)) => AgentMessage::Heartbeat {
                running: if beat.running_job_id.is_empty() {
                    None
                } else {
                    Some((
                        parse_id("heartbeat.running_job_id", &beat.running_job_id)?,
                        beat.running_attempt,
                    ))
                },
                cache: AgentCacheUsage {
                    bytes: beat.cache_bytes,
                    max_bytes: beat.max_cache_bytes,
                },
            },
            Some(Kind::Ready(ready)) => AgentMessage::Ready {
                resume: if ready.resume_job_id.is_empty() {
                    None
                } else {
                    Some((
                        parse_id("ready.resume_job_id", &ready.resume_job_id)?,
                        ready.resume_attempt,
                    ))
                },
            },
            Some(Kind::Leaving(leaving)) => AgentMessage::Leaving {
                job_id: parse_id("leaving.job_id", &leaving.job_id)?,
                attempt: leaving.attempt,
            },
            None => return Err(WireError::Missing { field: "kind" }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abfleet_core::ids::RunId;

    #[test]
    fn inventory_round_trips_through_the_wire() {
        let inv = Inventory {
            hostname: "bench-1".into(),
            os: "Debian 12".into(),
            kernel: "6.1".into(),
            arch: "x86_64".into(),
            cpu_model: "AMD EPYC 9R14".into(),
            physical_cores: 2,
            logical_cores: 4,
            memory_bytes: 24 << 30,
            hardware: Some(serde_json::json!({"isa": ["avx2"]})),
            generations: vec![Generation {
                key: "cpu/x86-64-v4/zen4".into(),
                backend: "cpu".into(),
                vendor: "amd".into(),
                silicon_id: "abc".into(),
                hardware_id: "abd".into(),
                description: "AMD EPYC 9R14".into(),
                simulated: true,
                emulator: Some("qemu-aarch64 -cpu max".into()),
                toolchain: [("cc".to_string(), "cc (Debian 12.2.0-14) 12.2.0".to_string())].into(),
            }],
        };
        let back = Inventory::try_from(pb::Inventory::from(inv.clone())).unwrap();
        assert_eq!(back, inv);
    }

    #[test]
    fn agent_messages_round_trip_through_the_wire() {
        let job_id = abfleet_core::JobId::new_random();
        for message in [
            AgentMessage::Heartbeat {
                running: Some((job_id, 2)),
                cache: AgentCacheUsage {
                    bytes: Some(7 << 20),
                    max_bytes: Some(1 << 30),
                },
            },
            AgentMessage::Heartbeat {
                running: None,
                cache: AgentCacheUsage::default(),
            },
            AgentMessage::Ready { resume: None },
            AgentMessage::Ready {
                resume: Some((job_id, 2)),
            },
            AgentMessage::Leaving { job_id, attempt: 1 },
        ] {
            let wire = agent_message("a", message.clone());
            assert_eq!(wire.agent_id, "a");
            assert_eq!(AgentMessage::try_from(wire).unwrap(), message);
        }
        let mut bad = agent_message("a", AgentMessage::Leaving { job_id, attempt: 1 });
        if let Some(pb::agent_message::Kind::Leaving(leaving)) = &mut bad.kind {
            leaving.job_id = "not-an-id".into();
        }
        let err = AgentMessage::try_from(bad).unwrap_err().to_string();
        assert!(err.contains("leaving.job_id"), "{err}");
        let empty = AgentMessage::try_from(pb::AgentMessage::default()).unwrap_err();
        assert!(empty.to_string().contains("kind"), "{empty}");
    }

    #[test]
    fn an_inventory_without_hostname_is_rejected() {
        let err = Inventory::try_from(pb::Inventory::default()).unwrap_err();
        assert!(err.to_string().contains("inventory.hostname"));
    }

    #[test]
    fn ids_are_parsed_with_the_field_named() {
        let id = RunId::new_random();
        assert_eq!(parse_id::<RunId>("run_id", &id.to_string()).unwrap(), id);
        let err = parse_id::<RunId>("run_id", "x").unwrap_err().to_string();
        assert!(err.contains("run_id"), "{err}");
        assert!(parse_id::<RunId>("run_id", "").is_err());
    }

    mod round_trips {
        //! Domain → wire → domain is the identity for every type this module converts.
        use std::path::Path;

        use abfleet_core::ids::{JobId, RunId};
        use proptest::prelude::*;
        use uuid::Uuid;

        use super::super::*;

        fn demo_spec() -> JobSpec {
            let text = include_str!("../../fixtures/jobs/demo.toml");
            let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
            JobSpec::from_toml(text, Path::new("demo.toml"), dir).unwrap()
        }

        fn run_id() -> impl Strategy<Value = RunId> {
            any::<u128>().prop_map(|n| RunId(Uuid::from_u128(n)))
        }

        fn job_id() -> impl Strategy<Value = JobId> {
            any::<u128>().prop_map(|n| JobId(Uuid::from_u128(n)))
        }

        /// An optional text; the wire writes absent as "", so present is never empty.
        fn optional_text() -> impl Strategy<Value = Option<String>> {
            proptest::option::of(".{1,12}")
        }

        fn generation() -> impl Strategy<Value = Generation> {
            (
                ".{1,16}",
                ".{0,8}",
                ".{0,8}",
                ".{0,8}",
                ".{0,16}",
                any::<bool>(),
                proptest::collection::btree_map(".{1,6}", ".{0,12}", 0..3),
                ".{0,8}",
                optional_text(),
            )
                .prop_map(
                    |(
                        key,
                        backend,
                        vendor,
                        silicon_id,
                        description,
                        simulated,
                        toolchain,
                        hardware_id,
                        emulator,
                    )| {
                        Generation {
                            key,
                            backend,
                            vendor,
                            silicon_id,
                            hardware_id,
                            description,
                            simulated,
                            emulator,
                            toolchain,
                        }
                    },
                )
        }

        fn hardware() -> impl Strategy<Value = Option<serde_json::Value>> {
            proptest::option::of(
                (".{0,8}", any::<i64>(), proptest::collection::vec(".{0,6}", 0..3)).prop_map(
                    |(name, count, isa)| serde_json::json!({"name": name, "count": count, "isa": isa}),
                ),
            )
        }

        prop_compose! {
            fn inventory()(
                hostname in ".{1,16}",
                os in ".{0,12}",
                kernel in ".{0,12}",
                arch in ".{0,8}",
                cpu_model in ".{0,16}",
                physical_cores in any::<u32>(),
                logical_cores in any::<u32>(),
                memory_bytes in any::<u64>(),
                generations in proptest::collection::vec(generation(), 0..4),
                hardware in hardware(),
            ) -> Inventory {
                Inventory {
                    hostname, os, kernel, arch, cpu_model, physical_cores, logical_cores,
                    memory_bytes, generations, hardware,
                }
            }
        }

        prop_compose! {
            fn run_progress()(
                run_id in run_id(),
                job_id in proptest::option::of(job_id()),
                state in ".{0,10}",
                message in ".{0,24}",
                cells_done in any::<u32>(),
                cells_total in any::<u32>(),
                current_cell in optional_text(),
                exit_code in proptest::option::of(any::<i32>()),
            ) -> RunProgress {
                RunProgress {
                    run_id, job_id, state, message, cells_done, cells_total, current_cell,
                    exit_code,
                }
            }
        }

        prop_compose! {
            fn job_offer()(
                job_id in job_id(),
                run_id in run_id(),
                attempt in any::<u32>(),
                lease_ms in any::<u64>(),
                next_seq in any::<u64>(),
                generation in optional_text(),
                kept_cells in proptest::collection::btree_set(any::<u32>(), 0..8),
            ) -> JobOffer {
                JobOffer {
                    job_id, run_id, attempt, spec: demo_spec(),
                    lease: Duration::from_millis(lease_ms), next_seq, generation, kept_cells,
                }
            }
        }

        /// A decoded offer as the coordinator would send it: its spec as JSON text.
        fn sent(offer: JobOffer) -> JobOffer<SpecJson> {
            JobOffer {
                spec: SpecJson::from(&offer.spec),
                job_id: offer.job_id,
                run_id: offer.run_id,
                attempt: offer.attempt,
                lease: offer.lease,
                next_seq: offer.next_seq,
                generation: offer.generation,
                kept_cells: offer.kept_cells,
            }
        }

        fn outgoing(message: SessionMessage) -> OutgoingMessage {
            match message {
                SessionMessage::Offer(offer) => SessionMessage::Offer(Box::new(sent(*offer))),
                SessionMessage::Cancel { job_id, reason } => {
                    SessionMessage::Cancel { job_id, reason }
                }
                SessionMessage::LeaseLost { job_id, attempt } => {
                    SessionMessage::LeaseLost { job_id, attempt }
                }
            }
        }

        fn session_message() -> impl Strategy<Value = SessionMessage> {
            prop_oneof![
                job_offer().prop_map(|offer| SessionMessage::Offer(Box::new(offer))),
                (job_id(), ".{0,24}")
                    .prop_map(|(job_id, reason)| SessionMessage::Cancel { job_id, reason }),
                (job_id(), any::<u32>())
                    .prop_map(|(job_id, attempt)| SessionMessage::LeaseLost { job_id, attempt }),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            #[test]
            fn inventory_round_trips(inv in inventory()) {
                prop_assert_eq!(Inventory::try_from(pb::Inventory::from(inv.clone())).unwrap(), inv);
            }

            #[test]
            fn run_progress_round_trips(update in run_progress()) {
                prop_assert_eq!(
                    RunProgress::try_from(pb::RunProgress::from(update.clone())).unwrap(),
                    update
                );
            }

            #[test]
            fn job_offer_round_trips(offer in job_offer()) {
                prop_assert_eq!(JobOffer::try_from(pb::JobOffer::from(sent(offer.clone()))).unwrap(), offer);
            }

            #[test]
            fn session_message_round_trips(message in session_message()) {
                prop_assert_eq!(
                    SessionMessage::try_from(pb::CoordinatorMessage::from(outgoing(message.clone())))
                        .unwrap(),
                    message
                );
            }
        }

        #[test]
        fn an_offer_whose_spec_does_not_parse_names_the_field() {
            let mut offer = pb::JobOffer::from(sent(JobOffer {
                job_id: JobId::new_random(),
                run_id: RunId::new_random(),
                attempt: 1,
                spec: demo_spec(),
                lease: Duration::from_secs(30),
                next_seq: 0,
                generation: None,
                kept_cells: Default::default(),
            }));
            offer.spec_json = "{".into();
            let err = JobOffer::try_from(offer).unwrap_err().to_string();
            assert!(err.contains("offer.spec_json"), "{err}");
        }

        #[test]
        fn a_message_without_a_kind_is_refused() {
            let err = SessionMessage::try_from(pb::CoordinatorMessage { kind: None }).unwrap_err();
            assert!(err.to_string().contains("`kind`"), "{err}");
        }
    }
}
