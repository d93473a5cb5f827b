//! The invariants of ARCHITECTURE.md that a reading of the source can check, kept true: the
//! crate graph's floors (no arrow back up, the test double a dev-dependency only), `core`,
//! `render` and `html` doing no I/O, the agent's imports flowing one way, and the fleet's concerns calling
//! only lower concerns. ("Only proto knows
//! protobuf" is `wire_boundary.rs`.) Only product code is read: a file's text before its
//! `#[cfg(test)]`, and no `tests.rs` or `tests/` file.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Each crate's floor: a crate depends only on crates on lower floors.
const FLOORS: &[(&str, u32)] = &[
    ("core", 0),
    ("proto", 1),
    ("render", 1),
    ("html", 2),
    ("agent", 2),
    ("coordinator", 3),
    ("cli", 4),
];

/// The `abfleet-*` crates named in a manifest's `[dependencies]` (not its dev-dependencies).
fn product_dependencies(manifest: &str) -> Vec<String> {
    let mut in_dependencies = false;
    let mut names = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
        } else if in_dependencies {
            if let Some(name) = line.split(['=', '.', ' ']).next() {
                if name.starts_with("abfleet-") {
                    names.push(name.trim_start_matches("abfleet-").to_string());
                }
            }
        }
    }
    names
}

#[test]
fn each_crate_depends_only_on_lower_floors_and_the_test_double_only_in_tests() {
    let floor = |name: &str| FLOORS.iter().find(|(c, _)| *c == name).map(|(_, f)| *f);
    let mut wrong = Vec::new();
    for (name, own) in FLOORS {
        let manifest = std::fs::read_to_string(root().join(name).join("Cargo.toml")).unwrap();
        for dependency in product_dependencies(&manifest) {
            match floor(&dependency) {
                Some(theirs) if theirs < *own => {}
                Some(theirs) => wrong.push(format!(
                    "{name} (floor {own}) depends on {dependency} (floor {theirs})"
                )),
                None => wrong.push(format!(
                    "{name} depends on {dependency}, which ships in no product (testkit is a dev-dependency only)"
                )),
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Product Rust files under `dir`, each with its code before `#[cfg(test)]`, comments cut.
fn product_code(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                if name != "tests" {
                    pending.push(path);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let product = text.split("#[cfg(test)]").next().unwrap_or("");
                let code: Vec<&str> = product
                    .lines()
                    .map(|line| line.split("//").next().unwrap_or(""))
                    .collect();
                out.push((path, code.join("\n")));
            }
        }
    }
    out
}

/// What names I/O in product code: a socket, a child process, an async runtime, a database,
/// the file system.
const IO: &[&str] = &[
    "TcpStream",
    "TcpListener",
    "UdpSocket",
    "process::Command",
    "tokio::",
    "Connection::open",
    "std::fs::",
    "File::open",
    "File::create",
];

/// Core's one I/O: reading the spec file (and the directory it names) it validates.
const CORE_READS_SPEC_FILES: &str = "core/src/spec/validate.rs";

#[test]
fn core_render_and_html_do_no_io_but_core_reading_a_spec_file() {
    let mut found = Vec::new();
    for crate_dir in ["core", "render", "html"] {
        for (path, code) in product_code(&root().join(crate_dir).join("src")) {
            let relative = path.strip_prefix(root()).unwrap().display().to_string();
            for needle in IO {
                let allowed = relative == CORE_READS_SPEC_FILES && *needle == "std::fs::";
                if code.contains(needle) && !allowed {
                    found.push(format!("{relative} names {needle}"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "core, render and html are pure (ARCHITECTURE.md): do I/O in the coordinator, the agent or the CLI: {found:#?}"
    );
    let spec_reader = std::fs::read_to_string(root().join(CORE_READS_SPEC_FILES)).unwrap();
    assert!(
        spec_reader.contains("std::fs::read_to_string"),
        "the spec reader moved: update CORE_READS_SPEC_FILES"
    );
}

/// The agent's layers, top first: a module imports none of a layer above its own.
const AGENT_LAYERS: &[&[&str]] = &[
    &["session"],
    &["job"],
    &["stages"],
    &["fork_run", "command_line", "context"],
    &["build", "fixtures", "sink", "source", "runner", "cache"],
];

/// The top-level modules of the agent crate that `code` names as `crate::module`.
fn crate_modules_named(code: &str) -> Vec<String> {
    let mut named = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            named.extend(
                inner
                    .split(',')
                    .filter_map(|item| item.trim().split("::").next())
                    .map(str::to_string),
            );
        } else {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            named.push(rest[..end].to_string());
        }
    }
    named
}

#[test]
fn the_agents_imports_flow_one_way() {
    let layer_of = |module: &str| AGENT_LAYERS.iter().position(|l| l.contains(&module));
    let src = root().join("agent/src");
    let mut upward = Vec::new();
    let mut seen_layers = std::collections::BTreeSet::new();
    for (path, code) in product_code(&src) {
        let relative = path.strip_prefix(&src).unwrap();
        let first = relative.components().next().unwrap().as_os_str();
        let module = first.to_string_lossy().trim_end_matches(".rs").to_string();
        let Some(own) = layer_of(&module) else {
            continue;
        };
        seen_layers.insert(own);
        for named in crate_modules_named(&code) {
            if layer_of(&named).is_some_and(|theirs| theirs < own) {
                upward.push(format!("agent/src/{} imports {named}", relative.display()));
            }
        }
    }
    assert_eq!(
        seen_layers.len(),
        AGENT_LAYERS.len(),
        "a layer's modules were renamed: update AGENT_LAYERS and ARCHITECTURE.md"
    );
    assert!(
        upward.is_empty(),
        "imports flow session → job → stages → fork_run/command_line/context → build/fixtures/sink/source/runner/cache (ARCHITECTURE.md): {upward:#?}"
    );
}

#[test]
fn crate_paths_are_read_from_use_groups_and_paths_alike() {
    let code = "use crate::{session::X, job};\nlet y = crate::stages::run();";
    assert_eq!(crate_modules_named(code), ["session", "job", "stages"]);
    let manifest = "[dependencies]\nabfleet-core.workspace = true\nabfleet-proto = { path = \"p\" }\n\n[dev-dependencies]\nabfleet-testkit.workspace = true\n";
    assert_eq!(product_dependencies(manifest), ["core", "proto"]);
}

/// The fleet's concerns, lowest first: each holds as fields only concerns before it.
const CONCERNS: &[&str] = &[
    "Reports",
    "Alerts",
    "Finishing",
    "Scheduling",
    "Trust",
    "Intake",
    "Runs",
    "PullRequests",
    "Triggers",
];

/// The field types of `pub struct NAME { … }` in `code`, if it is defined there.
fn struct_field_types(code: &str, name: &str) -> Option<Vec<String>> {
    let start = code.find(&format!("pub struct {name} {{"))?;
    let body = &code[start..];
    let body = &body[body.find('{')? + 1..body.find("\n}")?];
    Some(
        body.lines()
            .filter_map(|line| line.split_once(':'))
            .map(|(_, ty)| ty.trim().trim_end_matches(',').to_string())
            .collect(),
    )
}

/// Words of `text`: what an identifier is made of.
fn names_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric() && c != '_')
        .any(|w| w == word)
}

#[test]
fn the_fleets_concerns_call_only_lower_concerns_and_only_the_fleet_handle_sees_them_all() {
    let code = product_code(&root().join("coordinator/src/fleet"));
    let mut wrong = Vec::new();
    let mut found = Vec::new();
    for (path, text) in &code {
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        for (rank, concern) in CONCERNS.iter().enumerate() {
            let Some(fields) = struct_field_types(text, concern) else {
                continue;
            };
            found.push(*concern);
            for ty in &fields {
                if names_word(ty, "Fleet") {
                    wrong.push(format!("{file}: {concern} holds the whole fleet ({ty})"));
                }
                for (theirs, other) in CONCERNS.iter().enumerate() {
                    if names_word(ty, other) && theirs >= rank {
                        wrong.push(format!(
                            "{file}: {concern} holds {other}, which is not below it"
                        ));
                    }
                }
            }
        }
        let allowed = ["state.rs", "metrics.rs", "mod.rs"];
        if !allowed.contains(&file.as_str()) && names_word(text, "Fleet") {
            wrong.push(format!(
                "{file} names `Fleet`: a concern calls another through its field, not the handle"
            ));
        }
    }
    found.sort();
    let mut expected = CONCERNS.to_vec();
    expected.sort();
    assert_eq!(found, expected, "every concern is a `pub struct` in fleet/");
    assert!(wrong.is_empty(), "{wrong:#?}");
}
