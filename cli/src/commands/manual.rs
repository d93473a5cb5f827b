//! `abfleet completions SHELL` and `abfleet man --out DIR`: the shell completions and the
//! manual pages, generated from the one clap definition (`cli.rs`), so they never drift
//! from the flags.

use std::path::Path;

use clap::CommandFactory;

use crate::failure::{Classify, Failure};

/// Completions for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<i32, Failure> {
    use std::io::Write;
    let mut command = crate::cli::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "abfleet", &mut script);
    // A closed pipe (`| head`) ends the output; it is not a failure worth a panic.
    let _ = std::io::stdout().lock().write_all(&script);
    Ok(abfleet_core::exit::OK)
}

/// abfleet.1 and a page per subcommand, in `out`; their names on stdout.
pub fn man_pages(out: &Path) -> Result<i32, Failure> {
    std::fs::create_dir_all(out)
        .map_err(|err| {
            anyhow::anyhow!(
                "cannot create `{}`: {err}; give --out a directory you may write",
                out.display()
            )
        })
        .usage()?;
    let mut command = crate::cli::Cli::command().disable_help_subcommand(true);
    command.build();
    write_pages(command, out)
        .map_err(|err| {
            anyhow::anyhow!(
                "cannot write the manual pages to `{}`: {err}; give --out a directory you may write",
                out.display()
            )
        })
        .usage()?;
    let mut pages: Vec<String> = std::fs::read_dir(out)
        .map_err(|err| {
            anyhow::anyhow!(
                "cannot list `{}` after writing the pages: {err}",
                out.display()
            )
        })
        .usage()?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("abfleet") && name.ends_with(".1"))
        .collect();
    pages.sort();
    for page in pages {
        println!("{}", out.join(page).display());
    }
    Ok(abfleet_core::exit::OK)
}

/// The page of `command` and of each of its subcommands, as `clap_mangen::generate_to`
/// writes them, each with an ENVIRONMENT section naming the variables its flags read
/// (clap_mangen leaves them out).
fn write_pages(command: clap::Command, out: &Path) -> std::io::Result<()> {
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub.clone(), out)?;
    }
    let man = clap_mangen::Man::new(command.clone());
    let mut page = Vec::new();
    man.render(&mut page)?;
    let mut page = String::from_utf8_lossy(&page).into_owned();
    let environment = environment_section(&command);
    match page.find(".SH VERSION") {
        Some(at) => page.insert_str(at, &environment),
        None => page.push_str(&environment),
    }
    std::fs::write(out.join(man.get_filename()), page)
}

/// `.SH ENVIRONMENT`: each variable a flag of `command` reads, and the flag.
fn environment_section(command: &clap::Command) -> String {
    let escape = |text: &str| text.replace('\\', "\\\\").replace('-', "\\-");
    let variables: Vec<String> = command
        .get_arguments()
        .filter(|arg| !arg.is_hide_set())
        .filter_map(|arg| {
            let variable = arg.get_env()?.to_string_lossy().into_owned();
            let flag = arg
                .get_long()
                .map_or_else(|| arg.get_id().to_string(), |long| format!("--{long}"));
            Some(format!(
                ".TP\n\\fB{}\\fR\nThe value of \\fB{}\\fR when the flag is not given.\n",
                escape(&variable),
                escape(&flag)
            ))
        })
        .collect();
    if variables.is_empty() {
        String::new()
    } else {
        format!(".SH ENVIRONMENT\n{}", variables.concat())
    }
}
