//! A generation's toolchains as report.md's and the sweep report's generation sections both
//! list them, each change since the previous run flagged.

use std::fmt::Write;

use abfleet_core::report::markdown_text::code;
use abfleet_core::report::GenerationSection;

/// A generation's toolchains as list items, each change since the previous run flagged,
/// then a blank line (report.md's and the sweep's sections alike).
pub(crate) fn render_toolchains(out: &mut String, section: &GenerationSection) {
    for (side, toolchain) in &section.toolchain {
        let _ = writeln!(out, "- {side} toolchain: {}", code(toolchain));
    }
    for change in section.toolchain_changes() {
        let _ = writeln!(
            out,
            "- **toolchain changed** since the previous run: {change}"
        );
    }
    out.push('\n');
}
