//! The `wgdiff` binary: `info` without a Vulkan driver fails cleanly, and `bench matmul
//! --json` prints one well-formed object per measurement.

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
