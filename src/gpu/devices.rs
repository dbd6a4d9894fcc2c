//! Several devices for data-parallel training (`--devices all|N|NAME,NAME`): every GPU of a
//! machine, or several logical devices on one adapter (one GPU, or lavapipe in tests).

use super::{adapters_for, describe, rank, AdapterChoice, Gpu};
use crate::{Error, Result};

/// Which devices hold the replicas of a data-parallel run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceSet {
    /// Every GPU adapter of the best backend (the best adapter alone when there is no GPU).
    All,
    /// This many devices: the adapters of [`DeviceSet::All`] in turn, several logical devices
    /// on one adapter when there are fewer adapters than devices.
    Count(usize),
    /// One device per name, each the best adapter whose name contains it (case-insensitive);
    /// a name given twice opens two logical devices on that adapter.
    Named(Vec<String>),
}

/// The most devices a run opens: each logical device holds its own queue, pipelines and a
/// copy of the model, so a count far beyond the GPUs would only exhaust host memory.
pub const MAX_DEVICES: usize = 64;

fn too_many(n: usize) -> Error {
    Error::Config(format!(
        "--devices {n}: at most {MAX_DEVICES} devices (every device holds its own copy of the model and \
         several on one adapter share its compute); `wgdiff info` lists the adapters"
    ))
}

impl DeviceSet {
    /// How many devices the set opens, when that is known before looking at the adapters.
    pub fn count(&self) -> Option<usize> {
        match self {
            DeviceSet::All => None,
            DeviceSet::Count(n) => Some(*n),
            DeviceSet::Named(names) => Some(names.len()),
        }
    }
}

impl Default for DeviceSet {
    fn default() -> Self {
        DeviceSet::Count(1)
    }
}

impl std::str::FromStr for DeviceSet {
    type Err = Error;

    fn from_str(text: &str) -> Result<DeviceSet> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("all") {
            return Ok(DeviceSet::All);
        }
        if let Ok(n) = text.parse::<usize>() {
            return match n {
                0 => Err(Error::Config(
                    "--devices 0: a run needs at least one device (all, a count such as 2, or adapter names)"
                        .into(),
                )),
                n if n > MAX_DEVICES => Err(too_many(n)),
                n => Ok(DeviceSet::Count(n)),
            };
        }
        let names: Vec<String> = text.split(',').map(|n| n.trim().to_string()).collect();
        if names.len() > MAX_DEVICES {
            return Err(too_many(names.len()));
        }
        if names.iter().any(String::is_empty) {
            return Err(Error::Config(format!(
                "--devices {text:?}: give all, a count such as 2, or comma-separated parts of adapter names \
                 (`wgdiff info` lists them), e.g. --devices nvidia,nvidia"
            )));
        }
        Ok(DeviceSet::Named(names))
    }
}

/// Opens one device per replica of `set` among the adapters `choice` allows, replica 0 on the
/// best. Errors name the adapters found when a name matches none.
pub async fn open_devices(choice: AdapterChoice, set: &DeviceSet) -> Result<Vec<Gpu>> {
    let choice = choice.or_env();
    let (instance, mut found) = adapters_for(&choice).await?;
    found.retain(|a| choice.matches(&a.get_info()));
    found.sort_by_key(|a| rank(&a.get_info()));
    let Some(best) = found.first() else {
        // The single-device path words the "nothing found" advice.
        return Gpu::new(choice).await.map(|gpu| vec![gpu]);
    };
    let best_backend = best.get_info().backend;
    let gpus: Vec<wgpu::Adapter> = found
        .iter()
        .filter(|a| {
            let info = a.get_info();
            info.backend == best_backend && info.device_type != wgpu::DeviceType::Cpu
        })
        .cloned()
        .collect();
    let all = if gpus.is_empty() { vec![best.clone()] } else { gpus };
    let adapters: Vec<wgpu::Adapter> = match set {
        DeviceSet::All => all,
        DeviceSet::Count(n) => all.iter().cycle().take(*n).cloned().collect(),
        DeviceSet::Named(names) => names
            .iter()
            .map(|name| {
                let lower = name.to_ascii_lowercase();
                found
                    .iter()
                    .find(|a| a.get_info().name.to_ascii_lowercase().contains(&lower))
                    .cloned()
                    .ok_or_else(|| {
                        let seen: Vec<String> = found.iter().map(|a| describe(&a.get_info())).collect();
                        Error::NoAdapter(format!(
                            "--devices: no adapter's name contains \"{name}\" (found: {}); `wgdiff info` lists them",
                            seen.join("; ")
                        ))
                    })
            })
            .collect::<Result<_>>()?,
    };
    let mut devices = Vec::with_capacity(adapters.len());
    for adapter in adapters {
        devices.push(Gpu::on_adapter(instance.clone(), adapter, choice.without).await?);
    }
    Ok(devices)
}
