// The uniform of one Adam step (optim::adam8bit::StepParams::words), shared by adam_step
// (optim.wgsl) and adam8bit_step (adam8bit.wgsl).
struct Params {
    n: u32,
    lr: f32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    bias1: f32,      // 1 - beta1^t
    bias2: f32,      // 1 - beta2^t
    decoupled: u32,  // 1: AdamW (decay the weights), 0: Adam (L2 added to the gradient)
    seed: u32,       // the step (8-bit Adam's stochastic rounding differs from step to step)
}
