//! `wgdiff bench mac`: the adapter's roof, interleaved: the multiply-accumulate probes (f32 FMAs,
//! int8 words unpacked to f32, `dot4I8Packed`: can int8 pay here?) and the memory probes.

use super::{run_interleaved, Case, Measurement};
use crate::roofline::cpu_fma;
use crate::roofline::mac_probe::{products_per_run, run_shape, Probe, VARIANTS};
use crate::roofline::memory_probe::{self, Work};
use crate::roofline::texel_probe;
use crate::{Gpu, Result};

/// The row of the host CPU's own FMAs ([`cpu_fma`]), where it has AVX2 and FMA.
pub const CPU_FMA: &str = "cpu-fma-f32";

/// Times every probe `reps` times after `warmup` runs, interleaved: the multiply-accumulate
/// probes first (a row's GFLOP/s counts a product as two operations whatever its type), then
/// the memory probes (GB/s read, or microseconds per dispatch or submit), then the texel and
/// uniform reads, then the host CPU's own AVX2 FMAs on every core (the ceiling of a CPU
/// adapter's fma-f32; x86-64 with AVX2 and FMA only).
pub fn run(gpu: &Gpu, warmup: usize, reps: usize) -> Result<Vec<Measurement>> {
    let probes = VARIANTS
        .iter()
        .map(|&(variant, entry)| Ok((variant, Probe::timed(gpu, entry)?)))
        .collect::<Result<Vec<_>>>()?;
    let memory_probes = memory_probe::probes(gpu)?;
    let texel_probes = texel_probe::probes(gpu)?;
    let mut cases: Vec<Case> = probes
        .iter()
        .map(|(variant, probe)| Case {
            peer: None,
            variant: variant.to_string(),
            shape: run_shape(),
            pass: None,
            flops: 2.0 * products_per_run(),
            bytes: 0.0,
            run: Box::new(move || {
                probe.run(gpu);
                Ok(())
            }),
        })
        .collect();
    cases.extend(
        memory_probes
            .iter()
            .map(|p| probe_case(p.variant, &p.shape, p.work, move || p.dispatch(gpu))),
    );
    cases.extend(
        texel_probes
            .iter()
            .map(|p| probe_case(p.variant, &p.shape, p.work, move || p.dispatch(gpu))),
    );
    let threads = cpu_fma::threads();
    if cpu_fma::available() {
        cases.push(Case {
            peer: None,
            variant: CPU_FMA.to_string(),
            shape: format!(
                "host CPU: {threads} threads x {} chains of 8-lane AVX2 FMAs x {}",
                cpu_fma::CHAINS,
                cpu_fma::ITERATIONS
            ),
            pass: None,
            flops: cpu_fma::flops_per_run(threads),
            bytes: 0.0,
            run: Box::new(move || {
                cpu_fma::run(threads);
                Ok(())
            }),
        });
    }
    let mut rows = run_interleaved(gpu, "mac", &cases, warmup, reps)?;
    for (row, probe) in rows[VARIANTS.len()..].iter_mut().zip(&memory_probes) {
        if let Work::Each(count) = probe.work {
            row.us_each = Some(row.median_ms * 1e3 / count);
        }
    }
    Ok(rows)
}

/// A memory or texel probe's case: its bytes read, or none counted (dispatches, submits).
fn probe_case<'a>(variant: &str, shape: &str, work: Work, run: impl Fn() + 'a) -> Case<'a> {
    Case {
        peer: None,
        variant: variant.to_string(),
        shape: shape.to_string(),
        pass: None,
        flops: 0.0,
        bytes: match work {
            Work::Bytes(b) => b,
            Work::Each(_) => 0.0,
        },
        run: Box::new(move || {
            run();
            Ok(())
        }),
    }
}

/// What the rows of [`run`] say of the adapter, a line each: the integer probes against
/// fma-f32, and the reads per FMA the adapter can feed (the bytes a kernel may load per
/// multiply-add before loads, not FMAs, bound it).
pub fn summary(rows: &[Measurement]) -> Vec<String> {
    let find = |v: &str| rows.iter().find(|r| r.variant == v);
    let Some(fma) = find(VARIANTS[0].0) else {
        return Vec::new();
    };
    let mut lines: Vec<String> = Vec::new();
    if let (Some(cpu), Some(gflops)) = (find(CPU_FMA), fma.gflops) {
        lines.push(format!(
            "fma-f32: {:.2}x the host CPU's own AVX2 FMA rate ({}; a CPU adapter cannot pass 1.0)",
            gflops / cpu.gflops.unwrap_or(f64::NAN),
            cpu.shape
        ));
    }
    lines.extend(VARIANTS[1..].iter().filter_map(|(v, _)| find(v)).map(|r| {
        format!(
            "{}: {:.2}x the products per second of fma-f32",
            r.variant,
            fma.median_ms / r.median_ms
        )
    }));
    let fmas_per_s = fma.gflops.unwrap_or(0.0) / 2.0;
    for r in rows {
        if let (Some(gbps), true) = (r.gbps, fmas_per_s > 0.0) {
            lines.push(format!(
                "{}: {:.2} GB/s, {:.3} bytes per fma-f32 product ({:.0} f32 products per f32 read)",
                r.variant,
                gbps,
                gbps / fmas_per_s,
                4.0 * fmas_per_s / gbps
            ));
        }
    }
    lines
}
