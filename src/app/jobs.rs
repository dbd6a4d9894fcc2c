//! Background jobs of the app: a job runs an async library call on the platform's worker,
//! sends messages to its view, can be cancelled at any time and ends with Ok or an error.

use super::platform::{self, JobSafe};
use crate::{Error, Result};
use eframe::egui;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

/// What a running job reports to its view.
pub enum Event<M> {
    /// A message of the job's own kind (a frame, a loss, a profile, ...).
    Message(M),
    /// The job ended: Ok, cancelled, or an error's message.
    Finished(std::result::Result<(), String>),
}

/// The view's handle on a job.
pub struct Job<M> {
    events: Receiver<Event<M>>,
    cancel: Arc<AtomicBool>,
    running: bool,
}

/// The job's side: sends messages, asks whether it was cancelled.
pub struct JobContext<M> {
    events: Sender<Event<M>>,
    cancel: Arc<AtomicBool>,
    repaint: egui::Context,
}

impl<M: JobSafe + 'static> Job<M> {
    /// Starts `work` on the platform's worker; the UI shows what it sends at its next frame and
    /// repaints at once when it ends.
    pub fn start<F, Fut>(ui: &egui::Context, name: &str, work: F) -> Job<M>
    where
        F: FnOnce(JobContext<M>) -> Fut + JobSafe + 'static,
        Fut: Future<Output = Result<()>> + 'static,
    {
        let (tx, events) = channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let context = JobContext {
            events: tx.clone(),
            cancel: cancel.clone(),
            repaint: ui.clone(),
        };
        let (failed, repaint) = (tx.clone(), ui.clone());
        let started = platform::spawn(name, move || async move {
            let ended = work(context).await;
            let _ = tx.send(Event::Finished(match ended {
                Ok(()) | Err(Error::Cancelled) => Ok(()),
                Err(e) => Err(e.to_string()),
            }));
            repaint.request_repaint();
        });
        if let Err(e) = started {
            // A job that cannot start ends at once with that error.
            let _ = failed.send(Event::Finished(Err(e.to_string())));
        }
        Job {
            events,
            cancel,
            running: true,
        }
    }

    /// Everything the job sent since the last call (the job counts as stopped after `Finished`).
    pub fn poll(&mut self) -> Vec<Event<M>> {
        let events: Vec<Event<M>> = self.events.try_iter().collect();
        if events.iter().any(|e| matches!(e, Event::Finished(_))) {
            self.running = false;
        }
        events
    }

    /// Blocks until the job ends or `limit` passes, dropping its messages (a closing window
    /// waits for a stopped run's checkpoint: the process would end before the job wrote it).
    /// The job's result, or None when it was still running at `limit`.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn wait_until_ended(
        &mut self,
        limit: std::time::Duration,
    ) -> Option<std::result::Result<(), String>> {
        let deadline = std::time::Instant::now() + limit;
        while self.running {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.events.recv_timeout(left) {
                Ok(Event::Finished(result)) => {
                    self.running = false;
                    return Some(result);
                }
                Ok(Event::Message(_)) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => self.running = false,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => return None,
            }
        }
        Some(Ok(()))
    }

    /// Asks the job to stop at its next check.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// True until the job has reported that it ended.
    pub fn running(&self) -> bool {
        self.running
    }
}

impl<M> JobContext<M> {
    /// Sends a message to the view, which shows it at the UI's next frame: at the latest after
    /// [`busy_redraw`](super::busy_redraw), the cadence the UI keeps while jobs run (a later
    /// wake-up than the frame asked for would replace it). Waking the UI at once for every step
    /// drew a third more frames, each taken from the job (on lavapipe).
    pub fn send(&self, message: M) {
        let _ = self.events.send(Event::Message(message));
        self.repaint
            .request_repaint_after(super::busy_redraw(&self.repaint));
    }

    /// `Err(Error::Cancelled)` once the view has cancelled the job.
    pub fn check(&self) -> Result<()> {
        match self.cancel.load(Ordering::Relaxed) {
            true => Err(Error::Cancelled),
            false => Ok(()),
        }
    }
}

/// Whether an optional job is running.
pub fn is_running<M: JobSafe + 'static>(job: &Option<Job<M>>) -> bool {
    job.as_ref().is_some_and(Job::running)
}
