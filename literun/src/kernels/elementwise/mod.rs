//! Elementwise kernels: binary operators with numpy broadcasting, and unary operators, in float
//! and int32 ([`binary_f32`], [`unary_f32`]), quantized ([`BinaryI8`], QUANTIZE, 8-bit lookup
//! tables).

// What the concern modules use, through `use super::*`.
use super::Activation;
use crate::math::{
    ceilf, cosf, erff, exp_fast, expf, expm1f, floorf, gelu_fast, gelu_tanh_fast, logf,
    logistic_fast, powf, sinf, sqrtf, tanh_fast, tanhf,
};
use crate::quant::{
    downscale_multiplier_to_i16, multiply_by_quantized_multiplier as mbqm,
    multiply_by_quantized_multiplier_smaller_than_one as mbqm_lt1, quantize_multiplier,
    quantize_multiplier_smaller_than_one, rounding_divide_by_pot, rounding_divide_by_pot_i16,
    saturating_rounding_doubling_high_mul_i16 as srdhm16,
};

mod binary;
mod broadcast;
#[cfg(all(
    target_arch = "x86_64",
    feature = "ops-elementwise",
    feature = "ops-float"
))]
mod gelu_blocks;
mod lut;
mod quantize;
mod quantized;
mod unary;

pub use binary::*;
pub use broadcast::*;
#[cfg(all(
    target_arch = "x86_64",
    feature = "ops-elementwise",
    feature = "ops-float"
))]
pub(crate) use gelu_blocks::gelu_tanh_blocks;
pub use lut::*;
pub use quantize::*;
pub use quantized::*;
pub use unary::*;
