//! The charts' colours. Each role has its own colour, so a bar's fill says what it is (and a
//! test can tell bars, whiskers and bands apart in the drawn SVG, which writes colours as
//! `#RRGGBB`).

use plotters::style::RGBColor;

/// Bars by verdict.
pub const FASTER: RGBColor = RGBColor(0x2E, 0x7D, 0x32);
pub const SAME: RGBColor = RGBColor(0x78, 0x90, 0x9C);
pub const SLOWER: RGBColor = RGBColor(0xEF, 0x6C, 0x00);
pub const UNSURE: RGBColor = RGBColor(0x5C, 0x6B, 0xC0);
/// A cell whose scores broke the parity gate: its speedup does not count.
pub const PARITY_FAIL: RGBColor = RGBColor(0xD5, 0x00, 0x00);
/// The 95% interval.
pub const WHISKER: RGBColor = RGBColor(0x21, 0x21, 0x21);
/// The `same` band, 1 ± the practical threshold.
pub const SAME_BAND: RGBColor = RGBColor(0xE3, 0xE8, 0xEC);
/// The line at speedup 1.
pub const PARITY_LINE: RGBColor = RGBColor(0x42, 0x42, 0x42);
/// Text of rows without a bar (absent upstream, not measured).
pub const MUTED_TEXT: RGBColor = RGBColor(0x61, 0x61, 0x61);
/// The per-frame delta line and the gate.
pub const DELTA_LINE: RGBColor = RGBColor(0x15, 0x65, 0xC0);
pub const GATE_LINE: RGBColor = RGBColor(0xD5, 0x00, 0x00);

/// Every fill a speedup bar can have.
pub const BAR_FILLS: [RGBColor; 5] = [FASTER, SAME, SLOWER, UNSURE, PARITY_FAIL];

/// One colour per generation in the cross-generation chart, in section order (repeats after
/// eight). None of them is a verdict colour or red.
pub const GENERATIONS: [RGBColor; 8] = [
    RGBColor(0x1F, 0x77, 0xB4),
    RGBColor(0xFF, 0x7F, 0x0E),
    RGBColor(0x2C, 0xA0, 0x2C),
    RGBColor(0x94, 0x67, 0xBD),
    RGBColor(0x8C, 0x56, 0x4B),
    RGBColor(0xE3, 0x77, 0xC2),
    RGBColor(0x7F, 0x7F, 0x7F),
    RGBColor(0x17, 0xBE, 0xCF),
];

/// `#RRGGBB`, as the SVG backend writes a colour.
pub fn hex(color: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", color.0, color.1, color.2)
}
