//! Adapter selection: which backend and which adapter the engine runs on, from flags or
//! environment, Vulkan first, with an error that names the fix when nothing is found.

use crate::{Error, Result};

/// What the user asked for: a backend name and/or an adapter-name substring.
#[derive(Clone, Debug, Default)]
pub struct AdapterChoice {
    /// `vulkan`, `metal`, `dx12`, `gl` or `webgpu` (comma-separated list allowed).
    pub backend: Option<String>,
    /// Case-insensitive substring of the adapter name, e.g. `llvmpipe`.
    pub adapter: Option<String>,
    /// Optional features not to request even when offered (tests of the fallback paths).
    pub without: wgpu::Features,
}

impl AdapterChoice {
    /// Reads `WGPU_BACKEND` and `WGPU_ADAPTER_NAME`.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|s| !s.trim().is_empty());
        Self {
            backend: var("WGPU_BACKEND"),
            adapter: var("WGPU_ADAPTER_NAME"),
            without: wgpu::Features::empty(),
        }
    }

    /// Flags win over the environment, field by field.
    pub fn or_env(self) -> Self {
        let env = Self::from_env();
        Self {
            backend: self.backend.or(env.backend),
            adapter: self.adapter.or(env.adapter),
            without: self.without,
        }
    }

    /// Whether the adapter's name contains the asked-for text (any adapter when none is asked).
    pub fn matches(&self, info: &wgpu::AdapterInfo) -> bool {
        self.adapter
            .as_ref()
            .is_none_or(|sub| info.name.to_ascii_lowercase().contains(&sub.to_ascii_lowercase()))
    }

    /// The backends this choice allows.
    pub fn backends(&self) -> Result<wgpu::Backends> {
        let Some(list) = &self.backend else {
            return Ok(wgpu::Backends::all());
        };
        let mut backends = wgpu::Backends::empty();
        for name in list.split(',').map(|s| s.trim().to_ascii_lowercase()) {
            backends |= match name.as_str() {
                "vulkan" | "vk" => wgpu::Backends::VULKAN,
                "metal" | "mtl" => wgpu::Backends::METAL,
                "dx12" | "d3d12" => wgpu::Backends::DX12,
                "gl" | "gles" | "opengl" => wgpu::Backends::GL,
                "webgpu" | "browser" => wgpu::Backends::BROWSER_WEBGPU,
                other => {
                    return Err(Error::NoAdapter(format!(
                        "unknown backend \"{other}\"; use one of vulkan, metal, dx12, gl, webgpu"
                    )))
                }
            };
        }
        Ok(backends)
    }
}

/// Keeps Mesa's Vulkan device-select layer from probing Wayland where there is no Wayland
/// session: it connects to find the default GPU, and libwayland then prints "error:
/// XDG_RUNTIME_DIR is invalid or not set in the environment." twice per instance on every
/// machine without a display. wgdiff ranks the adapters itself ([`rank`]), so the layer adds
/// nothing there; a user's own device-select settings are left alone. It sets an environment
/// variable: call it first thing in `main`, before any thread starts.
#[cfg(not(target_arch = "wasm32"))]
pub fn quiet_display_probes() {
    let given = |key: &str| std::env::var_os(key).is_some_and(|v| !v.is_empty());
    let wayland_possible = given("XDG_RUNTIME_DIR") || given("WAYLAND_SOCKET");
    if !wayland_possible && !given("NODEVICE_SELECT") && !given("MESA_VK_DEVICE_SELECT") {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
}

/// Preference order: Vulkan, Metal, DX12, browser WebGPU, GL; then discrete before integrated
/// before virtual before CPU adapters.
pub fn rank(info: &wgpu::AdapterInfo) -> (u8, u8) {
    let backend = match info.backend {
        wgpu::Backend::Vulkan => 0,
        wgpu::Backend::Metal => 1,
        wgpu::Backend::Dx12 => 2,
        wgpu::Backend::BrowserWebGpu => 3,
        wgpu::Backend::Gl => 4,
        _ => 5,
    };
    let kind = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    };
    (backend, kind)
}

/// Picks the best adapter among `found` for `choice`, or explains what to do.
pub fn pick(found: Vec<wgpu::Adapter>, choice: &AdapterChoice) -> Result<wgpu::Adapter> {
    let names: Vec<String> = found.iter().map(|a| describe(&a.get_info())).collect();
    let mut matching: Vec<wgpu::Adapter> = found
        .into_iter()
        .filter(|a| choice.matches(&a.get_info()))
        .collect();
    matching.sort_by_key(|a| rank(&a.get_info()));
    if let Some(best) = matching.into_iter().next() {
        return Ok(best);
    }
    Err(Error::NoAdapter(no_adapter_message(choice, &names)))
}

/// One line naming an adapter: name, backend and device type.
pub fn describe(info: &wgpu::AdapterInfo) -> String {
    // Browsers may keep the adapter's name to themselves (Chromium on SwiftShader does).
    let name = match info.name.as_str() {
        "" => "unnamed adapter",
        name => name,
    };
    format!("{name} ({:?}, {:?})", info.backend, info.device_type)
}

fn no_adapter_message(choice: &AdapterChoice, found: &[String]) -> String {
    let wanted = match (&choice.backend, &choice.adapter) {
        (Some(b), Some(a)) => format!("no {b} adapter whose name contains \"{a}\""),
        (Some(b), None) => format!("no {b} adapter"),
        (None, Some(a)) => format!("no adapter whose name contains \"{a}\""),
        (None, None) => "no GPU adapter at all".to_string(),
    };
    let seen = if found.is_empty() {
        "none were found".to_string()
    } else {
        format!("found: {}", found.join("; "))
    };
    let fix = if !found.is_empty() {
        // Adapters exist; the choice ruled them all out.
        "Fix: choose one of the adapters found with --adapter <part of its name> and/or --backend \
         (or WGPU_ADAPTER_NAME / WGPU_BACKEND), or leave both out to take the best one"
            .to_string()
    } else if let Some(backend) = choice
        .backend
        .as_deref()
        .filter(|b| !b.eq_ignore_ascii_case("vulkan"))
    {
        format!(
            "Fix: the {backend} backend has no adapter on this machine (Metal runs on macOS, DX12 on Windows, \
             GL needs an OpenGL driver); leave out --backend (and WGPU_BACKEND) to take the best available, \
             or install a Vulkan driver: on a machine without a GPU, `sudo apt-get install mesa-vulkan-drivers`"
        )
    } else {
        "Fix: install a Vulkan driver; on a machine without a GPU, Debian/Ubuntu's software Vulkan works: \
         `sudo apt-get install mesa-vulkan-drivers`. Or choose another backend/adapter with --backend/--adapter \
         or WGPU_BACKEND/WGPU_ADAPTER_NAME"
            .to_string()
    };
    format!("{wanted} ({seen}).\n{fix} (`wgdiff info` lists what this machine has).")
}

/// A warning when the adapter chosen without being asked for is the OpenGL one: wgpu's GL
/// backend is a slow fallback for compute (a tiny training step can take a minute and a
/// half), taken only because no Vulkan, Metal or DX12 adapter was found.
pub fn slow_fallback_warning(info: &wgpu::AdapterInfo, choice: &AdapterChoice) -> Option<String> {
    (info.backend == wgpu::Backend::Gl && choice.backend.is_none()).then(|| {
        format!(
            "warning: running on {} because no Vulkan, Metal or DX12 adapter was found; it is a slow \
             fallback for compute. Install a Vulkan driver (without a GPU: `sudo apt-get install \
             mesa-vulkan-drivers`), or pass --backend gl to choose it knowingly",
            describe(info)
        )
    })
}

/// The Mesa release of a lavapipe adapter's driver ("Mesa 25.0.7-2~bpo12+1 (LLVM 15.0.6)" ->
/// (25, 0)); None for any other driver.
pub fn lavapipe_mesa_version(info: &wgpu::AdapterInfo) -> Option<(u32, u32)> {
    if info.backend != wgpu::Backend::Vulkan || info.driver != "llvmpipe" {
        return None;
    }
    let version = info
        .driver_info
        .split_whitespace()
        .skip_while(|w| *w != "Mesa")
        .nth(1)?;
    let mut parts = version.split(['.', '-']).map(str::parse::<u32>);
    Some((parts.next()?.ok()?, parts.next()?.ok()?))
}

/// A note when the adapter is lavapipe from a Mesa older than 24 and the host is an x86 CPU
/// without AVX-512 (`host_has_avx512`, as [`host_has_avx512`] finds): on an AVX2 CPU Mesa 25's ran the
/// same kernels up to 2-3x faster (its storage loads 4-5x) and trained the main job 2.2x the
/// steps, and Debian 12, whose own is 22.3, has it in bookworm-backports. On an AVX-512 CPU
/// Mesa 22.3 was the faster driver (the main job 1.2x) and compiles kernels 4-6x faster, so
/// nothing is said there (BENCHMARKS.md, "Mesa 25's lavapipe" and "Which lavapipe").
pub fn old_lavapipe_note(info: &wgpu::AdapterInfo, host_has_avx512: bool) -> Option<String> {
    let (major, minor) = lavapipe_mesa_version(info).filter(|(major, _)| *major < 24)?;
    if host_has_avx512 || !cfg!(target_arch = "x86_64") {
        return None;
    }
    Some(format!(
        "note: lavapipe from Mesa {major}.{minor} on a CPU without AVX-512; on such a CPU (an AVX2 AMD EPYC) Mesa 25's ran \
         wgdiff's kernels up to 2-3x faster and trained the main job 2.2x the steps, though it compiles each kernel 4-6x \
         slower on its first use (BENCHMARKS.md, \"Mesa 25's lavapipe\"). On Debian 12: add the suite bookworm-backports \
         to apt's sources, then `sudo apt-get install -t bookworm-backports mesa-vulkan-drivers` (the README's first section)"
    ))
}

/// Whether this process runs on an x86-64 CPU with AVX-512 (false elsewhere).
pub fn host_has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lavapipe(driver_info: &str) -> wgpu::AdapterInfo {
        wgpu::AdapterInfo {
            name: "llvmpipe (LLVM 15.0.6, 256 bits)".into(),
            driver: "llvmpipe".into(),
            driver_info: driver_info.into(),
            ..wgpu::AdapterInfo::new(wgpu::DeviceType::Cpu, wgpu::Backend::Vulkan)
        }
    }

    #[test]
    fn lavapipe_mesa_releases_are_read_and_old_ones_get_a_note() {
        let old = lavapipe("Mesa 22.3.6 (LLVM 15.0.6)");
        assert_eq!(lavapipe_mesa_version(&old), Some((22, 3)));
        assert_eq!(
            old_lavapipe_note(&old, false).is_some_and(|n| n.contains("bookworm-backports")),
            cfg!(target_arch = "x86_64"),
            "on an x86 CPU without AVX-512 the note names the upgrade"
        );
        assert_eq!(
            old_lavapipe_note(&old, true),
            None,
            "with AVX-512 Mesa 22.3 was the faster"
        );
        let new = lavapipe("Mesa 25.0.7-2~bpo12+1 (LLVM 15.0.6)");
        assert_eq!(lavapipe_mesa_version(&new), Some((25, 0)));
        assert_eq!(old_lavapipe_note(&new, false), None);
        let gl = wgpu::AdapterInfo {
            backend: wgpu::Backend::Gl,
            driver: String::new(),
            ..old.clone()
        };
        assert_eq!(lavapipe_mesa_version(&gl), None);
        assert_eq!(lavapipe_mesa_version(&lavapipe("something else")), None);
    }
}
