#!/usr/bin/env python3
"""Writes tests/fixtures/metrics.json: float64 references for wgdiff's Frechet distance, KID and IS.

Requires: pip install numpy scipy mpmath   (Python >= 3.9; run from the repository root)

Features are integers / SCALE (SCALE = 128), stored as the integers, so Rust and Python read exactly
the same f32/f64 values and the covariances are exact rationals. Per Frechet case the file holds:

- "fd": the value the tests trust. Covariances and means are computed exactly (integer sums), then
  tr sqrt(S1^1/2 S2 S1^1/2) with mpmath at 60 digits through two symmetric eigendecompositions
  (eigenvalues clamped at 0; at 60 digits the round-off of a zero eigenvalue is ~1e-60, so its
  square root adds ~1e-30). Cross-checked against "fd_nuclear_f64", an independent float64 route:
  tr sqrt(S1 S2) = the nuclear norm of A B^T, A and B the centred data / sqrt(n - 1) (singular values
  carry absolute error ~eps * |A B^T|, with no square root of a rounded zero). The script stops if
  the two differ by more than 1e-11 relative.
- "fd_scipy": pytorch-fid's formula in float64 (scipy.linalg.sqrtm(sigma1.dot(sigma2)), real part,
  with its eps offset when the result is not finite). For rank-deficient covariances sqrtm of the
  singular product is off by ~1e-8 relative; it is stored for comparison only.

KID references are the unbiased MMD^2 with k(x, y) = (x.y / d + 1)^3 over the whole sets (one
subset = everything, so no randomness), computed exactly in rational arithmetic. The IS reference
is the original Inception Score (exp of the mean KL per split, mean and population std over splits)
on fixed logits, computed with mpmath at 50 digits.
"""

import json
import warnings
from fractions import Fraction
from pathlib import Path

import mpmath as mp
import numpy as np
import scipy.linalg

SCALE = 128
OUT = Path("tests/fixtures/metrics.json")


def quantise(x):
    return np.round(np.asarray(x) * SCALE).astype(np.int64)


def exact_stats(ints):
    """Exact mean and unbiased covariance (numpy.cov(rowvar=False)) of ints / SCALE as Fractions."""
    n, d = ints.shape
    s = [int(v) for v in ints.sum(0)]
    g = (ints.T.astype(object) @ ints.astype(object)).tolist()  # exact Python ints
    mean = [Fraction(s[j], n * SCALE) for j in range(d)]
    den = n * (n - 1) * SCALE * SCALE
    cov = [[Fraction(n * g[j][k] - s[j] * s[k], den) for k in range(d)] for j in range(d)]
    return mean, cov


def fd_mpmath(ia, ib):
    mp.mp.dps = 60
    ma, ca = exact_stats(ia)
    mb, cb = exact_stats(ib)
    d = len(ma)
    to_mp = lambda c: mp.matrix([[mp.mpf(x.numerator) / x.denominator for x in row] for row in c])
    s1, s2 = to_mp(ca), to_mp(cb)
    e, q = mp.eigsy(s1)
    r = q * mp.diag([mp.sqrt(max(e[i], 0)) for i in range(d)]) * q.T
    m = r * s2 * r
    m = (m + m.T) / 2
    em = mp.eigsy(m, eigvals_only=True)
    tr_sqrt = mp.fsum(mp.sqrt(max(em[i], 0)) for i in range(d))
    dmu = sum((a - b) ** 2 for a, b in zip(ma, mb))
    tr1 = sum(ca[j][j] for j in range(d))
    tr2 = sum(cb[j][j] for j in range(d))
    fd = mp.mpf(dmu.numerator) / dmu.denominator
    fd += mp.mpf(tr1.numerator) / tr1.denominator + mp.mpf(tr2.numerator) / tr2.denominator
    return fd - 2 * tr_sqrt, tr_sqrt


def fd_nuclear_f64(xa, xb):
    a = (xa - xa.mean(0)) / np.sqrt(len(xa) - 1)
    b = (xb - xb.mean(0)) / np.sqrt(len(xb) - 1)
    nuc = np.linalg.svd(a @ b.T, compute_uv=False).sum()
    dmu = xa.mean(0) - xb.mean(0)
    return float(dmu @ dmu + (a * a).sum() + (b * b).sum() - 2 * nuc)


def fd_pytorch_fid(mu1, sigma1, mu2, sigma2, eps=1e-6):
    """pytorch-fid's calculate_frechet_distance, float64."""
    diff = mu1 - mu2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        covmean, _ = scipy.linalg.sqrtm(sigma1.dot(sigma2), disp=False)
        if not np.isfinite(covmean).all():
            offset = np.eye(sigma1.shape[0]) * eps
            covmean = scipy.linalg.sqrtm((sigma1 + offset).dot(sigma2 + offset))
    if np.iscomplexobj(covmean):
        covmean = covmean.real
    return float(diff.dot(diff) + np.trace(sigma1) + np.trace(sigma2) - 2 * np.trace(covmean))


def kid_exact(ia, ib):
    """Unbiased MMD^2, polynomial kernel (x.y/d + 1)^3, whole sets, exact (ints / SCALE)."""
    d = ia.shape[1]
    c = SCALE * SCALE * d  # k = (X.Y + c)^3 / c^3 for the integer rows X, Y
    gram = lambda x, y: (x.astype(object) @ y.astype(object).T)
    kxx, kyy, kxy = gram(ia, ia), gram(ib, ib), gram(ia, ib)
    cube_sum = lambda k, off_diag: sum(
        (k[i, j] + c) ** 3 for i in range(k.shape[0]) for j in range(k.shape[1]) if not (off_diag and i == j)
    )
    m, n = len(ia), len(ib)
    val = (
        Fraction(cube_sum(kxx, True), m * (m - 1))
        + Fraction(cube_sum(kyy, True), n * (n - 1))
        - Fraction(2 * cube_sum(kxy, False), m * n)
    ) / c**3
    return float(val)


def inception_score_mp(logits, splits):
    mp.mp.dps = 50
    n, _ = logits.shape
    probs = []
    for row in logits:
        mx = max(row)
        ex = [mp.exp(mp.mpf(int(v)) / 16 - mp.mpf(int(mx)) / 16) for v in row]
        z = mp.fsum(ex)
        probs.append([e / z for e in ex])
    scores = []
    for k in range(splits):
        part = probs[k * n // splits : (k + 1) * n // splits]
        py = [mp.fsum(col) / len(part) for col in zip(*part)]
        kl = mp.fsum(mp.fsum(p * (mp.log(p) - mp.log(q)) for p, q in zip(row, py)) for row in part) / len(part)
        scores.append(mp.exp(kl))
    mean = mp.fsum(scores) / splits
    std = mp.sqrt(mp.fsum((s - mean) ** 2 for s in scores) / splits)
    return float(mean), float(std)


def main():
    rng = np.random.default_rng(20240605)
    cases = []

    def add_case(name, ia, ib, note):
        xa, xb = ia / SCALE, ib / SCALE
        fd, tr_sqrt = fd_mpmath(ia, ib)
        nuc = fd_nuclear_f64(xa, xb)
        ref = float(fd)
        if abs(nuc - ref) > 1e-11 * abs(ref):
            raise SystemExit(f"{name}: mpmath {ref!r} and nuclear-norm {nuc!r} disagree")
        mu1, s1 = xa.mean(0), np.cov(xa, rowvar=False)
        mu2, s2 = xb.mean(0), np.cov(xb, rowvar=False)
        scipy_fd = fd_pytorch_fid(mu1, s1, mu2, s2)
        ranks = [int(np.linalg.matrix_rank(s1)), int(np.linalg.matrix_rank(s2))]
        print(f"{name}: fd {ref!r} nuclear {nuc!r} scipy {scipy_fd!r} "
              f"(scipy rel err {abs(scipy_fd - ref) / abs(ref):.1e}) ranks {ranks}")
        cases.append({
            "name": name, "note": note, "dim": int(ia.shape[1]),
            "a": {"n": int(ia.shape[0]), "ints": ia.ravel().tolist()},
            "b": {"n": int(ib.shape[0]), "ints": ib.ravel().tolist()},
            "fd": ref, "fd_nuclear_f64": nuc, "fd_scipy": scipy_fd,
            "tr_sqrt": float(tr_sqrt), "cov_ranks": ranks,
        })

    d = 16
    scales = rng.uniform(0.5, 2.0, d)
    ia = quantise(rng.standard_normal((200, d)) * scales)
    ib = quantise(rng.standard_normal((200, d)) * scales * 1.3 + 0.4)
    add_case("gauss_200x16", ia, ib, "independent Gaussians, b shifted and wider")
    ib2 = quantise(rng.standard_normal((200, d)) * scales)
    add_case("same_distribution_200x16", ia, ib2, "two samples of one distribution: FD is sampling noise")

    d = 32
    u, _ = np.linalg.qr(rng.standard_normal((d, d)))
    mix = u * np.geomspace(3.0, 0.05, d)  # strongly correlated features, condition number 60
    ia = quantise(rng.standard_normal((300, d)) @ mix.T)
    mix_b = mix + 0.1 * rng.standard_normal((d, d))
    ib = quantise(rng.standard_normal((250, d)) @ mix_b.T + 0.2)
    add_case("correlated_300x32", ia, ib, "correlated features (x = A z), b from a perturbed A")

    ia = quantise(rng.standard_normal((20, d)) * rng.uniform(0.5, 2.0, d))
    ib = quantise(rng.standard_normal((25, d)) * rng.uniform(0.5, 2.0, d) + 0.1)
    add_case("rank_deficient_20x32", ia, ib, "fewer samples than dimensions: ranks 19 and 24 of 32")

    d = 24
    base_a = rng.standard_normal((100, 16))
    base_b = rng.standard_normal((100, 16)) * 1.1
    ia = quantise(np.hstack([base_a, base_a[:, :7], np.full((100, 1), 0.5)]))
    ib = quantise(np.hstack([base_b, base_b[:, :7], base_b[:, :1] - base_b[:, 1:2]]))
    add_case("duplicated_columns_100x24", ia, ib,
             "columns 16..22 copy columns 0..6; a's last column is constant (rank 16), "
             "b's is col0 - col1 up to rounding (rank 17, smallest eigenvalue ~ rounding noise)")

    # Statistics check: numpy's mean and cov of the first case's set a.
    first = cases[0]
    xa = np.array(first["a"]["ints"], dtype=np.float64).reshape(first["a"]["n"], first["dim"]) / SCALE
    stats_check = {"case": first["name"], "mean": xa.mean(0).tolist(),
                   "cov": np.cov(xa, rowvar=False).ravel().tolist()}

    kid = []
    for case in cases[:2]:
        ia = np.array(case["a"]["ints"]).reshape(case["a"]["n"], case["dim"])
        ib = np.array(case["b"]["ints"]).reshape(case["b"]["n"], case["dim"])
        kid.append({"case": case["name"], "mmd2_unbiased": kid_exact(ia, ib)})
        print(f"kid {case['name']}: {kid[-1]['mmd2_unbiased']!r}")

    logits = np.round(rng.standard_normal((57, 10)) * 3 * 16 + np.arange(10) * 8).astype(np.int64)
    is_mean, is_std = inception_score_mp(logits, 10)
    print(f"IS: {is_mean!r} +- {is_std!r}")
    inception = {"n": 57, "classes": 10, "splits": 10, "logit_scale": 16,
                 "logit_ints": logits.ravel().tolist(), "mean": is_mean, "std": is_std}

    doc = {
        "about": "written by scripts/make_metric_fixtures.py; features are ints / scale, row-major",
        "scale": SCALE, "frechet": cases, "stats_check": stats_check, "kid": kid, "inception": inception,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
