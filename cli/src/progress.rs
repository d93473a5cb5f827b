//! Progress of a followed run on stderr: a bar with the current cell on a terminal, plain
//! lines (one per change) otherwise. What the agent says is shown through
//! `terminal_text::visible_cell`.

use std::io::IsTerminal;

use abfleet_core::progress::RunProgress;
use indicatif::{ProgressBar, ProgressStyle};

use crate::terminal_text::visible_cell;

pub struct Progress {
    bar: Option<ProgressBar>,
    last_line: String,
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
            last_line: String::new(),
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
                if line != self.last_line {
                    eprintln!("{line}");
                    self.last_line = line;
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
