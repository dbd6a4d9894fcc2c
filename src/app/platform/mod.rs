//! The app's one seam to the platform: where a job runs, how it waits, files, announcements.
//! Native (`native.rs`): threads, `std::fs`, stderr; the browser (`web.rs`): the page's event
//! loop, files in memory, fetch, downloads. What both share is written once here on top of them.

#[cfg(not(target_arch = "wasm32"))]
mod native;
#[cfg(target_arch = "wasm32")]
mod web;

#[cfg(not(target_arch = "wasm32"))]
pub use native::{
    announce, deliver, exists, pick_file, read_file, resident_bytes, run_files, sleep, spawn, write_file,
    JobSafe, IN_PAGE,
};
#[cfg(target_arch = "wasm32")]
pub use web::{
    announce, deliver, exists, pick_file, read_file, resident_bytes, run_files, sleep, spawn, write_file,
    JobSafe, IN_PAGE,
};

/// How a shell starts the app: in a window (native) or in a page's canvas (the browser).
pub mod entry {
    #[cfg(not(target_arch = "wasm32"))]
    pub use super::native::run_native;
    #[cfg(target_arch = "wasm32")]
    pub use super::web::run_web;
}

use crate::checkpoint::Checkpoint;
use crate::data::{DataSource, Dataset, Split};
use crate::models::SkipType;
use crate::pipeline::TrainedModel;
use crate::pipeline::DEFAULT_CHECKPOINT;
use crate::train::{ResumeChanges, TrainConfig, Trainer};
use crate::{Error, Gpu, Result};
use std::path::Path;
use std::sync::Arc;

/// Reads the checkpoint at `path` (a file, a diffusers model folder, or an address on the page's
/// site: of a file, or of a diffusers model folder when it has no `.safetensors` ending).
pub async fn read_checkpoint(path: &Path) -> Result<Checkpoint> {
    if path.is_dir() {
        return crate::pipeline::diffusers::read_folder(path);
    }
    if IN_PAGE && !exists(path) && path.extension().is_none_or(|e| e != "safetensors") {
        return read_diffusers_address(path).await;
    }
    let bytes = read_file(path)
        .await
        .map_err(|e| match path.as_os_str() == DEFAULT_CHECKPOINT {
            true => Error::Checkpoint {
                path: DEFAULT_CHECKPOINT.into(),
                msg: format!(
                    "not found ({e}): the default model ships in a wgdiff checkout's assets/models/; run \
                 wgdiff there, set WGDIFF_ASSETS to that checkout's assets folder, or pass another checkpoint"
                ),
            },
            false => e,
        })?;
    Checkpoint::from_bytes(&bytes, &path.display().to_string())
}

/// The diffusers model whose folder is at address `dir` on the page's site (in a page nothing is
/// a folder): its U-Net's config and weights there, its scheduler config there or in
/// `../scheduler/`, fetched and imported as natively.
async fn read_diffusers_address(dir: &Path) -> Result<Checkpoint> {
    use crate::pipeline::diffusers::{import, DiffusersFiles, CONFIG_FILE, SCHEDULER_FILE, WEIGHTS_FILE};
    let origin = dir.display().to_string();
    let fetch = |name: &str| {
        let path = dir.join(name);
        async move { read_file(&path).await }
    };
    let config = fetch(CONFIG_FILE).await.map_err(|e| Error::Checkpoint {
        path: origin.clone(),
        msg: format!(
            "is read as a diffusers model folder (an address without .safetensors), but {e}: give the address of a \
             .safetensors checkpoint or of a folder holding {CONFIG_FILE}, {WEIGHTS_FILE} and {SCHEDULER_FILE}"
        ),
    })?;
    let weights = fetch(WEIGHTS_FILE).await?;
    let scheduler = match fetch(SCHEDULER_FILE).await {
        Ok(bytes) => bytes,
        Err(_) => fetch(&format!("../scheduler/{SCHEDULER_FILE}")).await?,
    };
    import(&DiffusersFiles {
        config: &config,
        weights: &weights,
        scheduler: &scheduler,
        origin: &origin,
    })
}

/// The EMA weights of the checkpoint at `path`, ready to sample (see
/// [`TrainedModel::from_checkpoint`]); a diverged run's are refused (`check_output_scale`).
pub async fn load_model(gpu: &Gpu, path: &Path, skip_type: Option<SkipType>) -> Result<TrainedModel> {
    let ckpt = read_checkpoint(path).await?;
    let origin = path.display().to_string();
    let model = TrainedModel::from_checkpoint(gpu, &ckpt, &origin, skip_type)?;
    model.sampling().check_output_scale(gpu, &origin).await?;
    Ok(model)
}

/// The images a training run of a model of `image_shape` images reads: natively what `wgdiff
/// train` reads (`train::load_data`: the training split of `--data`); in the browser the MNIST
/// test split (1.6 MB gzipped) fetched from the page's site, the only data it has.
pub async fn training_data(data: &str, image_shape: [usize; 3]) -> Result<Arc<Dataset>> {
    if !IN_PAGE {
        return Ok(Arc::new(crate::train::load_data(data, image_shape)?));
    }
    let DataSource::Mnist(dir) = data.parse::<DataSource>()? else {
        return Err(Error::Config(format!(
            "the page trains on MNIST only (data = \"mnist\"), not {data}: it has no files"
        )));
    };
    let images = dir.join("t10k-images.idx3-ubyte.gz");
    let labels = dir.join("t10k-labels.idx1-ubyte.gz");
    let (image_bytes, label_bytes) = (read_file(&images).await?, read_file(&labels).await?);
    let mut dataset = crate::data::idx_from_bytes((&images, image_bytes), (&labels, label_bytes))?;
    dataset.name = format!("mnist/{}", Split::Test);
    Ok(Arc::new(dataset))
}

/// MNIST-FID during training: the shipped classifier against its shipped statistics of the
/// MNIST test split (files, or addresses on the page's site).
pub async fn mnist_fid(gpu: &Gpu) -> Result<crate::train::FidTracker> {
    let read = |path: &'static str| async move {
        read_file(Path::new(path)).await.map_err(|e| {
            Error::Config(format!(
                "MNIST-FID during training needs {path} ({e}): it ships in a wgdiff checkout's assets/models/: run \
                 wgdiff there, set WGDIFF_ASSETS to that checkout's assets folder, or train without it (fid_share = 0)"
            ))
        })
    };
    let classifier = read(crate::classifier::SHIPPED_MNIST_CLASSIFIER).await?;
    let stats = read(crate::classifier::SHIPPED_MNIST_TEST_STATS).await?;
    Ok(crate::classifier::MnistFid::shipped(gpu, &classifier, &stats)?.into())
}

/// A fresh training run of `config`, or with `resume` the run saved there continued to
/// `config.steps` steps.
pub async fn start_training(gpu: &Gpu, config: TrainConfig, resume: Option<&Path>) -> Result<Trainer> {
    match resume {
        Some(path) => {
            let ckpt = read_checkpoint(path).await?;
            let origin = path.display().to_string();
            let saved = crate::run_state::saved_state(&ckpt, &origin)?;
            let data = training_data(&saved.config.data, saved.model.image_shape()).await?;
            Trainer::resume_with_data(
                gpu,
                &ckpt,
                &origin,
                data,
                &ResumeChanges {
                    steps: Some(config.steps),
                    ..ResumeChanges::default()
                },
            )
        }
        None => {
            let init = match &config.init {
                Some(path) => Some(read_checkpoint(path).await?),
                None => None,
            };
            let shape = crate::train::run_image_shape(&config, init.as_ref())?;
            let data = training_data(&config.data, shape).await?;
            Trainer::with_data(gpu, config, data, init.as_ref())
        }
    }
}
