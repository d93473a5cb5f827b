//! "Only proto knows protobuf" (ARCHITECTURE.md), kept honest: every Rust file outside
//! `proto/` that names `pb::` or `tonic::` must be one of the wire edges listed here, each
//! with why; a new file that names them fails, and so does a listed file that no longer does
//! (take it off the list: the boundary only shrinks). Everything else reaches the
//! coordinator through `abfleet_proto::agent_link` and `abfleet_proto::control_link`.

use std::path::{Path, PathBuf};

/// The files allowed to name protobuf or tonic, and why.
const WIRE_EDGES: &[(&str, &str)] = &[
    (
        "coordinator/src/agent_service.rs",
        "the agent service's adapter",
    ),
    (
        "coordinator/src/control_service.rs",
        "the control service's adapter",
    ),
    (
        "coordinator/src/server.rs",
        "wires the two services into tonic's server",
    ),
    (
        "coordinator/src/error.rs",
        "the errors as gRPC statuses, for the adapters",
    ),
    (
        "coordinator/src/auth.rs",
        "the interceptor that reads the caller's certificate",
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn only_proto_and_the_listed_wire_edges_name_protobuf_or_tonic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    // Product code only: tests talk to the real wire on purpose.
    for crate_dir in ["core", "coordinator", "agent", "cli", "html"] {
        rust_files(&root.join(crate_dir).join("src"), &mut files);
    }
    let mut naming = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let names_the_wire = text.lines().any(|line| {
            let code = line.split("//").next().unwrap_or("");
            code.contains("pb::") || code.contains("tonic::")
        });
        if names_the_wire {
            let relative = file.strip_prefix(&root).unwrap().display().to_string();
            naming.push(relative);
        }
    }
    let listed: Vec<&str> = WIRE_EDGES.iter().map(|(file, _)| *file).collect();
    let unlisted: Vec<&String> = naming
        .iter()
        .filter(|file| !listed.contains(&file.as_str()))
        .collect();
    assert!(
        unlisted.is_empty(),
        "these name pb:: or tonic:: outside proto: speak domain types through proto's clients and conversions instead: {unlisted:?}"
    );
    let stale: Vec<&&str> = listed
        .iter()
        .filter(|file| !naming.iter().any(|n| n == *file))
        .collect();
    assert!(
        stale.is_empty(),
        "these no longer name pb:: or tonic::: take them off WIRE_EDGES: {stale:?}"
    );
}
