//! Reference float kernels, one module per TFLite builtin (or family of builtins).
//!
//! Kernels are plain functions over slices and shapes (NHWC for images); the interpreter parses
//! options, computes padding and calls them. They never panic on shapes the interpreter has
//! validated, and do no allocation unless documented.

pub mod batch_matmul;
pub mod compare;
pub mod conv;
pub mod depthwise_conv;
pub mod elementwise;
pub mod fully_connected;
pub mod pool;
pub mod reduce;
pub mod resize;
pub mod shape_ops;
pub mod simd;
pub mod softmax;
pub mod transpose_conv;

/// A fused activation, as in TFLite's `ActivationFunctionType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Activation {
    #[default]
    None,
    Relu,
    ReluN1To1,
    Relu6,
    Tanh,
}

impl Activation {
    /// Applies the activation to one value.
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::None => x,
            Activation::Relu => x.max(0.0),
            Activation::ReluN1To1 => x.clamp(-1.0, 1.0),
            Activation::Relu6 => x.clamp(0.0, 6.0),
            Activation::Tanh => libm_tanh(x),
        }
    }
}

/// `tanh` without std (core has no transcendental functions).
#[inline]
pub fn libm_tanh(x: f32) -> f32 {
    crate::math::tanhf(x)
}
