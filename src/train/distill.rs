//! The teacher of a progressive-distillation run (`wgdiff train --distill TEACHER`): its
//! network with the EMA weights, what its output means, and the round's grids; checked against
//! the student's process so both walk the same timesteps.

use crate::diffusion::{DistillGrid, Marginals, Process};
use crate::models::DiffusionNet;
use crate::pipeline::{read_checkpoint, TrainedModel};
use crate::run_state::Distill;
use crate::{Error, Gpu, Result};

/// A loaded teacher.
pub struct Teacher {
    pub net: Box<dyn DiffusionNet>,
    pub marginals: Marginals,
    pub grid: DistillGrid,
}

impl Teacher {
    /// The teacher `distill` names, for a student on `student` (the same VP noise schedule).
    /// Errors name the teacher's file: not an unconditional VP model, a schedule the student
    /// does not share, or (an earlier round's student as teacher) a step count that is not
    /// half of its own.
    pub fn load(gpu: &Gpu, distill: &Distill, student: &Process) -> Result<Teacher> {
        let origin = distill.teacher.display().to_string();
        let bad = |msg: String| Error::Checkpoint {
            path: origin.clone(),
            msg,
        };
        let ckpt = read_checkpoint(&distill.teacher)?;
        let model = TrainedModel::from_checkpoint(gpu, &ckpt, &origin, None)?;
        if model.state.model.classes().is_some() {
            return Err(bad(
                "is class-conditional; distillation takes an unconditional teacher (its guided two-model \
                 form is not distilled here)"
                    .into(),
            ));
        }
        if let Some(own) = &model.state.config.distill {
            if own.steps != 2 * distill.steps {
                return Err(bad(format!(
                    "is a distilled student of {} steps; its student takes half as many: --distill-steps {}",
                    own.steps,
                    own.steps / 2
                )));
            }
        }
        let marginals = model.state.process.marginals()?;
        let (ours, theirs) = (student.marginals()?, marginals.clone());
        let same_schedule = match (ours.alpha_bars(), theirs.alpha_bars()) {
            (Some(a), Some(b)) => {
                a.last() == b.last()
                    && (0..=a.last() as usize).all(|t| a.alpha_bar(t as f64) == b.alpha_bar(t as f64))
            }
            _ => false,
        };
        if !same_schedule {
            let teacher_schedule = match &model.state.process {
                Process::Vp { schedule, .. } => schedule.flag_name(),
                _ => None,
            };
            let keep = match teacher_schedule {
                Some(name) => format!("--schedule {name}, or leave --schedule out"),
                None => "leave --schedule out".into(),
            };
            return Err(bad(format!(
                "runs the {} process on another noise schedule than the student's {}; a student learns its \
                 teacher's timesteps: keep the teacher's schedule ({keep})",
                model.state.process.name(),
                student.name()
            )));
        }
        let grid = DistillGrid::new(&marginals, distill.steps).map_err(|e| bad(e.to_string()))?;
        Ok(Teacher {
            net: model.net,
            marginals,
            grid,
        })
    }
}

/// The student's steps when none are asked for and the teacher is not itself a student: its
/// DDIM on twice as many teaches.
pub const FIRST_ROUND_STEPS: usize = 32;

/// The distillation round of a student of `teacher` taking `steps` steps (None: half a
/// distilled teacher's, else [`FIRST_ROUND_STEPS`]); the teacher's file must be readable.
pub fn distill_round(teacher: &std::path::Path, steps: Option<usize>) -> Result<Distill> {
    let ckpt = read_checkpoint(teacher)?;
    let state = crate::run_state::saved_state(&ckpt, &teacher.display().to_string())?;
    let steps = match (steps, &state.config.distill) {
        (Some(steps), _) => steps,
        (None, Some(own)) => own.steps / 2,
        (None, None) => FIRST_ROUND_STEPS,
    };
    Ok(Distill {
        teacher: teacher.to_path_buf(),
        steps,
    })
}
