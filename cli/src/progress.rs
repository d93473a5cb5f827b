//! Progress of a followed run on stderr: a bar with the current cell on a terminal, plain
//! lines (one per change) otherwise — a step said again with only its elapsed time grown
//! (a long build's heartbeat) prints that time alone, not the step's whole line again (a CI
//! log filled with a 21-target command line every 10 s: issue 39). What the agent says is
//! shown through `terminal_text::visible_cell`.

use std::io::IsTerminal;

use abfleet_core::progress::RunProgress;
use indicatif::{ProgressBar, ProgressStyle};

use crate::terminal_text::visible_cell;

pub struct Progress {
    bar: Option<ProgressBar>,
    lines: PlainLines,
}

/// The plain lines of a followed run: what was printed last, without its elapsed time.
#[derive(Default)]
struct PlainLines {
    last_step: String,
}

impl PlainLines {
    /// The line to print for `line`, if any: nothing when it says what the last did; only
    /// the elapsed time when only that changed.
    fn next(&mut self, line: &str) -> Option<String> {
        let (step, elapsed) = split_elapsed(line);
        if step == self.last_step {
            return elapsed.map(|elapsed| format!("  … {elapsed}"));
        }
        self.last_step = step.to_string();
        Some(line.to_string())
    }
}

/// `line` without a trailing `, N s elapsed`, and that elapsed part (`N s elapsed`).
fn split_elapsed(line: &str) -> (&str, Option<&str>) {
    match line.rsplit_once(", ") {
        Some((step, elapsed))
            if elapsed
                .strip_suffix(" s elapsed")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
        {
            (step, Some(elapsed))
        }
        _ => (line, None),
    }
}

impl Progress {
    pub fn new(run_id: &str) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} cells  {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            bar
        });
        if bar.is_none() {
            eprintln!("run {run_id}: following");
        }
        Progress {
            bar,
            lines: PlainLines::default(),
        }
    }

    pub fn update(&mut self, update: &RunProgress) {
        // The message and the cell's name come from the agent: one line, made visible.
        let (state, text) = (visible_cell(&update.state), visible_cell(&update.message));
        let message = match &update.current_cell {
            None => format!("{state}: {text}"),
            Some(cell) => format!("{state}: {}", visible_cell(cell)),
        };
        match &self.bar {
            Some(bar) => {
                if update.cells_total > 0 {
                    bar.set_length(u64::from(update.cells_total));
                    bar.set_position(u64::from(update.cells_done));
                }
                bar.set_message(message);
            }
            None => {
                // No count before the agent knows how many cells there are (`[0/0]` said
                // nothing).
                let count = if update.cells_total > 0 {
                    format!("[{}/{}] ", update.cells_done, update.cells_total)
                } else {
                    String::new()
                };
                let line = format!(
                    "{count}{}{}",
                    state,
                    if text.is_empty() {
                        String::new()
                    } else {
                        format!(": {text}")
                    }
                );
                if let Some(shown) = self.lines.next(&line) {
                    eprintln!("{shown}");
                }
            }
        }
    }

    pub fn note(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }

    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_said_again_prints_only_its_elapsed_time() {
        let mut lines = PlainLines::default();
        let step = "build: building fork: ninja -C build src/a.hsaco src/b.hsaco";
        assert_eq!(
            lines.next(&format!("{step}, 10 s elapsed")).as_deref(),
            Some(format!("{step}, 10 s elapsed").as_str())
        );
        assert_eq!(
            lines.next(&format!("{step}, 20 s elapsed")).as_deref(),
            Some("  … 20 s elapsed")
        );
        assert_eq!(
            lines.next("[1/4] running: tiny/psnr").as_deref(),
            Some("[1/4] running: tiny/psnr")
        );
        assert_eq!(lines.next("[1/4] running: tiny/psnr"), None, "said once");
        assert_eq!(split_elapsed("a, b"), ("a, b", None));
        assert_eq!(split_elapsed("a, s elapsed"), ("a, s elapsed", None));
    }
}
