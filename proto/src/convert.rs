//! Conversions between wire messages and domain types, validating on the way in.

use abfleet_core::generation::Generation;
use abfleet_core::inventory::Inventory;

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
                        description: g.description,
                        simulated: g.simulated,
                    })
                })
                .collect::<Result<_, _>>()?,
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
                description: "AMD EPYC 9R14".into(),
                simulated: true,
            }],
        };
        let back = Inventory::try_from(pb::Inventory::from(inv.clone())).unwrap();
        assert_eq!(back, inv);
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
}
