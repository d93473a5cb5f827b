//! Where log lines go: standard error, and nowhere once standard error is gone.
//!
//! A coordinator or agent outlives the terminal or pipe it was started from (a closed
//! terminal, a log collector restarted, a test that stopped reading). `tracing-subscriber`
//! reports a failed write with `eprintln!`, which panics when standard error is the thing that
//! failed, so a lost log reader took the whole process down with it. This writer drops a line
//! it cannot write instead: the log is lost, the process and its jobs are not.

use std::io::{self, Write};

/// Standard error, with failed writes dropped.
pub struct LossyStderr;

impl Write for LossyStderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // A reader that went away (EPIPE) or a full disk behind a redirect: drop the line.
        let _ = io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = io::stderr().flush();
        Ok(())
    }
}

/// For `tracing_subscriber::fmt().with_writer(..)`.
pub fn lossy_stderr() -> LossyStderr {
    LossyStderr
}
