//! The agent's own policy: which sources it fetches and which programs it runs, whatever the
//! coordinator asks. Read once at start-up from a TOML file (`abfleet agent --policy FILE`,
//! default [`DEFAULT_POLICY_PATH`] when that file exists); a job outside it is refused before
//! anything is fetched or run. Without a policy the agent trusts the coordinator fully: whoever
//! can submit a job can run programs on this host. See docs/security.md.

use std::path::{Path, PathBuf};

use abfleet_core::spec::{FixtureLocation, JobSpec, SourceSpec};
use serde::Deserialize;

/// Where the agent looks for a policy when `--policy` is not given.
pub const DEFAULT_POLICY_PATH: &str = "/etc/abfleet/agent-policy.toml";

/// Build environment variables a policy never lets a spec set: they change which program
/// runs (`PATH`) or what it loads (`LD_*`, `DYLD_*`), around `allowed_build_programs`.
const PROGRAM_CHANGING_ENV: &[&str] = &["PATH", "LD_", "DYLD_"];

/// A policy as read from its file.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentPolicy {
    /// The file it was read from, named in every refusal.
    pub origin: PathBuf,
    /// Patterns over git URLs and source paths (exact, or `*` matching any run of characters).
    pub allowed_sources: Vec<String>,
    /// Patterns over the `argv[0]` of every program a spec names: build commands, toolchain
    /// fingerprints, a command template or `simd_info` that does not start with `{binary}`.
    pub allowed_build_programs: Vec<String>,
    /// Patterns over fixture files by path (after symlinks are resolved) and by URL. Empty
    /// (the default): only fixtures the agent generates itself; a spec naming a file on this
    /// host or a URL is refused.
    pub allowed_fixtures: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    allowed_sources: Vec<String>,
    allowed_build_programs: Vec<String>,
    #[serde(default)]
    allowed_fixtures: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("failed to read the agent policy `{path}`: {source}; fix the path given to --policy")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to parse the agent policy `{path}`: {message}; it needs `allowed_sources` and `allowed_build_programs` (docs/security.md)")]
    Parse { path: PathBuf, message: String },
    #[error("the agent policy `{path}` has an empty `{key}`, which refuses every job; list what this host may {what}")]
    Empty {
        path: PathBuf,
        key: &'static str,
        what: &'static str,
    },
}

/// Why a policy refuses a job: the rule, the spec's field and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the agent policy `{origin}` refuses the job: {what} `{value}` is not allowed by `{rule}`; add it to `{rule}` on this host if it is trusted")]
pub struct Refusal {
    pub origin: String,
    pub rule: &'static str,
    pub what: String,
    pub value: String,
}

impl AgentPolicy {
    /// Reads and checks a policy file.
    pub fn load(path: &Path) -> Result<AgentPolicy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        AgentPolicy::from_toml(&text, path)
    }

    /// The policy in [`DEFAULT_POLICY_PATH`], when that file exists.
    pub fn load_default() -> Result<Option<AgentPolicy>, PolicyError> {
        let path = Path::new(DEFAULT_POLICY_PATH);
        if path.exists() {
            AgentPolicy::load(path).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn from_toml(text: &str, origin: &Path) -> Result<AgentPolicy, PolicyError> {
        let file: PolicyFile = toml::from_str(text).map_err(|err| PolicyError::Parse {
            path: origin.to_path_buf(),
            message: err.to_string().trim().replace('\n', " "),
        })?;
        for (key, list, what) in [
            ("allowed_sources", &file.allowed_sources, "fetch"),
            (
                "allowed_build_programs",
                &file.allowed_build_programs,
                "run",
            ),
        ] {
            if list.is_empty() {
                return Err(PolicyError::Empty {
                    path: origin.to_path_buf(),
                    key,
                    what,
                });
            }
        }
        Ok(AgentPolicy {
            origin: origin.to_path_buf(),
            allowed_sources: file.allowed_sources,
            allowed_build_programs: file.allowed_build_programs,
            allowed_fixtures: file.allowed_fixtures,
        })
    }

    /// Whether this host may run `spec` for `generation`: every source and every program the
    /// spec names (and the toolchain a GPU backend of `generation` would fingerprint by
    /// default) must match a pattern.
    pub fn check(&self, spec: &JobSpec, generation: &str) -> Result<(), Refusal> {
        for (side, side_spec) in [("upstream", &spec.upstream), ("fork", &spec.fork)] {
            match &side_spec.source {
                SourceSpec::Git { url, .. } => {
                    self.source_allowed(&format!("[{side}] git"), url)?;
                }
                SourceSpec::Path { path } => {
                    let what = format!("[{side}] path");
                    self.source_allowed(&what, &path.display().to_string())?;
                    // A symlink in an allowed directory must not lead out of it.
                    if let Ok(real) = path.canonicalize() {
                        if real != *path {
                            self.source_allowed(
                                &format!("{what} (resolved)"),
                                &real.display().to_string(),
                            )?;
                        }
                    }
                }
            }
            let recipe = &side_spec.build;
            for key in recipe.env.keys() {
                self.env_allowed(
                    &format!("[{side}.build] env `{key}`"),
                    key,
                    &recipe.env[key],
                )?;
            }
            for (number, argv) in recipe.commands.iter().enumerate() {
                self.program_allowed(&format!("[{side}.build] command {}", number + 1), argv)?;
            }
            self.program_allowed(&format!("[{side}.build] toolchain"), &recipe.toolchain)?;
        }
        // A sweep's environment tunables reach the timed runs: the same variables are refused.
        if let Some(sweep) = &spec.sweep {
            for tunable in &sweep.tunables {
                if let abfleet_core::spec::TunableKind::Env(var) = &tunable.how {
                    let what = format!("[[sweep.tunables]] `{}` env `{var}`", tunable.name);
                    self.env_allowed(&what, var, &tunable.values.join(", "))?;
                }
            }
        }
        if spec.command.template.first().map(String::as_str) != Some("{binary}") {
            self.program_allowed("[command] template", &spec.command.template)?;
        }
        if let Some(cpu) = &spec.backends.cpu {
            if cpu.simd_info.first().map(String::as_str) != Some("{binary}") {
                self.program_allowed("[backends.cpu] simd_info", &cpu.simd_info)?;
            }
        }
        for fixture in &spec.fixtures {
            for (role, file) in [
                ("reference", &fixture.reference),
                ("distorted", &fixture.distorted),
            ] {
                let what = format!("[[fixtures]] `{}` {role}", fixture.name);
                match &file.location {
                    FixtureLocation::Generate { .. } => {}
                    FixtureLocation::Url(url) => self.fixture_allowed(&what, url)?,
                    FixtureLocation::Path(path) => {
                        self.fixture_allowed(&what, &path.display().to_string())?;
                        // A symlink in an allowed directory must not lead out of it.
                        if let Ok(real) = path.canonicalize() {
                            if real != *path {
                                self.fixture_allowed(
                                    &format!("{what} (resolved)"),
                                    &real.display().to_string(),
                                )?;
                            }
                        }
                    }
                }
            }
        }
        let current = abfleet_core::report::backend_of(generation);
        for backend in ["cuda", "hip", "sycl"] {
            if let Some(config) = spec.backends.gpu(backend) {
                for (key, value) in &config.env {
                    self.env_allowed(&format!("[backends.{backend}] env `{key}`"), key, value)?;
                }
                for (what, steps) in [("command", &config.commands), ("link", &config.link)] {
                    for (number, argv) in steps.iter().enumerate() {
                        self.program_allowed(
                            &format!("[backends.{backend}] {what} {}", number + 1),
                            argv,
                        )?;
                    }
                }
                let toolchain = if !config.toolchain.is_empty() {
                    config.toolchain.clone()
                } else if backend == current {
                    abfleet_core::spec::default_toolchain(backend)
                } else {
                    continue;
                };
                self.program_allowed(&format!("[backends.{backend}] toolchain"), &toolchain)?;
            }
        }
        Ok(())
    }

    fn source_allowed(&self, what: &str, value: &str) -> Result<(), Refusal> {
        if self
            .allowed_sources
            .iter()
            .any(|pattern| pattern_matches(pattern, value))
        {
            Ok(())
        } else {
            Err(self.refusal("allowed_sources", what.to_string(), value.to_string()))
        }
    }

    fn fixture_allowed(&self, what: &str, value: &str) -> Result<(), Refusal> {
        if self
            .allowed_fixtures
            .iter()
            .any(|pattern| pattern_matches(pattern, value))
        {
            Ok(())
        } else {
            Err(self.refusal("allowed_fixtures", what.to_string(), value.to_string()))
        }
    }

    fn program_allowed(&self, what: &str, argv: &[String]) -> Result<(), Refusal> {
        let Some(program) = argv.first() else {
            return Ok(());
        };
        if self
            .allowed_build_programs
            .iter()
            .any(|pattern| pattern_matches(pattern, program))
        {
            Ok(())
        } else {
            Err(self.refusal(
                "allowed_build_programs",
                format!("{what} program"),
                program.clone(),
            ))
        }
    }

    /// Refuses a variable that changes which program runs or what it loads.
    fn env_allowed(&self, what: &str, key: &str, value: &str) -> Result<(), Refusal> {
        if PROGRAM_CHANGING_ENV
            .iter()
            .any(|bad| key == *bad || (bad.ends_with('_') && key.starts_with(bad)))
        {
            return Err(self.refusal(
                "allowed_build_programs",
                format!("{what} (it changes which program runs or what it loads)"),
                value.to_string(),
            ));
        }
        Ok(())
    }

    fn refusal(&self, rule: &'static str, what: String, value: String) -> Refusal {
        Refusal {
            origin: self.origin.display().to_string(),
            rule,
            what,
            value,
        }
    }
}

/// A policy pattern: the exact string, or with `*` matching any run of characters
/// (including `/`). No other character is special.
pub fn pattern_matches(pattern: &str, value: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = value.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_exact_or_star_globs() {
        let url = "https://github.com/Netflix/vmaf.git";
        assert!(pattern_matches(url, url));
        assert!(!pattern_matches(
            url,
            "https://github.com/Netflix/vmaf.git.evil"
        ));
        assert!(!pattern_matches(url, "https://github.com/Netflix/vmaf"));
        assert!(pattern_matches("/srv/trees/*", "/srv/trees/vmaf"));
        assert!(pattern_matches("/srv/trees/*", "/srv/trees/a/b"));
        assert!(!pattern_matches("/srv/trees/*", "/srv/treesx/a"));
        assert!(!pattern_matches("/srv/trees/*", "/srv/other"));
        assert!(pattern_matches("*", "anything"));
        assert!(pattern_matches(
            "https://*/vmaf.git",
            "https://example.com/x/vmaf.git"
        ));
        assert!(!pattern_matches(
            "https://*/vmaf.git",
            "https://example.com/x/vmaf"
        ));
        assert!(pattern_matches("a*b*c", "abc"));
        assert!(pattern_matches("a*b*c", "a-b-b-c"));
        assert!(!pattern_matches("a*b*c", "a-c-b"));
        assert!(!pattern_matches("ab*ba", "aba"), "the ends do not overlap");
        assert!(!pattern_matches("cc?", "cc1"), "`?` is a plain character");
        assert!(pattern_matches("cc?", "cc?"));
        assert!(
            !pattern_matches("meson", "/tmp/meson"),
            "a path is not its name"
        );
    }

    fn policy(sources: &[&str], programs: &[&str]) -> AgentPolicy {
        let list = |items: &[&str]| {
            items
                .iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        AgentPolicy::from_toml(
            &format!(
                "allowed_sources = [{}]\nallowed_build_programs = [{}]\nallowed_fixtures = [\"*\"]\n",
                list(sources),
                list(programs)
            ),
            Path::new("/etc/abfleet/agent-policy.toml"),
        )
        .unwrap()
    }

    fn spec() -> JobSpec {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        JobSpec::load(&dir.join("vmaf-upstream-ab.toml")).unwrap()
    }

    #[test]
    fn a_sweep_env_tunable_cannot_change_which_program_runs() {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        let mut sweep = JobSpec::load(&dir.join("demo-sweep.toml")).unwrap();
        let policy = AgentPolicy::from_toml(
            "allowed_sources = [\"*\"]\nallowed_build_programs = [\"make\", \"cc\"]\n",
            Path::new("p.toml"),
        )
        .unwrap();
        policy.check(&sweep, "").unwrap();
        let tunable = &mut sweep.sweep.as_mut().unwrap().tunables[1];
        tunable.how = abfleet_core::spec::TunableKind::Env("LD_PRELOAD".into());
        let refusal = policy.check(&sweep, "").unwrap_err();
        assert_eq!(refusal.rule, "allowed_build_programs");
        assert!(
            refusal
                .what
                .contains("[[sweep.tunables]] `row_stride` env `LD_PRELOAD`"),
            "{}",
            refusal.what
        );
    }

    #[test]
    fn fixtures_come_only_from_the_directories_and_urls_the_policy_names() {
        let tmp = tempfile::tempdir().unwrap();
        let allowed = tmp.path().join("fixtures");
        std::fs::create_dir_all(&allowed).unwrap();
        std::fs::write(allowed.join("ref.yuv"), b"x").unwrap();
        // A symlink inside the allowed directory that leads out of it.
        std::os::unix::fs::symlink("/etc/passwd", allowed.join("escape.yuv")).unwrap();
        let text = format!(
            "allowed_sources = [\"*\"]\nallowed_build_programs = [\"*\"]\nallowed_fixtures = [\"{}/*\", \"https://media.example/*\"]\n",
            allowed.display()
        );
        let policy = AgentPolicy::from_toml(&text, Path::new("p.toml")).unwrap();
        let with_reference = |location: FixtureLocation| {
            let mut spec = spec();
            spec.fixtures[0].reference.location = location;
            spec.fixtures[0].distorted.location = FixtureLocation::Generate {
                generator: abfleet_core::spec::Generator::MovingPattern,
                seed: 1,
            };
            spec.fixtures.truncate(1);
            spec
        };
        policy
            .check(
                &with_reference(FixtureLocation::Path(allowed.join("ref.yuv"))),
                "",
            )
            .unwrap();
        policy
            .check(
                &with_reference(FixtureLocation::Url("https://media.example/a.yuv".into())),
                "",
            )
            .unwrap();
        for (location, value) in [
            (
                FixtureLocation::Path("/etc/shadow".into()),
                "/etc/shadow".to_string(),
            ),
            (
                FixtureLocation::Path(allowed.join("escape.yuv")),
                "/etc/passwd".to_string(),
            ),
            (
                FixtureLocation::Url("https://elsewhere.example/a.yuv".into()),
                "https://elsewhere.example/a.yuv".to_string(),
            ),
        ] {
            let refusal = policy.check(&with_reference(location), "").unwrap_err();
            assert_eq!(refusal.rule, "allowed_fixtures");
            assert_eq!(refusal.value, value);
        }
        // Without `allowed_fixtures`, only generated fixtures pass.
        let strict = AgentPolicy::from_toml(
            "allowed_sources = [\"*\"]\nallowed_build_programs = [\"*\"]\n",
            Path::new("p.toml"),
        )
        .unwrap();
        let refusal = strict
            .check(
                &with_reference(FixtureLocation::Path(allowed.join("ref.yuv"))),
                "",
            )
            .unwrap_err();
        assert_eq!(refusal.rule, "allowed_fixtures");
        let mut generated = with_reference(FixtureLocation::Generate {
            generator: abfleet_core::spec::Generator::MovingPattern,
            seed: 2,
        });
        generated.fixtures[0].reference.sha256 = None;
        strict.check(&generated, "").unwrap();
    }

    #[test]
    fn a_bad_policy_file_says_what_is_wrong() {
        let origin = Path::new("p.toml");
        let err = AgentPolicy::from_toml("allowed_sources = [\"*\"]\n", origin)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("allowed_build_programs") && err.contains("p.toml"),
            "{err}"
        );
        let err = AgentPolicy::from_toml(
            "allowed_sources = [\"*\"]\nallowed_build_programs = [\"make\"]\nallow_all = true\n",
            origin,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("allow_all"), "{err}");
        let err = AgentPolicy::from_toml(
            "allowed_sources = []\nallowed_build_programs = [\"make\"]\n",
            origin,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("empty `allowed_sources`"), "{err}");
        let err = AgentPolicy::load(Path::new("/nonexistent/abfleet-policy.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent/abfleet-policy.toml"), "{err}");
    }

    #[test]
    fn a_spec_inside_the_policy_passes_and_one_outside_names_rule_and_value() {
        let spec = spec();
        let programs = ["meson", "ninja", "cc"];
        let open = policy(
            &[
                "https://github.com/Netflix/vmaf.git",
                "https://github.com/*",
            ],
            &programs,
        );
        let upstream_url = match &spec.upstream.source {
            SourceSpec::Git { url, .. } => url.clone(),
            other => panic!("{other:?}"),
        };
        open.check(&spec, "cpu/x86-64-v3").unwrap();

        let only_local = policy(&["/srv/trees/*"], &programs);
        let refusal = only_local.check(&spec, "cpu/x86-64-v3").unwrap_err();
        assert_eq!(refusal.rule, "allowed_sources");
        assert_eq!(refusal.value, upstream_url);
        let text = refusal.to_string();
        assert!(
            text.contains("[upstream] git") && text.contains("/etc/abfleet/agent-policy.toml"),
            "{text}"
        );

        let no_ninja = policy(&["*"], &["meson", "cc"]);
        let refusal = no_ninja.check(&spec, "").unwrap_err();
        assert_eq!(refusal.rule, "allowed_build_programs");
        assert_eq!(refusal.value, "ninja");

        let mut templated = spec.clone();
        templated.command.template.insert(0, "python3".into());
        let refusal = open.check(&templated, "").unwrap_err();
        assert_eq!(
            (refusal.rule, refusal.value.as_str()),
            ("allowed_build_programs", "python3")
        );
        assert!(refusal.what.contains("[command] template"), "{refusal}");

        let mut preloaded = spec.clone();
        preloaded
            .fork
            .build
            .env
            .insert("LD_PRELOAD".into(), "/tmp/evil.so".into());
        let refusal = open.check(&preloaded, "").unwrap_err();
        assert!(refusal.what.contains("LD_PRELOAD"), "{refusal}");
    }

    #[test]
    fn a_path_source_is_matched_as_written_and_as_resolved() {
        let tmp = tempfile::tempdir().unwrap();
        let allowed = tmp.path().join("trees");
        std::fs::create_dir_all(allowed.join("vmaf")).unwrap();
        std::fs::create_dir_all(tmp.path().join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("elsewhere"), allowed.join("sneaky")).unwrap();
        let allowed = allowed.canonicalize().unwrap();
        let policy = policy(
            &[&format!("{}/*", allowed.display())],
            &["meson", "ninja", "cc"],
        );
        let mut spec = spec();
        spec.upstream.source = SourceSpec::Path {
            path: allowed.join("vmaf"),
        };
        spec.fork.source = SourceSpec::Path {
            path: allowed.join("vmaf"),
        };
        policy.check(&spec, "").unwrap();
        spec.fork.source = SourceSpec::Path {
            path: allowed.join("sneaky"),
        };
        let refusal = policy.check(&spec, "").unwrap_err();
        assert!(
            refusal.what.contains("(resolved)") && refusal.value.ends_with("elsewhere"),
            "{refusal}"
        );
    }
}
