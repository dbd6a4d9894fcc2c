//! The device view: the adapters found, the one in use, its optional features and limits (as
//! `wgdiff info` prints them), the autotuner's kernel choices and the buffer pool's bytes.

use super::jobs::{Event, Job};
use super::Shared;
use crate::gpu::DeviceReport;
use eframe::egui;

/// What the device job reports.
pub enum DeviceMessage {
    Report(DeviceReport),
}

/// The device view's state.
#[derive(Default)]
pub struct DeviceView {
    pub report: Option<DeviceReport>,
    job: Option<Job<DeviceMessage>>,
    error: Option<String>,
}

impl DeviceView {
    pub fn poll(&mut self) {
        for event in self.job.as_mut().map(Job::poll).unwrap_or_default() {
            match event {
                Event::Message(DeviceMessage::Report(r)) => self.report = Some(r),
                Event::Finished(Err(e)) => self.error = Some(e),
                Event::Finished(Ok(())) => {}
            }
        }
    }

    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &Shared) {
        if self.report.is_none() && self.job.is_none() {
            let (gpu, choice) = (shared.gpu.clone(), shared.options.choice.clone());
            self.job = Some(Job::start(ui.ctx(), "device", move |job| async move {
                job.send(DeviceMessage::Report(DeviceReport::new(&gpu, &choice).await?));
                Ok(())
            }));
        }
        if let Some(e) = &self.error {
            ui.colored_label(egui::Color32::LIGHT_RED, format!("error: {e}"));
        }
        let Some(report) = &self.report else {
            ui.label("listing adapters");
            return;
        };
        ui.strong(format!("in use: {}", report.chosen));
        ui.label("adapters found (best first):");
        for (adapter, driver) in &report.adapters {
            ui.label(format!("  {adapter}   driver: {driver}"));
        }
        ui.separator();
        egui::Grid::new("features").striped(true).show(ui, |ui| {
            for (name, present) in &report.features {
                ui.label(*name);
                ui.label(if *present { "yes" } else { "no (fallback path)" });
                ui.end_row();
            }
            let (min, max) = report.subgroup_sizes;
            ui.label("subgroup size");
            ui.label(format!("{min}..{max}"));
            ui.end_row();
            for (name, value) in &report.limits {
                ui.label(*name);
                ui.label(value.to_string());
                ui.end_row();
            }
        });
        ui.separator();
        let stats = shared.gpu.pool().stats();
        ui.label(format!(
            "buffer pool: {:.1} MB live, {:.1} MB pooled, {:.1} MB peak; {} pipelines compiled",
            stats.live_bytes as f64 * 1e-6,
            stats.pooled_bytes as f64 * 1e-6,
            stats.peak_live_bytes as f64 * 1e-6,
            shared.gpu.pipeline_count()
        ));
        ui.strong("kernel choices of the autotuner (measured or loaded from its cache):");
        let choices = shared.gpu.tuner().snapshot();
        if choices.is_empty() {
            ui.label("none yet (they are made the first time a shape is seen)");
        }
        egui::Grid::new("autotune").striped(true).show(ui, |ui| {
            for (key, choice) in choices {
                ui.label(key);
                ui.label(choice);
                ui.end_row();
            }
        });
    }
}
