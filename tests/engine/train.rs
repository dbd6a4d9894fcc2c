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

#[test]
fn skip_training_batches_share_one_skip_count() {
    use rand::SeedableRng;
    use wgdiff::diffusion::{skip_levels, Process};
    use wgdiff::train::{skip_batch, SkipTraining};
    let process = Process::ddpm();
    let marginals = process.marginals().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let scheme = Some(SkipTraining::Consistent { exponent: 2.0 });
    let mut seen = [0usize; 3];
    for _ in 0..300 {
        let (times, skip) = skip_batch(&process, scheme, 3, 16, &mut rng).unwrap();
        assert_eq!(times.len(), 16);
        seen[skip] += 1;
        for &t in &times {
            assert_eq!(skip_levels(3, marginals.normalized_time(t), 2.0), skip, "t = {t}");
        }
    }
    // k is picked by a uniform time: P(k = 0) = 1 - (2/3)^(1/2) = 0.18, P(k = 2) = (1/3)^(1/2) = 0.58.
    let share = |k: usize| seen[k] as f64 / 300.0;
    assert!(
        (share(0) - 0.184).abs() < 0.07 && (share(2) - 0.577).abs() < 0.09,
        "{seen:?}"
    );

    // Uniform scheme: k uniform, timesteps over the whole process whatever k is.
    let mut counts = [0usize; 3];
    let mut mixed = 0;
    for _ in 0..300 {
        let (times, skip) = skip_batch(&process, Some(SkipTraining::Uniform), 3, 8, &mut rng).unwrap();
        counts[skip] += 1;
        let ks: Vec<usize> = times
            .iter()
            .map(|&t| skip_levels(3, marginals.normalized_time(t), 2.0))
            .collect();
        mixed += ks.iter().any(|&k| k != ks[0]) as usize;
    }
    assert!(counts.iter().all(|&n| n > 60), "uniform k: {counts:?}");
    assert!(
        mixed > 250,
        "only {mixed} of 300 uniform-scheme batches mix schedule intervals"
    );
    let (_, skip) = skip_batch(&process, None, 3, 8, &mut rng).unwrap();
    assert_eq!(skip, 0);
    let msg = skip_batch(&process, scheme, 1, 8, &mut rng)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("more than one level"), "{msg}");
    assert!(SkipTraining::parse("consistent:0").is_err());
    assert_eq!(SkipTraining::parse("uniform").unwrap(), SkipTraining::Uniform);
}

#[test]
fn a_skip_trained_unet_learns() {
    let mut trainer = Trainer::new(
        gpu(),
        TrainConfig {
            skip_training: Some(wgdiff::train::SkipTraining::Consistent { exponent: 2.0 }),
            ..tiny_config("skips", 16)
        },
    )
    .unwrap();
    let mut losses = Vec::new();
    while !trainer.finished() {
        losses.push(trainer.step().unwrap());
    }
    let first: f32 = losses[..4].iter().sum::<f32>() / 4.0;
    let last: f32 = losses[12..].iter().sum::<f32>() / 4.0;
    assert!(last < 0.8 * first, "loss did not fall: {losses:?}");
}
