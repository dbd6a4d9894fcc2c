//! Training end to end on real MNIST: the loss of a tiny U-Net falls, a resumed run repeats
//! the next step's loss bit for bit, and broken checkpoints give clear errors.

use crate::common::gpu;
use wgdiff::train::{TrainConfig, Trainer};

fn tiny_config(out: &str, steps: usize) -> TrainConfig {
    TrainConfig {
        preset: "tiny".into(),
        steps,
        batch: 8,
        lr: 3e-3,
        warmup: 0,
        out: std::env::temp_dir().join(format!("wgdiff-train-{}-{out}", std::process::id())),
        ..TrainConfig::default()
    }
}

#[test]
fn tiny_unet_loss_falls_on_mnist() {
    let mut trainer = Trainer::new(gpu(), tiny_config("falls", 16)).unwrap();
    let mut losses = Vec::new();
    while !trainer.finished() {
        losses.push(trainer.step().unwrap());
    }
    let first: f32 = losses[..4].iter().sum::<f32>() / 4.0;
    let last: f32 = losses[12..].iter().sum::<f32>() / 4.0;
    assert!(last < 0.8 * first, "loss did not fall: {losses:?}");
}

#[test]
fn resume_repeats_the_next_step_exactly() {
    let config = tiny_config("resume", 4);
    let checkpoint = config.out.join("checkpoint.safetensors");
    let mut trainer = Trainer::new(gpu(), config).unwrap();
    for _ in 0..3 {
        trainer.step().unwrap();
    }
    trainer.save(&checkpoint).unwrap();
    let expected = trainer.step().unwrap();
    let uninterrupted: Vec<Vec<f32>> = trainer
        .net()
        .named_params()
        .iter()
        .map(|(_, t)| t.to_vec().unwrap())
        .collect();

    let mut resumed = Trainer::resume(gpu(), &checkpoint, None).unwrap();
    assert_eq!(resumed.state.step, 3);
    let loss = resumed.step().unwrap();
    assert_eq!(
        loss.to_bits(),
        expected.to_bits(),
        "resumed loss {loss} vs {expected}"
    );
    for ((name, t), want) in resumed.net().named_params().iter().zip(&uninterrupted) {
        let got: Vec<u32> = t.to_vec().unwrap().iter().map(|v| v.to_bits()).collect();
        let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "parameter {name} after the resumed step");
    }
}

#[test]
fn broken_checkpoints_and_settings_give_clear_errors() {
    let config = tiny_config("broken", 1);
    std::fs::create_dir_all(&config.out).unwrap();
    let path = config.out.join("cut.safetensors");
    let mut trainer = Trainer::new(gpu(), config.clone()).unwrap();
    trainer.step().unwrap();
    trainer.save(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let msg = Trainer::resume(gpu(), &path, None).err().unwrap().to_string();
    assert!(
        msg.contains("cut.safetensors") && msg.contains("truncated or corrupt"),
        "{msg}"
    );

    let msg = Trainer::new(
        gpu(),
        TrainConfig {
            preset: "nope".into(),
            ..config.clone()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        msg.contains("unknown model preset \"nope\"") && msg.contains("mnist"),
        "{msg}"
    );
    let msg = Trainer::new(
        gpu(),
        TrainConfig {
            data: "mnist:/nonexistent".into(),
            ..config
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(msg.contains("/nonexistent"), "{msg}");
}
