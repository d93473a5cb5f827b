//! An emulated host: an agent that serves an architecture it is not (aarch64 under
//! qemu-user on an x86 machine; later riscv64 the same way). What the emulation file says
//! (`abfleet agent --emulate FILE`, e.g. `deploy/emulate-aarch64.toml`), and the four things
//! it changes, each in one function here:
//!
//! - the inventory: the emulated CPU is a recorded probe of a real host of that
//!   architecture, its generation key ends in `/emulated` ([`emulated_inventory`]);
//! - the builds: `{cross}` in a build command becomes the cross arguments (nothing on a
//!   native host), the toolchain is the cross compiler's ([`cross_recipe`]), and
//!   a binary that is not of the emulated architecture fails its build ([`check_binary`]);
//! - the runs: every run of a built binary goes through the emulator ([`wrapped`]);
//! - the measuring: one run per side, no warm-up ([`untimed_measure`]): the scores are real,
//!   the times are the emulator's, and the report withholds them anyway.

use std::path::{Path, PathBuf};

use abfleet_core::inventory::Inventory;
use abfleet_core::spec::{BuildRecipe, MeasureSpec};
use serde::Deserialize;

/// The argument of a build command that is replaced by the cross arguments on an emulated
/// host and dropped on a native one: a spec runs unchanged on both.
pub const CROSS_PLACEHOLDER: &str = "{cross}";

/// An emulation file, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct EmulationFile {
    arch: String,
    cpu_probes: PathBuf,
    compiler: Vec<String>,
    wrapper: Vec<String>,
    #[serde(default = "default_wrapper_name")]
    wrapper_name: String,
    #[serde(default)]
    cross_args: Vec<String>,
    #[serde(default)]
    variants: Vec<Variant>,
}

fn default_wrapper_name() -> String {
    "default".to_string()
}

/// Another way to run the same binary under the emulator (another SVE vector length): the
/// ISA checks run the fork under each and compare the scores with the default wrapper's.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    pub name: String,
    pub wrapper: Vec<String>,
}

/// A loaded emulation: paths resolved against the file's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Emulation {
    /// `aarch64`: the architecture the built binaries must be.
    pub arch: String,
    /// A recorded probe set of a real host of that architecture (its `cpuinfo.txt`).
    pub cpu_probes: PathBuf,
    /// The cross compiler's version command: the generation's toolchain.
    pub compiler: Vec<String>,
    /// The prefix of every run of a built binary (`qemu-aarch64 -cpu max -L …`).
    pub wrapper: Vec<String>,
    /// What the ISA checks call the default wrapper beside the variants (`sve-128`).
    pub wrapper_name: String,
    /// What `{cross}` becomes in build commands (`--cross-file FILE`).
    pub cross_args: Vec<String>,
    pub variants: Vec<Variant>,
    /// `qemu-aarch64 -cpu max,sve-default-vector-length=16 -L … (qemu-aarch64 version 7.2.x)`.
    pub description: String,
    /// The cross compiler's version line (`cc`) and the emulator's (`emulator`), asked once
    /// when the file is loaded: the generation's toolchain.
    pub toolchain: std::collections::BTreeMap<String, String>,
}

/// ELF `e_machine` of each architecture an emulation may name.
const MACHINES: &[(&str, u16)] = &[("aarch64", 183), ("riscv64", 243), ("x86_64", 62)];

impl Emulation {
    /// Reads an emulation file; relative paths in `cpu_probes` and `cross_args` are the
    /// file's folder's. The emulator and the cross compiler must run: each is asked its
    /// version, and the answer goes into the description and the toolchain.
    pub fn load(path: &Path) -> Result<Emulation, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|err| format!("cannot read the emulation file `{}`: {err}", path.display()))?;
        let file: EmulationFile = toml::from_str(&text).map_err(|err| {
            format!(
                "`{}` is not an emulation file: {err} (keys: arch, cpu_probes, compiler, wrapper, cross_args, [[variants]] name and wrapper; see deploy/emulate-aarch64.toml)",
                path.display()
            )
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::from_file(file, base)
    }

    fn from_file(file: EmulationFile, base: &Path) -> Result<Emulation, String> {
        if !MACHINES.iter().any(|(arch, _)| *arch == file.arch) {
            return Err(format!(
                "emulation arch `{}` is not one abfleet knows (aarch64, riscv64)",
                file.arch
            ));
        }
        for (what, argv) in [("wrapper", &file.wrapper), ("compiler", &file.compiler)] {
            if argv.is_empty() {
                return Err(format!(
                    "the emulation's `{what}` is empty: name the program and its arguments"
                ));
            }
        }
        for variant in &file.variants {
            if variant.wrapper.is_empty() || variant.name.trim().is_empty() {
                return Err("every [[variants]] entry needs a name and a wrapper".into());
            }
        }
        let resolve = |p: &Path| {
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                base.join(p)
            }
        };
        let cpu_probes = resolve(&file.cpu_probes);
        if !cpu_probes.join("cpuinfo.txt").is_file() {
            return Err(format!(
                "the emulation's cpu_probes `{}` has no cpuinfo.txt: name a recorded probe set of a real {} host (fixtures/probes/)",
                cpu_probes.display(),
                file.arch
            ));
        }
        // A cross argument that names an existing file relative to the emulation file is
        // made absolute: builds run in their own directories.
        let cross_args = file
            .cross_args
            .iter()
            .map(|arg| {
                let candidate = base.join(arg);
                if !Path::new(arg).is_absolute() && !arg.starts_with('-') && candidate.is_file() {
                    candidate.display().to_string()
                } else {
                    arg.clone()
                }
            })
            .collect();
        let version = first_line_of(&[file.wrapper[0].clone(), "--version".into()])?;
        let compiler = first_line_of(&file.compiler)?;
        Ok(Emulation {
            description: format!("{} ({version})", file.wrapper.join(" ")),
            toolchain: [
                ("cc".to_string(), compiler),
                ("emulator".to_string(), version),
            ]
            .into(),
            arch: file.arch,
            cpu_probes,
            compiler: file.compiler,
            wrapper: file.wrapper,
            wrapper_name: file.wrapper_name,
            cross_args,
            variants: file.variants,
        })
    }

    /// The ELF machine number binaries for this architecture carry.
    pub fn elf_machine(&self) -> u16 {
        MACHINES
            .iter()
            .find(|(arch, _)| *arch == self.arch)
            .map_or(0, |(_, machine)| *machine)
    }
}

/// The first non-empty line a command prints (stdout, else stderr); an error naming the
/// command when it cannot run.
fn first_line_of(argv: &[String]) -> Result<String, String> {
    let output = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .output()
        .map_err(|err| {
            format!(
                "`{}` does not run ({err}): install it (docs/retuning.md, \"ARM\") or fix the emulation file",
                argv.join(" ")
            )
        })?;
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    Ok(text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string())
}

/// The inventory of an emulated host: this machine's facts (name, memory, cores: what runs
/// the emulator), the recorded CPU as the emulated one, one generation whose key ends in
/// `/emulated` and whose silicon id covers the emulator, so it never pools with a real host.
pub fn emulated_inventory(emulation: &Emulation) -> Result<Inventory, crate::AgentError> {
    let recorded = crate::inventory::from_recorded_probes(&emulation.cpu_probes)?;
    // This machine's name, memory and cores only: its own hardware probes (GPUs, Vulkan)
    // are not what this agent serves.
    let live = crate::inventory::basic_host();
    let generations = recorded
        .generations
        .into_iter()
        .filter(|g| g.backend == "cpu")
        .map(|g| {
            crate::generations::emulated(g, &emulation.description, emulation.toolchain.clone())
        })
        .collect();
    Ok(Inventory {
        hostname: live.hostname.clone(),
        os: format!(
            "{} (emulating {} with {})",
            live.os, emulation.arch, emulation.description
        ),
        kernel: live.kernel,
        arch: emulation.arch.clone(),
        cpu_model: format!("{} (emulated)", recorded.cpu_model),
        physical_cores: live.physical_cores,
        logical_cores: live.logical_cores,
        memory_bytes: live.memory_bytes,
        generations,
        hardware: recorded.hardware,
    })
}

/// The recipe as this host builds it: `{cross}` replaced by the emulation's cross arguments
/// (dropped without an emulation) and, when emulating, the cross compiler as its toolchain.
pub fn cross_recipe(emulation: Option<&Emulation>, recipe: &BuildRecipe) -> BuildRecipe {
    let cross: &[String] = emulation.map_or(&[], |e| &e.cross_args);
    let expand = |command: &Vec<String>| -> Vec<String> {
        command
            .iter()
            .flat_map(|arg| {
                if arg == CROSS_PLACEHOLDER {
                    cross.to_vec()
                } else {
                    vec![arg.clone()]
                }
            })
            .collect()
    };
    BuildRecipe {
        commands: recipe.commands.iter().map(expand).collect(),
        link: recipe.link.iter().map(expand).collect(),
        toolchain: emulation.map_or(recipe.toolchain.clone(), |e| e.compiler.clone()),
        ..recipe.clone()
    }
}

/// Whether a build command line uses `{cross}`: an emulated host refuses a recipe that
/// does not (it would build for this machine's own architecture).
pub fn uses_cross(recipe: &BuildRecipe) -> bool {
    recipe
        .commands
        .iter()
        .flatten()
        .any(|arg| arg == CROSS_PLACEHOLDER)
}

/// Why `binary` cannot run on the emulated architecture, if it cannot: not an ELF file, or
/// an ELF file for another machine (a build that ignored the cross arguments).
pub fn check_binary(emulation: &Emulation, binary: &Path) -> Result<(), String> {
    use std::io::Read;
    let mut head = [0u8; 20];
    let read = std::fs::File::open(binary).and_then(|mut f| f.read_exact(&mut head));
    let machine = read
        .map_err(|err| err.to_string())
        .and_then(|()| abfleet_core::retune::elf_sections::machine(&head))
        .map_err(|_| {
            format!(
                "`{}` is not an ELF executable; an emulated {} host runs only {} binaries",
                binary.display(),
                emulation.arch,
                emulation.arch
            )
        })?;
    if machine == emulation.elf_machine() {
        return Ok(());
    }
    let found = MACHINES.iter().find(|(_, m)| *m == machine).map_or_else(
        || format!("ELF machine {machine}"),
        |(arch, _)| arch.to_string(),
    );
    Err(format!(
        "`{}` was built for {found}, not {}: the build ignored the cross arguments; put \"{CROSS_PLACEHOLDER}\" in the spec's `meson setup` command (docs/retuning.md, \"ARM\")",
        binary.display(),
        emulation.arch
    ))
}

/// `argv` run through `wrapper` (nothing to add without one).
pub fn wrapped(wrapper: &[String], argv: &[String]) -> Vec<String> {
    wrapper.iter().chain(argv).cloned().collect()
}

/// The measuring an emulated host does: no warm-up, one run per side. The times are the
/// emulator's, so more of them would only cost; the scores are the same every run.
pub fn untimed_measure(measure: &MeasureSpec) -> MeasureSpec {
    MeasureSpec {
        warmup: 0,
        runs: 1,
        max_runs: 1,
        ..measure.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emulation() -> Emulation {
        Emulation {
            arch: "aarch64".into(),
            cpu_probes: PathBuf::from("/nowhere"),
            compiler: vec!["aarch64-linux-gnu-gcc".into(), "--version".into()],
            wrapper: vec!["qemu-aarch64".into(), "-cpu".into(), "max".into()],
            wrapper_name: "default".into(),
            cross_args: vec!["--cross-file".into(), "/etc/cross.ini".into()],
            variants: Vec::new(),
            description: "qemu-aarch64 -cpu max".into(),
            toolchain: Default::default(),
        }
    }

    fn spec() -> abfleet_core::spec::JobSpec {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/jobs/vmaf-upstream-ab.toml"
        );
        abfleet_core::spec::JobSpec::load(Path::new(path)).unwrap()
    }

    fn recipe() -> BuildRecipe {
        BuildRecipe {
            commands: vec![
                vec![
                    "meson".into(),
                    "setup".into(),
                    "build".into(),
                    "{cross}".into(),
                ],
                vec!["ninja".into(), "-C".into(), "build".into()],
            ],
            ..spec().upstream.build
        }
    }

    #[test]
    fn cross_is_the_cross_arguments_when_emulating_and_nothing_natively() {
        let e = emulation();
        let cross = cross_recipe(Some(&e), &recipe());
        assert_eq!(
            cross.commands[0],
            ["meson", "setup", "build", "--cross-file", "/etc/cross.ini"]
        );
        assert_eq!(cross.toolchain, e.compiler);
        let native = cross_recipe(None, &recipe());
        assert_eq!(native.commands[0], ["meson", "setup", "build"]);
        assert_eq!(native.toolchain, recipe().toolchain);
        assert!(uses_cross(&recipe()));
        assert!(!uses_cross(&native));
    }

    #[test]
    fn a_binary_of_another_machine_is_refused_with_what_to_do() {
        let e = emulation();
        let tmp = tempfile::tempdir().unwrap();
        // This test binary itself: an ELF file of the machine the tests run on.
        let own = std::env::current_exe().unwrap();
        let err = check_binary(&e, &own).unwrap_err();
        assert!(err.contains("not aarch64"), "{err}");
        assert!(err.contains("{cross}"), "{err}");
        let text = tmp.path().join("script");
        std::fs::write(&text, "#!/bin/sh\n").unwrap();
        assert!(check_binary(&e, &text)
            .unwrap_err()
            .contains("not an ELF executable"));
        // An aarch64 ELF header (little-endian, e_machine 183 at offset 18).
        let mut head = vec![0u8; 64];
        head[..4].copy_from_slice(b"\x7fELF");
        head[4] = 2;
        head[5] = 1;
        head[18..20].copy_from_slice(&183u16.to_le_bytes());
        let arm = tmp.path().join("arm");
        std::fs::write(&arm, head).unwrap();
        assert_eq!(check_binary(&e, &arm), Ok(()));
    }

    #[test]
    fn an_emulation_file_that_cannot_work_says_why() {
        let tmp = tempfile::tempdir().unwrap();
        let write = |text: &str| {
            let path = tmp.path().join("e.toml");
            std::fs::write(&path, text).unwrap();
            Emulation::load(&path).unwrap_err()
        };
        let probes = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/probes/grace-neoverse-v2"
        );
        let err = write("arch = \"aarch64\"\n");
        assert!(err.contains("missing field"), "{err}");
        let err = write(&format!(
            "arch = \"sparc\"\ncpu_probes = \"{probes}\"\ncompiler = [\"cc\"]\nwrapper = [\"q\"]\n"
        ));
        assert!(err.contains("sparc"), "{err}");
        let err = write(
            "arch = \"aarch64\"\ncpu_probes = \"/nowhere\"\ncompiler = [\"cc\"]\nwrapper = [\"q\"]\n",
        );
        assert!(err.contains("cpuinfo.txt"), "{err}");
        let err = write(&format!(
            "arch = \"aarch64\"\ncpu_probes = \"{probes}\"\ncompiler = [\"cc\", \"--version\"]\nwrapper = [\"no-such-emulator-here\"]\n"
        ));
        assert!(err.contains("no-such-emulator-here"), "{err}");
        assert!(err.contains("does not run"), "{err}");
    }

    #[test]
    fn an_emulated_host_takes_one_run_per_side_and_no_warm_up() {
        let measure = spec().measure;
        let untimed = untimed_measure(&measure);
        assert_eq!((untimed.warmup, untimed.runs, untimed.max_runs), (0, 1, 1));
        assert_eq!(untimed.max_score_delta, measure.max_score_delta);
        assert_eq!(untimed.seed, measure.seed);
    }
}
