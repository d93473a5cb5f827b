//! Shell completions and manual pages (issue 25), generated from the clap definition: bash
//! really completes with the script (`_abfleet` called as bash calls it on <Tab>), and there
//! is a page for `abfleet` and for every subcommand `--help` lists.

mod support;

use support::*;

/// What bash offers for the words typed so far (the last one is being completed).
fn bash_completes(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let line = words.join(" ");
    let program = format!(
        "source '{}'\nCOMP_WORDS=({line})\nCOMP_CWORD={}\nCOMP_LINE='{line}'\nCOMP_POINT=${{#COMP_LINE}}\n_abfleet abfleet '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        words.len() - 1,
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let output = std::process::Command::new("bash")
        .args(["-c", &program])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", output_text(&output));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_subcommands_and_their_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let output = abfleet(tmp.path(), &["completions", "bash"]);
    assert!(output.status.success(), "{}", output_text(&output));
    let script = tmp.path().join("abfleet.bash");
    std::fs::write(&script, &output.stdout).unwrap();

    let offered = bash_completes(&script, &["abfleet", "su"]);
    assert_eq!(offered, ["submit"], "{offered:?}");
    let offered = bash_completes(&script, &["abfleet", "runs", "--for"]);
    assert_eq!(offered, ["--format"], "{offered:?}");
    let offered = bash_completes(&script, &["abfleet", "agents", "--pro"]);
    assert_eq!(offered, ["--profile"], "{offered:?}");

    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let output = abfleet(tmp.path(), &["completions", shell]);
        assert!(
            output.status.success() && output.stdout.len() > 1000,
            "{shell}: {}",
            output_text(&output)
        );
    }
    let unknown = abfleet(tmp.path(), &["completions", "tcsh"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", output_text(&unknown));
}

#[test]
fn every_subcommand_has_a_manual_page() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("man/man1");
    let output = abfleet(tmp.path(), &["man", "--out", out.to_str().unwrap()]);
    assert!(output.status.success(), "{}", output_text(&output));
    let help = abfleet(tmp.path(), &["--help"]);
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let subcommands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("\n\n")
        .next()
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert!(
        subcommands.len() >= 15 && subcommands.contains(&"submit") && subcommands.contains(&"man"),
        "{help}"
    );
    for name in subcommands {
        let page = out.join(format!("abfleet-{name}.1"));
        let text = std::fs::read_to_string(&page)
            .unwrap_or_else(|err| panic!("no page for `{name}` ({err}): {}", output_text(&output)));
        assert!(text.contains(&format!(".TH abfleet-{name} 1")), "{text}");
    }
    let main = std::fs::read_to_string(out.join("abfleet.1")).unwrap();
    assert!(
        main.contains(".TH abfleet 1") && main.contains("submit"),
        "{main}"
    );
    let submit = std::fs::read_to_string(out.join("abfleet-submit.1")).unwrap();
    assert!(
        submit.contains("profile") && submit.contains("ABFLEET_COORDINATOR"),
        "the flags and their variables: {submit}"
    );
    // Nested subcommands get their own pages.
    assert!(out.join("abfleet-certs-issue.1").is_file());
    assert!(out.join("abfleet-config-check.1").is_file());
}
