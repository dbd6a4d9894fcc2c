//! The `wgdiff` binary: `info` without a Vulkan driver fails cleanly, `bench matmul|block --json`
//! print one well-formed object per measurement, `profile --trace` writes a Chrome trace.

use std::process::Command;

fn wgdiff() -> Command {
    Command::new(env!("CARGO_BIN_EXE_wgdiff"))
}

#[test]
fn info_without_a_vulkan_driver_names_the_fix() {
    let out = wgdiff()
        .arg("info")
        .env("WGPU_BACKEND", "vulkan")
        .env("VK_DRIVER_FILES", "/nonexistent.json")
        .env("VK_ICD_FILENAMES", "/nonexistent.json")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "info should fail without a Vulkan driver");
    assert!(stderr.contains("mesa-vulkan-drivers"), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("stack backtrace"),
        "{stderr}"
    );
}

#[test]
fn info_lists_the_chosen_adapter() {
    let out = wgdiff().arg("info").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("chosen:") && stdout.contains("max_storage_buffer_binding_size"),
        "{stdout}"
    );
}

#[test]
fn bench_matmul_json_has_the_documented_keys() {
    let out = wgdiff()
        .args([
            "bench", "matmul", "--json", "--shapes", "48x40x36", "--reps", "1", "--warmup", "0",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(rows.len() >= 2, "{stdout}");
    for row in &rows {
        for key in ["bench", "variant", "shape", "median_ms", "gflops", "device"] {
            assert!(row.get(key).is_some(), "missing {key} in {row}");
        }
        assert_eq!(row["shape"], "48x40x36");
        assert!(row["median_ms"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn bench_block_json_has_variant_pass_and_shape() {
    let out = wgdiff()
        .args([
            "bench", "block", "--json", "--shapes", "2x8x5x6", "--reps", "1", "--warmup", "0",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let cells: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["variant"].as_str().unwrap(), r["pass"].as_str().unwrap()))
        .collect();
    for variant in ["fused", "unfused"] {
        for pass in ["forward", "forward+backward"] {
            assert!(
                cells.contains(&(variant, pass)),
                "{variant} {pass} missing: {stdout}"
            );
        }
    }
    assert!(rows.iter().all(|r| r["shape"] == "B2 C8 5x6"), "{stdout}");
}

#[test]
fn profile_writes_a_chrome_trace() {
    let path = std::env::temp_dir().join(format!("wgdiff-trace-{}.json", std::process::id()));
    let out = wgdiff()
        .args(["profile", "mlp", "--steps", "1", "--json", "--trace"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in stdout.lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(row["calls"].as_u64().unwrap() > 0, "{row}");
    }
    let trace: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    assert!(!events.is_empty());
    for e in events {
        assert!(e["name"].is_string() && e["ph"] == "X", "{e}");
        assert!(e["ts"].is_number() && e["dur"].is_number(), "{e}");
    }
}

#[test]
fn profile_names_an_unwritable_trace_path() {
    let out = wgdiff()
        .args([
            "profile",
            "--steps",
            "1",
            "--trace",
            "/nonexistent-dir/trace.json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("/nonexistent-dir/trace.json") && !stderr.contains("panicked"),
        "{stderr}"
    );
}
