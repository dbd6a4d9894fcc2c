//! Models in the diffusers layout: the committed random-weight `UNet2DModel`s
//! (scripts/diffusers_fixtures.py) give diffusers' outputs, and what wgdiff cannot run is refused by name.

use std::path::{Path, PathBuf};
use wgdiff::pipeline::diffusers::{
    import, read_folder, DiffusersFiles, CONFIG_FILE, SCHEDULER_FILE, WEIGHTS_FILE,
};
use wgdiff::pipeline::TrainedModel;
use wgdiff::{AdapterChoice, DType, Gpu, Tensor};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/diffusers")
        .join(name)
}

/// A fixture's input batch and diffusers' output on it.
struct Io {
    shape: Vec<usize>,
    x: Vec<f32>,
    t: Vec<f32>,
    labels: Option<Vec<u32>>,
    out: Vec<f32>,
}

fn io(dir: &Path) -> Io {
    let bytes = std::fs::read(dir.join("io.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let values = |name: &str| -> Option<(Vec<usize>, Vec<f32>)> {
        let view = file.tensor(name).ok()?;
        Some((view.shape().to_vec(), bytemuck::pod_collect_to_vec(view.data())))
    };
    let (shape, x) = values("x").unwrap();
    let labels = values("labels").map(|(_, l)| l.iter().map(|&v| v as u32).collect());
    Io {
        shape,
        x,
        t: values("t").unwrap().1,
        labels,
        out: values("out").unwrap().1,
    }
}

#[test]
fn diffusers_unets_give_the_outputs_diffusers_gives() {
    // (a device of its own in deterministic mode: timing every conv variant of these new shapes
    // would take minutes on lavapipe; poisoned, so unwritten outputs show)
    let gpu = &Gpu::new_blocking(AdapterChoice::default()).expect("a GPU adapter");
    gpu.set_deterministic(true);
    gpu.set_poison(true);
    for name in ["mnist-attn", "rgb64"] {
        let dir = fixture(name);
        let ckpt = read_folder(&dir).unwrap();
        let model = TrainedModel::from_checkpoint(gpu, &ckpt, name, None).unwrap();
        let Io {
            shape,
            x,
            t,
            labels,
            out: want,
        } = io(&dir);
        let x = Tensor::from_slice(gpu, &shape, &x, DType::F32).unwrap();
        let got = model
            .net
            .forward(&x, &t, labels.as_deref(), 0)
            .unwrap()
            .to_vec()
            .unwrap();
        assert_eq!(got.len(), want.len(), "{name}: output size");
        let largest = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        let error = got.iter().zip(&want).fold(0f32, |m, (g, w)| m.max((g - w).abs())) / largest;
        eprintln!("{name}: max |wgdiff - diffusers| / max |diffusers| = {error:.2e}");
        assert!(error <= 1e-4, "{name}: relative error {error:.3e} above 1e-4");
    }
}

/// A change to a config file's JSON.
type Edit = Box<dyn Fn(&mut serde_json::Value)>;

/// The error importing the `mnist-attn` fixture with its config and scheduler config edited.
fn import_edited(
    config: impl Fn(&mut serde_json::Value),
    scheduler: impl Fn(&mut serde_json::Value),
) -> String {
    let dir = fixture("mnist-attn");
    let edited = |file: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut value: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(file)).unwrap()).unwrap();
        edit(&mut value);
        serde_json::to_vec(&value).unwrap()
    };
    let weights = std::fs::read(dir.join(WEIGHTS_FILE)).unwrap();
    let files = DiffusersFiles {
        config: &edited(CONFIG_FILE, &config),
        weights: &weights,
        scheduler: &edited(SCHEDULER_FILE, &scheduler),
        origin: "mnist-attn",
    };
    match import(&files) {
        Ok(_) => panic!("the edited model was imported"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn diffusers_settings_wgdiff_cannot_run_are_refused_by_name() {
    let keep = |_: &mut serde_json::Value| {};
    let cases: Vec<(Edit, Edit, &[&str])> = vec![
        (
            Box::new(|c| c["down_block_types"][1] = "CrossAttnDownBlock2D".into()),
            Box::new(keep),
            &["config.json", "down_block_types[1]", "CrossAttnDownBlock2D"],
        ),
        (
            Box::new(|c| c["up_block_types"][1] = "UpBlock2D".into()),
            Box::new(keep),
            &["up_block_types[1]", "same levels"],
        ),
        (
            Box::new(|c| c["resnet_time_scale_shift"] = "scale_shift".into()),
            Box::new(keep),
            &["resnet_time_scale_shift", "scale_shift"],
        ),
        (
            Box::new(|c| c["an_unknown_option"] = 3.into()),
            Box::new(keep),
            &["an_unknown_option"],
        ),
        (
            Box::new(|c| c["block_out_channels"] = serde_json::json!([16, 24, 32])),
            Box::new(keep),
            &["block_out_channels", "multiple of the first"],
        ),
        (
            Box::new(keep),
            Box::new(|s| s["beta_schedule"] = "sigmoid".into()),
            &["scheduler_config.json", "beta_schedule", "sigmoid"],
        ),
        (
            Box::new(keep),
            Box::new(|s| s["clip_sample"] = false.into()),
            &["clip_sample"],
        ),
        (
            Box::new(keep),
            Box::new(|s| s["_class_name"] = "EulerDiscreteScheduler".into()),
            &["EulerDiscreteScheduler", "DDPMScheduler"],
        ),
        (
            Box::new(keep),
            Box::new(|s| s["variance_type"] = "learned_range".into()),
            &["variance_type", "learned_range"],
        ),
    ];
    for (config, scheduler, words) in cases {
        let msg = import_edited(config, scheduler);
        for word in words {
            assert!(msg.contains(word), "`{word}` missing from: {msg}");
        }
    }
}

#[test]
fn diffusers_folders_missing_a_part_say_which() {
    let root = std::env::temp_dir().join(format!("wgdiff-diffusers-{}", std::process::id()));
    let copy = |name: &str, files: &[&str]| {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for file in files {
            std::fs::copy(fixture("mnist-attn").join(file), dir.join(file)).unwrap();
        }
        dir
    };
    let error = |dir: &Path| read_folder(dir).map(|_| ()).unwrap_err().to_string();
    let no_scheduler = copy("no-scheduler", &[CONFIG_FILE, WEIGHTS_FILE]);
    assert!(
        error(&no_scheduler).contains(SCHEDULER_FILE),
        "{}",
        error(&no_scheduler)
    );
    let pickle = copy("pickle", &[CONFIG_FILE, SCHEDULER_FILE]);
    std::fs::write(pickle.join("diffusion_pytorch_model.bin"), b"pickle").unwrap();
    assert!(
        error(&pickle).contains("diffusion_pytorch_model.bin"),
        "{}",
        error(&pickle)
    );
    let truncated = copy("truncated", &[CONFIG_FILE, SCHEDULER_FILE]);
    let weights = std::fs::read(fixture("mnist-attn").join(WEIGHTS_FILE)).unwrap();
    std::fs::write(truncated.join(WEIGHTS_FILE), &weights[..weights.len() / 2]).unwrap();
    assert!(
        error(&truncated).contains("truncated or corrupt"),
        "{}",
        error(&truncated)
    );
    let empty = copy("empty", &[]);
    assert!(
        error(&empty).contains("not a diffusers model"),
        "{}",
        error(&empty)
    );
    // a pipeline folder: unet/ and scheduler/
    let pipeline = root.join("pipeline");
    for (sub, files) in [
        ("unet", &[CONFIG_FILE, WEIGHTS_FILE][..]),
        ("scheduler", &[SCHEDULER_FILE][..]),
    ] {
        std::fs::create_dir_all(pipeline.join(sub)).unwrap();
        for file in files {
            std::fs::copy(fixture("mnist-attn").join(file), pipeline.join(sub).join(file)).unwrap();
        }
    }
    assert!(read_folder(&pipeline).is_ok());
    std::fs::remove_dir_all(&root).unwrap();
}
