//! Inception-v3 (pytorch-fid's FID network) against pytorch-fid itself: the weights come from
//! the deterministic generator of `scripts/make_inception_fixtures.py`, reproduced here bit for
//! bit, written to a temporary safetensors file with exactly the fixture's state_dict keys and
//! loaded by `InceptionV3::load`; features and logits must match `tests/fixtures/inception.json`
//! (PyTorch, float64) to max |ours - ref| / max |ref| <= 1e-4 per case. Plus the load errors.

use crate::common::gpu;
use safetensors::tensor::TensorView;
use safetensors::Dtype;
use serde_json::Value;
use std::sync::OnceLock;
use wgdiff::features::InceptionV3;
use wgdiff::ops::ConvImpl;
use wgdiff::Tensor;

fn fixture() -> &'static Value {
    static FIXTURE: OnceLock<Value> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/inception.json");
        serde_json::from_str(&std::fs::read_to_string(path).expect("tests/fixtures/inception.json")).unwrap()
    })
}

/// FNV-1a 64 of the tensor name: the generator's per-tensor key.
fn fnv1a64(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Element i of tensor `name`: f32(lo + (hi - lo) * u), u = (splitmix64(key + i) >> 11) 2^-53.
fn uniform(name: &str, n: usize, lo: f64, hi: f64) -> Vec<f32> {
    let key = fnv1a64(name);
    (0..n as u64)
        .map(|i| {
            let u = (splitmix64(key.wrapping_add(i)) >> 11) as f64 * 2f64.powi(-53);
            (lo + (hi - lo) * u) as f32
        })
        .collect()
}

/// The generated values of a float tensor (the ranges of the fixture script's `generated`).
fn generated(name: &str, shape: &[usize]) -> Vec<f32> {
    let n = shape.iter().product();
    let (lo, hi) = if name.ends_with(".conv.weight") {
        let a = (6.0 / (shape[1] * shape[2] * shape[3]) as f64).sqrt();
        (-a, a)
    } else if name == "fc.weight" {
        let a = (3.0 / shape[1] as f64).sqrt();
        (-a, a)
    } else if name == "fc.bias" {
        (-0.1, 0.1)
    } else if name.ends_with(".bn.weight") {
        (0.8, 1.2)
    } else if name.ends_with(".bn.bias") || name.ends_with(".bn.running_mean") {
        (-0.2, 0.2)
    } else if name.ends_with(".bn.running_var") {
        (0.5, 1.5)
    } else {
        panic!("no generator rule for {name}")
    };
    uniform(name, n, lo, hi)
}

/// One stored tensor: name, shape, dtype, little-endian bytes.
type Stored = (String, Vec<usize>, Dtype, Vec<u8>);

/// Every tensor of pytorch-fid's state_dict (from the fixture), generated; int64 counters 0.
fn state_dict() -> &'static [Stored] {
    static STATE: OnceLock<Vec<Stored>> = OnceLock::new();
    STATE.get_or_init(|| {
        fixture()["state_dict"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let name = e[0].as_str().unwrap().to_string();
                let shape: Vec<usize> = serde_json::from_value(e[1].clone()).unwrap();
                match e[2].as_str().unwrap() {
                    "float32" => {
                        let bytes = bytemuck::cast_slice(&generated(&name, &shape)).to_vec();
                        (name, shape, Dtype::F32, bytes)
                    }
                    "int64" => (name, shape, Dtype::I64, vec![0; 8]),
                    other => panic!("fixture dtype {other}"),
                }
            })
            .collect()
    })
}

/// The safetensors encoding of `tensors`.
fn encode<'a>(tensors: impl IntoIterator<Item = (String, &'a [usize], Dtype, &'a [u8])>) -> Vec<u8> {
    let views: Vec<(String, TensorView)> = tensors
        .into_iter()
        .map(|(name, shape, dtype, bytes)| (name, TensorView::new(dtype, shape.to_vec(), bytes).unwrap()))
        .collect();
    safetensors::serialize(views, None).unwrap()
}

/// The generated state_dict encoded after `edit` (which may rename, reshape or drop entries).
fn encode_edited(edit: impl Fn(&Stored) -> Option<(String, Vec<usize>)>) -> Vec<u8> {
    let edited: Vec<(String, Vec<usize>, Dtype, &[u8])> = state_dict()
        .iter()
        .filter_map(|t| edit(t).map(|(name, shape)| (name, shape, t.2, &t.3[..])))
        .collect();
    encode(edited.iter().map(|(n, s, d, b)| (n.clone(), &s[..], *d, *b)))
}

/// The fixture's input images: ((3 x^2 + 5 y + x y + 11 c + 17 n) mod 23) / 11 - 1.
fn image(shape: &[usize]) -> Vec<f32> {
    let [n, c, h, w] = shape[..] else { panic!() };
    let mut v = Vec::with_capacity(n * c * h * w);
    for (i, ch, y, x) in (0..n)
        .flat_map(|i| (0..c).flat_map(move |ch| (0..h).flat_map(move |y| (0..w).map(move |x| (i, ch, y, x)))))
    {
        let k = (3 * x * x + 5 * y + x * y + 11 * ch + 17 * i) % 23;
        v.push((k as f64 / 11.0 - 1.0) as f32);
    }
    v
}

/// max |ours - reference| / max |reference|.
fn max_rel_err(ours: &[f32], reference: &[f64]) -> f64 {
    assert_eq!(ours.len(), reference.len());
    let scale = reference.iter().fold(0f64, |m, r| m.max(r.abs()));
    let err = ours
        .iter()
        .zip(reference)
        .fold(0f64, |m, (&a, b)| m.max((a as f64 - b).abs()));
    if ours.iter().all(|v| v.is_finite()) {
        err / scale
    } else {
        f64::INFINITY
    }
}

fn rows(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()))
        .collect()
}

fn temp_path(test: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "wgdiff-inception-{}-{test}.safetensors",
        std::process::id()
    ))
}

#[test]
fn inception_matches_pytorch_fid_features_and_logits() {
    let started = std::time::Instant::now();
    let path = temp_path("weights");
    let all = state_dict()
        .iter()
        .map(|(n, s, d, b)| (n.clone(), &s[..], *d, &b[..]));
    let bytes = encode(all);
    std::fs::write(&path, &bytes).unwrap();
    let loaded = InceptionV3::load(gpu(), &path);
    std::fs::remove_file(&path).unwrap();
    let id = loaded.as_ref().unwrap().id().to_string();
    assert_inception_ids(&id, &bytes);
    // Chunks of one image: the 2-image case runs two chunks and joins them.
    // im2col: the fastest conv on lavapipe here (auto would time every candidate per shape).
    let net = loaded.unwrap().with_chunk(1).with_conv_impl(ConvImpl::Im2col);
    let load_time = started.elapsed();
    for case in fixture()["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let shape: Vec<usize> = serde_json::from_value(case["shape"].clone()).unwrap();
        let images = Tensor::from_f32(gpu(), &shape, &image(&shape)).unwrap();
        let features = net.features(&images).unwrap();
        assert_eq!(features.shape(), [shape[0], 2048]);
        let logits = net.logits(&features).unwrap();
        assert_eq!(logits.shape(), [shape[0], 1008]);
        for (what, ours, reference) in [
            ("features", &features, rows(&case["features"])),
            ("logits", &logits, rows(&case["logits"])),
        ] {
            let err = max_rel_err(&ours.to_vec().unwrap(), &reference);
            eprintln!("inception {name} {what}: max rel err {err:.2e}");
            assert!(
                err <= 1e-4,
                "{name} {what}: max |ours - pytorch| / max |pytorch| = {err:.2e} > 1e-4"
            );
        }
    }
    eprintln!(
        "inception: load {:.1} s, total {:.1} s",
        load_time.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );

    // Inputs the network cannot take.
    let two_channels = Tensor::zeros(gpu(), &[1, 2, 8, 8], wgdiff::DType::F32).unwrap();
    let err = net.features(&two_channels).unwrap_err().to_string();
    assert!(
        err.contains("[1, 2, 8, 8]") && err.contains("1 or 3 channels"),
        "{err}"
    );
    let err = net
        .logits(&two_channels.reshape(&[2, 64]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("[2, 64]") && err.contains("2048"), "{err}");
}

/// `id` (of the generated weights `bytes`) is `inception-fid-` + 16 hex digits, the same for
/// the same bytes and different when one weight differs.
fn assert_inception_ids(id: &str, bytes: &[u8]) {
    let digits = id
        .strip_prefix("inception-fid-")
        .unwrap_or_else(|| panic!("id {id}"));
    assert!(
        digits.len() == 16 && digits.chars().all(|c| c.is_ascii_hexdigit()),
        "{id}"
    );
    let again = InceptionV3::from_bytes(gpu(), bytes, "same.safetensors").unwrap();
    assert_eq!(again.id(), id, "the same bytes must give the same id");
    let changed = state_dict().iter().map(|(n, s, d, b)| {
        let b = if n == "fc.bias" {
            let mut v: Vec<f32> = bytemuck::pod_collect_to_vec(b);
            v[0] += 0.5;
            bytemuck::cast_slice(&v).to_vec()
        } else {
            b.clone()
        };
        (n.clone(), s.clone(), *d, b)
    });
    let changed: Vec<Stored> = changed.collect();
    let other = encode(changed.iter().map(|(n, s, d, b)| (n.clone(), &s[..], *d, &b[..])));
    let other = InceptionV3::from_bytes(gpu(), &other, "other.safetensors").unwrap();
    assert_ne!(other.id(), id, "different weights must give a different id");
}

/// The load error for the generated weights after `edit`.
fn load_error(edit: impl Fn(&Stored) -> Option<(String, Vec<usize>)>) -> String {
    match InceptionV3::from_bytes(gpu(), &encode_edited(edit), "test.safetensors") {
        Ok(_) => panic!("loading should fail"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn inception_load_errors_name_the_tensor_the_shapes_and_the_fix() {
    let same = |t: &Stored| (t.0.clone(), t.1.clone());
    // A tensor missing (the last BatchNorm: every tensor is checked).
    let missing = "Mixed_7c.branch_pool.bn.running_var";
    let err = load_error(|t| (t.0 != missing).then(|| same(t)));
    assert!(
        err.contains("test.safetensors") && err.contains(missing) && err.contains("[192]"),
        "{err}"
    );
    assert!(
        err.contains("pt_inception-2015-12-05") && err.contains("save_file"),
        "{err}"
    );

    // A wrong shape: expected and found.
    let err = load_error(|t| {
        Some(if t.0 == "Conv2d_2a_3x3.conv.weight" {
            (t.0.clone(), vec![32, 32, 1, 9])
        } else {
            same(t)
        })
    });
    assert!(
        err.contains("Conv2d_2a_3x3.conv.weight")
            && err.contains("[32, 32, 1, 9]")
            && err.contains("[32, 32, 3, 3]"),
        "{err}"
    );

    // Names with a prefix (a wrapped module's state_dict).
    let err = load_error(|t| Some((format!("module.{}", t.0), t.1.clone())));
    assert!(
        err.contains("module.Conv2d_1a_3x3.conv.weight") && err.contains("prefix"),
        "{err}"
    );

    // A tensor the FID network does not have (torchvision's auxiliary classifier).
    let err = load_error(|t| {
        Some(if t.0 == "Mixed_5b.branch1x1.bn.num_batches_tracked" {
            ("AuxLogits.conv0.conv.weight".into(), t.1.clone())
        } else {
            same(t)
        })
    });
    assert!(
        err.contains("AuxLogits.conv0.conv.weight") && err.contains("1 tensor"),
        "{err}"
    );

    // A truncated file, and no file at all.
    let path = temp_path("truncated");
    let bytes = encode_edited(|t| Some(same(t)));
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = InceptionV3::load(gpu(), &path).err().unwrap().to_string();
    std::fs::remove_file(&path).unwrap();
    assert!(
        err.contains(&path.display().to_string()) && err.contains("truncated") && err.contains("save_file"),
        "{err}"
    );
    let err = InceptionV3::load(gpu(), &temp_path("absent"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("cannot be read") && err.contains("save_file"),
        "{err}"
    );
}
