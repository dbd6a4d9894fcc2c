//! The roofline model of a profiled step: the device's measured compute and bandwidth
//! ceilings, one point per op (FLOP/byte against achieved GFLOP/s), and a log-log PNG plot.

use crate::gpu::Profile;
use crate::ops::matmul::matmul_flops;
use crate::ops::random::Rng;
use crate::ops::MatmulKernel;
use crate::{DType, Error, Gpu, Result};
use serde::Serialize;

/// The device's ceilings, measured with the engine's own kernels.
#[derive(Clone, Debug, Serialize)]
pub struct Ceilings {
    /// Compute ceiling: f32 GFLOP/s of the best matmul kernel on a large square matmul.
    pub gflops: f64,
    /// The kernel and shape the compute ceiling was measured on.
    pub matmul: String,
    /// Bandwidth ceiling: GB/s (bytes read + written) of an elementwise map over a large buffer.
    pub gbytes_per_s: f64,
    /// The kernel and size the bandwidth ceiling was measured on.
    pub copy: String,
}

impl Ceilings {
    /// The ridge point: the intensity (FLOP/byte) above which an op can be compute bound.
    pub fn ridge(&self) -> f64 {
        self.gflops / self.gbytes_per_s
    }

    /// The attainable GFLOP/s at an intensity: min(compute ceiling, intensity x bandwidth).
    pub fn roof(&self, intensity: f64) -> f64 {
        self.gflops.min(intensity * self.gbytes_per_s)
    }
}

/// Side of the square matmul the compute ceiling is measured on.
const MATMUL_SIZE: usize = 1024;
/// f32 elements of the bandwidth measurement (64 MiB in, 64 MiB out: past CPU caches).
const COPY_ELEMENTS: usize = 16 << 20;
/// Timed runs per ceiling (after one warm-up run); the fastest counts.
const RUNS: usize = 5;

/// Measures the compute ceiling (the blocked f32 matmul, autotuned as `wgdiff bench matmul`
/// runs it, on 1024x1024x1024) and the bandwidth ceiling (the elementwise map `y = 2x` on
/// 16M f32, bytes = read + written): one warm-up run, then the fastest of 5 runs each, timed
/// by the wall clock around [`Gpu::finish`].
pub async fn measure_ceilings(gpu: &Gpu) -> Result<Ceilings> {
    let mut rng = Rng::new(7);
    let n = MATMUL_SIZE;
    let a = rng.normal(gpu, &[n, n], 0.0, 1.0, DType::F32)?;
    let b = rng.normal(gpu, &[n, n], 0.0, 1.0, DType::F32)?;
    let matmul_ns = fastest_ns(gpu, &|| {
        a.matmul_with(&b, false, false, MatmulKernel::Blocked).map(drop)
    })
    .await?;
    drop((a, b));
    let elements = COPY_ELEMENTS.min((gpu.max_binding_bytes() / 4) as usize);
    let x = rng.uniform(gpu, &[elements], -1.0, 1.0, DType::F32)?;
    let copy_ns = fastest_ns(gpu, &|| x.mul_scalar(2.0).map(drop)).await?;
    let mib = (elements * 4) as f64 / (1u64 << 20) as f64;
    let count = match elements % (1 << 20) {
        0 => format!("{}M", elements >> 20),
        _ => elements.to_string(),
    };
    Ok(Ceilings {
        gflops: matmul_flops(1, n, n, n) / matmul_ns,
        matmul: format!("matmul_blocked f32 {n}x{n}x{n}"),
        gbytes_per_s: (2 * elements * 4) as f64 / copy_ns,
        copy: format!("elementwise y = 2x on {count} f32, {mib:.0} MiB read + {mib:.0} MiB written"),
    })
}

/// The shortest of [`RUNS`] timed runs of `run` after one warm-up run, in nanoseconds, by the
/// wall clock with the device idle before and after each run. Each run lasts milliseconds, so
/// the wait's overhead (tens of microseconds) hardly counts; device timestamps of a lone
/// dispatch proved unreliable while another thread (the app's UI) submits to the same queue.
async fn fastest_ns(gpu: &Gpu, run: &dyn Fn() -> Result<()>) -> Result<f64> {
    run()?;
    gpu.finish().await?;
    let mut best = f64::INFINITY;
    for _ in 0..RUNS {
        let start = web_time::Instant::now();
        run()?;
        gpu.finish().await?;
        best = best.min(start.elapsed().as_nanos() as f64);
    }
    if best.is_finite() && best > 0.0 {
        Ok(best)
    } else {
        Err(Error::Profiler(format!(
            "measuring the device's ceilings: a run took {best} ns, which cannot be timed"
        )))
    }
}

/// One op of a profile on the roofline.
#[derive(Clone, Debug, Serialize)]
pub struct RooflinePoint {
    pub op: String,
    /// FLOP per byte moved.
    pub intensity: f64,
    /// Achieved GFLOP/s over the op's device time.
    pub gflops: f64,
    /// Fraction of the step's summed op time, in [0, 1].
    pub share: f64,
}

/// One point per op row of `profile` ([`Profile::rows`], largest time first); rows without
/// counted FLOPs or bytes (copies, fills, memory-bound ops) are left out.
pub fn roofline_points(profile: &Profile) -> Vec<RooflinePoint> {
    profile
        .rows()
        .into_iter()
        .filter_map(|r| {
            Some(RooflinePoint {
                intensity: r.flop_per_byte?,
                gflops: r.gflops?,
                share: r.device_pct / 100.0,
                op: r.op,
            })
        })
        .collect()
}

#[cfg(not(target_arch = "wasm32"))]
pub use plot::plot_png;

#[cfg(not(target_arch = "wasm32"))]
mod plot {
    use super::{Ceilings, RooflinePoint};
    use crate::plot_font::{plot_error, render_png, FONT};
    use crate::Result;
    use plotters::prelude::*;
    use std::path::Path;

    const SIZE: (u32, u32) = (1000, 700);
    /// Ops named on the plot (largest share first).
    const LABELLED: usize = 8;
    const COMPUTE: RGBColor = RGBColor(214, 39, 40);
    const MEMORY: RGBColor = RGBColor(31, 119, 180);
    const OPS: RGBColor = RGBColor(44, 160, 44);

    /// A short number for axis labels and legends.
    fn short(v: f64) -> String {
        if v >= 100.0 || (v >= 1.0 && (v - v.round()).abs() < 1e-9 * v) {
            format!("{v:.0}")
        } else if v >= 1.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.2}")
        }
    }

    /// The roofline as a PNG: log-log axes (FLOP/byte, GFLOP/s), the roof
    /// min(compute ceiling, intensity x bandwidth) with its ridge point, every op a circle
    /// whose area is its share of the device time, the largest ones named, and the ceilings
    /// in the legend. Written atomically.
    pub fn plot_png(path: &Path, title: &str, points: &[RooflinePoint], ceilings: &Ceilings) -> Result<()> {
        let err = |e: &dyn std::fmt::Display| plot_error(path, e);
        let good = |v: f64| v.is_finite() && v > 0.0;
        if !good(ceilings.gflops) || !good(ceilings.gbytes_per_s) {
            return Err(err(&format!("ceilings must be positive, got {ceilings:?}")));
        }
        let points: Vec<&RooflinePoint> = points
            .iter()
            .filter(|p| good(p.intensity) && good(p.gflops))
            .collect();
        let ridge = ceilings.ridge();
        let x_lo = points.iter().map(|p| p.intensity).fold(ridge, f64::min) / 4.0;
        let x_hi = points.iter().map(|p| p.intensity).fold(ridge, f64::max) * 4.0;
        let y_hi = points.iter().map(|p| p.gflops).fold(ceilings.gflops, f64::max) * 3.0;
        let y_lo = points
            .iter()
            .map(|p| p.gflops)
            .fold(ceilings.roof(x_lo), f64::min)
            / 3.0;

        render_png(path, SIZE, |root| {
            let mut chart = ChartBuilder::on(root)
                .caption(title, (FONT, 20))
                .margin(15)
                .x_label_area_size(45)
                .y_label_area_size(70)
                .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())
                .map_err(|e| err(&e))?;
            chart
                .configure_mesh()
                .x_desc("arithmetic intensity (FLOP/byte, log)")
                .y_desc("GFLOP/s (log)")
                .x_labels(8)
                .y_labels(8)
                .x_label_formatter(&|v| short(*v))
                .y_label_formatter(&|v| short(*v))
                .label_style((FONT, 14))
                .draw()
                .map_err(|e| err(&e))?;

            // The roof in two labelled pieces: the bandwidth slope up to the ridge, then flat.
            let steps = 64;
            let slope: Vec<(f64, f64)> = (0..=steps)
                .map(|i| {
                    let x = x_lo * (ridge / x_lo).powf(i as f64 / steps as f64);
                    (x, x * ceilings.gbytes_per_s)
                })
                .collect();
            chart
                .draw_series(LineSeries::new(slope, MEMORY.stroke_width(3)))
                .map_err(|e| err(&e))?
                .label(format!(
                    "bandwidth {} GB/s ({})",
                    short(ceilings.gbytes_per_s),
                    ceilings.copy
                ))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], MEMORY.stroke_width(3)));
            chart
                .draw_series(LineSeries::new(
                    [(ridge, ceilings.gflops), (x_hi, ceilings.gflops)],
                    COMPUTE.stroke_width(3),
                ))
                .map_err(|e| err(&e))?
                .label(format!(
                    "compute {} GFLOP/s ({})",
                    short(ceilings.gflops),
                    ceilings.matmul
                ))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], COMPUTE.stroke_width(3)));
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((ridge, ceilings.gflops))
                        + Circle::new((0, 0), 5, BLACK.filled())
                        + Text::new(
                            format!("ridge {} FLOP/B", short(ridge)),
                            (8, 8),
                            (FONT, 14).into_font(),
                        ),
                ))
                .map_err(|e| err(&e))?;

            // Ops: circle area proportional to the share of device time.
            let radius = |share: f64| (3.0 + 22.0 * share.clamp(0.0, 1.0).sqrt()) as i32;
            chart
                .draw_series(
                    points.iter().map(|p| {
                        Circle::new((p.intensity, p.gflops), radius(p.share), OPS.mix(0.45).filled())
                    }),
                )
                .map_err(|e| err(&e))?
                .label("ops (area ~ share of device time)")
                .legend(|(x, y)| Circle::new((x + 10, y), 5, OPS.mix(0.45).filled()));
            chart
                .draw_series(
                    points
                        .iter()
                        .map(|p| Circle::new((p.intensity, p.gflops), radius(p.share), OPS.stroke_width(1))),
                )
                .map_err(|e| err(&e))?;
            let mut largest = points.clone();
            largest.sort_by(|a, b| b.share.total_cmp(&a.share));
            chart
                .draw_series(largest.iter().take(LABELLED).map(|p| {
                    EmptyElement::at((p.intensity, p.gflops))
                        + Text::new(
                            match 100.0 * p.share {
                                pct if pct < 1.0 => format!("{} <1%", p.op),
                                pct => format!("{} {pct:.0}%", p.op),
                            },
                            (radius(p.share) + 3, -7),
                            (FONT, 13).into_font(),
                        )
                }))
                .map_err(|e| err(&e))?;

            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .label_font((FONT, 13))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(|e| err(&e))?;
            Ok(())
        })
    }
}
