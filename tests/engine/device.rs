//! Device behaviour: pool reuse, limits, poisoning, and the fallback paths of a device
//! opened without SHADER_F16 and SUBGROUP.

use crate::common::*;
use crate::cpu;
use wgdiff::gpu::{size_class, BufferPool};
use wgdiff::ops::Unary;
use wgdiff::{AdapterChoice, DType, Error, Gpu, Tensor};

#[test]
fn pool_reuses_freed_buffers() {
    let gpu = gpu();
    let shape = [12_345];
    drop(Tensor::zeros(gpu, &shape, DType::F32).unwrap());
    let before = gpu.pool().stats();
    drop(Tensor::zeros(gpu, &shape, DType::F32).unwrap());
    let after = gpu.pool().stats();
    assert!(after.reused > before.reused, "{before:?} -> {after:?}");
}

#[test]
fn pool_counts_the_peak_device_memory_it_held() {
    let gpu = gpu();
    let pool = BufferPool::default();
    let (a, b, c) = (size_class(10_000), size_class(50_000), size_class(200_000));
    let first = pool.take(&gpu.device, 10_000);
    let second = pool.take(&gpu.device, 50_000);
    drop(first);
    let again = pool.take(&gpu.device, 10_000); // reused: the pool holds no more memory
    let s = pool.stats();
    assert_eq!(
        (s.peak_held_bytes, s.peak_live_bytes, s.created, s.reused),
        (a + b, a + b, 2, 1)
    );
    drop((second, again));
    let _third = pool.take(&gpu.device, 200_000); // a new buffer on top of the idle ones
    let s = pool.stats();
    assert_eq!(
        (s.peak_held_bytes, s.live_bytes, s.pooled_bytes),
        (a + b + c, c, a + b)
    );
    // the peaks of one piece of work: restarted from what is held now
    pool.reset_peaks();
    let _fourth = pool.take(&gpu.device, 10_000); // reused
    let s = pool.stats();
    assert_eq!((s.peak_live_bytes, s.peak_held_bytes), (a + c, a + b + c));
}

#[test]
fn pool_serves_a_miss_from_an_idle_buffer_up_to_twice_its_size() {
    let gpu = gpu();
    let pool = BufferPool::default();
    let idle = size_class(60_000);
    drop(pool.take(&gpu.device, 60_000));
    let smaller = pool.take(&gpu.device, 40_000); // the idle 60 000 bytes are at most twice
    assert_eq!(smaller.raw().size(), idle);
    let s = pool.stats();
    assert_eq!(
        (s.created, s.reused, s.live_bytes, s.pooled_bytes),
        (1, 1, idle, 0)
    );
    drop(smaller);
    let tiny = pool.take(&gpu.device, 20_000); // more than twice: a buffer of its own size
    assert_eq!(tiny.raw().size(), size_class(20_000));
    let s = pool.stats();
    assert_eq!(
        (s.created, s.live_bytes, s.pooled_bytes),
        (2, size_class(20_000), idle)
    );
}

#[test]
fn buffers_over_the_binding_limit_are_a_clear_error() {
    let gpu = gpu();
    let too_many = (gpu.max_binding_bytes() / 4 + 1) as usize;
    match Tensor::empty(gpu, &[too_many], DType::F32) {
        Err(Error::TooLarge { what, .. }) => assert!(what.contains(&too_many.to_string())),
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[test]
fn poison_marks_new_tensors_as_nan() {
    let t = Tensor::empty(gpu(), &[5], DType::F32).unwrap();
    assert!(t.to_vec().unwrap().iter().all(|v| v.is_nan()));
}

#[test]
fn device_without_f16_or_subgroups_still_runs_f16_ops() {
    let gpu = Gpu::new_blocking(AdapterChoice {
        without: wgpu::Features::SHADER_F16 | wgpu::Features::SUBGROUP,
        ..Default::default()
    })
    .unwrap();
    gpu.set_poison(true);
    assert!(!gpu.has_f16() && !gpu.has_subgroups());
    let x = normal_vec(&mut rng(), 37);
    let xr = round_to(&x, DType::F16);
    let f: Vec<f32> = xr.iter().map(|&v| v as f32).collect();
    let t = Tensor::from_slice(&gpu, &[37], &f, DType::F16)
        .unwrap()
        .requires_grad();
    let y = t.unary(Unary::Silu).unwrap();
    assert_eq!(y.dtype(), DType::F16);
    assert_close(
        "silu f16 fallback",
        &download(&y),
        &cpu::unary(Unary::Silu, &xr),
        1e-2,
    );
    let s = y.sum_all().unwrap();
    assert_close(
        "sum fallback",
        &download(&s),
        &[cpu::unary(Unary::Silu, &xr).iter().sum()],
        1e-2,
    );
    wgdiff::backward(&s).unwrap();
    assert_eq!(t.grad().unwrap().dtype(), DType::F16);
    let m = t
        .reshape(&[1, 37])
        .unwrap()
        .matmul(&t.reshape(&[37, 1]).unwrap())
        .unwrap();
    assert_close(
        "matmul fallback",
        &download(&m),
        &[xr.iter().map(|v| v * v).sum()],
        1e-2,
    );
}

#[test]
fn norm_and_resample_fall_back_to_f32_without_f16() {
    let gpu = Gpu::new_blocking(AdapterChoice {
        without: wgpu::Features::SHADER_F16,
        ..Default::default()
    })
    .unwrap();
    gpu.set_poison(true);
    let shape = [2, 4, 3, 5];
    let mut r = rng();
    let up = |s: &[usize], v: &[f64]| {
        let f: Vec<f32> = round_to(v, DType::F16).iter().map(|&x| x as f32).collect();
        Tensor::from_slice(&gpu, s, &f, DType::F16)
            .unwrap()
            .requires_grad()
    };
    let xv = normal_vec(&mut r, 120);
    let (x, ones, zeros) = (up(&shape, &xv), up(&[4], &[1.0; 4]), up(&[4], &[0.0; 4]));
    let nc = up(&[2, 4], &[0.0; 8]);
    let y = x
        .group_norm_scale_shift_silu(2, &ones, &zeros, &nc, &nc, 1e-5)
        .unwrap()
        .resize_bicubic(4, 7)
        .unwrap();
    assert_eq!(y.dtype(), DType::F16);
    let xr = round_to(&xv, DType::F16);
    let gn = cpu::norm(&xr, &shape, 2, false, &[1.0; 4], &[0.0; 4], 1e-5);
    let want = cpu::resize_bicubic(&cpu::unary(Unary::Silu, &gn), &shape, 4, 7);
    assert_close("group norm + bicubic f16 fallback", &download(&y), &want, 1e-2);
    wgdiff::backward(&y.sum_all().unwrap()).unwrap();
    assert_eq!(x.grad().unwrap().dtype(), DType::F16);
}

#[test]
fn autotune_choices_persist_in_the_cache_file() {
    let dir = std::env::temp_dir().join(format!("wgdiff-tune-{}", std::process::id()));
    let path = dir.join("autotune.json");
    let labels = vec!["slow".to_string(), "fast".to_string()];
    let first = wgdiff::gpu::Autotuner::default();
    first.use_cache_file(path.clone());
    // Candidate 1 records less work, so it is measured faster.
    let t = Tensor::zeros(gpu(), &[1 << 16], DType::F32).unwrap();
    let chosen = first
        .choose(gpu(), "test:key", &labels, 0, |c| {
            for _ in 0..(if c == 0 { 200 } else { 1 }) {
                drop(t.add_scalar(1.0)?);
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(chosen, 1);
    assert!(first.seconds_measuring() > 0.0);
    let saved = std::fs::read_to_string(&path).unwrap();
    assert!(saved.contains("test:key") && saved.contains("fast"), "{saved}");
    let second = wgdiff::gpu::Autotuner::default();
    second.use_cache_file(path);
    let reused = second
        .choose(gpu(), "test:key", &labels, 0, |_| {
            panic!("must not measure again")
        })
        .unwrap();
    assert_eq!((reused, second.seconds_measuring()), (1, 0.0));
    std::fs::remove_dir_all(dir).unwrap();
}

/// Tuners of several processes (here threads, each with its own tuner) saving to one cache
/// file at once: every save succeeds and the file stays valid JSON. With one shared temporary
/// name, a writer's rename could take away the file another was writing (ENOENT), and
/// `wgdiff sample` failed in CI while other tests tuned.
#[test]
fn concurrent_saves_of_one_autotune_cache_file_all_succeed() {
    let dir = std::env::temp_dir().join(format!("wgdiff-tune-race-{}", std::process::id()));
    let path = dir.join("autotune.json");
    let labels = vec!["only".to_string()];
    std::thread::scope(|s| {
        for thread in 0..8 {
            let (path, labels) = (path.clone(), labels.clone());
            s.spawn(move || {
                let tuner = wgdiff::gpu::Autotuner::default();
                tuner.use_cache_file(path);
                for key in 0..40 {
                    tuner
                        .choose(gpu(), &format!("race:{thread}:{key}"), &labels, 0, |_| Ok(()))
                        .unwrap();
                }
            });
        }
    });
    let saved = std::fs::read_to_string(&path).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&saved).unwrap();
    assert!(parsed.as_object().is_some_and(|m| !m.is_empty()), "{saved}");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn attention_falls_back_to_f32_without_f16() {
    let gpu = Gpu::new_blocking(AdapterChoice {
        without: wgpu::Features::SHADER_F16,
        ..Default::default()
    })
    .unwrap();
    gpu.set_poison(true);
    let (shape, len, d) = ([1, 2, 6, 4], 6, 4);
    let mut r = rng();
    let xs: Vec<Vec<f64>> = (0..3)
        .map(|_| round_to(&normal_vec(&mut r, 48), DType::F16))
        .collect();
    let [q, k, v] = [0, 1, 2].map(|i| {
        let f: Vec<f32> = xs[i].iter().map(|&x| x as f32).collect();
        Tensor::from_slice(&gpu, &shape, &f, DType::F16)
            .unwrap()
            .requires_grad()
    });
    let y = wgdiff::ops::attention(&q, &k, &v, None).unwrap();
    assert_eq!(y.dtype(), DType::F16);
    let want = cpu::attention(&xs[0], &xs[1], &xs[2], cpu::Attn::square(len, d));
    assert_close("attention f16 fallback", &download(&y), &want, 1e-2);
    wgdiff::backward(&y.sum_all().unwrap()).unwrap();
    for t in [&q, &k, &v] {
        assert_eq!(t.grad().unwrap().dtype(), DType::F16);
    }
}

#[test]
fn a_started_read_returns_the_data_of_its_start_while_later_work_runs() {
    let gpu = gpu();
    let t = Tensor::from_f32(gpu, &[4], &[1.0, 2.0, 3.0, 4.0]).unwrap();
    let read = gpu.start_read(t.buffer(), t.byte_len(), "the test tensor");
    // Recorded after the read started: overwrites the tensor on the device.
    t.copy_from(&Tensor::full(gpu, &[4], 9.0, DType::F32).unwrap())
        .unwrap();
    let bytes = pollster::block_on(read.finish()).unwrap();
    assert_eq!(bytemuck::cast_slice::<u8, f32>(&bytes), &[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(t.to_vec().unwrap(), vec![9.0; 4]);
}

#[test]
fn gl_is_opened_only_where_no_other_backend_has_an_adapter() {
    use wgdiff::gpu::{adapters_for, instance_for, list_adapters};
    let choice = AdapterChoice::default();
    let every = pollster::block_on(list_adapters(&instance_for(&choice).unwrap()));
    let (_, opened) = pollster::block_on(adapters_for(&choice)).unwrap();
    let is_gl = |a: &wgpu::Adapter| a.get_info().backend == wgpu::Backend::Gl;
    if every.iter().any(|a| !is_gl(a)) {
        assert!(!opened.is_empty() && !opened.iter().any(is_gl));
    } else {
        assert_eq!(
            opened.len(),
            every.len(),
            "GL is the fallback where it is all there is"
        );
    }
}
