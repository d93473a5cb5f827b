//! `abfleet occupancy` as a script reads it (issue 25): `--format json` gives the same
//! figures as the text, in a documented shape. The launches are checked against the vendors'
//! own arithmetic: on sm_89 255 registers/thread take 8 KiB registers per warp, so 64 Ki
//! registers fit 8 warps (2 blocks of 128) of 48; on gfx942 128 VGPRs leave 4 of 8 waves per
//! SIMD (512 VGPRs each).

mod support;

use support::*;

fn json(args: &[&str]) -> serde_json::Value {
    let tmp = tempfile::tempdir().unwrap();
    let output = abfleet(tmp.path(), args);
    assert!(output.status.success(), "{}", output_text(&output));
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|err| panic!("{err}: {}", output_text(&output)))
}

#[test]
fn occupancy_prints_one_json_document_with_the_texts_figures() {
    let cuda = [
        "occupancy",
        "--arch",
        "sm_89",
        "--block",
        "128",
        "--regs",
        "255",
    ];
    let tmp = tempfile::tempdir().unwrap();
    let text = abfleet(tmp.path(), &cuda);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("8 of 48 warps = 16.7%"), "{text}");
    let doc = json(&[&cuda[..], &["--format", "json"]].concat());
    assert_eq!(doc["vendor"], "nvidia");
    assert_eq!(
        (
            &doc["active_blocks_per_sm"],
            &doc["active_warps_per_sm"],
            &doc["max_warps_per_sm"]
        ),
        (
            &serde_json::json!(2),
            &serde_json::json!(8),
            &serde_json::json!(48)
        ),
        "{doc}"
    );
    assert_eq!(doc["limiter"], "registers", "{doc}");
    assert_eq!(doc["blocks_per_sm_by"]["registers"], 2, "{doc}");
    assert!(
        (doc["occupancy_pct"].as_f64().unwrap() - 16.7).abs() < 0.05,
        "{doc}"
    );

    let doc = json(&[
        "occupancy",
        "--arch",
        "gfx942",
        "--vgprs",
        "128",
        "--format",
        "json",
    ]);
    assert_eq!(doc["vendor"], "amd");
    assert_eq!(
        (
            &doc["waves_per_simd"],
            &doc["max_waves_per_simd"],
            &doc["limiter"]
        ),
        (
            &serde_json::json!(4),
            &serde_json::json!(8),
            &serde_json::json!("vgprs")
        ),
        "{doc}"
    );
    assert_eq!(doc["wave_size"], 64, "{doc}");
}
