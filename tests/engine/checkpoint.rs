//! Checkpoint files: a bit-exact round trip through safetensors, and clear errors for
//! truncated files, foreign files and tensors of the wrong shape.

use crate::common::gpu;
use wgdiff::checkpoint::Checkpoint;
use wgdiff::ops::random::Rng;
use wgdiff::{DType, Tensor};

fn temp_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("wgdiff-checkpoint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn named_random(seed: u64) -> Vec<(String, Tensor)> {
    let mut rng = Rng::new(seed);
    vec![
        (
            "conv.weight".into(),
            rng.normal(gpu(), &[4, 3, 3, 3], 0.0, 1.0, DType::F32).unwrap(),
        ),
        (
            "conv.bias".into(),
            rng.normal(gpu(), &[4], 0.0, 1.0, DType::F32).unwrap(),
        ),
    ]
}

#[test]
fn round_trip_is_bit_exact_and_restores_into_tensors() {
    let named = named_random(1);
    let meta = serde_json::json!({"step": 7, "config": {"preset": "tiny"}});
    let ckpt = pollster::block_on(Checkpoint::capture(&named, meta.clone())).unwrap();
    let path = temp_path("round.safetensors");
    ckpt.save(&path).unwrap();
    let back = Checkpoint::load(&path).unwrap();
    assert_eq!(back.meta, meta);
    for (name, t) in &named {
        let a: Vec<u32> = t.to_vec().unwrap().iter().map(|v| v.to_bits()).collect();
        let b: Vec<u32> = back.tensors[name].data.iter().map(|v| v.to_bits()).collect();
        assert_eq!(a, b, "{name}");
    }
    let fresh = named_random(2);
    back.restore("", &fresh, "round.safetensors").unwrap();
    for ((_, a), (_, b)) in named.iter().zip(&fresh) {
        assert_eq!(a.to_vec().unwrap(), b.to_vec().unwrap());
    }
}

#[test]
fn corrupt_foreign_and_mismatched_checkpoints_give_clear_errors() {
    let named = named_random(3);
    let ckpt = pollster::block_on(Checkpoint::capture(&named, serde_json::json!({}))).unwrap();
    let bytes = ckpt.to_bytes().unwrap();

    let truncated = temp_path("truncated.safetensors");
    std::fs::write(&truncated, &bytes[..bytes.len() - 10]).unwrap();
    let msg = Checkpoint::load(&truncated).unwrap_err().to_string();
    assert!(
        msg.contains("truncated.safetensors") && msg.contains("truncated or corrupt"),
        "{msg}"
    );

    let missing = Checkpoint::load(&temp_path("absent.safetensors"))
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("absent.safetensors") && missing.contains("cannot be read"),
        "{missing}"
    );

    let foreign = safetensors::serialize(
        [(
            "w",
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![1], &[0u8; 4]).unwrap(),
        )],
        None,
    )
    .unwrap();
    let msg = Checkpoint::from_bytes(&foreign, "foreign.safetensors")
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("foreign.safetensors") && msg.contains("not written by wgdiff"),
        "{msg}"
    );

    let wrong_shape = vec![(
        "conv.weight".to_string(),
        Tensor::zeros(gpu(), &[8, 3, 3, 3], DType::F32).unwrap(),
    )];
    let msg = ckpt
        .restore("", &wrong_shape, "ck.safetensors")
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("conv.weight") && msg.contains("[4, 3, 3, 3]") && msg.contains("[8, 3, 3, 3]"),
        "{msg}"
    );

    let absent_tensor = vec![(
        "head.weight".to_string(),
        Tensor::zeros(gpu(), &[2], DType::F32).unwrap(),
    )];
    let msg = ckpt
        .restore("ema.", &absent_tensor, "ck.safetensors")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("ema.head.weight"), "{msg}");
}

#[test]
fn atomic_writes_leave_no_temporary_files_behind() {
    let dir = std::env::temp_dir().join(format!("wgdiff-atomic-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("checkpoint.safetensors");
    // A writer killed at the rename left its temporary (no process has this id: pids stop
    // at 2^22 on Linux); a live writer's temporary (ours) is not touched by others.
    let stale = dir.join("checkpoint.safetensors.tmp4294967295");
    std::fs::write(&stale, b"half a checkpoint").unwrap();
    wgdiff::fsio::write_atomic(&path, b"new").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"new");
    assert!(!stale.exists(), "the killed writer's temporary is still there");

    // A write that fails at the rename (a folder is in the way) removes its temporary.
    let blocked = dir.join("blocked.safetensors");
    std::fs::create_dir_all(blocked.join("inside")).unwrap();
    let err = wgdiff::fsio::write_atomic(&blocked, b"data")
        .unwrap_err()
        .to_string();
    assert!(err.contains("blocked.safetensors"), "{err}");
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporaries left: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn checkpoints_with_nan_or_infinite_weights_are_refused_at_load() {
    let named = named_random(4);
    for bad in [f32::NAN, f32::INFINITY] {
        let mut ckpt = pollster::block_on(Checkpoint::capture(&named, serde_json::json!({}))).unwrap();
        ckpt.tensors.get_mut("conv.bias").unwrap().data[2] = bad;
        let target = named_random(5);
        let before: Vec<Vec<f32>> = target.iter().map(|(_, t)| t.to_vec().unwrap()).collect();
        let msg = ckpt
            .restore("", &target, "diverged.safetensors")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("diverged.safetensors")
                && msg.contains("conv.bias")
                && msg.contains("1 NaN or infinite"),
            "{msg}"
        );
        let after: Vec<Vec<f32>> = target.iter().map(|(_, t)| t.to_vec().unwrap()).collect();
        assert_eq!(after, before, "a refused checkpoint changed the model");
    }
}

/// A 2.4 MB checkpoint whose metadata was edited to say `base_channels: 128` (a 64x larger
/// U-Net): refused from its size before the model is built (it used to allocate gigabytes first).
#[test]
fn metadata_describing_a_larger_model_than_the_tensors_is_refused_before_allocating() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/assets/models/mnist-small.safetensors"
    );
    let mut ckpt = Checkpoint::load(std::path::Path::new(path)).unwrap();
    assert!(wgdiff::pipeline::TrainedModel::from_checkpoint(gpu(), &ckpt, "shipped", None).is_ok());
    ckpt.meta["model"]["base_channels"] = serde_json::json!(128);
    let msg = wgdiff::pipeline::TrainedModel::from_checkpoint(gpu(), &ckpt, "edited.safetensors", None)
        .err()
        .expect("an error")
        .to_string();
    for part in [
        "edited.safetensors",
        "larger than the tensors it holds",
        "edited or damaged",
    ] {
        assert!(msg.contains(part), "{msg:?} does not mention {part:?}");
    }
}

/// Every model shipped in assets/models is what sampling needs: no raw weights or Adam moments
/// (a training checkpoint is 4x its export, and the tree travels to a lent GPU machine within
/// 64 MiB with the binary beside it: scripts/gpu-bench.sh).
#[test]
fn shipped_models_hold_no_training_state() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/models");
    let mut models = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "safetensors") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let training: Vec<&str> = file
            .names()
            .into_iter()
            .filter(|n| n.starts_with("adam.") || n.starts_with("model."))
            .take(3)
            .collect();
        assert!(
            training.is_empty(),
            "{} holds training state ({training:?}...): ship its `wgdiff export`",
            path.display()
        );
        models += 1;
    }
    assert!(models >= 8, "{models} models in {}", dir.display());
}
