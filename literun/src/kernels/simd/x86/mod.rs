//! x86-64 micro-kernels: AVX2 (+FMA), AVX-VNNI and AVX-512 VNNI, one module per kernel family
//! as in `simd`: each exposes the entry points its family's driver calls (`tile_i8`,
//! `dw_i8_rows`, `wino_input_f32`, ...), which pick the ISA's kernel.
//!
//! Every `unsafe` block here relies on one invariant besides its bounds checks: the packed
//! weights it is given ([`super::GemmI8`], [`DwI8`], [`super::GemmF32`], [`DwF32`]) were built
//! by their `pack` functions for an [`Isa`] whose `available()` returned true on this CPU, and
//! their fields are private to the crate, so the instructions each kernel uses exist.

// What the family modules use, through `use super::*`.
use core::arch::x86_64::*;
use core::ops::Range;

#[cfg(feature = "ops-int16")]
use super::ArithI16;
use super::{
    f32_row_ptrs, for_each_window_ptrs, for_each_window_run, fused_cache_in, fused_cache_scratch,
    ArithI8, ArithOp, Dw3, Dw3Stage, DwF32, DwI8, Isa, Mbqm, QuantizeTo, Requant, SegF32,
    DW3_STRIP, DW_MAX_TAPS, FUSED_CACHE_WORDS, GROUP_F32, MAX_SEGS_F32, MR_F32, NR_F32,
    UNSIGNED_CACHE_WORDS,
};
use crate::kernels::conv::Conv2dParams;
use crate::kernels::elementwise::Run;
use crate::kernels::Activation;

#[cfg(feature = "amx")]
mod amx;
#[cfg(all(feature = "ops-batch-matmul", feature = "ops-float"))]
mod batch_matmul;
mod depthwise3x3_f32;
mod depthwise3x3_i8;
mod depthwise_f32;
mod depthwise_i8;
mod elementwise;
#[cfg(feature = "ops-int16")]
mod elementwise_i16;
#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
mod gelu;
mod gemm_f32;
mod gemm_f32_direct;
mod gemm_i8;
mod gemm_i8_rq512;
mod requant;
mod requant_u;
mod winograd;

#[cfg(feature = "amx")]
pub(crate) use amx::*;
#[cfg(all(feature = "ops-batch-matmul", feature = "ops-float"))]
pub(crate) use batch_matmul::*;
use depthwise3x3_f32::*;
use depthwise3x3_i8::*;
pub(crate) use depthwise_f32::*;
pub(crate) use depthwise_i8::*;
pub(crate) use elementwise::*;
#[cfg(feature = "ops-int16")]
pub(crate) use elementwise_i16::*;
pub(crate) use gemm_f32::*;
pub(crate) use gemm_f32_direct::*;
pub(crate) use gemm_i8::*;
pub(crate) use gemm_i8_rq512::*;
pub(crate) use requant::*;
pub(crate) use requant_u::*;
pub(crate) use winograd::*;

/// Whether the CPU has `isa`.
pub(crate) fn available(isa: Isa) -> bool {
    #[cfg(feature = "std")]
    {
        let avx2 = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        match isa {
            Isa::Portable => true,
            Isa::Neon | Isa::NeonDot => false,
            Isa::Avx2 => avx2,
            Isa::AvxVnni => avx2 && std::is_x86_feature_detected!("avxvnni"),
            Isa::Avx512Vnni => {
                avx2 && std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl")
                    && std::is_x86_feature_detected!("avx512vnni")
            }
            #[cfg(feature = "amx")]
            Isa::Avx512Amx => available(Isa::Avx512Vnni) && amx_usable(),
            #[cfg(not(feature = "amx"))]
            Isa::Avx512Amx => false,
        }
    }
    #[cfg(not(feature = "std"))]
    {
        // No run-time detection without std: what the build targets.
        let avx2 = cfg!(target_feature = "avx2") && cfg!(target_feature = "fma");
        match isa {
            Isa::Portable => true,
            Isa::Neon | Isa::NeonDot => false,
            Isa::Avx2 => avx2,
            Isa::AvxVnni => avx2 && cfg!(target_feature = "avxvnni"),
            Isa::Avx512Vnni => {
                avx2 && cfg!(target_feature = "avx512f")
                    && cfg!(target_feature = "avx512bw")
                    && cfg!(target_feature = "avx512vl")
                    && cfg!(target_feature = "avx512vnni")
            }
            // (The tile permission is asked through std.)
            Isa::Avx512Amx => false,
        }
    }
}

#[inline]
#[target_feature(enable = "avx2,fma")]
fn activate(v: __m256, act: Activation) -> __m256 {
    match act {
        Activation::Relu => _mm256_max_ps(v, _mm256_setzero_ps()),
        Activation::Relu6 => {
            _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(6.0))
        }
        Activation::ReluN1To1 => {
            _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-1.0)), _mm256_set1_ps(1.0))
        }
        // Tanh is applied by the caller (scalar).
        Activation::None | Activation::Tanh => v,
    }
}

/// Lower and upper bounds that clamp to `act` (Relu, Relu6, ReluN1To1; `max` first, so NaN
/// becomes the lower bound as in [`activate512`]).
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
fn clamp512(act: Activation) -> (__m512, __m512) {
    let (lo, hi) = match act {
        Activation::Relu => (0.0, f32::INFINITY),
        Activation::Relu6 => (0.0, 6.0),
        Activation::ReluN1To1 => (-1.0, 1.0),
        Activation::None | Activation::Tanh => (f32::NEG_INFINITY, f32::INFINITY),
    };
    (_mm512_set1_ps(lo), _mm512_set1_ps(hi))
}

#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
fn activate512(v: __m512, act: Activation) -> __m512 {
    let zero = _mm512_setzero_ps();
    match act {
        Activation::Relu => _mm512_max_ps(v, zero),
        Activation::Relu6 => _mm512_min_ps(_mm512_max_ps(v, zero), _mm512_set1_ps(6.0)),
        Activation::ReluN1To1 => {
            _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-1.0)), _mm512_set1_ps(1.0))
        }
        // Tanh is applied by the caller (scalar).
        Activation::None | Activation::Tanh => v,
    }
}

/// The mask of the first `min(n, 16)` lanes.
#[inline]
fn lanes16(n: usize) -> __mmask16 {
    if n >= 16 {
        0xFFFF
    } else {
        ((1u32 << n) - 1) as __mmask16
    }
}
