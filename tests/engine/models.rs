//! The diffusion networks: exact parameter counts of the presets, summaries that agree with
//! the named parameters, forward shapes, gradients reaching every parameter, level skipping
//! that runs fewer kernels, class conditioning, dropout, the ScoreNet's 1/std(t) scale and the
//! MLP's gated identity path.

use crate::common::{gpu, own_gpu};
use wgdiff::models::{preset, DiffusionNet, MlpNetConfig, ModelConfig, SkipType, UNet, UNetConfig, PRESETS};
use wgdiff::nn::{dropout, ConvGroups};
use wgdiff::ops::random::Rng;
use wgdiff::{DType, Tensor};

fn build(name: &str) -> Box<dyn DiffusionNet> {
    preset(name).unwrap().build(gpu(), 7).unwrap()
}

fn param_count(net: &dyn DiffusionNet) -> usize {
    net.named_params().iter().map(|(_, t)| t.numel()).sum()
}

/// A deterministic [n, c, s, s] input.
fn input(n: usize, c: usize, s: usize) -> Tensor {
    let data: Vec<f32> = (0..n * c * s * s)
        .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
        .collect();
    Tensor::from_f32(gpu(), &[n, c, s, s], &data).unwrap()
}

/// Summary rows own exactly the named parameters and buffers, under the same names.
fn check_summary(what: &str, net: &dyn DiffusionNet, batch: usize) {
    let rows = net.summary(batch).unwrap();
    let (params, buffers) = (net.named_params(), net.named_buffers());
    let total = |trainable: bool| -> usize {
        rows.iter()
            .filter(|r| r.trainable == trainable)
            .map(|r| r.params)
            .sum()
    };
    assert_eq!(
        total(true),
        params.iter().map(|(_, t)| t.numel()).sum::<usize>(),
        "{what}"
    );
    assert_eq!(
        total(false),
        buffers.iter().map(|(_, t)| t.numel()).sum::<usize>(),
        "{what}"
    );
    for (name, t) in params.iter().chain(&buffers) {
        let (layer, _) = name.rsplit_once('.').unwrap();
        assert!(
            rows.iter().any(|r| r.name == layer && r.params >= t.numel()),
            "{what}: {name}"
        );
    }
    let mut names: Vec<&String> = params.iter().map(|(n, _)| n).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), params.len(), "{what}: duplicate parameter names");
    assert!(
        rows.iter().all(|r| r.output_shape.first() == Some(&batch)),
        "{what}"
    );
}

#[test]
fn mnist_unet_has_2238337_parameters_and_runs() {
    let net = build("mnist");
    assert_eq!(param_count(net.as_ref()), 2_238_337);
    assert_eq!(net.levels(), 3);
    check_summary("mnist", net.as_ref(), 4);
    let rows = net.summary(4).unwrap();
    assert_eq!(rows.last().unwrap().output_shape, [4, 1, 28, 28]);
    let shape = |name: &str| rows.iter().find(|r| r.name == name).unwrap().output_shape.clone();
    assert_eq!(shape("down.0.downsample"), [4, 32, 14, 14]);
    assert_eq!(shape("down.2.attn.1"), [4, 64, 7, 7]);
    assert_eq!(shape("up.1.res.2"), [4, 64, 14, 14]);
    let _g = wgdiff::no_grad();
    let y = net.forward(&input(1, 1, 28), &[500.0], None, 0).unwrap();
    assert_eq!(y.shape(), [1, 1, 28, 28]);
    assert!(y.to_vec().unwrap().iter().all(|v| v.is_finite()));
}

#[test]
fn cifar10_unet_has_the_ddpm_papers_35_7m_parameters() {
    let net = build("cifar10");
    // the reference implementation's 35,746,307
    assert_eq!(param_count(net.as_ref()), 35_746_307);
    assert_eq!(net.levels(), 4);
    check_summary("cifar10", net.as_ref(), 1);
    assert_eq!(
        net.summary(2).unwrap().last().unwrap().output_shape,
        [2, 3, 32, 32]
    );
}

#[test]
fn ncsn_scorenet_has_1115297_parameters_and_a_fixed_fourier_buffer() {
    let net = build("ncsn-mnist");
    assert_eq!(param_count(net.as_ref()), 1_115_297);
    let buffers = net.named_buffers();
    assert_eq!(buffers.len(), 1);
    assert_eq!(
        (buffers[0].0.as_str(), buffers[0].1.shape()),
        ("embed.0.W", &[128][..])
    );
    assert!(!buffers[0].1.tracks_grad());
    assert_eq!(net.levels(), 1);
    check_summary("ncsn-mnist", net.as_ref(), 2);
    let rows = net.summary(2).unwrap();
    let shape = |name: &str| rows.iter().find(|r| r.name == name).unwrap().output_shape.clone();
    assert_eq!(shape("conv1"), [2, 32, 26, 26]);
    assert_eq!(shape("conv4"), [2, 256, 2, 2]);
    assert_eq!(shape("tconv4"), [2, 128, 5, 5]);
    assert_eq!(shape("tconv3"), [2, 64, 12, 12]);
    assert_eq!(shape("tconv2"), [2, 32, 26, 26]);
    assert_eq!(shape("tconv1"), [2, 1, 28, 28]);
}

#[test]
fn every_variant_summarises_its_named_parameters() {
    let variants = [
        UNetConfig {
            skip_type: SkipType::Interpolate,
            ..UNetConfig::tiny()
        },
        UNetConfig {
            conv_groups: ConvGroups::Fixed(2),
            bottleneck: Some(2),
            classes: Some(10),
            dropout: 0.1,
            ..UNetConfig::tiny()
        },
        UNetConfig {
            conv_groups: ConvGroups::Max,
            ..UNetConfig::mnist_small()
        },
    ];
    for config in variants {
        let net = UNet::new(gpu(), &config, 1).unwrap();
        check_summary(&format!("{config:?}"), &net, 3);
    }
    for name in PRESETS.into_iter().filter(|&n| n != "cifar10" && n != "mnist") {
        check_summary(name, build(name).as_ref(), 2);
    }
    let grouped = UNet::new(
        gpu(),
        &UNetConfig {
            conv_groups: ConvGroups::Fixed(2),
            ..UNetConfig::mnist()
        },
        1,
    )
    .unwrap();
    assert!(param_count(&grouped) < 2_238_337);
}

#[test]
fn small_networks_map_a_batch_to_its_shape() {
    let _g = wgdiff::no_grad();
    let x = input(2, 1, 28);
    for name in ["tiny", "mnist-small", "mnist-mlp"] {
        let y = build(name).forward(&x, &[3.0, 900.0], None, 0).unwrap();
        assert_eq!(y.shape(), [2, 1, 28, 28], "{name}");
    }
    let y = build("ncsn-mnist").forward(&x, &[0.3, 1.0], None, 0).unwrap();
    assert_eq!(y.shape(), [2, 1, 28, 28]);
    assert!(y.to_vec().unwrap().iter().all(|v| v.is_finite()));
}

#[test]
fn every_parameter_of_the_tiny_unet_gets_a_finite_gradient() {
    let config = UNetConfig {
        classes: Some(10),
        dropout: 0.1,
        bottleneck: Some(2),
        ..UNetConfig::tiny()
    };
    let mut net = UNet::new(gpu(), &config, 3).unwrap();
    net.set_training(true);
    for dtype in [DType::F32, DType::F16] {
        let x = input(2, 1, 28);
        let grads = output_and_grads(&net, dtype, &x, &[10.0, 700.0], Some(&[3, 10]), 0).1;
        assert_eq!(
            grads.len(),
            net.named_params().len(),
            "{dtype:?}: some parameter got no gradient"
        );
        for (name, g) in grads {
            assert!(g.iter().all(|v| v.is_finite()), "{dtype:?} {name}");
            assert!(g.iter().any(|&v| v != 0.0), "{dtype:?} {name}: all-zero gradient");
        }
    }
}

/// The output of `net` run in `dtype` (f32 values) and the gradient of the sum of its squares
/// for every parameter the call used (skipped levels' parameters get none).
fn output_and_grads(
    net: &dyn DiffusionNet,
    dtype: DType,
    x: &Tensor,
    t: &[f32],
    labels: Option<&[u32]>,
    skip: usize,
) -> (Vec<f32>, Vec<(String, Vec<f32>)>) {
    let params = net.named_params();
    let y = net.forward_in(dtype, x, t, labels, skip).unwrap();
    assert_eq!(y.dtype(), DType::F32);
    wgdiff::backward(&y.square().unwrap().sum_all().unwrap()).unwrap();
    let grads = params
        .iter()
        .filter_map(|(name, p)| {
            let g = p.grad()?;
            assert_eq!(g.dtype(), DType::F32, "{name}: master weights get f32 gradients");
            p.zero_grad();
            Some((name.clone(), g.to_vec().unwrap()))
        })
        .collect();
    (y.to_vec().unwrap(), grads)
}

/// Euclidean norm in f64.
fn norm(v: impl Iterator<Item = f32>) -> f64 {
    v.map(|x| f64::from(x).powi(2)).sum::<f64>().sqrt()
}

/// |a - b| / max(|a|, floor) over whole vectors.
fn relative_error(a: &[f32], b: &[f32], floor: f64) -> f64 {
    norm(a.iter().zip(b).map(|(a, b)| a - b)) / norm(a.iter().copied()).max(floor)
}

#[test]
fn f16_forward_and_gradients_track_f32_on_every_network_path() {
    let unet = |skip_type| {
        let config = UNetConfig {
            classes: Some(10),
            bottleneck: Some(2),
            skip_type,
            ..UNetConfig::tiny()
        };
        Box::new(UNet::new(gpu(), &config, 4).unwrap()) as Box<dyn DiffusionNet>
    };
    let x = input(2, 1, 28);
    let check = |what: &str, net: &dyn DiffusionNet, t: [f32; 2], labels: Option<&[u32]>, skip| {
        let (y32, g32) = output_and_grads(net, DType::F32, &x, &t, labels, skip);
        let (y16, g16) = output_and_grads(net, DType::F16, &x, &t, labels, skip);
        let err = relative_error(&y32, &y16, 0.0);
        assert!(err < 1e-2, "{what}: output differs by {err}");
        assert_eq!(
            g32.len(),
            g16.len(),
            "{what}: f16 and f32 update different parameters"
        );
        // some gradients are zero in exact arithmetic (a per-channel bias right before a
        // one-channel-per-group GroupNorm), so f16 and f32 round to different noise there: judge
        // those against 2% of the largest gradient (f16 rounding is 0.05%)
        let floor = 2e-2
            * g32
                .iter()
                .map(|(_, g)| norm(g.iter().copied()))
                .fold(0.0, f64::max);
        for ((name, a), (_, b)) in g32.iter().zip(&g16) {
            let err = relative_error(a, b, floor);
            assert!(err < 5e-2, "{what}: gradient of {name} differs by {err}");
        }
    };
    check(
        "conditional U-Net",
        unet(SkipType::Zero).as_ref(),
        [10.0, 700.0],
        Some(&[3, 10]),
        0,
    );
    check(
        "U-Net, interpolated skip",
        unet(SkipType::Interpolate).as_ref(),
        [10.0, 700.0],
        None,
        1,
    );
    check("ScoreNet", build("ncsn-mnist").as_ref(), [0.3, 0.9], None, 0);
}

#[test]
fn skipping_levels_runs_fewer_kernels_for_every_skip_type() {
    // a device of its own: the profiler would record other tests' work on the shared one
    let gpu = own_gpu();
    let x = Tensor::from_f32(&gpu, &[2, 1, 28, 28], &vec![0.25; 2 * 28 * 28]).unwrap();
    let _g = wgdiff::no_grad();
    for skip_type in [SkipType::Zero, SkipType::Duplicate, SkipType::Interpolate] {
        let config = UNetConfig {
            skip_type,
            ..UNetConfig::tiny()
        };
        let net = UNet::new(&gpu, &config, 5).unwrap();
        let mut counts = Vec::new();
        for skip in 0..net.levels() {
            net.forward(&x, &[1.0, 2.0], None, skip).unwrap(); // compiles
            gpu.profiler().start().unwrap();
            let y = net.forward(&x, &[1.0, 2.0], None, skip).unwrap();
            let profile = gpu.profiler().stop_blocking().unwrap();
            assert_eq!(y.shape(), [2, 1, 28, 28], "{skip_type:?} skip {skip}");
            counts.push(profile.records.len());
        }
        assert!(
            counts.windows(2).all(|w| w[1] < w[0]),
            "{skip_type:?}: dispatches {counts:?}"
        );
        let err = net.forward(&x, &[1.0, 2.0], None, 3).unwrap_err().to_string();
        assert!(err.contains("cannot skip 3"), "{err}");
    }
}

#[test]
fn class_labels_steer_the_conditional_unet_and_mlp() {
    let _g = wgdiff::no_grad();
    let unet = ModelConfig::UNet(UNetConfig {
        classes: Some(10),
        ..UNetConfig::tiny()
    });
    let plain_mlp = ModelConfig::Mlp(MlpNetConfig {
        classes: None,
        ..MlpNetConfig::mnist()
    });
    let x = input(2, 1, 28);
    for (config, plain) in [
        (unet, preset("tiny").unwrap()),
        (preset("mnist-mlp").unwrap(), plain_mlp),
    ] {
        let net = config.build(gpu(), 9).unwrap();
        let what = config.kind_name();
        let run = |labels: Option<&[u32]>| {
            net.forward(&x, &[50.0, 50.0], labels, 0)
                .unwrap()
                .to_vec()
                .unwrap()
        };
        let (a, b, null) = (run(Some(&[1, 2])), run(Some(&[7, 4])), run(None));
        assert_ne!(a, b, "{what}");
        assert_eq!(null, run(Some(&[10, 10])), "{what}: no labels = the null class");
        let err = net
            .forward(&x, &[1.0, 1.0], Some(&[11, 0]), 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("label 11"), "{what}: {err}");
        let err = net
            .forward(&x, &[1.0, 1.0], Some(&[1]), 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("1 class labels for a batch of 2"), "{what}: {err}");
        let table = net
            .named_params()
            .into_iter()
            .find(|(n, _)| n == "class_embed.weight");
        assert_eq!(table.unwrap().1.shape(), [11, config_temb(&config)], "{what}");
        let plain = plain.build(gpu(), 9).unwrap();
        assert!(
            plain.forward(&x, &[1.0, 1.0], Some(&[1, 2]), 0).is_err(),
            "{what}"
        );
    }
}

/// Width of the time embedding the class rows are added to.
fn config_temb(config: &ModelConfig) -> usize {
    match config {
        ModelConfig::UNet(u) => u.time_embed_dim,
        ModelConfig::Mlp(m) => m.time_embed_dim,
        ModelConfig::ScoreNet(_) => unreachable!("the ScoreNet is unconditional"),
    }
}

#[test]
fn dropout_runs_only_in_training_and_keeps_the_mean() {
    let _g = wgdiff::no_grad();
    let x = Tensor::full(gpu(), &[64, 64], 1.0, DType::F32).unwrap();
    let y = dropout(&x, 0.25, &mut Rng::new(4)).unwrap().to_vec().unwrap();
    let kept = y.iter().filter(|&&v| v != 0.0).count() as f64 / y.len() as f64;
    assert!((kept - 0.75).abs() < 0.03, "kept {kept}");
    assert!(y.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
    let config = UNetConfig {
        dropout: 0.3,
        ..UNetConfig::tiny()
    };
    let mut net = UNet::new(gpu(), &config, 2).unwrap();
    let x = input(1, 1, 28);
    let run = |net: &UNet| net.forward(&x, &[5.0], None, 0).unwrap().to_vec().unwrap();
    assert_eq!(run(&net), run(&net), "eval mode is deterministic");
    net.set_training(true);
    assert_ne!(run(&net), run(&net), "training mode draws new masks");
}

#[test]
fn mlp_has_2424096_parameters_a_gated_identity_path_and_gradients_everywhere() {
    let net = build("mnist-mlp");
    assert_eq!(param_count(net.as_ref()), 2_424_096);
    let x = input(2, 1, 28);
    let t = [20.0, 800.0];
    let grads = output_and_grads(net.as_ref(), DType::F32, &x, &t, None, 0).1;
    assert_eq!(
        grads.len(),
        net.named_params().len(),
        "some parameter got no gradient"
    );
    for (name, g) in grads {
        assert!(g.iter().all(|v| v.is_finite()), "{name}");
        assert!(g.iter().any(|&v| v != 0.0), "{name}: all-zero gradient");
    }
    let _g = wgdiff::no_grad();
    // with out.fc zeroed only the gate path is left: output = gate(e) * x, linear in x
    for (name, p) in net.named_params() {
        if name.starts_with("out.fc.") {
            p.copy_from(&Tensor::zeros(gpu(), p.shape(), DType::F32).unwrap())
                .unwrap();
        }
    }
    let a = net.forward(&x, &t, None, 0).unwrap().to_vec().unwrap();
    let b = net
        .forward(&x.mul_scalar(2.0).unwrap(), &t, None, 0)
        .unwrap()
        .to_vec()
        .unwrap();
    assert!(a.iter().any(|&v| v != 0.0));
    for (i, (a, b)) in a.iter().zip(&b).enumerate() {
        assert!(
            (b - 2.0 * a).abs() <= 1e-5 * (a.abs() + 1e-3),
            "element {i}: {b} vs 2 x {a}"
        );
    }
    assert!(net.forward(&x, &t, None, 1).is_err(), "no levels to skip");
    assert!(net.forward(&input(2, 1, 14), &t, None, 0).is_err(), "28x28 only");
    assert!(net.forward(&x, &[1.0], None, 0).is_err(), "one time per image");
}

#[test]
fn the_mlps_conv_head_starts_as_the_identity_and_trains() {
    let headed = ModelConfig::Mlp(MlpNetConfig {
        conv_head: Some(4),
        ..MlpNetConfig::mnist()
    });
    let (plain, net) = (build("mnist-mlp"), headed.build(gpu(), 7).unwrap());
    check_summary("conv head", net.as_ref(), 2);
    assert_eq!(
        param_count(net.as_ref()),
        2_424_096 + (9 * 4 + 4) + (256 * 4 + 4) + (9 * 4 + 1)
    );
    let (x, t, labels) = (input(2, 1, 28), [20.0, 800.0], Some(&[3u32, 10][..]));
    let run = |net: &dyn DiffusionNet| {
        let _g = wgdiff::no_grad();
        net.forward(&x, &t, labels, 0).unwrap().to_vec().unwrap()
    };
    // the head's last conv starts at zero: the same output as the preset built from the same seed
    let before = run(net.as_ref());
    assert_eq!(before, run(plain.as_ref()));
    let grads: std::collections::HashMap<String, Vec<f32>> =
        output_and_grads(net.as_ref(), DType::F32, &x, &t, labels, 0)
            .1
            .into_iter()
            .collect();
    assert!(
        grads["head.conv2.weight"].iter().any(|&v| v != 0.0),
        "no gradient reaches the head"
    );
    // once its last conv is not zero, the head changes the output
    let _g = wgdiff::no_grad();
    let (name, conv2) = net
        .named_params()
        .into_iter()
        .find(|(n, _)| n == "head.conv2.weight")
        .unwrap();
    let values: Vec<f32> = (0..conv2.numel()).map(|i| (i % 7) as f32 * 0.1 - 0.3).collect();
    conv2
        .copy_from(&Tensor::from_f32(gpu(), conv2.shape(), &values).unwrap())
        .unwrap();
    let after = run(net.as_ref());
    let changed = before.iter().zip(&after).filter(|(a, b)| a != b).count();
    assert!(
        changed > before.len() / 2,
        "{name}: {changed} of {} values changed",
        before.len()
    );
    let bad = MlpNetConfig {
        conv_head: Some(0),
        ..MlpNetConfig::mnist()
    };
    assert!(bad.validate().unwrap_err().to_string().contains("conv_head"));
}

#[test]
fn scorenet_output_scales_as_one_over_the_marginal_std() {
    let _g = wgdiff::no_grad();
    let net = build("ncsn-mnist");
    // with the time embedding's Linear zeroed, t only enters through the final 1/std(t)
    for (name, p) in net.named_params() {
        if name.starts_with("embed.1.") {
            p.copy_from(&Tensor::zeros(gpu(), p.shape(), DType::F32).unwrap())
                .unwrap();
        }
    }
    let x = input(2, 1, 28);
    let (t0, t1) = (0.1f32, 0.9f32);
    let a = net.forward(&x, &[t0, t0], None, 0).unwrap().to_vec().unwrap();
    let b = net.forward(&x, &[t1, t1], None, 0).unwrap().to_vec().unwrap();
    let ModelConfig::ScoreNet(config) = preset("ncsn-mnist").unwrap() else {
        unreachable!()
    };
    let ratio = config.marginal_std(t1) / config.marginal_std(t0);
    let want = (((25f64.powf(2.0 * 0.9) - 1.0) / (25f64.powf(0.2) - 1.0)).sqrt()) as f32;
    assert!((ratio - want).abs() < 1e-4 * want);
    for (i, (a, b)) in a.iter().zip(&b).enumerate() {
        assert!(
            (a - b * ratio).abs() <= 1e-4 * (a.abs() + 1e-3),
            "element {i}: {a} vs {b} * {ratio}"
        );
    }
    assert!(net.forward(&x, &[0.0, 0.5], None, 0).is_err(), "t = 0 has std 0");
    assert!(
        net.forward(&x, &[0.5, 0.5], None, 1).is_err(),
        "no levels to skip"
    );
}

#[test]
fn presets_round_trip_through_json_and_unknown_names_list_them() {
    for name in PRESETS {
        let config = preset(name).unwrap();
        let json = serde_json::to_string(&config).unwrap();
        assert!(json.starts_with(r#"{"kind":""#), "{json}");
        assert_eq!(serde_json::from_str::<ModelConfig>(&json).unwrap(), config);
    }
    let err = preset("mnist-huge").unwrap_err().to_string();
    assert!(PRESETS.iter().all(|p| err.contains(p)), "{err}");
    let bad = UNetConfig {
        heads: 3,
        ..UNetConfig::mnist()
    };
    let err = bad.validate().unwrap_err().to_string();
    assert!(err.contains("heads"), "{err}");
    assert!(UNet::new(gpu(), &bad, 0).is_err());
}
