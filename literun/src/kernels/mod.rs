//! Reference float kernels, one module per TFLite builtin (or family of builtins).
//!
//! Kernels are plain functions over slices and shapes (NHWC for images); the interpreter parses
//! options, computes padding and calls them. They never panic on shapes the interpreter has
//! validated, and do no allocation unless documented.

pub mod accumulate;
pub mod batch_matmul;
pub mod compare;
pub mod conv;
pub mod data;
pub mod depthwise_conv;
pub mod elementwise;
pub mod fft;
pub mod fully_connected;
#[cfg(all(
    feature = "ops-reduce",
    feature = "ops-elementwise",
    feature = "ops-float"
))]
pub mod layer_norm;
pub mod lstm_int8;
pub mod pool;
pub mod reduce;
pub mod resize;
pub mod sequence;
pub mod shape_ops;
pub mod simd;
pub mod softmax;
pub mod transpose_conv;

/// A stored quantized activation type: int8, or int16 (int16x8 models).
pub trait Quantized: Copy {
    const MIN: i32;
    const MAX: i32;
    fn get(self) -> i32;
    /// `v` clamped to the type's range.
    fn saturate(v: i32) -> Self;
}

impl Quantized for i8 {
    const MIN: i32 = -128;
    const MAX: i32 = 127;
    #[inline]
    fn get(self) -> i32 {
        i32::from(self)
    }
    #[inline]
    fn saturate(v: i32) -> i8 {
        v.clamp(-128, 127) as i8
    }
}

impl Quantized for i16 {
    const MIN: i32 = -32768;
    const MAX: i32 = 32767;
    #[inline]
    fn get(self) -> i32 {
        i32::from(self)
    }
    #[inline]
    fn saturate(v: i32) -> i16 {
        v.clamp(-32768, 32767) as i16
    }
}

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
