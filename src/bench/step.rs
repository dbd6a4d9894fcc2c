//! `bench step`: one sampling step of a checkpoint's network (the network call and a DDIM
//! update around it) per batch size, optionally beside another implementation's step timed in
//! the same rounds (diffusers on PyTorch, by the command), with the per-round ratio.

use super::Measurement;
use crate::median::median;
use crate::models::DiffusionNet;
use crate::ops::random::Rng;
use crate::{DType, Gpu, Result};

/// Times another implementation's step: seconds for one step at this batch size.
pub type OtherStep<'a> = dyn FnMut(usize) -> Result<f64> + 'a;

/// Another implementation timed beside wgdiff: its rows' variant (`diffusers`), what it runs on
/// (their `device`), and its step.
pub struct Other<'a, 'b> {
    pub name: &'a str,
    pub device: &'a str,
    pub step: &'a mut OtherStep<'b>,
}

/// One batch size's figures.
pub struct StepRow {
    pub batch: usize,
    /// Median milliseconds of wgdiff's step.
    pub wgdiff_ms: f64,
    /// Median milliseconds of the other implementation's step, when one was timed.
    pub other_ms: Option<f64>,
    /// Median over rounds of (other / wgdiff) in the same round.
    pub other_over_wgdiff: Option<f64>,
}

/// Times a step of `net` at every batch in `batches` for `reps` rounds after `warmup` untimed
/// steps each; in every round each batch runs wgdiff's step and then `other`'s (so drift hits
/// both alike). Returns the table's rows and the measurements (variants "wgdiff" and
/// `other.name`).
pub fn run(
    gpu: &Gpu,
    net: &dyn DiffusionNet,
    image_shape: [usize; 3],
    batches: &[usize],
    warmup: usize,
    reps: usize,
    mut other: Option<Other>,
) -> Result<(Vec<StepRow>, Vec<Measurement>)> {
    let [c, h, w] = image_shape;
    let mut rng = Rng::new(0);
    let inputs = batches
        .iter()
        .map(|&b| rng.normal(gpu, &[b, c, h, w], 0.0, 1.0, DType::F32))
        .collect::<Result<Vec<_>>>()?;
    let step = |i: usize| -> Result<()> {
        let _g = crate::no_grad();
        let x = &inputs[i];
        let eps = net.forward(x, &vec![500.0; batches[i]], None, 0)?;
        x.mul_scalar(1.01)?.add(&eps.mul_scalar(-0.1)?).map(drop)?;
        gpu.sync()
    };
    for (i, &batch) in batches.iter().enumerate() {
        for _ in 0..warmup {
            step(i)?;
            if let Some(other) = other.as_mut() {
                (other.step)(batch)?;
            }
        }
    }
    let mut ours = vec![Vec::new(); batches.len()];
    let mut theirs = vec![Vec::new(); batches.len()];
    for _ in 0..reps.max(1) {
        for (i, &batch) in batches.iter().enumerate() {
            let start = web_time::Instant::now();
            step(i)?;
            ours[i].push(start.elapsed().as_secs_f64() * 1e3);
            if let Some(other) = other.as_mut() {
                theirs[i].push((other.step)(batch)? * 1e3);
            }
        }
    }
    let device = crate::gpu::describe(&gpu.info);
    let mut rows = Vec::new();
    let mut measurements = Vec::new();
    for (i, &batch) in batches.iter().enumerate() {
        let shape = format!("B{batch} {c}x{h}x{w}");
        let mut measure = |variant: &str, device: &str, times: &[f64]| {
            measurements.push(Measurement {
                bench: "step".into(),
                variant: variant.to_string(),
                shape: shape.clone(),
                pass: None,
                median_ms: median(times),
                min_ms: times.iter().copied().fold(f64::INFINITY, f64::min),
                reps: times.len(),
                gflops: None,
                gbps: None,
                us_each: None,
                vs_torch: None,
                device: device.to_string(),
            });
            median(times)
        };
        let wgdiff_ms = measure("wgdiff", &device, &ours[i]);
        let (other_ms, other_over_wgdiff) = match &other {
            Some(other) => {
                let ratios: Vec<f64> = theirs[i].iter().zip(&ours[i]).map(|(t, o)| t / o).collect();
                (
                    Some(measure(other.name, other.device, &theirs[i])),
                    Some(median(&ratios)),
                )
            }
            None => (None, None),
        };
        rows.push(StepRow {
            batch,
            wgdiff_ms,
            other_ms,
            other_over_wgdiff,
        });
    }
    Ok((rows, measurements))
}
