//! The per-dispatch profiler: one record per dispatch with op names, kernel labels and
//! positive durations; nothing while off; pass timing (a browser's) and the CPU-timing
//! fallback; the report's sums and each op against a roof; the library's profiled training and
//! sampling steps, roofline points, the roof's memory probes and measured ceilings.

use crate::common::{gpu, rng};
use rand::Rng;
use std::path::Path;
use wgdiff::gpu::{KernelSpec, Profile, Record, Roof, Timing};
use wgdiff::models::preset;
use wgdiff::profile::{profile_sampling_step, profile_training_step, ModelSetup, Workload};
use wgdiff::roofline::memory_probe::{probe_sums, Work};
use wgdiff::roofline::{measure_ceilings, plot_png, roofline_points};
use wgdiff::{shader, AdapterChoice, DType, Gpu, Tensor};

/// A device of its own: the shared test device runs other tests' work concurrently,
/// which a profiler on it would record too.
fn own_gpu(without: wgpu::Features) -> Gpu {
    Gpu::new_blocking(AdapterChoice {
        without,
        ..Default::default()
    })
    .expect("a GPU adapter (install mesa-vulkan-drivers)")
}

/// tanh, add, sum and an 8x8x8 matmul, plus a plain dispatch of the fill kernel.
fn small_workload(gpu: &Gpu, x: &Tensor) -> wgdiff::Result<()> {
    let y = x.tanh()?;
    y.add(&y)?.sum_all()?;
    x.matmul(x)?;
    let fill = gpu.kernel(&KernelSpec {
        source: shader!("fill"),
        entry: "fill",
        defines: &[],
        inputs: 0,
        outputs: 1,
        texels: 0,
    });
    gpu.dispatch(&fill, &[4, 0], &[], &[x.buffer()], [1, 1, 1]);
    Ok(())
}

fn check_records(gpu: &Gpu, timing: Timing) {
    let x = Tensor::from_f32(gpu, &[8, 8], &[0.5; 64]).unwrap();
    small_workload(gpu, &x).unwrap(); // warm-up: compiles and autotunes
    gpu.sync().unwrap();
    assert_eq!(gpu.profiler().timing(), timing);
    gpu.profiler().start().unwrap();
    assert!(gpu.profiler().is_on());
    small_workload(gpu, &x).unwrap();
    let profile = gpu.profiler().stop_blocking().unwrap();
    assert!(!gpu.profiler().is_on());
    assert_eq!(profile.timing, timing);
    let names: Vec<&str> = profile.records.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["tanh", "add", "sum", "matmul", "fill::fill"],
        "{profile:?}"
    );
    let kernels: Vec<&str> = profile.records.iter().map(|r| r.kernel.as_str()).collect();
    assert_eq!(kernels[0], "elementwise::unary_forward");
    assert_eq!(kernels[3], "matmul_blocked::matmul_blocked");
    for r in &profile.records {
        assert!(r.duration_ns > 0.0, "{r:?}");
    }
    let mm = &profile.records[3];
    assert_eq!(mm.flops, 2.0 * 8.0 * 8.0 * 8.0);
    assert_eq!(mm.bytes, 3 * 64 * 4);
    assert_eq!(profile.records[0].bytes, 2 * 64 * 4);
    assert_eq!((profile.records[4].flops, profile.records[4].bytes), (0.0, 0));
    assert!(profile.wall_ns.unwrap() > 0.0);
    assert!(profile.table().contains("tanh"));
}

#[test]
fn records_every_dispatch_with_its_name_and_cost() {
    let gpu = own_gpu(wgpu::Features::empty());
    let timing = gpu.profiler().timing();
    check_records(&gpu, timing);
}

#[test]
fn cpu_timing_fallback_without_timestamp_queries() {
    let gpu = own_gpu(
        wgpu::Features::TIMESTAMP_QUERY
            | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES
            | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS,
    );
    check_records(&gpu, Timing::Cpu);
    gpu.profiler().start().unwrap();
    Tensor::zeros(&gpu, &[4], DType::F32).unwrap();
    let table = gpu.profiler().stop_blocking().unwrap().table();
    assert!(table.contains("CPU wall clock"), "{table}");
}

#[test]
fn pass_timing_without_timestamps_inside_passes() {
    // What a browser's WebGPU offers: timestamps only at the beginning and end of passes.
    let gpu = own_gpu(
        wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS,
    );
    check_records(&gpu, Timing::Pass);
    gpu.profiler().start().unwrap();
    Tensor::zeros(&gpu, &[4], DType::F32).unwrap();
    let table = gpu.profiler().stop_blocking().unwrap().table();
    assert!(table.contains("a pass per dispatch"), "{table}");
}

#[test]
fn off_records_nothing_and_misuse_is_an_error() {
    let gpu = own_gpu(wgpu::Features::empty());
    assert!(!gpu.profiler().is_on());
    assert!(gpu.profiler().stop_blocking().is_err());
    let x = Tensor::from_f32(&gpu, &[8, 8], &[0.5; 64]).unwrap();
    small_workload(&gpu, &x).unwrap();
    gpu.profiler().start().unwrap();
    assert!(gpu.profiler().start().is_err());
    let profile = gpu.profiler().stop_blocking().unwrap();
    assert!(profile.records.is_empty(), "{profile:?}");
    // Still usable afterwards.
    assert_eq!(x.tanh().unwrap().to_vec().unwrap().len(), 64);
}

#[test]
fn rows_sum_calls_and_shares() {
    let record = |name: &str, ns: f64, flops: f64, bytes: u64| Record {
        name: name.into(),
        kernel: "k".into(),
        start_ns: 0.0,
        duration_ns: ns,
        flops,
        bytes,
    };
    let profile = Profile {
        timing: Timing::Device,
        records: vec![
            record("matmul", 3e6, 6e6, 3000),
            record("add", 1e6, 0.0, 1000),
            record("matmul", 1e6, 2e6, 1000),
        ],
        wall_ns: Some(6e6),
        roof: None,
    };
    let rows = profile.rows();
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].op.as_str(), rows[0].calls), ("matmul", 2));
    assert!((rows[0].total_ms - 4.0).abs() < 1e-9 && (rows[0].mean_ms - 2.0).abs() < 1e-9);
    assert!((rows[0].device_pct - 80.0).abs() < 1e-9);
    assert!((rows[0].flop_per_byte.unwrap() - 2000.0).abs() < 1e-9);
    assert!((rows[0].gflops.unwrap() - 2.0).abs() < 1e-9);
    assert_eq!(rows[1].flop_per_byte, None);
    let trace: serde_json::Value = serde_json::from_str(&profile.chrome_trace()).unwrap();
    assert_eq!(trace["traceEvents"].as_array().unwrap().len(), 3);
    for line in profile.json_lines().lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(row.get("gflops").is_some() && row.get("share_pct").is_none());
        assert!(row.get("bound").is_none(), "no roof, no bound: {row}");
    }
    assert!(!profile.table().contains("of bound"));

    // Against a roof of 4 GFLOP/s, 1 GB/s and 100 us a dispatch: the matmuls' 8 MFLOP take at
    // least 2 ms (their 4 KB 4 us, their 2 dispatches 200 us), the add's 1 KB and 1 dispatch
    // 100 us.
    let roofed = Profile {
        roof: Some(Roof {
            gflops: 4.0,
            gbytes_per_s: 1.0,
            dispatch_us: 100.0,
        }),
        ..profile.clone()
    };
    let rows = roofed.rows();
    assert_eq!(rows[0].bound, Some("FMA"));
    assert!((rows[0].bound_ms.unwrap() - 2.0).abs() < 1e-9, "{:?}", rows[0]);
    assert!(
        (rows[0].of_bound_pct.unwrap() - 50.0).abs() < 1e-9,
        "{:?}",
        rows[0]
    );
    assert_eq!(rows[1].bound, Some("dispatch"));
    assert!(
        (rows[1].of_bound_pct.unwrap() - 10.0).abs() < 1e-9,
        "{:?}",
        rows[1]
    );
    let memory_bound = Roof {
        gbytes_per_s: 1e-6,
        ..roofed.roof.unwrap()
    };
    assert_eq!(memory_bound.bound(6e6, 3000.0, 1).1, "memory");
    let table = roofed.table();
    assert!(
        table.contains("of bound") && table.contains("FMA") && table.contains("50.0%"),
        "{table}"
    );
    for line in roofed.json_lines().lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(row["of_bound_pct"].as_f64().unwrap() > 0.0, "{row}");
    }
}

/// The sum invocation `i` of the memory probe `entry` stores (shaders/memory_probe.wgsl,
/// gather_probe.wgsl), in plain Rust: `data` holds vec4s (4 f32s each) except for the gather.
fn memory_probe_reference(entry: &str, data: &[f32], i: usize, rounds: usize, stride: usize) -> f32 {
    let reads = 8 * rounds;
    match entry {
        "read_vec4" => {
            let mask = data.len() / 4 - 1;
            (0..reads)
                .map(|s| (s * stride + i) & mask)
                .map(|e| data[4 * e..4 * e + 4].iter().sum::<f32>())
                .sum()
        }
        "read_gather" => {
            let mask = data.len() - 1;
            (0..reads)
                .flat_map(|s| (0..16).map(move |q| (i * 16 + s * stride + q) & mask))
                .map(|e| data[e])
                .sum()
        }
        "read_workgroup" => {
            let mask = data.len() / 4 - 1;
            let tile_base = (i / 64) * 1024;
            (0..reads)
                .map(|s| (tile_base + ((i % 64 + s * 64) & 1023)) & mask)
                .map(|e| data[4 * e..4 * e + 4].iter().sum::<f32>())
                .sum()
        }
        other => panic!("no memory probe {other}"),
    }
}

#[test]
fn the_memory_probes_read_what_the_cpu_reads() {
    let mut r = rng();
    // Small integers, so every sum is exact in f32 whatever its order.
    let data: Vec<f32> = (0..4096).map(|_| r.random_range(0..8u32) as f32).collect();
    for entry in ["read_vec4", "read_gather", "read_workgroup"] {
        let rounds = r.random_range(1..4usize);
        let stride = r.random_range(1..200usize);
        let workgroups = 2;
        let sums = pollster::block_on(probe_sums(
            gpu(),
            entry,
            &data,
            rounds as u32,
            stride as u32,
            workgroups,
        ))
        .unwrap();
        let want: Vec<f32> = (0..64 * workgroups as usize)
            .map(|i| memory_probe_reference(entry, &data, i, rounds, stride))
            .collect();
        assert_eq!(sums, want, "{entry}: {rounds} rounds, stride {stride}");
    }
}

#[test]
fn the_texel_and_uniform_probes_read_what_the_cpu_reads() {
    use wgdiff::roofline::texel_probe::{self, ELEMENTS};
    let mut r = rng();
    let data: Vec<f32> = (0..4 * ELEMENTS)
        .map(|_| r.random_range(0..8u32) as f32)
        .collect();
    for (variant, _) in texel_probe::VARIANTS {
        let rounds = r.random_range(1..4usize);
        let stride = r.random_range(1..300usize);
        let sums = pollster::block_on(texel_probe::probe_sums(
            gpu(),
            variant,
            &data,
            rounds as u32,
            stride as u32,
            2,
        ))
        .unwrap();
        // The pattern of read_vec4 over the same vec4s.
        let want: Vec<f32> = (0..128)
            .map(|i| memory_probe_reference("read_vec4", &data, i, rounds, stride))
            .collect();
        assert_eq!(sums, want, "{variant}: {rounds} rounds, stride {stride}");
    }
    let short = pollster::block_on(texel_probe::probe_sums(gpu(), "read-texel", &data[..64], 1, 1, 1));
    assert!(short.unwrap_err().to_string().contains("4096 vec4s"));
}

#[test]
fn every_memory_probe_runs_and_counts_its_work() {
    let gpu = gpu();
    for probe in wgdiff::roofline::memory_probe::probes(gpu).unwrap() {
        probe.dispatch(gpu);
        match probe.work {
            Work::Bytes(b) => assert!(b >= (1 << 20) as f64, "{}: {b} bytes", probe.variant),
            Work::Each(n) => assert!(n >= 1.0, "{}: {n}", probe.variant),
        }
    }
    for probe in wgdiff::roofline::texel_probe::probes(gpu).unwrap() {
        probe.dispatch(gpu);
        assert!(
            matches!(probe.work, Work::Bytes(b) if b >= (1 << 20) as f64),
            "{}",
            probe.variant
        );
    }
    gpu.sync().unwrap();
}

#[test]
fn long_profiles_span_several_query_batches() {
    let gpu = own_gpu(wgpu::Features::empty());
    let x = Tensor::from_f32(&gpu, &[16], &[0.5; 16]).unwrap();
    x.tanh().unwrap();
    gpu.sync().unwrap();
    gpu.profiler().start().unwrap();
    for _ in 0..2 {
        for _ in 0..1100 {
            x.tanh().unwrap();
        }
        gpu.sync().unwrap(); // maps the finished batches, decoded at the next flush
    }
    let profile = gpu.profiler().stop_blocking().unwrap();
    assert_eq!(profile.records.len(), 2200);
    assert!(profile
        .records
        .iter()
        .all(|r| r.name == "tanh" && r.duration_ns > 0.0));
    assert_eq!(profile.rows()[0].calls, 2200);
}

/// Checks each roofline point against the records of its op row; returns the summed shares.
fn check_roofline_points(profile: &Profile) -> f64 {
    let points = roofline_points(profile);
    let rows: Vec<_> = profile
        .rows()
        .into_iter()
        .filter(|r| r.flop_per_byte.is_some() && r.gflops.is_some())
        .collect();
    assert!(!points.is_empty() && points.len() == rows.len(), "{points:?}");
    let all_ns = profile.op_ns();
    for (p, row) in points.iter().zip(&rows) {
        assert_eq!(p.op, row.op);
        let mine = profile
            .records
            .iter()
            .filter(|r| r.name == row.op && r.kernel == row.kernel);
        let (flops, bytes, ns) = mine.fold((0.0, 0.0, 0.0), |(f, b, t), r| {
            (f + r.flops, b + r.bytes as f64, t + r.duration_ns)
        });
        assert!(flops > 0.0 && bytes > 0.0, "{p:?}");
        assert!((p.intensity - flops / bytes).abs() <= 1e-9 * p.intensity, "{p:?}");
        assert!((p.gflops - flops / ns).abs() <= 1e-9 * p.gflops, "{p:?}");
        assert!((p.share - ns / all_ns).abs() <= 1e-9, "{p:?}");
    }
    points.iter().map(|p| p.share).sum()
}

#[test]
fn roofline_points_and_measured_ceilings() {
    let gpu = own_gpu(wgpu::Features::empty());
    // A U-Net training step: every op with FLOPs is a point at its own FLOP/byte.
    let unet = pollster::block_on(profile_training_step(&gpu, &preset("tiny").unwrap(), 1)).unwrap();
    let shares = check_roofline_points(&unet);
    assert!(shares > 0.0 && shares <= 1.0 + 1e-9, "{shares}");
    // Matmuls forward and backward: most of the step's time has FLOPs.
    let setup = ModelSetup {
        preset: "tiny".into(),
        batch: 1,
        checkpoint: None,
    };
    let profiled = pollster::block_on(wgdiff::profile::run(&gpu, Workload::Matmul, &setup, 1)).unwrap();
    assert_eq!(profiled.steps.len(), 1);
    // The first step ran every kernel of the later one (and perhaps the autotuner's candidates).
    let kernels = |p: &wgdiff::gpu::Profile| {
        let mut k: Vec<String> = p.records.iter().map(|r| r.kernel.clone()).collect();
        k.sort();
        k.dedup();
        k
    };
    let first = kernels(&profiled.first);
    assert!(
        kernels(&profiled.steps[0]).iter().all(|k| first.contains(k)),
        "{first:?}"
    );
    assert_eq!(profiled.first_use().len(), first.len());
    let shares = check_roofline_points(&profiled.steps[0]);
    assert!(shares > 0.5 && shares <= 1.0 + 1e-9, "shares sum to {shares}");

    let ceilings = pollster::block_on(measure_ceilings(&gpu)).unwrap();
    for v in [ceilings.gflops, ceilings.gbytes_per_s, ceilings.dispatch_us] {
        assert!(v.is_finite() && v > 0.0, "{ceilings:?}");
    }
    assert!(
        ceilings.compute.contains("fma-f32") && ceilings.bandwidth.contains("vec4"),
        "{ceilings:?}"
    );

    let png = plot_png(
        Path::new("roofline.png"),
        "tiny U-Net",
        &roofline_points(&unet),
        &ceilings,
    )
    .unwrap();
    let decoded = image::load_from_memory(&png).unwrap();
    assert!(decoded.width() > 100 && decoded.height() > 100);
}

#[test]
fn a_sampling_step_skipping_a_level_counts_fewer_flops() {
    let gpu = own_gpu(wgpu::Features::empty());
    let model = preset("tiny").unwrap();
    let net = model.build(&gpu, 0).unwrap();
    let flops = |skip: usize| -> f64 {
        let profile = pollster::block_on(profile_sampling_step(&gpu, net.as_ref(), &model, 2, skip)).unwrap();
        assert!(!profile.records.is_empty());
        profile.records.iter().map(|r| r.flops).sum()
    };
    let (full, skipped) = (flops(0), flops(1));
    assert!(
        skipped > 0.0 && skipped < full,
        "skip 0: {full} FLOPs, skip 1: {skipped}"
    );
}
