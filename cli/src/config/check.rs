//! `abfleet config check FILE`: every table of a file checked as the service would check it,
//! as text or JSON.

use std::path::Path;

use super::{AgentSettings, ConfigError, ConfigFile, CoordinatorSettings};
use crate::findings::{line, Findings};

/// `abfleet config check FILE`: the effective settings of each table on stdout, or each
/// problem on stderr (`--format json`: one document on stdout either way, docs/operations.md
/// "Lists for scripts"). Returns the exit code.
pub fn check_file(path: &Path, format: crate::cli::ListFormat) -> i32 {
    let checked = match ConfigFile::load(path) {
        Ok(file) => Ok(checked_tables(&file)),
        Err(ConfigError::Invalid { problems, .. }) => Err(problems),
        Err(err) => Err(vec![err.to_string()]),
    };
    let problems: Vec<String> = match &checked {
        Err(problems) => problems.clone(),
        Ok(tables) => tables
            .iter()
            .flat_map(|table| {
                table
                    .findings
                    .problems
                    .iter()
                    .map(move |problem| format!("[{}] {problem}", table.name))
            })
            .collect(),
    };
    let code = if problems.is_empty() {
        abfleet_core::exit::OK
    } else {
        abfleet_core::exit::USAGE
    };
    if format == crate::cli::ListFormat::Json {
        let tables = checked.as_deref().unwrap_or_default();
        println!("{}", check_json(path, &problems, tables));
        return code;
    }
    if !problems.is_empty() {
        for problem in problems {
            eprintln!("error: `{}`: {problem}", path.display());
        }
        return code;
    }
    println!(
        "# `{}` is valid: the settings `abfleet coordinator|agent --config` and client\n# profiles take from it, defaults filled in (flags and their variables override them)",
        path.display()
    );
    for table in checked.unwrap_or_default() {
        println!();
        print!("{}", table.text);
        for note in &table.findings.notes {
            eprintln!("note: [{}] {note}", table.name);
        }
    }
    code
}

/// One table of a checked file: its effective settings as TOML and what the check found.
struct CheckedTable {
    name: String,
    text: String,
    findings: Findings,
}

/// Each table of a valid file, checked as the service reading it would.
fn checked_tables(file: &ConfigFile) -> Vec<CheckedTable> {
    let mut tables = Vec::new();
    let mut push = |name: String, text: String, findings: Findings| {
        tables.push(CheckedTable {
            name,
            text,
            findings,
        })
    };
    let problems_only = |problems| Findings {
        problems,
        notes: Vec::new(),
    };
    if let Some(section) = &file.coordinator {
        let mut settings = CoordinatorSettings::default();
        settings.overlay(section, |_| false);
        push("coordinator".into(), settings.to_toml(), settings.check());
    }
    if let Some(section) = &file.agent {
        let mut settings = AgentSettings::default();
        settings.overlay(section, |_| false);
        push("agent".into(), settings.to_toml(), settings.check());
    }
    if let Some(section) = &file.github {
        let milestone = file
            .coordinator
            .as_ref()
            .and_then(|c| c.milestone_spec.clone());
        let (text, problems) = match section.load(milestone.as_deref()) {
            Ok(reporting) => (
                format!(
                    "[github]\n# answers pull requests with the status `{}`{}\n",
                    reporting.context,
                    reporting
                        .report_url
                        .as_ref()
                        .map_or(String::new(), |url| format!(", linking {url}/runs/RUN"))
                ),
                Vec::new(),
            ),
            Err(problems) => (String::new(), problems),
        };
        push("github".into(), text, problems_only(problems));
    }
    if let Some(section) = &file.notify {
        let (text, problems) = match section.load() {
            Ok(config) => (notify_summary(&config), Vec::new()),
            Err(problems) => (String::new(), problems),
        };
        push("notify".into(), text, problems_only(problems));
    }
    for (name, profile) in file.profiles.iter().flatten() {
        let (text, findings) = crate::profile::check(name, profile);
        push(format!("profile.{name}"), text, findings);
    }
    tables
}

/// `config check --format json`: the file, whether it is valid, every problem, and per
/// table its effective settings (the keys that are set) and notes.
fn check_json(path: &Path, problems: &[String], tables: &[CheckedTable]) -> serde_json::Value {
    let tables: Vec<serde_json::Value> = tables
        .iter()
        .map(|table| {
            // The table's own keys: `[profile.lab]` is nested in its TOML as profile → lab.
            let parsed = toml::Value::Table(table.text.parse().unwrap_or_default());
            let settings = table
                .name
                .split('.')
                .try_fold(&parsed, |value, key| value.get(key))
                .cloned()
                .unwrap_or(toml::Value::Table(Default::default()));
            serde_json::json!({
                "table": table.name,
                "settings": settings,
                "problems": table.findings.problems,
                "notes": table.findings.notes,
            })
        })
        .collect();
    serde_json::json!({
        "file": path.display().to_string(),
        "valid": problems.is_empty(),
        "problems": problems,
        "tables": tables,
    })
}

/// The alert settings as `config check` shows them: each endpoint's name, format, where
/// it points (scheme and host only: the rest of a webhook URL is a secret) and its alerts.
fn notify_summary(config: &abfleet_coordinator::outbound::notify::NotifyConfig) -> String {
    use abfleet_coordinator::outbound::http_client::url_origin;
    let mut out = String::from("[notify]\n");
    line(
        &mut out,
        "report_url",
        config.report_url.clone().map(Into::into),
    );
    out.push_str(&format!(
        "retry_after_seconds = {}\nmax_attempts = {}\ntimeout_seconds = {}\n",
        config.retry_after.as_secs_f64(),
        config.max_attempts,
        config.timeout.as_secs_f64()
    ));
    for endpoint in &config.endpoints {
        let events: Vec<&str> = endpoint.events.iter().map(|k| k.as_str()).collect();
        out.push_str(&format!(
            "# endpoint `{}`: {:?} to {}, {}{}\n",
            endpoint.name,
            endpoint.format,
            url_origin(&endpoint.url),
            if events.is_empty() {
                "every alert".to_string()
            } else {
                events.join(", ")
            },
            if endpoint.secret.is_some() {
                ", signed"
            } else {
                ""
            }
        ));
    }
    out
}
