//! Integration tests of the tensor engine on the shared device (lavapipe in CI): every op
//! against a plain-Rust CPU reference, every backward against central finite differences.

mod common;
mod cpu;

mod attention;
mod autograd;
mod blocks;
mod checkpoint;
mod classifier;
mod cli;
mod compress;
mod conv;
mod crash;
mod data;
mod determinism;
mod device;
mod diffusers;
mod diffusion;
mod distill;
mod elementwise;
mod eval;
mod exact;
mod experiment;
mod fuzz;
mod hardening;
mod inception;
mod ladder;
mod layers;
mod layout;
mod matmul;
mod metrics;
mod models;
mod norm;
mod optim;
mod packed;
mod parallel;
mod port;
mod profiler;
mod random;
mod reduce;
mod resample;
mod samplers;
mod skip_search;
mod softmax;
mod spirals;
mod train;
