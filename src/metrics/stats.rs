//! `FeatureStats`: the mean and unbiased covariance (f64) of a feature set, the input of the
//! Fréchet distance; saved and loaded as safetensors (`mean`, `cov` in F64, count and source).

use super::check_rows;
use crate::{Error, Result};
use nalgebra::{DMatrix, DVector};
use std::collections::HashMap;

/// Metadata key marking a feature-statistics file (value: the format version).
const FORMAT_KEY: &str = "wgdiff-feature-stats";
const FORMAT_VERSION: &str = "1";

/// Rows converted to f64 and accumulated into the covariance at a time.
const CHUNK_ROWS: usize = 512;

/// Mean and covariance of `count` feature vectors of dimension `mean.len()`.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureStats {
    /// Number of samples the statistics were computed from.
    pub count: usize,
    /// Per-feature mean.
    pub mean: DVector<f64>,
    /// Unbiased covariance (divided by `count - 1`, like `numpy.cov(x, rowvar=False)`),
    /// exactly symmetric.
    pub cov: DMatrix<f64>,
}

impl FeatureStats {
    /// Mean and unbiased covariance of a row-major `n x dim` feature matrix (`f32` or `f64`),
    /// computed in f64 in two passes (mean first, then the centred products), like numpy.
    /// Errors for `n < 2`, a length that is not a multiple of `dim`, or non-finite values.
    pub fn from_features<T: Copy + Into<f64>>(features: &[T], dim: usize) -> Result<FeatureStats> {
        let rows = check_rows(
            "features for FID statistics",
            features,
            dim,
            2,
            "an unbiased covariance",
        )?;
        let n = rows.n;
        let mut mean = DVector::<f64>::zeros(dim);
        for i in 0..n {
            for j in 0..dim {
                mean[j] += rows.get(i, j);
            }
        }
        mean /= n as f64;
        let mut cov = DMatrix::<f64>::zeros(dim, dim);
        let mut start = 0;
        while start < n {
            let len = CHUNK_ROWS.min(n - start);
            // Column-major d x len: each column one centred sample.
            let xt = DMatrix::from_fn(dim, len, |j, i| rows.get(start + i, j) - mean[j]);
            cov.gemm(1.0, &xt, &xt.transpose(), 1.0);
            start += len;
        }
        cov /= (n - 1) as f64;
        let cov = (&cov + cov.transpose()) * 0.5;
        Ok(FeatureStats { count: n, mean, cov })
    }

    /// The feature dimension.
    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// Checks that the mean and covariance agree in size and are finite; `what` names the
    /// statistics in the error.
    pub(crate) fn check(&self, what: &str) -> Result<()> {
        let d = self.dim();
        if d == 0 {
            return Err(Error::metrics(what, "the statistics have 0 features"));
        }
        if self.cov.shape() != (d, d) {
            return Err(Error::metrics(
                what,
                format!(
                    "the mean has {d} features but the covariance is {} x {}",
                    self.cov.nrows(),
                    self.cov.ncols()
                ),
            ));
        }
        let bad = self
            .mean
            .iter()
            .chain(self.cov.iter())
            .filter(|v| !v.is_finite())
            .count();
        if bad > 0 {
            return Err(Error::metrics(
                what,
                format!("{bad} mean/covariance entries are not finite; recompute the statistics"),
            ));
        }
        Ok(())
    }

    /// The safetensors encoding: F64 tensors `mean` [d] and `cov` [d, d] (row-major), metadata
    /// `count` and `source` (`source` is free-form JSON describing where the features came
    /// from: dataset, split, feature network, ...).
    pub fn to_bytes(&self, source: &serde_json::Value) -> Result<Vec<u8>> {
        self.check("feature statistics (being written)")?;
        let d = self.dim();
        let mean: Vec<f64> = self.mean.iter().copied().collect();
        let cov: Vec<f64> = self.cov.transpose().as_slice().to_vec(); // row-major
        let encode_err = |e: safetensors::SafeTensorError| {
            Error::metrics(
                "feature statistics (being written)",
                format!("safetensors encoding failed: {e}"),
            )
        };
        let views = vec![
            (
                "mean".to_string(),
                safetensors::tensor::TensorView::new(
                    safetensors::Dtype::F64,
                    vec![d],
                    bytemuck::cast_slice(&mean),
                )
                .map_err(encode_err)?,
            ),
            (
                "cov".to_string(),
                safetensors::tensor::TensorView::new(
                    safetensors::Dtype::F64,
                    vec![d, d],
                    bytemuck::cast_slice(&cov),
                )
                .map_err(encode_err)?,
            ),
        ];
        let meta = HashMap::from([
            (FORMAT_KEY.to_string(), FORMAT_VERSION.to_string()),
            ("count".to_string(), self.count.to_string()),
            ("source".to_string(), source.to_string()),
        ]);
        safetensors::serialize(views, Some(meta)).map_err(encode_err)
    }

    /// Decodes [`FeatureStats::to_bytes`]; returns the statistics and their `source` JSON.
    /// `origin` names the file in errors.
    pub fn from_bytes(bytes: &[u8], origin: &str) -> Result<(FeatureStats, serde_json::Value)> {
        let what = format!("feature statistics {origin}");
        let fail = |msg: String| Error::metrics(what.clone(), msg);
        let corrupt = |e: safetensors::SafeTensorError| {
            fail(format!(
                "not a valid safetensors file ({e}); it is truncated or corrupt — delete it to recompute"
            ))
        };
        let (_, header) = safetensors::SafeTensors::read_metadata(bytes).map_err(corrupt)?;
        let meta = header.metadata().clone().unwrap_or_default();
        match meta.get(FORMAT_KEY).map(String::as_str) {
            Some(FORMAT_VERSION) => {}
            Some(v) => {
                return Err(fail(format!(
                "format version {v}, but this build reads version {FORMAT_VERSION}; recompute the statistics"
            )))
            }
            None => {
                return Err(fail(format!(
                    "no \"{FORMAT_KEY}\" metadata: not a wgdiff feature-statistics file"
                )))
            }
        }
        let count: usize = meta
            .get("count")
            .and_then(|c| c.parse().ok())
            .filter(|&c| c >= 2)
            .ok_or_else(|| fail("the \"count\" metadata is missing or below 2".into()))?;
        let source = match meta.get("source") {
            Some(s) => serde_json::from_str(s)
                .map_err(|e| fail(format!("the \"source\" metadata is not JSON: {e}")))?,
            None => serde_json::Value::Null,
        };
        let file = safetensors::SafeTensors::deserialize(bytes).map_err(corrupt)?;
        let tensor = |name: &str| -> Result<(Vec<usize>, Vec<f64>)> {
            let view = file
                .tensor(name)
                .map_err(|_| fail(format!("has no tensor \"{name}\"")))?;
            if view.dtype() != safetensors::Dtype::F64 {
                return Err(fail(format!(
                    "tensor {name} has dtype {:?}, expected F64",
                    view.dtype()
                )));
            }
            Ok((view.shape().to_vec(), bytemuck::pod_collect_to_vec(view.data())))
        };
        let (mean_shape, mean) = tensor("mean")?;
        let (cov_shape, cov) = tensor("cov")?;
        let d = mean.len();
        if mean_shape != [d] || cov_shape != [d, d] {
            return Err(fail(format!(
                "mean has shape {mean_shape:?} and cov {cov_shape:?}; expected [d] and [d, d]"
            )));
        }
        let stats = FeatureStats {
            count,
            mean: DVector::from_vec(mean),
            cov: DMatrix::from_row_slice(d, d, &cov),
        };
        stats.check(&what)?;
        Ok((stats, source))
    }

    /// Writes the statistics to `path` atomically (temp file + rename); see
    /// [`FeatureStats::to_bytes`] for the layout.
    pub fn save(&self, path: &std::path::Path, source: &serde_json::Value) -> Result<()> {
        crate::fsio::write_atomic(path, &self.to_bytes(source)?)
    }

    /// Reads statistics written by [`FeatureStats::save`], with their `source` JSON.
    pub fn load(path: &std::path::Path) -> Result<(FeatureStats, serde_json::Value)> {
        let bytes = crate::fsio::read_io(path).map_err(|e| {
            Error::metrics(
                format!("feature statistics {}", path.display()),
                format!("cannot be read: {e}"),
            )
        })?;
        FeatureStats::from_bytes(&bytes, &path.display().to_string())
    }
}
