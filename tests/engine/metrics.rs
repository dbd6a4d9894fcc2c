//! FID, KID and IS (CPU, f64) against float64 references computed offline
//! (`scripts/make_metric_fixtures.py` -> `tests/fixtures/metrics.json`) and closed forms.

use crate::common::normal_vec;
use nalgebra::{DMatrix, DVector};
use rand::{rngs::StdRng, SeedableRng};
use serde_json::Value;
use wgdiff::metrics::{
    frechet_distance, inception_score, kid, mmd2_unbiased, FeatureStats, Predictions, KID_SUBSETS,
};

fn fixture() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/metrics.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("tests/fixtures/metrics.json")).unwrap()
}

/// A fixture feature set: stored integers / scale, as f32 (exact: |ints| < 2^24).
fn features(set: &Value, scale: f64) -> Vec<f32> {
    set["ints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v.as_f64().unwrap() / scale) as f32)
        .collect()
}

fn rel(ours: f64, reference: f64) -> f64 {
    (ours - reference).abs() / reference.abs()
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

/// A Fréchet case of the fixture: its name, dimension, two feature sets and JSON.
struct Case {
    name: String,
    dim: usize,
    a: Vec<f32>,
    b: Vec<f32>,
    json: Value,
}

fn cases(fx: &Value) -> Vec<Case> {
    let scale = num(&fx["scale"]);
    fx["frechet"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let dim = c["dim"].as_u64().unwrap() as usize;
            let name = c["name"].as_str().unwrap().to_string();
            Case {
                name,
                dim,
                a: features(&c["a"], scale),
                b: features(&c["b"], scale),
                json: c.clone(),
            }
        })
        .collect()
}

#[test]
fn metrics_fid_matches_float64_references_including_rank_deficient() {
    let fx = fixture();
    let mut worst = (0.0f64, String::new());
    for Case {
        name,
        dim,
        a,
        b,
        json: case,
    } in cases(&fx)
    {
        let sa = FeatureStats::from_features(&a, dim).unwrap();
        let sb = FeatureStats::from_features(&b, dim).unwrap();
        assert_eq!(sa.count * dim, a.len());
        let fd = frechet_distance(&sa, &sb).unwrap();
        let trusted = num(&case["fd"]);
        let err = rel(fd, trusted);
        eprintln!(
            "{name}: ours {fd:.15e} reference {trusted:.15e} rel err {err:.1e} (scipy sqrtm {:.1e})",
            rel(num(&case["fd_scipy"]), trusted)
        );
        assert!(
            err < 1e-6,
            "{name}: FD {fd} vs reference {trusted} (rel {err:.1e})"
        );
        // The pytorch-fid (scipy sqrtm) value, as the issue asks, is within 1e-6 too.
        assert!(
            rel(fd, num(&case["fd_scipy"])) < 1e-6,
            "{name}: FD {fd} vs scipy {}",
            case["fd_scipy"]
        );
        if err > worst.0 {
            worst = (err, name);
        }
    }
    eprintln!("worst relative error: {:.1e} ({})", worst.0, worst.1);
    // The eigen route is far more accurate than required; this guards that precision.
    assert!(
        worst.0 < 1e-11,
        "worst relative error {:.1e} in {}",
        worst.0,
        worst.1
    );
}

#[test]
fn metrics_feature_stats_match_numpy_mean_and_cov() {
    let fx = fixture();
    let check = &fx["stats_check"];
    let Case { dim, a, .. } = cases(&fx)
        .into_iter()
        .find(|c| c.name == check["case"].as_str().unwrap())
        .unwrap();
    let stats = FeatureStats::from_features(&a, dim).unwrap();
    let a64: Vec<f64> = a.iter().map(|&v| v as f64).collect();
    assert_eq!(
        stats,
        FeatureStats::from_features(&a64, dim).unwrap(),
        "f32 and f64 input differ"
    );
    let mean: Vec<f64> = check["mean"].as_array().unwrap().iter().map(num).collect();
    let cov: Vec<f64> = check["cov"].as_array().unwrap().iter().map(num).collect();
    let scale = cov.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (j, m) in mean.iter().enumerate() {
        assert!(
            (stats.mean[j] - m).abs() < 1e-13,
            "mean[{j}]: {} vs numpy {m}",
            stats.mean[j]
        );
    }
    for j in 0..dim {
        for k in 0..dim {
            let (ours, np) = (stats.cov[(j, k)], cov[j * dim + k]);
            assert!(
                (ours - np).abs() < 1e-13 * scale,
                "cov[{j},{k}]: {ours} vs numpy {np}"
            );
            assert_eq!(ours, stats.cov[(k, j)], "covariance not symmetric at {j},{k}");
        }
    }
}

#[test]
fn metrics_fid_of_a_set_against_itself_is_zero_and_fid_is_symmetric() {
    for Case { name, dim, a, b, .. } in cases(&fixture()) {
        let sa = FeatureStats::from_features(&a, dim).unwrap();
        let sb = FeatureStats::from_features(&b, dim).unwrap();
        for (which, s) in [("a", &sa), ("b", &sb)] {
            let fd = frechet_distance(s, s).unwrap();
            let bound = 1e-9 * s.cov.trace();
            assert!(
                fd.abs() < bound,
                "{name} set {which}: FD against itself {fd:e} (bound {bound:e})"
            );
        }
        let (ab, ba) = (
            frechet_distance(&sa, &sb).unwrap(),
            frechet_distance(&sb, &sa).unwrap(),
        );
        assert!(rel(ab, ba) < 1e-12, "{name}: FD(a, b) = {ab} but FD(b, a) = {ba}");
    }
}

/// A random orthogonal matrix (QR of a Gaussian matrix).
fn rotation(rng: &mut StdRng, d: usize) -> DMatrix<f64> {
    DMatrix::from_vec(d, d, normal_vec(rng, d * d)).qr().q()
}

fn stats(mean: Vec<f64>, cov: DMatrix<f64>) -> FeatureStats {
    FeatureStats {
        count: 100,
        mean: DVector::from_vec(mean),
        cov,
    }
}

#[test]
fn metrics_fid_has_the_closed_form_of_gaussians() {
    let mut rng = StdRng::seed_from_u64(7);
    // Diagonal covariances (some variances 0), rotated by one orthogonal matrix: they commute,
    // so FD = |dmu|^2 + sum (sqrt(a_i) - sqrt(b_i))^2.
    let a = [4.0, 1.0, 0.0, 2.5, 0.0, 9.0];
    let b = [1.0, 1.0, 0.0, 0.5, 3.0, 0.25];
    let d = a.len();
    let (mu_a, mu_b) = (normal_vec(&mut rng, d), normal_vec(&mut rng, d));
    let q = rotation(&mut rng, d);
    let rotate = |v: &[f64]| &q * DMatrix::from_diagonal(&DVector::from_row_slice(v)) * q.transpose();
    let (ca, cb) = (rotate(&a), rotate(&b));
    let (ca, cb) = ((&ca + ca.transpose()) * 0.5, (&cb + cb.transpose()) * 0.5);
    let dmu: f64 = mu_a.iter().zip(&mu_b).map(|(x, y)| (x - y).powi(2)).sum();
    let expected = dmu
        + a.iter()
            .zip(&b)
            .map(|(x, y)| (x.sqrt() - y.sqrt()).powi(2))
            .sum::<f64>();
    let fd = frechet_distance(&stats(mu_a, ca), &stats(mu_b, cb)).unwrap();
    assert!(
        rel(fd, expected) < 1e-12,
        "rotated diagonal: FD {fd} vs closed form {expected}"
    );

    // Non-commuting 2 x 2: tr sqrt(A) = sqrt(tr A + 2 sqrt(det A)) for A = S1 S2 (real,
    // non-negative eigenvalues).
    let s1 = DMatrix::<f64>::from_row_slice(2, 2, &[2.0, 0.7, 0.7, 1.0]);
    let s2 = DMatrix::<f64>::from_row_slice(2, 2, &[0.5, -0.3, -0.3, 3.0]);
    let p = &s1 * &s2;
    let tr_sqrt = (p.trace() + 2.0 * p.determinant().sqrt()).sqrt();
    let expected = 1.0 + s1.trace() + s2.trace() - 2.0 * tr_sqrt;
    let fd = frechet_distance(&stats(vec![1.0, 0.0], s1), &stats(vec![0.0, 0.0], s2)).unwrap();
    assert!(
        rel(fd, expected) < 1e-13,
        "2 x 2: FD {fd} vs closed form {expected}"
    );
}

#[test]
fn metrics_kid_matches_the_exact_unbiased_mmd_on_whole_sets() {
    let fx = fixture();
    let all = cases(&fx);
    for reference in fx["kid"].as_array().unwrap() {
        let Case { name, dim, a, b, .. } = all
            .iter()
            .find(|c| c.name == reference["case"].as_str().unwrap())
            .unwrap();
        let expected = num(&reference["mmd2_unbiased"]);
        let whole = mmd2_unbiased(a, b, *dim).unwrap();
        // One subset of every sample: a permutation of the whole sets, so the same value.
        let n = a.len() / dim;
        let (mean, std) = kid(a, b, *dim, 1, Some(n), 3).unwrap();
        eprintln!("{name}: KID {mean:.15e} whole {whole:.15e} exact {expected:.15e}");
        assert!(
            (whole - expected).abs() < 1e-11,
            "{name}: unbiased MMD^2 {whole} vs exact {expected}"
        );
        assert!(
            (mean - expected).abs() < 1e-11,
            "{name}: KID {mean} vs exact {expected}"
        );
        assert_eq!(std, 0.0);
    }
}

/// The biased (V-statistic) MMD^2, every pair including i = j: the estimator KID must not be.
fn mmd2_biased(x: &[f64], y: &[f64], d: usize) -> f64 {
    let k =
        |u: &[f64], v: &[f64]| (u.iter().zip(v).map(|(a, b)| a * b).sum::<f64>() / d as f64 + 1.0).powi(3);
    let mean = |p: &[f64], q: &[f64]| {
        let s: f64 = p.chunks(d).flat_map(|u| q.chunks(d).map(move |v| k(u, v))).sum();
        s / ((p.len() / d) * (q.len() / d)) as f64
    };
    mean(x, x) + mean(y, y) - 2.0 * mean(x, y)
}

fn mean_and_standard_error(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

#[test]
fn metrics_kid_is_unbiased_where_the_biased_estimator_is_not() {
    // Many pairs of small sets from one distribution: the true MMD^2 is 0.
    let (d, m, trials) = (4, 8, 2000);
    let mut rng = StdRng::seed_from_u64(11);
    let (mut unbiased, mut biased) = (Vec::new(), Vec::new());
    for _ in 0..trials {
        let x = normal_vec(&mut rng, m * d);
        let y = normal_vec(&mut rng, m * d);
        unbiased.push(kid(&x, &y, d, 1, Some(m), 0).unwrap().0);
        biased.push(mmd2_biased(&x, &y, d));
    }
    let (mu, se) = mean_and_standard_error(&unbiased);
    let (mb, seb) = mean_and_standard_error(&biased);
    eprintln!("unbiased {mu:.4} +- {se:.4}, biased {mb:.4} +- {seb:.4}");
    assert!(mu.abs() < 3.0 * se, "unbiased KID averages {mu} +- {se}, not 0");
    assert!(
        mb > 10.0 * seb,
        "the biased estimator should be visibly positive: {mb} +- {seb}"
    );

    // Subsets of two large pools from one distribution, through `kid` with its default count.
    let n = 3000;
    let (a, b) = (normal_vec(&mut rng, n * d), normal_vec(&mut rng, n * d));
    let (mean, std) = kid(&a, &b, d, KID_SUBSETS, Some(m), 5).unwrap();
    let se = std / (KID_SUBSETS as f64).sqrt();
    assert!(mean.abs() < 3.0 * se, "KID over subsets {mean} +- {se}, not 0");
}

#[test]
fn metrics_kid_is_deterministic_for_a_seed_and_detects_a_shift() {
    let (d, n) = (8, 400);
    let mut rng = StdRng::seed_from_u64(3);
    let a = normal_vec(&mut rng, n * d);
    let b: Vec<f64> = normal_vec(&mut rng, n * d).iter().map(|v| v + 0.5).collect();
    let first = kid(&a, &b, d, 20, Some(50), 9).unwrap();
    assert_eq!(
        first,
        kid(&a, &b, d, 20, Some(50), 9).unwrap(),
        "same seed, different KID"
    );
    assert_ne!(
        first,
        kid(&a, &b, d, 20, Some(50), 10).unwrap(),
        "another seed, same subsets"
    );
    assert!(
        first.0 > 10.0 * first.1 / 20f64.sqrt(),
        "a mean shift of 0.5 not detected: {first:?}"
    );
    // None = min(1000, n) samples per subset, i.e. here the whole sets.
    let whole = mmd2_unbiased(&a, &b, d).unwrap();
    let (all, _) = kid(&a, &b, d, 2, None, 1).unwrap();
    assert!(
        (all - whole).abs() < 1e-12 * whole.abs().max(1.0),
        "{all} vs {whole}"
    );
}

#[test]
fn metrics_inception_score_matches_the_fixture_and_its_bounds() {
    let fx = fixture();
    let is = &fx["inception"];
    let scale = num(&is["logit_scale"]);
    let logits: Vec<f32> = is["logit_ints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (num(v) / scale) as f32)
        .collect();
    let classes = is["classes"].as_u64().unwrap() as usize;
    let splits = is["splits"].as_u64().unwrap() as usize;
    let (mean, std) = inception_score(Predictions::Logits(&logits), classes, splits).unwrap();
    let (em, es) = (num(&is["mean"]), num(&is["std"]));
    eprintln!("IS {mean} +- {std}, reference {em} +- {es}");
    assert!(
        rel(mean, em) < 1e-12 && rel(std, es) < 1e-10,
        "IS {mean} +- {std} vs {em} +- {es}"
    );

    // Uniform predictions: p(y|x) = p(y), IS = 1.
    let uniform = vec![0.25f32; 40 * 7];
    assert_eq!(
        inception_score(Predictions::Logits(&uniform), 7, 4).unwrap(),
        (1.0, 0.0)
    );
    // Confident predictions spread evenly over the classes: IS = classes, in every split.
    let c = 7;
    let one_hot: Vec<f32> = (0..3 * c)
        .flat_map(|i| (0..c).map(move |j| (i % c == j) as u8 as f32))
        .collect();
    let (m, s) = inception_score(Predictions::Probabilities(&one_hot), c, 3).unwrap();
    assert!(
        (m - c as f64).abs() < 1e-12 && s < 1e-12,
        "one-hot probabilities: IS {m} +- {s}"
    );
    let confident: Vec<f32> = one_hot.iter().map(|v| v * 1000.0).collect();
    let (m, _) = inception_score(Predictions::Logits(&confident), c, 1).unwrap();
    assert!((m - c as f64).abs() < 1e-12, "confident logits: IS {m}");
    // Confident but all one class: IS = 1.
    let same: Vec<f32> = (0..5 * c).map(|k| (k % c == 2) as u8 as f32 * 50.0).collect();
    let (m, _) = inception_score(Predictions::Logits(&same), c, 1).unwrap();
    assert!((m - 1.0).abs() < 1e-12, "one class only: IS {m}");
}

#[test]
fn metrics_feature_stats_round_trip_through_safetensors() {
    let dir = std::env::temp_dir().join(format!("wgdiff-metrics-{}", std::process::id()));
    let path = dir.join("stats.safetensors");
    let mut rng = StdRng::seed_from_u64(1);
    let stats = FeatureStats::from_features(&normal_vec(&mut rng, 30 * 5), 5).unwrap();
    let source = serde_json::json!({"dataset": "mnist", "split": "train", "features": "test-net"});
    stats.save(&path, &source).unwrap();
    let (back, back_source) = FeatureStats::load(&path).unwrap();
    assert_eq!(back, stats, "statistics changed through the file");
    assert_eq!(back_source, source);

    std::fs::write(&path, &std::fs::read(&path).unwrap()[..40]).unwrap();
    let err = FeatureStats::load(&path).unwrap_err().to_string();
    assert!(
        err.contains("truncated or corrupt") && err.contains("stats.safetensors"),
        "{err}"
    );
    let ckpt = wgdiff::checkpoint::Checkpoint {
        tensors: Default::default(),
        meta: serde_json::json!({}),
    };
    ckpt.save(&path).unwrap();
    let err = FeatureStats::load(&path).unwrap_err().to_string();
    assert!(err.contains("not a wgdiff feature-statistics file"), "{err}");
    let err = FeatureStats::load(&dir.join("missing.safetensors"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot be read"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn metrics_errors_name_the_problem() {
    let err = |r: wgdiff::Result<FeatureStats>| r.unwrap_err().to_string();
    let mut x = vec![0.5f32; 10 * 4];
    x[9] = f32::NAN;
    x[30] = f32::INFINITY;
    let e = err(FeatureStats::from_features(&x, 4));
    assert!(
        e.contains("2 of 40 values are not finite") && e.contains("sample 2 feature 1"),
        "{e}"
    );
    let e = err(FeatureStats::from_features(&[1.0f32; 10], 4));
    assert!(
        e.contains("10 values do not split into rows of 4") && e.contains("2 left over"),
        "{e}"
    );
    let e = err(FeatureStats::from_features(&[1.0f32; 4], 4));
    assert!(e.contains("1 samples") && e.contains("at least 2"), "{e}");
    let e = err(FeatureStats::from_features(&[1.0f32; 4], 0));
    assert!(e.contains("dimension is 0"), "{e}");

    let a = FeatureStats::from_features(&[1.0f32, 2.0, 3.0, 4.0, 0.0, 1.0], 2).unwrap();
    let b = FeatureStats::from_features(&[1.0f32, 2.0, 3.0, 4.0, 0.0, 1.0], 3).unwrap();
    let e = frechet_distance(&a, &b).unwrap_err().to_string();
    assert!(e.contains("2 and 3 features"), "{e}");
    let mut nan = a.clone();
    nan.cov[(0, 1)] = f64::NAN;
    let e = frechet_distance(&nan, &a).unwrap_err().to_string();
    assert!(e.contains("not finite"), "{e}");

    let f = vec![0.0f32; 10 * 2];
    let e = kid(&f, &f[..8], 2, 10, Some(5), 0).unwrap_err().to_string();
    assert!(
        e.contains("subset size 5") && e.contains("between 2 and 4"),
        "{e}"
    );
    let e = kid(&f, &f, 2, 0, None, 0).unwrap_err().to_string();
    assert!(e.contains("0 subsets"), "{e}");
    let e = kid(&f, &f[..7], 2, 1, None, 0).unwrap_err().to_string();
    assert!(e.contains("KID features b") && e.contains("1 left over"), "{e}");

    let e = inception_score(Predictions::Probabilities(&[0.5, 0.4, 0.3, 0.7]), 2, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("sample 0") && e.contains("sum to 0.9"), "{e}");
    let e = inception_score(Predictions::Logits(&[0.5; 6]), 2, 4)
        .unwrap_err()
        .to_string();
    assert!(e.contains("4 splits of 3 samples"), "{e}");
}
