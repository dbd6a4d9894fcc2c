//! Packed integer weights: the tiled conv, Winograd (its weight transform reading the integers) and the blocked
//! matmul reading int8 / packed int4 weights with a scale per output channel against the CPU
//! reference on the dequantised weights (fresh random values, poisoned outputs), layers that
//! carry a packed form, refusals, and `bench mac`'s integer and float probes against plain Rust.

use crate::common::*;
use crate::cpu;
use rand::rngs::StdRng;
use rand::Rng;
use wgdiff::nn::{Conv2d, Linear, Weight};
use wgdiff::ops::conv::use_conv_impl;
use wgdiff::ops::random::Rng as DeviceRng;
use wgdiff::ops::{ConvAddends, ConvImpl, ConvOptions, PackedWeights, WeightBits};
use wgdiff::{DType, Tensor};

/// Tolerance of the packed kernels against the f64 reference on the dequantised weights:
/// both sum the same products, the kernel in f32 (scale applied once per sum).
const PACKED_TOL: f64 = 1e-4;

/// `n` integers in `bits`' range and the dequantised values with `scales` per `channel(i)`.
fn random_weights(
    r: &mut StdRng,
    bits: WeightBits,
    n: usize,
    scales: &[f32],
    channel: impl Fn(usize) -> usize,
) -> (Vec<i8>, Vec<f64>) {
    let max = bits.max();
    let values: Vec<i8> = (0..n).map(|_| r.random_range(-max..=max)).collect();
    let dequantised = values
        .iter()
        .enumerate()
        .map(|(i, &v)| v as f64 * scales[channel(i)] as f64)
        .collect();
    (values, dequantised)
}

fn random_scales(r: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| r.random_range(0.01f32..0.2)).collect()
}

#[test]
fn packed_convs_match_the_reference_on_the_dequantised_weights() {
    let o = ConvOptions::default;
    // K = 4*3*3 = 36 (int4 pads rows to 40), grouped, strided, 1x1 with K = 5, 5x5 dilated;
    // the 3x3 stride-1 ones (ungrouped, grouped with padding 2) run Winograd when asked to.
    let cases = [
        ([2, 4, 7, 9], [6, 4, 3, 3], o().padding(1)),
        ([2, 4, 9, 7], [8, 2, 3, 3], o().stride(2).groups(2)),
        ([2, 5, 5, 6], [7, 5, 1, 1], o()),
        ([1, 8, 11, 10], [8, 2, 5, 5], o().padding(3).dilation(2).groups(4)),
        ([1, 16, 8, 8], [40, 16, 3, 3], o().padding(1)),
        ([2, 4, 6, 5], [6, 2, 3, 3], o().padding(2).groups(2)),
    ];
    let mut r = rng();
    let runs = [WeightBits::Int8, WeightBits::Int4]
        .into_iter()
        .flat_map(|bits| [(bits, ConvImpl::Tiled), (bits, ConvImpl::Winograd)]);
    for (bits, imp) in runs {
        let _imp = use_conv_impl(imp);
        for (xs, ws, opts) in cases {
            let per_out = ws[1] * ws[2] * ws[3];
            let scales = random_scales(&mut r, ws[0]);
            let (values, w) = random_weights(&mut r, bits, ws.iter().product(), &scales, |i| i / per_out);
            let packed = PackedWeights::conv(gpu(), bits, ws, &values, &scales).unwrap();
            let x = normal_vec(&mut r, xs.iter().product());
            let (want, [n, c, oh, ow]) = cpu::conv2d(&x, xs, &w, ws, &opts);
            let y = upload(&xs, &x, DType::F32)
                .conv2d_packed(&packed, opts, ConvAddends::default())
                .unwrap();
            assert_eq!(y.shape(), [n, c, oh, ow]);
            let what = format!("{} conv ({imp:?}) x{xs:?} w{ws:?} {opts:?}", bits.name());
            assert_close(&what, &download(&y), &want, PACKED_TOL);

            // with a bias, a bias per sample and a residual added as the kernel stores
            let bias = normal_vec(&mut r, c);
            let sample_bias = normal_vec(&mut r, n * c);
            let residual = normal_vec(&mut r, want.len());
            let add = (
                upload(&[c], &bias, DType::F32),
                upload(&[n, c], &sample_bias, DType::F32),
                upload(&[n, c, oh, ow], &residual, DType::F32),
            );
            let terms = ConvAddends {
                bias: Some(&add.0),
                sample_bias: Some(&add.1),
                residual: Some(&add.2),
            };
            let y = upload(&xs, &x, DType::F32)
                .conv2d_packed(&packed, opts, terms)
                .unwrap();
            let want: Vec<f64> = want
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let (s, ch) = (i / (c * oh * ow), (i / (oh * ow)) % c);
                    v + bias[ch] + sample_bias[s * c + ch] + residual[i]
                })
                .collect();
            assert_close(&format!("{what} + terms"), &download(&y), &want, PACKED_TOL);
        }
    }
}

#[test]
fn packed_matmuls_match_the_reference_on_the_dequantised_weights() {
    let mut r = rng();
    // N not a multiple of 8 (int4 pads columns), K not a multiple of 4, a batch of rows.
    let cases = [(5, 7, 13), (1, 64, 32), (37, 20, 8), (3, 33, 100)];
    for bits in [WeightBits::Int8, WeightBits::Int4] {
        for (m, k, n) in cases {
            let scales = random_scales(&mut r, n);
            let (values, w) = random_weights(&mut r, bits, k * n, &scales, |i| i % n);
            let packed = PackedWeights::matmul(gpu(), bits, k, n, &values, &scales).unwrap();
            let x = normal_vec(&mut r, m * k);
            let bias = normal_vec(&mut r, n);
            let product = cpu::matmul(&x, &[m, k], false, &w, &[k, n], false);
            let what = format!("{} matmul {m}x{k} @ {k}x{n}", bits.name());
            let y = upload(&[m, k], &x, DType::F32)
                .matmul_packed(&packed, None)
                .unwrap();
            assert_close(&what, &download(&y), &product, PACKED_TOL);
            let b = upload(&[n], &bias, DType::F32);
            let y = upload(&[m, k], &x, DType::F32)
                .matmul_packed(&packed, Some(&b))
                .unwrap();
            let want: Vec<f64> = product.iter().enumerate().map(|(i, v)| v + bias[i % n]).collect();
            assert_close(&format!("{what} + bias"), &download(&y), &want, PACKED_TOL);
        }
    }
}

/// A Conv2d and a Linear whose weights carry a packed form run it under no_grad (same
/// output as their float weights holding the dequantised values) and their float weights
/// when gradients are on (the gradient reaches the weight).
#[test]
fn layers_run_their_packed_weights_for_inference_and_float_weights_for_training() {
    let mut r = rng();
    let mut device_rng = DeviceRng::new(r.random());
    let conv = Conv2d::new(gpu(), &mut device_rng, 4, 8, 3, 1, 1, 1).unwrap();
    let scales = random_scales(&mut r, 8);
    let (values, w) = random_weights(&mut r, WeightBits::Int4, 8 * 36, &scales, |i| i / 36);
    conv.weight
        .float()
        .copy_from(&upload(&[8, 4, 3, 3], &w, DType::F32))
        .unwrap();
    let packed = PackedWeights::conv(gpu(), WeightBits::Int4, [8, 4, 3, 3], &values, &scales).unwrap();
    conv.weight.attach_packed(packed).unwrap();
    let x = upload(&[2, 4, 5, 5], &normal_vec(&mut r, 200), DType::F32);
    let float = x
        .conv2d(&conv.weight.float(), conv.bias.as_ref(), conv.opts)
        .unwrap();
    let inference = {
        let _g = wgdiff::no_grad();
        conv.forward(&x).unwrap()
    };
    assert_close(
        "packed Conv2d",
        &download(&inference),
        &download(&float),
        PACKED_TOL,
    );
    wgdiff::backward(&conv.forward(&x).unwrap().sum_all().unwrap()).unwrap();
    assert!(
        conv.weight.float().grad().is_some(),
        "training runs the float weights"
    );

    let linear = Linear::new(gpu(), &mut device_rng, 12, 10).unwrap();
    let scales = random_scales(&mut r, 10);
    let (values, w) = random_weights(&mut r, WeightBits::Int8, 120, &scales, |i| i % 10);
    linear
        .weight
        .float()
        .copy_from(&upload(&[12, 10], &w, DType::F32))
        .unwrap();
    let packed = PackedWeights::matmul(gpu(), WeightBits::Int8, 12, 10, &values, &scales).unwrap();
    linear.weight.attach_packed(packed).unwrap();
    let x = upload(&[3, 12], &normal_vec(&mut r, 36), DType::F32);
    let float = x
        .matmul(&linear.weight.float())
        .unwrap()
        .add(&linear.bias)
        .unwrap();
    let inference = {
        let _g = wgdiff::no_grad();
        linear.forward(&x).unwrap()
    };
    assert_close(
        "packed Linear",
        &download(&inference),
        &download(&float),
        PACKED_TOL,
    );
}

#[test]
fn bad_packed_weights_and_inputs_are_refused() {
    let values = vec![0i8; 8 * 36];
    let scales = vec![0.1f32; 8];
    let refused = |r: wgdiff::Result<PackedWeights>, needle: &str| {
        let msg = r.err().expect("refused").to_string();
        assert!(msg.contains(needle), "{msg}");
    };
    let mut out_of_range = values.clone();
    out_of_range[5] = 8;
    refused(
        PackedWeights::conv(gpu(), WeightBits::Int4, [8, 4, 3, 3], &out_of_range, &scales),
        "range",
    );
    refused(
        PackedWeights::conv(gpu(), WeightBits::Int8, [8, 4, 3, 3], &values[1..], &scales),
        "values",
    );
    refused(
        PackedWeights::conv(gpu(), WeightBits::Int8, [8, 4, 3, 3], &values, &[0.1; 7]),
        "scales",
    );
    refused(
        PackedWeights::conv(gpu(), WeightBits::Int8, [8, 4, 3, 3], &values, &[f32::NAN; 8]),
        "scale",
    );
    let packed = PackedWeights::conv(gpu(), WeightBits::Int8, [8, 4, 3, 3], &values, &scales).unwrap();
    let x = Tensor::zeros(gpu(), &[1, 4, 5, 5], DType::F32)
        .unwrap()
        .requires_grad();
    let msg = x
        .conv2d_packed(&packed, ConvOptions::default(), ConvAddends::default())
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("inference"), "{msg}");
    let msg = x.matmul_packed(&packed, None).err().unwrap().to_string();
    assert!(msg.contains("a conv's"), "{msg}");
    let w = Weight::from(Tensor::zeros(gpu(), &[8, 4, 3, 4], DType::F32).unwrap());
    let packed = PackedWeights::conv(gpu(), WeightBits::Int8, [8, 4, 3, 3], &values, &scales).unwrap();
    let msg = w.attach_packed(packed).err().unwrap().to_string();
    assert!(msg.contains("shape"), "{msg}");
}

/// Byte `k` of `word` as a signed 8-bit value.
fn signed_byte(word: u32, k: u32) -> i32 {
    ((word >> (8 * k)) as u8 as i8) as i32
}

/// WGSL's `unpack4x8snorm`: each byte / 127, at least -1.
fn unpack_snorm(word: u32) -> [f32; 4] {
    std::array::from_fn(|k| (signed_byte(word, k as u32) as f32 / 127.0).max(-1.0))
}

/// The sums of `bench mac`'s probes (shaders/mac_probe.wgsl) computed in plain Rust: eight
/// accumulators of four products a round, `rounds` rounds, summed at the end as the kernel does.
fn mac_probe_reference(entry: &str, s: u32, rounds: u32) -> f64 {
    let word = |j: u32| s ^ j.wrapping_mul(0x0101_0101);
    let a = unpack_snorm(s);
    match entry {
        "dot4_i8" => {
            let mut total = 0i32;
            for j in 0..8 {
                for i in 0..rounds {
                    let dot: i32 = (0..4)
                        .map(|k| signed_byte(s ^ i, k) * signed_byte(word(j), k))
                        .sum();
                    total = total.wrapping_add(dot);
                }
            }
            total as f64
        }
        "fma_f32" => {
            // acc = acc * a + b: each FMA on the last (so none can be folded away)
            let a = a.map(|v| 0.5 * v);
            let mut total = [0f32; 4];
            for j in 0..8 {
                let b = unpack_snorm(word(j)).map(|v| 0.5 + 0.25 * v);
                let mut acc = [0f32; 4];
                for _ in 0..rounds {
                    for k in 0..4 {
                        acc[k] = acc[k].mul_add(a[k], b[k]);
                    }
                }
                (0..4).for_each(|k| total[k] += acc[k]);
            }
            (total[0] + total[1] + total[2] + total[3]) as f64
        }
        "unpack_i8" => {
            let mut total = [0f32; 4];
            for j in 0..8 {
                let mut acc = [0f32; 4];
                for i in 0..rounds {
                    let b: [f32; 4] = std::array::from_fn(|k| signed_byte(word(j) ^ i, k as u32) as f32);
                    for k in 0..4 {
                        acc[k] = a[k].mul_add(b[k], acc[k]);
                    }
                }
                (0..4).for_each(|k| total[k] += acc[k]);
            }
            (total[0] + total[1] + total[2] + total[3]) as f64
        }
        other => panic!("no reference for {other}"),
    }
}

#[test]
fn the_mac_probes_compute_what_the_cpu_computes() {
    let mut r = rng();
    let seed: [u32; 64] = std::array::from_fn(|_| r.random());
    let iterations = r.random_range(1..6u32);
    let rounds = 8 * iterations;
    for (variant, entry) in wgdiff::roofline::mac_probe::VARIANTS {
        let sums = pollster::block_on(wgdiff::roofline::mac_probe::probe_sums(
            gpu(),
            entry,
            &seed,
            iterations,
        ))
        .unwrap();
        let got: Vec<f64> = sums
            .iter()
            .map(|&bits| match entry {
                "dot4_i8" => bits as i32 as f64,
                _ => f32::from_bits(bits) as f64,
            })
            .collect();
        let want: Vec<f64> = seed
            .iter()
            .map(|&s| mac_probe_reference(entry, s, rounds))
            .collect();
        if entry == "dot4_i8" {
            assert_eq!(got, want, "{variant}: dot4I8Packed sums over {rounds} rounds");
        } else {
            assert_close(variant, &got, &want, 1e-4);
        }
    }
}

/// `bench mac`'s host FMA chains (the ceiling beside the adapter's fma-f32 probe) compute what
/// `f32::mul_add` computes.
#[test]
fn the_host_fma_chains_compute_what_mul_add_computes() {
    use wgdiff::roofline::cpu_fma;
    let iterations = rng().random_range(1..2000usize);
    let Some(got) = cpu_fma::chains(iterations) else {
        assert!(!cpu_fma::available());
        return; // (no AVX2 and FMA on this host: bench mac leaves the row out)
    };
    for (c, lanes) in got.iter().enumerate() {
        for (l, &v) in lanes.iter().enumerate() {
            let mut x = cpu_fma::start(c, l);
            for _ in 0..iterations {
                x = x.mul_add(cpu_fma::A, cpu_fma::B);
            }
            assert_eq!(
                v.to_bits(),
                x.to_bits(),
                "chain {c}, lane {l} after {iterations} FMAs"
            );
        }
    }
}
