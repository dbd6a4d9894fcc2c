//! The roofline model of a profiled step: the device's ceilings measured by the roof's probes
//! (`mac_probe`, `memory_probe`), one point per op (FLOP/byte against GFLOP/s), a log-log PNG.

pub mod cpu_fma;
pub mod mac_probe;
pub mod memory_probe;
pub mod texel_probe;

use crate::gpu::{Profile, Roof};
use crate::{Error, Gpu, Result};
use memory_probe::Work;
use serde::Serialize;

/// The device's ceilings: `wgdiff bench mac`'s probes, not the engine's kernels, so that an op's
/// place under them says how much of the hardware it uses.
#[derive(Clone, Debug, Serialize)]
pub struct Ceilings {
    /// Compute ceiling: GFLOP/s of f32 FMAs from registers (the fma-f32 probe).
    pub gflops: f64,
    /// What the compute ceiling was measured on.
    pub compute: String,
    /// Bandwidth ceiling: GB/s of lane-contiguous vec4 storage reads, the faster of the
    /// streamed (64 MiB) and the cached (256 KiB) probe.
    pub gbytes_per_s: f64,
    /// What the bandwidth ceiling was measured on.
    pub bandwidth: String,
    /// Microseconds of an empty dispatch (256 in one submit).
    pub dispatch_us: f64,
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

    /// The ceilings as the profiler's [`Roof`], which bounds each op's time.
    pub fn as_roof(&self) -> Roof {
        Roof {
            gflops: self.gflops,
            gbytes_per_s: self.gbytes_per_s,
            dispatch_us: self.dispatch_us,
        }
    }
}

/// Timed runs per ceiling (after one warm-up run); the fastest counts.
const RUNS: usize = 5;

/// Measures the ceilings with `bench mac`'s probes: the fma-f32 probe, the streamed and the cached
/// vec4 reads, and the empty dispatch, each the fastest of 5 runs after a warm-up run, timed by
/// the wall clock around [`Gpu::finish`].
pub async fn measure_ceilings(gpu: &Gpu) -> Result<Ceilings> {
    let fma = mac_probe::Probe::timed(gpu, mac_probe::VARIANTS[0].1)?;
    let fma_ns = fastest_ns(gpu, &|| fma.run(gpu)).await?;
    let mut reads = Vec::new();
    for variant in ["read-vec4", "read-vec4-cached"] {
        let probe = memory_probe::probe(gpu, variant)?;
        let ns = fastest_ns(gpu, &|| probe.dispatch(gpu)).await?;
        if let Work::Bytes(bytes) = probe.work {
            reads.push((bytes / ns, format!("{variant}: {}", probe.shape)));
        }
    }
    let (gbytes_per_s, bandwidth) = reads
        .into_iter()
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .expect("two read probes");
    let dispatch = memory_probe::probe(gpu, "dispatch")?;
    let dispatch_ns = fastest_ns(gpu, &|| dispatch.dispatch(gpu)).await?;
    let Work::Each(dispatches) = dispatch.work else {
        unreachable!("the dispatch probe counts dispatches")
    };
    Ok(Ceilings {
        gflops: 2.0 * mac_probe::products_per_run() / fma_ns,
        compute: "fma-f32 probe: f32 FMAs from registers".into(),
        gbytes_per_s,
        bandwidth: format!("lane-contiguous vec4 reads ({bandwidth})"),
        dispatch_us: dispatch_ns * 1e-3 / dispatches,
    })
}

/// The shortest of [`RUNS`] timed runs of `run` after one warm-up run, in nanoseconds, by the
/// wall clock with the device idle before and after each run. Each run lasts milliseconds, so
/// the wait's overhead (tens of microseconds) hardly counts; device timestamps of a lone
/// dispatch proved unreliable while another thread (the app's UI) submits to the same queue.
async fn fastest_ns(gpu: &Gpu, run: &dyn Fn()) -> Result<f64> {
    run();
    gpu.finish().await?;
    let mut best = f64::INFINITY;
    for _ in 0..RUNS {
        let start = web_time::Instant::now();
        run();
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

pub use plot::plot_png;

mod plot {
    use super::{Ceilings, RooflinePoint};
    use crate::plot_font::{draw_legend, plot_error, png_bytes, Corner, LegendEntry, Mark, FONT};
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
    /// in the legend, as PNG bytes (`path` names it in errors).
    pub fn plot_png(
        path: &Path,
        title: &str,
        points: &[RooflinePoint],
        ceilings: &Ceilings,
    ) -> Result<Vec<u8>> {
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

        png_bytes(path, SIZE, |root| {
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
                .map_err(|e| err(&e))?;
            chart
                .draw_series(LineSeries::new(
                    [(ridge, ceilings.gflops), (x_hi, ceilings.gflops)],
                    COMPUTE.stroke_width(3),
                ))
                .map_err(|e| err(&e))?;
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
                .map_err(|e| err(&e))?;
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

            let legend = [
                LegendEntry {
                    name: format!(
                        "bandwidth {} GB/s ({})",
                        short(ceilings.gbytes_per_s),
                        ceilings.bandwidth
                    ),
                    colour: MEMORY.to_rgba(),
                    mark: Mark::Line(3),
                },
                LegendEntry {
                    name: format!(
                        "compute {} GFLOP/s ({})",
                        short(ceilings.gflops),
                        ceilings.compute
                    ),
                    colour: COMPUTE.to_rgba(),
                    mark: Mark::Line(3),
                },
                LegendEntry {
                    name: "ops (area ~ share of device time)".into(),
                    colour: OPS.mix(0.45),
                    mark: Mark::Dot(5),
                },
            ];
            let area = chart.plotting_area().strip_coord_spec();
            draw_legend(path, &area, &legend, Corner::LowerRight, 13)
        })
    }
}
