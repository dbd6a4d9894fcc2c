//! Models in the diffusers layout: the committed random-weight `UNet2DModel`s
//! (scripts/diffusers_fixtures.py) give diffusers' outputs and DDIM runs, and what wgdiff cannot run is refused by name.

use crate::common::gpu;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use wgdiff::checkpoint::{Checkpoint, Stored};
use wgdiff::diffusion::{NetDenoiser, Process, SampleOptions, Sampler, Spacing, Start, Step};
use wgdiff::models::{AttentionAt, DiffusionNet, ModelConfig, UNetConfig};
use wgdiff::ops::random::Rng;
use wgdiff::pipeline::diffusers::{
    import, read_folder, DiffusersFiles, CONFIG_FILE, SCHEDULER_FILE, WEIGHTS_FILE,
};
use wgdiff::pipeline::diffusers_export::{export, DiffusersModel};
use wgdiff::pipeline::TrainedModel;
use wgdiff::run_state::TrainState;
use wgdiff::{DType, Gpu, Tensor};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/diffusers")
        .join(name)
}

/// A fixture's input batch, diffusers' output on it, and diffusers' DDIM run.
struct Io {
    shape: Vec<usize>,
    x: Vec<f32>,
    t: Vec<f32>,
    labels: Option<Vec<u32>>,
    out: Vec<f32>,
    /// The DDIM run's initial noise, timesteps, and state after every step.
    ddim_x: Vec<f32>,
    ddim_t: Vec<f32>,
    ddim_steps: Vec<f32>,
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
    let all = |name: &str| values(name).unwrap().1;
    Io {
        shape,
        x,
        t: all("t"),
        labels,
        out: all("out"),
        ddim_x: all("ddim_x"),
        ddim_t: all("ddim_t"),
        ddim_steps: all("ddim_steps"),
    }
}

/// max |got - want| / max |want|.
fn relative_error(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len(), "sizes");
    let largest = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    got.iter().zip(want).fold(0f32, |m, (g, w)| m.max((g - w).abs())) / largest
}

/// wgdiff's forward on the model in `dir` against diffusers' output on its fixed batch.
fn check_forward(gpu: &Gpu, dir: &Path) {
    let name = dir.display();
    let model =
        TrainedModel::from_checkpoint(gpu, &read_folder(dir).unwrap(), &name.to_string(), None).unwrap();
    let Io {
        shape,
        x,
        t,
        labels,
        out: want,
        ..
    } = io(dir);
    let x = Tensor::from_slice(gpu, &shape, &x, DType::F32).unwrap();
    let got = model
        .net
        .forward(&x, &t, labels.as_deref(), 0)
        .unwrap()
        .to_vec()
        .unwrap();
    let error = relative_error(&got, &want);
    eprintln!("{name}: max |wgdiff - diffusers| / max |diffusers| = {error:.2e}");
    assert!(error <= 1e-4, "{name}: relative error {error:.3e} above 1e-4");
}

/// wgdiff's DDIM on the model in `dir` against diffusers' DDIMScheduler loop from the same
/// noise (eta 0, `trailing` timesteps, x0 clipped to [-1, 1] and eps recomputed from it:
/// use_clipped_model_output), state by state.
fn check_ddim(gpu: &Gpu, dir: &Path) {
    let name = dir.display();
    let model =
        TrainedModel::from_checkpoint(gpu, &read_folder(dir).unwrap(), &name.to_string(), None).unwrap();
    let io = io(dir);
    let denoiser = match &io.labels {
        Some(labels) => NetDenoiser::conditional(&*model.net, labels.clone()),
        None => NetDenoiser::new(&*model.net),
    };
    let mut states: Vec<(f32, Vec<f32>)> = Vec::new();
    let mut record = |step: &Step| {
        states.push((step.t, step.x.to_vec()?));
        Ok(())
    };
    let options = SampleOptions {
        steps: Some(io.ddim_t.len()),
        clip_x0: Some(1.0),
        start: Some(Start {
            x: Tensor::from_slice(gpu, &io.shape, &io.ddim_x, DType::F32).unwrap(),
            t: io.ddim_t[0] as f64,
        }),
        on_step: Some(&mut record),
        ..Default::default()
    };
    let ddim = Sampler::Ddim {
        eta: 0.0,
        spacing: Spacing::Trailing,
    };
    ddim.run(
        &model.state.process,
        &denoiser,
        gpu,
        &io.shape,
        &mut Rng::new(0),
        options,
    )
    .unwrap();
    assert_eq!(states.len(), io.ddim_t.len(), "{name}: steps");
    let size = io.ddim_x.len();
    for (i, ((t, got), want)) in states.iter().zip(io.ddim_steps.chunks(size)).enumerate() {
        assert_eq!(*t, io.ddim_t[i], "{name}: step {i}'s timestep");
        let error = relative_error(got, want);
        eprintln!("{name}: DDIM step {i} (t = {t}): relative error {error:.2e}");
        assert!(
            error <= 1e-3,
            "{name}: step {i}: relative error {error:.3e} above 1e-3"
        );
    }
}

#[test]
fn diffusers_unets_give_the_outputs_diffusers_gives() {
    for name in ["mnist-attn", "rgb64"] {
        check_forward(gpu(), &fixture(name));
    }
}

#[test]
fn a_ddim_run_on_a_diffusers_unet_follows_diffusers_ddim_scheduler_step_by_step() {
    for name in ["mnist-attn", "rgb64"] {
        check_ddim(gpu(), &fixture(name));
    }
}

/// The check of a model `scripts/diffusers_fixtures.py` makes and does not commit (the DDPM
/// CIFAR-10 configuration, 35.7M parameters): the script runs it with
/// WGDIFF_DIFFUSERS_MODEL=DIR cargo test --release --test engine -- --ignored --nocapture made_by_the_script
#[test]
#[ignore = "run by scripts/diffusers_fixtures.py --cifar10 on the model it makes"]
fn a_diffusers_unet_made_by_the_script_gives_diffusers_outputs_and_ddim_run() {
    let dir = std::env::var("WGDIFF_DIFFUSERS_MODEL")
        .expect("WGDIFF_DIFFUSERS_MODEL=DIR: the model folder to check");
    check_forward(gpu(), Path::new(&dir));
    check_ddim(gpu(), Path::new(&dir));
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

/// The model's files as `wgdiff export --format diffusers` writes them.
fn files_of<'a>(model: &'a DiffusersModel, origin: &'static str) -> DiffusersFiles<'a> {
    DiffusersFiles {
        config: &model.config,
        weights: &model.weights,
        scheduler: &model.scheduler,
        origin,
    }
}

/// Name -> (shape, f32 values) of a safetensors file.
fn tensors_of(bytes: &[u8]) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    let file = safetensors::SafeTensors::deserialize(bytes).unwrap();
    file.tensors()
        .into_iter()
        .map(|(name, view)| {
            (
                name,
                (view.shape().to_vec(), bytemuck::pod_collect_to_vec(view.data())),
            )
        })
        .collect()
}

#[test]
fn an_imported_model_exports_to_the_diffusers_files_it_came_from() {
    for name in ["mnist-attn", "rgb64"] {
        let dir = fixture(name);
        let ckpt = read_folder(&dir).unwrap();
        let model = export(&ckpt, name).unwrap();
        assert!(model.notes.is_empty(), "{name}: {:?}", model.notes);
        // every tensor of the original file, bit for bit, and nothing else
        let original = tensors_of(&std::fs::read(dir.join(WEIGHTS_FILE)).unwrap());
        assert_eq!(
            tensors_of(&model.weights),
            original,
            "{name}: the exported weights"
        );
        // and it imports back to the same checkpoint
        let again = import(&files_of(&model, "exported")).unwrap();
        assert_eq!(
            again.tensors, ckpt.tensors,
            "{name}: tensors after export and import"
        );
        assert_eq!(again.meta["model"], ckpt.meta["model"], "{name}: model config");
        assert_eq!(again.meta["process"], ckpt.meta["process"], "{name}: process");
    }
}

/// A freshly built U-Net (seed 7) as a checkpoint holding its weights as the EMA's.
fn fresh_unet(unet: UNetConfig) -> (Box<dyn DiffusionNet>, Checkpoint) {
    let config = ModelConfig::UNet(unet);
    let net = config.build(gpu(), 7).unwrap();
    let named: Vec<(String, Tensor)> = net
        .named_params()
        .into_iter()
        .map(|(name, t)| (format!("ema.{name}"), t))
        .collect();
    let meta = serde_json::to_value(TrainState::imported(config, Process::ddpm())).unwrap();
    let ckpt = pollster::block_on(Checkpoint::capture(&named, meta)).unwrap();
    (net, ckpt)
}

/// Exports a random-weight U-Net of `unet`, checks that the export imports back to the same
/// outputs (and says `note` when given), and writes it with wgdiff's output on a fixed batch to
/// target/tmp/diffusers-export-`name` for `scripts/diffusers_fixtures.py --check-exports`
/// (diffusers' `UNet2DModel.from_pretrained` on it must give the same).
fn export_and_check(unet: UNetConfig, name: &str, labels: Option<[u32; 2]>, note: Option<&str>) {
    let gpu = gpu();
    let (net, ckpt) = fresh_unet(unet);
    let model = export(&ckpt, name).unwrap_or_else(|e| panic!("{name}: {e}"));
    if let Some(note) = note {
        assert!(
            model.notes.iter().any(|n| n.contains(note)),
            "{name}: {:?}",
            model.notes
        );
    }
    let again = TrainedModel::from_checkpoint(
        gpu,
        &import(&files_of(&model, "exported")).unwrap(),
        "again",
        None,
    )
    .unwrap();
    let (shape, t) = ([2, 1, 28, 28], [900.0, 17.0]);
    let values: Vec<f32> = (0..2 * 28 * 28)
        .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
        .collect();
    let x = Tensor::from_slice(gpu, &shape, &values, DType::F32).unwrap();
    let out = |net: &dyn DiffusionNet| {
        net.forward(&x, &t, labels.as_ref().map(|l| &l[..]), 0)
            .unwrap()
            .to_vec()
            .unwrap()
    };
    let want = out(&*net);
    let error = relative_error(&out(&*again.net), &want);
    eprintln!("{name}: exported and imported back, relative error {error:.2e}");
    assert!(error <= 1e-5, "{name}: relative error {error:.3e}");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("diffusers-export-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    for (file, bytes) in [
        (CONFIG_FILE, &model.config),
        (WEIGHTS_FILE, &model.weights),
        (SCHEDULER_FILE, &model.scheduler),
    ] {
        std::fs::write(dir.join(file), bytes).unwrap();
    }
    let labels = labels.map(|l| l.map(|l| l as f32));
    let mut io: Vec<(&str, &[usize], &[f32])> =
        vec![("x", &shape, &values), ("t", &[2], &t), ("out", &shape, &want)];
    if let Some(labels) = &labels {
        io.push(("labels", &[2], labels));
    }
    let bytes: Vec<Vec<u8>> = io
        .iter()
        .map(|(_, _, v)| bytemuck::cast_slice(v).to_vec())
        .collect();
    let views = io.iter().zip(&bytes).map(|((name, shape, _), bytes)| {
        let view =
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.to_vec(), bytes).unwrap();
        (name.to_string(), view)
    });
    std::fs::write(
        dir.join("io.safetensors"),
        safetensors::serialize(views, None).unwrap(),
    )
    .unwrap();
}

#[test]
fn a_wgdiff_unet_exports_to_a_diffusers_model_with_the_same_outputs() {
    // a class-conditional U-Net with a learned null class (classifier-free guidance's), two
    // heads per attention block, attention at its second level
    let unet = UNetConfig {
        base_channels: 8,
        channel_mult: vec![1, 2],
        res_blocks: 1,
        attention: AttentionAt::Levels(vec![1]),
        heads: 2,
        norm_groups: 4,
        time_sinusoid_dim: 8,
        time_embed_dim: 16,
        classes: Some(3),
        ..UNetConfig::mnist()
    };
    export_and_check(unet, "native", Some([2, 0]), Some("null class"));
}

#[test]
fn a_wgdiff_unet_exports_as_the_mnist_and_mnist_small_presets_build_it() {
    export_and_check(UNetConfig::mnist(), "mnist", None, None);
    export_and_check(UNetConfig::mnist_small(), "mnist-small", None, None);
}

/// The shipped `mnist-small` U-Net exports (re-trained for it on 2026-12-06: its sinusoid is
/// as wide as its first level).
#[test]
fn the_shipped_unet_exports() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(wgdiff::pipeline::DEFAULT_CHECKPOINT);
    let model = export(&Checkpoint::load(&path).unwrap(), "the shipped model").unwrap();
    let config: serde_json::Value = serde_json::from_slice(&model.config).unwrap();
    assert_eq!(config["block_out_channels"][0], 16, "{config}");
}

#[test]
fn what_diffusers_cannot_hold_is_refused_by_name() {
    let shipped = |file: &str| {
        Checkpoint::load(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("assets/models")
                .join(file),
        )
        .unwrap()
    };
    let refusal = |ckpt: &Checkpoint| match export(ckpt, "the checkpoint") {
        Ok(_) => panic!("exported"),
        Err(e) => e.to_string(),
    };
    // mnist-small as it was until 2026-12-01: a 64-feature sinusoid before a 16-channel level
    let (_, wide_sinusoid) = fresh_unet(UNetConfig {
        time_sinusoid_dim: 64,
        ..UNetConfig::mnist_small()
    });
    let sinusoid = refusal(&wide_sinusoid);
    assert!(
        sinusoid.contains("sinusoid has 64 features") && sinusoid.contains("block_out_channels[0]"),
        "{sinusoid}"
    );
    let scorenet = refusal(&shipped("ncsn-mnist.safetensors"));
    assert!(scorenet.contains("U-Nets"), "{scorenet}");
    let mut compressed = read_folder(&fixture("rgb64")).unwrap();
    compressed.tensors.get_mut("ema.conv_in.weight").unwrap().stored = Stored::I8;
    let packed = refusal(&compressed);
    assert!(
        packed.contains("ema.conv_in.weight") && packed.contains("wgdiff compress"),
        "{packed}"
    );
}
