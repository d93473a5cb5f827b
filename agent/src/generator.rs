//! Deterministic YUV generators the agent runs itself, so a spec can name its inputs without
//! shipping files: a moving test pattern and a distorted copy of it. The same parameters give
//! the same bytes on every host (integer arithmetic and a seeded xorshift only).

use std::io::{BufWriter, Write};
use std::path::Path;

use abfleet_core::spec::{FixtureSpec, Generator};

/// Writes the generated file for one side of a fixture.
pub fn generate(
    generator: Generator,
    seed: u64,
    fixture: &FixtureSpec,
    dest: &Path,
) -> std::io::Result<()> {
    let file = std::fs::File::create(dest)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let max = (1u32 << fixture.bitdepth) - 1;
    let (cw, ch) = fixture.pixel_format.chroma_divisors();
    let chroma_w = u64::from(fixture.width).div_ceil(cw) as u32;
    let chroma_h = u64::from(fixture.height).div_ceil(ch) as u32;
    let mut rng = XorShift::new(seed);
    for t in 0..fixture.frames {
        let planes = [
            (fixture.width, fixture.height, 1u32, 0u32),
            (chroma_w, chroma_h, cw as u32, 1),
            (chroma_w, chroma_h, cw as u32, 2),
        ];
        for (w, h, scale, plane) in planes {
            let base = |x: u32, y: u32| {
                pattern(
                    x * scale,
                    y * scale,
                    t,
                    plane,
                    fixture.width,
                    fixture.height,
                    seed,
                )
            };
            for y in 0..h {
                for x in 0..w {
                    let value8 = match generator {
                        Generator::MovingPattern => base(x, y),
                        Generator::MovingPatternDistorted => {
                            // A 3-tap horizontal blur, then noise, then a coarse quantiser.
                            let left = base(x.saturating_sub(1), y);
                            let right = base((x + 1).min(w - 1), y);
                            let blurred = (left + 2 * base(x, y) + right) / 4;
                            let noise = (rng.next() % 9) as i32 - 4;
                            let noisy = (blurred as i32 + noise).clamp(0, 255) as u32;
                            (noisy / 4) * 4 + 2
                        }
                    };
                    let value = if fixture.bitdepth > 8 {
                        (value8.min(255) * max) / 255
                    } else {
                        value8.min(255)
                    };
                    if fixture.bitdepth > 8 {
                        out.write_all(&(value as u16).to_le_bytes())?;
                    } else {
                        out.write_all(&[value as u8])?;
                    }
                }
            }
        }
    }
    out.flush()
}

/// The 8-bit value of the test pattern at (x, y) of frame t: diagonal gradients, a
/// checkerboard, and a bright square travelling across the frame.
fn pattern(x: u32, y: u32, t: u32, plane: u32, width: u32, height: u32, seed: u64) -> u32 {
    let shift = (seed % 17) as u32;
    match plane {
        0 => {
            let gradient = ((x + 3 * t + shift) * 160 / width.max(1)) % 160;
            let checker = if ((x + t) / 16 + y / 16).is_multiple_of(2) {
                40
            } else {
                0
            };
            let side = (width.min(height) / 4).max(2);
            let sx = (t * 5 + shift) % width.max(1);
            let sy = (t * 3) % height.max(1);
            let in_square = x >= sx && x < sx + side && y >= sy && y < sy + side;
            if in_square {
                235
            } else {
                16 + gradient + checker
            }
        }
        1 => 64 + (y * 128 / height.max(1)) + (t % 8),
        _ => 192 - (x * 128 / width.max(1)) + (t % 5),
    }
}

struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abfleet_core::spec::{FixtureFile, FixtureLocation, PixelFormat};

    fn fixture(bitdepth: u8, pixel_format: PixelFormat) -> FixtureSpec {
        let file = FixtureFile {
            location: FixtureLocation::Generate {
                generator: Generator::MovingPattern,
                seed: 1,
            },
            sha256: None,
        };
        FixtureSpec {
            name: "g".into(),
            width: 33,
            height: 17,
            bitdepth,
            pixel_format,
            frames: 3,
            reference: file.clone(),
            distorted: file,
        }
    }

    #[test]
    fn output_has_the_exact_size_and_is_deterministic() {
        let tmp = tempfile::tempdir().unwrap();
        for (bitdepth, format) in [
            (8, PixelFormat::Yuv420),
            (10, PixelFormat::Yuv422),
            (16, PixelFormat::Yuv444),
        ] {
            let f = fixture(bitdepth, format);
            let a = tmp.path().join("a.yuv");
            let b = tmp.path().join("b.yuv");
            generate(Generator::MovingPatternDistorted, 7, &f, &a).unwrap();
            generate(Generator::MovingPatternDistorted, 7, &f, &b).unwrap();
            let bytes = std::fs::read(&a).unwrap();
            assert_eq!(bytes.len() as u64, f.file_bytes(), "{bitdepth} {format:?}");
            assert_eq!(bytes, std::fs::read(&b).unwrap());
        }
    }

    #[test]
    fn the_distorted_copy_differs_from_the_reference() {
        let tmp = tempfile::tempdir().unwrap();
        let f = fixture(8, PixelFormat::Yuv420);
        let reference = tmp.path().join("r.yuv");
        let distorted = tmp.path().join("d.yuv");
        generate(Generator::MovingPattern, 1, &f, &reference).unwrap();
        generate(Generator::MovingPatternDistorted, 1, &f, &distorted).unwrap();
        assert_ne!(
            std::fs::read(reference).unwrap(),
            std::fs::read(distorted).unwrap()
        );
    }
}
