//! Counter-based random numbers: bit-exact against a CPU Philox, reproducible, and with
//! the right moments.

use crate::common::*;
use crate::cpu;
use wgdiff::ops::random::Rng;
use wgdiff::DType;

#[test]
fn uniform_bits_match_cpu_philox() {
    let seed = 0x1234_5678_9abc_def0u64;
    let n = 1027;
    let got = Rng::new(seed)
        .uniform(gpu(), &[n], 0.0, 1.0, DType::F32)
        .unwrap()
        .to_vec()
        .unwrap();
    for (i, g) in got.iter().enumerate() {
        let block = cpu::philox([(i / 4) as u32, 0, 0, 0], [seed as u32, (seed >> 32) as u32]);
        let want = (block[i % 4] >> 8) as f32 / 16_777_216.0;
        assert_eq!(*g, want, "element {i}");
    }
}

#[test]
fn a_replicas_rows_are_the_rows_of_the_whole_batch_draw() {
    // Rows of 7 values: row offsets that are not multiples of Philox's 4-value blocks.
    for (rows, first_row) in [(9, 0), (4, 1), (3, 5), (1, 8)] {
        let mut whole = Rng::new(11);
        let mut part = Rng::new(11).from_row(first_row);
        for normal in [true, false] {
            let draw = |rng: &mut Rng, shape: &[usize]| {
                let t = if normal {
                    rng.normal(gpu(), shape, 0.0, 1.0, DType::F32)
                } else {
                    rng.uniform(gpu(), shape, -1.0, 1.0, DType::F32)
                };
                t.unwrap().to_vec().unwrap()
            };
            let all = draw(&mut whole, &[9, 7]);
            let got = draw(&mut part, &[rows, 7]);
            assert_eq!(
                got,
                all[first_row * 7..(first_row + rows) * 7],
                "rows {first_row}+{rows}"
            );
        }
    }
}

#[test]
fn same_seed_same_numbers_different_seed_different() {
    let draw = |seed| {
        Rng::new(seed)
            .normal(gpu(), &[4096], 0.0, 1.0, DType::F32)
            .unwrap()
            .to_vec()
            .unwrap()
    };
    assert_eq!(draw(7), draw(7));
    let (a, b) = (draw(7), draw(8));
    assert!(a.iter().zip(&b).filter(|(x, y)| x != y).count() > 4000);
    // successive draws from one Rng differ too
    let mut rng = Rng::new(7);
    let first = rng
        .normal(gpu(), &[64], 0.0, 1.0, DType::F32)
        .unwrap()
        .to_vec()
        .unwrap();
    let second = rng
        .normal(gpu(), &[64], 0.0, 1.0, DType::F32)
        .unwrap()
        .to_vec()
        .unwrap();
    assert_ne!(first, second);
}

#[test]
fn one_million_normals_have_mean_0_and_variance_1() {
    let x = Rng::new(42)
        .normal(gpu(), &[1_000_000], 0.0, 1.0, DType::F32)
        .unwrap()
        .to_vec()
        .unwrap();
    let n = x.len() as f64;
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
    assert!(mean.abs() < 0.01, "mean {mean}");
    assert!((var - 1.0).abs() < 0.01, "variance {var}");
    assert!(x.iter().all(|v| v.is_finite()));
}

#[test]
fn uniform_respects_its_range_and_f16_works() {
    for dtype in dtypes() {
        let x = Rng::new(3)
            .uniform(gpu(), &[10_001], -2.0, 3.0, dtype)
            .unwrap()
            .to_vec()
            .unwrap();
        assert!(x.iter().all(|&v| (-2.0..=3.0).contains(&v)), "{dtype:?}");
        let mean = x.iter().map(|&v| v as f64).sum::<f64>() / x.len() as f64;
        assert!((mean - 0.5).abs() < 0.05, "{dtype:?} mean {mean}");
    }
}
