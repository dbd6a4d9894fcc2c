//! Reverse-mode autograd: every op that has a tracked input records a node (links to its
//! inputs and a backward closure); `backward` walks them in reverse topological order.

use crate::{Error, Result, Tensor};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Maps the gradient of an op's output to gradients of its inputs (None: input needs none).
#[cfg(not(target_arch = "wasm32"))]
pub type BackwardFn = Box<dyn Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync>;
/// Maps the gradient of an op's output to gradients of its inputs (None: input needs none).
#[cfg(target_arch = "wasm32")]
pub type BackwardFn = Box<dyn Fn(&Tensor) -> Result<Vec<Option<Tensor>>>>;

/// How a tensor was made: the op, links to its inputs (not the inputs' data: what the
/// backward needs, the closure captures) and the backward closure, which runs once.
pub struct Node {
    pub op: &'static str,
    pub inputs: Vec<Arc<GradLink>>,
    backward: Mutex<Option<BackwardFn>>,
}

impl Node {
    pub(crate) fn new(op: &'static str, inputs: &[Tensor], backward: BackwardFn) -> Node {
        Node {
            op,
            inputs: inputs.iter().map(|t| t.0.link.clone()).collect(),
            backward: Mutex::new(Some(backward)),
        }
    }
}

/// A tensor's place in the graph, shared by its handles: whether gradients flow through it,
/// the node that made it (None for a leaf) and, for a leaf, its accumulated gradient.
pub struct GradLink {
    pub(crate) tracked: bool,
    shape: Vec<usize>,
    pub(crate) node: Option<Node>,
    pub(crate) grad: Mutex<Option<Tensor>>,
}

impl GradLink {
    pub(crate) fn untracked(shape: &[usize]) -> Arc<GradLink> {
        GradLink::new(false, shape, None)
    }

    pub(crate) fn leaf(shape: &[usize]) -> Arc<GradLink> {
        GradLink::new(true, shape, None)
    }

    pub(crate) fn node(shape: &[usize], node: Node) -> Arc<GradLink> {
        GradLink::new(true, shape, Some(node))
    }

    fn new(tracked: bool, shape: &[usize], node: Option<Node>) -> Arc<GradLink> {
        Arc::new(GradLink {
            tracked,
            shape: shape.to_vec(),
            node,
            grad: Mutex::new(None),
        })
    }
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

/// `future` with graph recording off while it is polled, and only then: a [`no_grad`] guard
/// held across an `.await` would turn recording off for whatever else the thread runs in the
/// meantime (in a web page every job shares the one thread: a training step would record nothing).
pub fn without_grad<F: std::future::Future>(future: F) -> WithoutGrad<F> {
    WithoutGrad(Box::pin(future))
}

/// The future [`without_grad`] returns.
pub struct WithoutGrad<F>(std::pin::Pin<Box<F>>);

impl<F: std::future::Future> std::future::Future for WithoutGrad<F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let _g = no_grad();
        self.0.as_mut().poll(cx)
    }
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

fn key(link: &Arc<GradLink>) -> *const GradLink {
    Arc::as_ptr(link)
}

/// Back-propagates from a one-element `loss`: adds d(loss)/d(leaf) into every tracked
/// leaf's `grad` (so several calls accumulate gradients across micro-batches). Each node's
/// saved tensors are freed as soon as its backward has run, so a graph is back-propagated
/// once; run the forward again for another backward.
pub fn backward(loss: &Tensor) -> Result<()> {
    if loss.numel() != 1 {
        return Err(Error::Autograd(format!(
            "backward needs a one-element loss, got shape {:?}; reduce it with sum() or mean() first",
            loss.shape()
        )));
    }
    backward_observed(loss, &mut |_| Ok(()))
}

/// [`backward`] that calls `leaf_done` with a leaf's [`leaf_id`] as soon as that leaf's
/// gradient is final (every use of it back-propagated), while the backward of the layers
/// before it is still to be recorded: data-parallel training reads a bucket of finished
/// gradients back while the device runs the rest of the backward.
pub fn backward_observed(loss: &Tensor, leaf_done: &mut dyn FnMut(usize) -> Result<()>) -> Result<()> {
    if loss.numel() != 1 {
        return Err(Error::Autograd(format!(
            "backward needs a one-element loss, got shape {:?}; reduce it with sum() or mean() first",
            loss.shape()
        )));
    }
    let seed = Tensor::full(loss.gpu(), loss.shape(), 1.0, loss.dtype())?;
    propagate(loss, &seed, leaf_done)
}

/// Identifies a tracked leaf (a parameter) to [`backward_observed`]'s callback.
pub fn leaf_id(t: &Tensor) -> usize {
    key(&t.0.link) as usize
}

/// Back-propagates `grad` = d(something)/d(`output`) (same shape as `output`) into every
/// tracked leaf `output` depends on, accumulating like [`backward`].
pub fn backward_from(output: &Tensor, grad: &Tensor) -> Result<()> {
    propagate(output, grad, &mut |_| Ok(()))
}

/// [`backward_from`], telling `leaf_done` of each leaf whose gradient is final.
fn propagate(output: &Tensor, grad: &Tensor, leaf_done: &mut dyn FnMut(usize) -> Result<()>) -> Result<()> {
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
    let root = output.0.link.clone();
    let mut order = topological_order(&root);
    let _guard = no_grad();
    let mut grads: HashMap<*const GradLink, Tensor> = HashMap::new();
    grads.insert(key(&root), grad.detach());
    while let Some(link) = order.pop() {
        let Some(g) = grads.remove(&key(&link)) else {
            continue;
        };
        let Some(node) = &link.node else {
            let mut slot = link.grad.lock().unwrap();
            let total = match slot.take() {
                Some(prev) => prev.add(&g)?,
                None => g,
            };
            *slot = Some(total);
            drop(slot);
            // Reverse topological order: every use of this leaf has been back-propagated.
            leaf_done(key(&link) as usize)?;
            continue;
        };
        // Taken, not borrowed: the closure and the tensors it saved are freed once it has run.
        let backward = node.backward.lock().unwrap().take().ok_or_else(|| {
            Error::Autograd(format!(
                "backward ran through this graph already (at {}): each backward frees what the forward saved; run the forward again",
                node.op
            ))
        })?;
        let input_grads = backward(&g)?;
        drop(backward);
        for (input, ig) in node.inputs.iter().zip(input_grads) {
            let Some(ig) = ig else { continue };
            if !input.tracked {
                continue;
            }
            if ig.shape() != input.shape {
                return Err(Error::Autograd(format!(
                    "backward of {} gave a gradient of shape {:?} for an input of shape {:?}",
                    node.op,
                    ig.shape(),
                    input.shape
                )));
            }
            let entry = match grads.remove(&key(input)) {
                Some(prev) => prev.add(&ig)?,
                None => ig,
            };
            grads.insert(key(input), entry);
        }
    }
    Ok(())
}

/// Tracked links reachable from `root`, each after all of its inputs.
fn topological_order(root: &Arc<GradLink>) -> Vec<Arc<GradLink>> {
    let mut order = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![(root.clone(), false)];
    while let Some((link, expanded)) = stack.pop() {
        if expanded {
            order.push(link);
            continue;
        }
        if !seen.insert(key(&link)) {
            continue;
        }
        stack.push((link.clone(), true));
        if let Some(node) = &link.node {
            for input in &node.inputs {
                if input.tracked && !seen.contains(&key(input)) {
                    stack.push((input.clone(), false));
                }
            }
        }
    }
    order
}
