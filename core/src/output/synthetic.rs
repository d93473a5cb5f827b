//! A vmaf output of any length, for measuring the parsers: `frames` frames of the 30 metrics
//! a vmaf model and the common extra features print, at vmaf's `%.6f`, in the shape each of
//! vmaf's `--json`, `--xml` and `--csv` writes (frames; then, for JSON and XML, the pooled
//! block of min, max, mean and harmonic mean per metric). Values come from a seeded xorshift,
//! so every call writes the same text; it is written as it is generated, never held, so a
//! caller measuring memory sees only what it does with it. `abfleet-bench parse` and the
//! criterion bench `core/benches/parsers.rs` both read this.

use std::io::{self, Write};

use super::OutputFormat;

/// 10 minutes at 24 fps: the 4K clip of the parsers' target (docs/performance.md).
pub const TEN_MINUTES_AT_24_FPS: u32 = 14_400;

/// A vmaf model's features and the common extra features: 30 metrics.
pub const METRICS: [&str; 30] = [
    "integer_adm2",
    "integer_aim",
    "integer_adm3",
    "integer_adm_scale0",
    "integer_adm_scale1",
    "integer_adm_scale2",
    "integer_adm_scale3",
    "integer_motion2",
    "integer_motion",
    "integer_vif_scale0",
    "integer_vif_scale1",
    "integer_vif_scale2",
    "integer_vif_scale3",
    "integer_motion3",
    "vmaf",
    "float_ssim",
    "float_ms_ssim",
    "psnr_y",
    "psnr_cb",
    "psnr_cr",
    "psnr_hvs_y",
    "psnr_hvs_cb",
    "psnr_hvs_cr",
    "psnr_hvs",
    "cambi",
    "ciede2000",
    "ssimulacra2",
    "float_vif_scale0",
    "float_adm2",
    "float_motion",
];

/// Writes a `format` output of `frames` frames to `out`.
pub fn write_output(format: OutputFormat, frames: u32, out: impl Write) -> io::Result<()> {
    let mut out = io::BufWriter::new(out);
    match format {
        OutputFormat::Json => json(frames, &mut out)?,
        OutputFormat::Xml => xml(frames, &mut out)?,
        OutputFormat::Csv => csv(frames, &mut out)?,
    }
    out.flush()
}

/// [`write_output`] into a string.
pub fn output_text(format: OutputFormat, frames: u32) -> String {
    let mut bytes = Vec::new();
    write_output(format, frames, &mut bytes).expect("writing to memory cannot fail");
    String::from_utf8(bytes).expect("the output is ASCII")
}

/// The frames' values, one frame at a time, with each metric's pooled figures kept as they go.
struct Frames {
    state: u64,
    /// Per metric: min, max, sum, sum of reciprocals.
    pooled: [(f64, f64, f64, f64); METRICS.len()],
}

impl Frames {
    fn new() -> Frames {
        Frames {
            state: 0x9E37_79B9_7F4A_7C15,
            pooled: [(f64::INFINITY, f64::NEG_INFINITY, 0.0, 0.0); METRICS.len()],
        }
    }

    /// The next frame's values, each in [0.5, 100).
    fn next_frame(&mut self) -> [f64; METRICS.len()] {
        std::array::from_fn(|i| {
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            let value = 0.5 + (self.state >> 11) as f64 / (1u64 << 53) as f64 * 99.5;
            let (min, max, sum, inv_sum) = &mut self.pooled[i];
            *min = min.min(value);
            *max = max.max(value);
            *sum += value;
            *inv_sum += 1.0 / value;
            value
        })
    }

    /// Per metric, after `frames` frames: min, max, mean, harmonic mean.
    fn pooled(&self, frames: u32) -> impl Iterator<Item = (&'static str, [f64; 4])> + '_ {
        let n = f64::from(frames);
        METRICS
            .iter()
            .zip(&self.pooled)
            .map(move |(metric, (min, max, sum, inv_sum))| {
                (*metric, [*min, *max, sum / n, n / inv_sum])
            })
    }
}

fn json(frames: u32, out: &mut impl Write) -> io::Result<()> {
    let mut values = Frames::new();
    writeln!(
        out,
        "{{\n  \"version\": \"3.0.0\",\n  \"fps\": 14.87,\n  \"frames\": ["
    )?;
    for frame in 0..frames {
        writeln!(
            out,
            "    {{\n      \"frameNum\": {frame},\n      \"metrics\": {{"
        )?;
        for (i, (metric, value)) in METRICS.iter().zip(values.next_frame()).enumerate() {
            let comma = if i + 1 < METRICS.len() { "," } else { "" };
            writeln!(out, "        \"{metric}\": {value:.6}{comma}")?;
        }
        let comma = if frame + 1 < frames { "," } else { "" };
        writeln!(out, "      }}\n    }}{comma}")?;
    }
    writeln!(out, "  ],\n  \"pooled_metrics\": {{")?;
    for (i, (metric, [min, max, mean, harmonic])) in values.pooled(frames).enumerate() {
        let comma = if i + 1 < METRICS.len() { "," } else { "" };
        writeln!(
            out,
            "    \"{metric}\": {{\n      \"min\": {min:.6},\n      \"max\": {max:.6},\n      \"mean\": {mean:.6},\n      \"harmonic_mean\": {harmonic:.6}\n    }}{comma}"
        )?;
    }
    writeln!(out, "  }},\n  \"aggregate_metrics\": {{\n  }}\n}}")
}

fn xml(frames: u32, out: &mut impl Write) -> io::Result<()> {
    let mut values = Frames::new();
    writeln!(
        out,
        "<VMAF version=\"3.0.0\">\n  <params qualityWidth=\"3840\" qualityHeight=\"2160\" />\n  <fyi fps=\"14.87\" />\n  <frames>"
    )?;
    for frame in 0..frames {
        write!(out, "    <frame frameNum=\"{frame}\"")?;
        for (metric, value) in METRICS.iter().zip(values.next_frame()) {
            write!(out, " {metric}=\"{value:.6}\"")?;
        }
        writeln!(out, " />")?;
    }
    writeln!(out, "  </frames>\n  <pooled_metrics>")?;
    for (metric, [min, max, mean, harmonic]) in values.pooled(frames) {
        writeln!(
            out,
            "    <metric name=\"{metric}\" min=\"{min:.6}\" max=\"{max:.6}\" mean=\"{mean:.6}\" harmonic_mean=\"{harmonic:.6}\" />"
        )?;
    }
    writeln!(out, "  </pooled_metrics>\n  <aggregate_metrics />\n</VMAF>")
}

fn csv(frames: u32, out: &mut impl Write) -> io::Result<()> {
    let mut values = Frames::new();
    write!(out, "Frame,")?;
    for metric in METRICS {
        write!(out, "{metric},")?;
    }
    writeln!(out)?;
    for frame in 0..frames {
        write!(out, "{frame},")?;
        for value in values.next_frame() {
            write!(out, "{value:.6},")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_parses_to_its_frames_with_the_same_values() {
        let parsed: Vec<_> = [OutputFormat::Json, OutputFormat::Xml, OutputFormat::Csv]
            .into_iter()
            .map(|format| super::super::parse(format, &output_text(format, 3)).unwrap())
            .collect();
        for scores in &parsed {
            assert_eq!(scores.frames.len(), 3);
            assert_eq!(scores.frames[2].metrics.len(), METRICS.len());
            assert_eq!(scores.frames[1].metrics, parsed[0].frames[1].metrics);
        }
        // The pooled block is the frames' own: JSON's and XML's mean of a metric is the
        // mean of its three values, at the printed precision.
        let vmaf: Vec<f64> = parsed[0]
            .frames
            .iter()
            .map(|frame| *frame.metrics.get("vmaf").unwrap())
            .collect();
        let mean = vmaf.iter().sum::<f64>() / 3.0;
        for scores in &parsed[..2] {
            let pooled = scores.pooled["vmaf"].mean;
            assert!((pooled - mean).abs() < 2e-6, "{pooled} vs {mean}");
        }
    }

    #[test]
    fn the_same_call_writes_the_same_text() {
        assert_eq!(
            output_text(OutputFormat::Json, 5),
            output_text(OutputFormat::Json, 5)
        );
        assert_ne!(
            output_text(OutputFormat::Json, 5),
            output_text(OutputFormat::Json, 6)
        );
    }
}
