//! aarch64 micro-kernels: NEON (`Isa::Neon`) and NEON + `sdot` (`Isa::NeonDot`, through
//! inline `asm!` since `vdotq_s32` is unstable on stable Rust), one module per kernel family as
//! in `simd`.
//!
//! To keep the code small (the aarch64 footprint goal), each tile kernel exists in two sizes
//! only: one row (FULLY_CONNECTED with batch 1) and the full tile; a partial tile of more than
//! one row runs the full tile on repeated or stale rows and the caller keeps the rows it asked
//! for. Int8 depthwise multiply-accumulates 8 channels in i16 x i16 -> i32. Requantization is
//! scalar ([`super::Requant::apply`]); int16 ADD/SUB/MUL's output stage is in vectors
//! (`sqrdmulh`, `srshl`).
//!
//! Every `unsafe` block here relies on one invariant besides its bounds checks: the packed
//! weights it is given ([`super::GemmI8`], [`DwI8`], [`super::GemmF32`], [`DwF32`]) were built by their
//! `pack` functions for an [`Isa`] whose `available()` returned true on this CPU, and their
//! fields are private to the crate, so the instructions each kernel uses exist.

// What the family modules use, through `use super::*`.
use core::arch::aarch64::*;
use core::arch::asm;

#[cfg(feature = "ops-int16")]
use super::{ArithI16, ArithOp, Mbqm};
use super::{DwF32, DwI8, Isa, MR_F32, NR_F32};
use crate::kernels::Activation;

mod depthwise_f32;
mod depthwise_i8;
#[cfg(feature = "ops-int16")]
mod elementwise_i16;
#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
mod gelu;
mod gemm_f32;
mod gemm_i8;

pub(crate) use depthwise_f32::*;
pub(crate) use depthwise_i8::*;
#[cfg(feature = "ops-int16")]
pub(crate) use elementwise_i16::*;
#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
pub(crate) use gelu::gelu_exact;
pub(crate) use gemm_f32::*;
pub(crate) use gemm_i8::*;

/// Whether the CPU has `isa`.
pub(crate) fn available(isa: Isa) -> bool {
    #[cfg(feature = "std")]
    {
        let neon = std::arch::is_aarch64_feature_detected!("neon");
        match isa {
            Isa::Portable => true,
            Isa::Neon => neon,
            Isa::NeonDot => neon && std::arch::is_aarch64_feature_detected!("dotprod"),
            _ => false,
        }
    }
    #[cfg(not(feature = "std"))]
    {
        // No run-time detection without std: what the build targets.
        let neon = cfg!(target_feature = "neon");
        match isa {
            Isa::Portable => true,
            Isa::Neon => neon,
            Isa::NeonDot => neon && cfg!(target_feature = "dotprod"),
            _ => false,
        }
    }
}

#[inline]
#[target_feature(enable = "neon")]
fn activate(v: float32x4_t, act: Activation) -> float32x4_t {
    match act {
        Activation::Relu => vmaxq_f32(v, vdupq_n_f32(0.0)),
        Activation::Relu6 => vminq_f32(vmaxq_f32(v, vdupq_n_f32(0.0)), vdupq_n_f32(6.0)),
        Activation::ReluN1To1 => vminq_f32(vmaxq_f32(v, vdupq_n_f32(-1.0)), vdupq_n_f32(1.0)),
        // Tanh is applied by the caller (scalar).
        Activation::None | Activation::Tanh => v,
    }
}
