//! Pipeline cache: compiles each (shader, entry point, template values) once and keeps the
//! compute pipeline; also owns the tiny `{{NAME}}` template substitution used by shaders/.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A WGSL source file from `shaders/` and the name it is cached under.
#[derive(Clone, Copy, Debug)]
pub struct ShaderSource {
    pub name: &'static str,
    pub wgsl: &'static str,
}

/// Includes `shaders/<name>.wgsl` as a [`ShaderSource`].
#[macro_export]
macro_rules! shader {
    ($name:literal) => {
        $crate::gpu::ShaderSource {
            name: $name,
            wgsl: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/", $name, ".wgsl")),
        }
    };
}

/// A compiled kernel: pipeline plus the binding layout it was built with.
#[derive(Clone)]
pub struct Kernel {
    pub(crate) pipeline: Arc<wgpu::ComputePipeline>,
    pub(crate) layout: Arc<wgpu::BindGroupLayout>,
    pub(crate) inputs: usize,
    pub(crate) outputs: usize,
    pub(crate) texels: usize,
    pub(crate) label: Arc<str>,
}

/// Everything that identifies a pipeline.
#[derive(Clone, Debug)]
pub struct KernelSpec<'a> {
    pub source: ShaderSource,
    pub entry: &'a str,
    /// `{{NAME}}` substitutions; `T = f16` also turns on `enable f16;`.
    pub defines: &'a [(&'a str, String)],
    /// Number of read-only storage bindings (1..) after the uniform at binding 0.
    pub inputs: usize,
    /// Number of read-write storage bindings after the inputs.
    pub outputs: usize,
    /// Number of `texture_2d<f32>` bindings after the outputs: operands read as rgba32float
    /// texels ([`crate::gpu::Texels`]).
    pub texels: usize,
}

/// One pipeline's creation: what `wgpu` took to compile it (on lavapipe, LLVM compiling the
/// kernel; seconds for a large unrolled one), in the order they were created.
#[derive(Clone, Debug)]
pub struct PipelineCreation {
    /// `shader::entry`, as the profiler names the kernel.
    pub label: Arc<str>,
    /// The template values it was built with (`{{NAME}}` = value).
    pub defines: String,
    pub seconds: f64,
}

impl PipelineCreation {
    /// How many pipelines `created` holds, the seconds they took in all, and the `top` slowest
    /// with their template values, one per line.
    pub fn table(created: &[PipelineCreation], top: usize) -> String {
        let total: f64 = created.iter().map(|c| c.seconds).sum();
        let mut out = format!(
            "pipelines created: {} in {total:.2} s (wgpu's pipeline creation, once per process; a driver may \
             compile a kernel at its first dispatch instead, as lavapipe does)\n",
            created.len()
        );
        let mut slowest: Vec<&PipelineCreation> = created.iter().collect();
        slowest.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
        for c in slowest.iter().take(top) {
            out += &format!("  {:>8.3} s  {}  {}\n", c.seconds, c.label, c.defines);
        }
        out.trim_end().to_string()
    }
}

#[derive(Default)]
pub(crate) struct PipelineCache {
    kernels: Mutex<HashMap<String, Kernel>>,
    layouts: Mutex<HashMap<(usize, usize, usize), Arc<wgpu::BindGroupLayout>>>,
    created: Mutex<Vec<PipelineCreation>>,
}

/// Substitutes `{{NAME}}` placeholders and unrolls `#for` lines (a body may use derived
/// indices such as `{j*4+1}` or, with two loop variables, `{h*8+l}`); panics on an
/// unresolved placeholder (a bug in the caller).
///
/// `#for r in 0..4, c in 0..2: acc{r}_{c} += x{r};` repeats its body for every (r, c)
/// (the first variable outermost), replacing `{r}` and `{c}`. A line
/// `#for j in 0..8 {` repeats every line up to the matching `#end`, which may hold further
/// `#for` lines. Bounds may be template values (`0..{{R}}`); a block over `0..0` is left
/// out and one over `0..1` kept, which is how a template value switches lines on and off.
pub fn expand_template(src: &str, defines: &[(&str, String)]) -> String {
    let mut out = include_shared(src);
    for (k, v) in defines {
        out = out.replace(&format!("{{{{{k}}}}}"), v);
    }
    let lines: Vec<String> = out.lines().map(str::to_string).collect();
    out = unroll(&lines).join("\n");
    if let Some(pos) = out.find("{{") {
        let end = out[pos..].find("}}").map_or(out.len(), |e| pos + e + 2);
        panic!("unresolved template value {} in shader", &out[pos..end]);
    }
    if defines.iter().any(|(k, v)| v == "f16" && k.starts_with('T')) {
        out = format!("enable f16;\n{out}");
    }
    out
}

/// Shader pieces several files share, pulled in by a line `#include <name>`.
const SHARED: [(&str, &str); 8] = [
    (
        "conv_params",
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/conv_params.wgsl")),
    ),
    (
        "conv_epilogue",
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/conv_epilogue.wgsl")),
    ),
    (
        "adam_params",
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/adam_params.wgsl")),
    ),
    (
        "weights",
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/weights.wgsl")),
    ),
    (
        "winograd_transforms",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/shaders/winograd_transforms.wgsl"
        )),
    ),
    (
        "winograd_tiles",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/shaders/winograd_tiles.wgsl"
        )),
    ),
    (
        "texels",
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/texels.wgsl")),
    ),
    (
        "attention_params",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/shaders/attention_params.wgsl"
        )),
    ),
];

/// Replaces each `#include <name>` line by the shared piece of that name.
fn include_shared(src: &str) -> String {
    src.lines()
        .map(|line| match line.trim().strip_prefix("#include ") {
            Some(name) => SHARED
                .iter()
                .find(|(n, _)| *n == name.trim())
                .unwrap_or_else(|| panic!("unknown shader include {name}"))
                .1
                .to_string(),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Parses `r in 0..4, c in 0..2` into (variable, count) pairs.
fn parse_loops(header: &str) -> Vec<(String, usize)> {
    header
        .split(',')
        .map(|l| {
            let (var, range) = l.trim().split_once(" in 0..").expect("#for var in 0..N");
            (
                var.trim().to_string(),
                range.trim().parse().expect("#for bound must be a number"),
            )
        })
        .collect()
}

/// Every copy of `text` for the loop variables' values, first variable outermost.
fn repeat(text: &str, loops: &[(String, usize)]) -> Vec<String> {
    let mut copies = vec![text.to_string()];
    for (var, n) in loops {
        let (pat, product, addend) = (format!("{{{var}}}"), format!("{{{var}*"), format!("+{var}}}"));
        copies = copies
            .iter()
            .flat_map(|b| {
                (0..*n)
                    .map(|i| {
                        let text = b
                            .replace(&pat, &i.to_string())
                            .replace(&product, &format!("{{{i}*"))
                            .replace(&addend, &format!("+{i}}}"));
                        eval_index_products(&text)
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
    }
    copies
}

/// Replaces `{A*B+C}` (integers, `+C` optional) by its value, so a loop body can name
/// derived indices such as `{j*4+1}`.
fn eval_index_products(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let tail = &rest[open..];
        let Some(close) = tail.find('}') else {
            rest = tail;
            break;
        };
        let inner = &tail[1..close];
        if inner.contains('{') {
            // A WGSL brace, not an index expression: keep it and look inside.
            out.push('{');
            rest = &tail[1..];
            continue;
        }
        let value = inner.split_once('*').and_then(|(a, bc)| {
            let (b, c) = bc.split_once('+').unwrap_or((bc, "0"));
            Some(
                a.trim().parse::<usize>().ok()? * b.trim().parse::<usize>().ok()?
                    + c.trim().parse::<usize>().ok()?,
            )
        });
        match value {
            Some(v) => out.push_str(&v.to_string()),
            None => out.push_str(&tail[..=close]),
        }
        rest = &tail[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Expands `#for` lines and `#for .. {` / `#end` blocks.
fn unroll(lines: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        i += 1;
        let Some(rest) = trimmed.strip_prefix("#for ") else {
            out.push(line.clone());
            continue;
        };
        if let Some(header) = rest.trim_end().strip_suffix('{') {
            let mut depth = 1;
            let start = i;
            while depth > 0 {
                let t = lines.get(i).expect("#for block without #end").trim_start();
                depth += t.starts_with("#for ") as i32 * t.trim_end().ends_with('{') as i32;
                depth -= (t.trim_end() == "#end") as i32;
                i += 1;
            }
            let block = lines[start..i - 1].join("\n");
            for copy in repeat(&block, &parse_loops(header)) {
                let copy_lines: Vec<String> = copy.lines().map(str::to_string).collect();
                out.extend(unroll(&copy_lines));
            }
        } else {
            let (header, body) = rest.split_once(':').expect("#for line needs ':' before its body");
            out.extend(
                repeat(body.trim(), &parse_loops(header))
                    .into_iter()
                    .map(|b| format!("{indent}{b}")),
            );
        }
    }
    out
}

impl PipelineCache {
    fn bind_layout(
        &self,
        device: &wgpu::Device,
        inputs: usize,
        outputs: usize,
        texels: usize,
    ) -> Arc<wgpu::BindGroupLayout> {
        let mut layouts = self.layouts.lock().unwrap();
        layouts
            .entry((inputs, outputs, texels))
            .or_insert_with(|| {
                let mut entries = vec![wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                }];
                for i in 0..inputs + outputs {
                    entries.push(wgpu::BindGroupLayoutEntry {
                        binding: 1 + i as u32,
                        visibility: wgpu::ShaderStages::COMPUTE,
                        ty: wgpu::BindingType::Buffer {
                            ty: wgpu::BufferBindingType::Storage {
                                read_only: i < inputs,
                            },
                            has_dynamic_offset: false,
                            min_binding_size: None,
                        },
                        count: None,
                    });
                }
                for i in 0..texels {
                    entries.push(wgpu::BindGroupLayoutEntry {
                        binding: (1 + inputs + outputs + i) as u32,
                        visibility: wgpu::ShaderStages::COMPUTE,
                        ty: wgpu::BindingType::Texture {
                            sample_type: wgpu::TextureSampleType::Float { filterable: false },
                            view_dimension: wgpu::TextureViewDimension::D2,
                            multisampled: false,
                        },
                        count: None,
                    });
                }
                Arc::new(device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: Some("wgdiff bindings"),
                    entries: &entries,
                }))
            })
            .clone()
    }

    /// Returns the cached kernel for `spec`, compiling it on first use.
    pub(crate) fn get(&self, device: &wgpu::Device, spec: &KernelSpec) -> Kernel {
        let key = format!(
            "{}:{}:{:?}:{}:{}:{}",
            spec.source.name, spec.entry, spec.defines, spec.inputs, spec.outputs, spec.texels
        );
        if let Some(k) = self.kernels.lock().unwrap().get(&key) {
            return k.clone();
        }
        let started = web_time::Instant::now();
        let wgsl = expand_template(spec.source.wgsl, spec.defines);
        let layout = self.bind_layout(device, spec.inputs, spec.outputs, spec.texels);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(spec.source.name),
            source: wgpu::ShaderSource::Wgsl(wgsl.into()),
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(spec.source.name),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&key),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(spec.entry),
            compilation_options: Default::default(),
            cache: None,
        });
        let kernel = Kernel {
            pipeline: Arc::new(pipeline),
            layout,
            inputs: spec.inputs,
            outputs: spec.outputs,
            texels: spec.texels,
            label: format!("{}::{}", spec.source.name, spec.entry).into(),
        };
        self.created.lock().unwrap().push(PipelineCreation {
            label: kernel.label.clone(),
            defines: spec
                .defines
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
            seconds: started.elapsed().as_secs_f64(),
        });
        self.kernels.lock().unwrap().insert(key, kernel.clone());
        kernel
    }

    pub(crate) fn len(&self) -> usize {
        self.kernels.lock().unwrap().len()
    }

    /// Every pipeline created so far, in order (also those [`PipelineCache::retain`] dropped).
    pub(crate) fn created(&self) -> Vec<PipelineCreation> {
        self.created.lock().unwrap().clone()
    }

    /// The keys of the compiled pipelines.
    #[cfg(not(target_arch = "wasm32"))] // (the autotuner's measurements are native)
    pub(crate) fn keys(&self) -> std::collections::HashSet<String> {
        self.kernels.lock().unwrap().keys().cloned().collect()
    }

    /// Drops every pipeline whose key is not in `keep` (a later use compiles it again).
    #[cfg(not(target_arch = "wasm32"))] // (the autotuner's measurements are native)
    pub(crate) fn retain(&self, keep: &std::collections::HashSet<String>) {
        self.kernels.lock().unwrap().retain(|k, _| keep.contains(k));
    }
}

#[cfg(test)]
mod tests {
    use super::expand_template;

    #[test]
    fn for_lines_blocks_and_derived_indices_unroll() {
        let src = "#for r in 0..2, c in 0..{{C}}: a{r}_{c};\n#for j in 0..2 {\nb{j*4+1}\n#for i in 0..2: c{j}{i}\n#end\nend";
        let out = expand_template(src, &[("C", "2".into())]);
        assert_eq!(out, "a0_0;\na0_1;\na1_0;\na1_1;\nb1\nc00\nc01\nb5\nc10\nc11\nend");
        // Derived indices inside WGSL braces.
        let src = "#for j in 0..2 {\nif (a{j*4+1} < n) { y[b{j*2+0}] = 1; }\n#end";
        let out = expand_template(src, &[]);
        assert_eq!(out, "if (a1 < n) { y[b0] = 1; }\nif (a5 < n) { y[b2] = 1; }");
        // A derived index of two variables, and blocks switched off and on by their bound.
        let src = "#for h in 0..2, l in 0..{{W}}: b{h*{{W}}+l}\n#for s in 0..{{OFF}} {\noff\n#end\n#for s in 0..{{ON}} {\non\n#end";
        let defines = [("W", "3".into()), ("OFF", "0".into()), ("ON", "1".into())];
        let out = expand_template(src, &defines);
        assert_eq!(out, "b0\nb1\nb2\nb3\nb4\nb5\non");
    }
}
