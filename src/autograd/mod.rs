//! Reverse-mode autograd: every op that has a tracked input records a node (its inputs and a
//! backward closure); `backward` walks them in reverse topological order.

use crate::{Error, Result, Tensor};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

/// Maps the gradient of an op's output to gradients of its inputs (None: input needs none).
#[cfg(not(target_arch = "wasm32"))]
pub type BackwardFn = Box<dyn Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync>;
/// Maps the gradient of an op's output to gradients of its inputs (None: input needs none).
#[cfg(target_arch = "wasm32")]
pub type BackwardFn = Box<dyn Fn(&Tensor) -> Result<Vec<Option<Tensor>>>>;

/// How a tensor was made.
pub struct Node {
    pub op: &'static str,
    pub inputs: Vec<Tensor>,
    pub backward: BackwardFn,
}

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// True unless inside [`no_grad`].
pub fn grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// While alive, ops record nothing (sampling, evaluation, optimiser updates).
pub struct NoGradGuard {
    previous: bool,
}

/// Turns graph recording off until the guard drops.
pub fn no_grad() -> NoGradGuard {
    let previous = GRAD_ENABLED.with(|g| g.replace(false));
    NoGradGuard { previous }
}

/// Turns graph recording back on until the guard drops (a backward closure that
/// differentiates a recomputed sub-graph uses it; backward closures run under `no_grad`).
pub fn enable_grad() -> NoGradGuard {
    let previous = GRAD_ENABLED.with(|g| g.replace(true));
    NoGradGuard { previous }
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.previous));
    }
}

fn key(t: &Tensor) -> *const () {
    Arc::as_ptr(&t.0) as *const ()
}

/// Back-propagates from a one-element `loss`: adds d(loss)/d(leaf) into every tracked
/// leaf's `grad` (so several calls accumulate gradients across micro-batches).
pub fn backward(loss: &Tensor) -> Result<()> {
    if loss.numel() != 1 {
        return Err(Error::Autograd(format!(
            "backward needs a one-element loss, got shape {:?}; reduce it with sum() or mean() first",
            loss.shape()
        )));
    }
    backward_from(loss, &Tensor::full(loss.gpu(), loss.shape(), 1.0, loss.dtype())?)
}

/// Back-propagates `grad` = d(something)/d(`output`) (same shape as `output`) into every
/// tracked leaf `output` depends on, accumulating like [`backward`].
pub fn backward_from(output: &Tensor, grad: &Tensor) -> Result<()> {
    if !output.tracks_grad() {
        return Err(Error::Autograd(
            "backward on a tensor that does not depend on any parameter (was it built under no_grad, or did you forget requires_grad?)".into(),
        ));
    }
    if grad.shape() != output.shape() {
        return Err(Error::Autograd(format!(
            "backward_from: gradient of shape {:?} for an output of shape {:?}",
            grad.shape(),
            output.shape()
        )));
    }
    let order = topological_order(output);
    let _guard = no_grad();
    let mut grads: HashMap<*const (), Tensor> = HashMap::new();
    grads.insert(key(output), grad.detach());
    for t in order.iter().rev() {
        let Some(g) = grads.remove(&key(t)) else { continue };
        match &t.0.node {
            None => {
                let total = match t.grad() {
                    Some(prev) => prev.add(&g)?,
                    None => g,
                };
                t.set_grad(Some(total));
            }
            Some(node) => {
                let input_grads = (node.backward)(&g)?;
                for (input, ig) in node.inputs.iter().zip(input_grads) {
                    let Some(ig) = ig else { continue };
                    if !input.tracks_grad() {
                        continue;
                    }
                    if ig.shape() != input.shape() {
                        return Err(Error::Autograd(format!(
                            "backward of {} gave a gradient of shape {:?} for an input of shape {:?}",
                            node.op,
                            ig.shape(),
                            input.shape()
                        )));
                    }
                    let entry = match grads.remove(&key(input)) {
                        Some(prev) => prev.add(&ig)?,
                        None => ig,
                    };
                    grads.insert(key(input), entry);
                }
            }
        }
    }
    Ok(())
}

/// Tracked tensors reachable from `root`, each after all of its inputs.
fn topological_order(root: &Tensor) -> Vec<Tensor> {
    let mut order = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![(root.clone(), false)];
    while let Some((t, expanded)) = stack.pop() {
        if expanded {
            order.push(t);
            continue;
        }
        if !seen.insert(key(&t)) {
            continue;
        }
        stack.push((t.clone(), true));
        if let Some(node) = &t.0.node {
            for input in &node.inputs {
                if input.tracks_grad() && !seen.contains(&key(input)) {
                    stack.push((input.clone(), false));
                }
            }
        }
    }
    order
}
