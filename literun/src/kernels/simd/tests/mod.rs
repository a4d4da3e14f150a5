//! Every fast path against the portable kernel on random shapes (odd sizes, padding,
//! strides, dilation), for every ISA this CPU has: int8 bit-exact, float within 1e-5.

use super::*;
use crate::kernels::{conv, depthwise_conv, fully_connected};
use crate::quant::quantize_multiplier;
#[allow(unused_imports)]
use alloc::{format, vec, vec::Vec};

/// A test of one fast path against the portable kernel: `$body` runs for cases `0..$cases` on
/// every ISA this CPU has ([`isas`]), drawing from one `Rng($seed)` for all of them.
macro_rules! fast_vs_portable {
    (
        $(#[$attr:meta])*
        fn $name:ident(seed $seed:literal, cases $cases:literal, $isa:ident, $case:ident, $rng:ident)
        $body:block
    ) => {
        $(#[$attr])*
        #[test]
        fn $name() {
            let mut $rng = Rng($seed);
            for $isa in isas() {
                for $case in 0..$cases {
                    $body
                }
            }
        }
    };
}

#[cfg(all(feature = "ops-batch-matmul", feature = "ops-float"))]
mod batch_matmul_f32;
#[cfg(all(feature = "ops-batch-matmul", feature = "ops-int8"))]
mod batch_matmul_i8;
mod depthwise_f32;
mod depthwise_i8;
mod elementwise;
#[cfg(all(
    feature = "ops-int16",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod elementwise_i16;
mod gemm_f32;
mod gemm_i8;
mod pad;
#[cfg(feature = "ops-pool")]
mod pool;
mod requant;
mod winograd;

struct Rng(u64);
impl Rng {
    fn u(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.u() % n as u64) as usize
    }
    fn i8s(&mut self, n: usize) -> Vec<i8> {
        (0..n).map(|_| (self.u() >> 56) as i8).collect()
    }
    fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.u() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
            .collect()
    }
    fn stage(&mut self, n: usize, k: usize, single: bool) -> OutputStage {
        let mut multipliers = Vec::new();
        let mut shifts = Vec::new();
        for _ in 0..n {
            // Typical conv scales (acc ~ 2^15 * k -> int8), and some above 1.
            let e = -(self.below(14) as i32) - 4 - (k as f64).log2() as i32 / 2;
            let real = (1.0 + self.below(1000) as f64 / 1000.0) * 2f64.powi(e);
            let real = if self.below(20) == 0 {
                real * 4096.0
            } else {
                real
            };
            let (m, s) = quantize_multiplier(real);
            multipliers.push(m);
            shifts.push(s);
        }
        let act_min = -128 + self.below(2) as i32 * (self.below(100) as i32);
        OutputStage {
            input_offset: -((self.u() >> 56) as i8 as i32),
            output_offset: (self.u() >> 56) as i8 as i32,
            multipliers,
            shifts,
            act_min,
            act_max: 127 - self.below(2) as i32 * (self.below(60) as i32),
            single_rounding: single,
        }
    }
}

fn isas() -> Vec<Isa> {
    [
        Isa::Avx2,
        Isa::AvxVnni,
        Isa::Avx512Vnni,
        Isa::Neon,
        Isa::NeonDot,
    ]
    .into_iter()
    .filter(|i| i.available())
    .collect()
}

/// The ISAs the tests above run: on aarch64 NEON at least (it is part of the base
/// architecture), so the NEON paths are always compared with the portable kernels there.
#[test]
fn tested_isas() {
    let all = isas();
    #[cfg(feature = "std")]
    std::eprintln!(
        "fast paths tested here: {all:?}, detected {:?}",
        Isa::detect()
    );
    if cfg!(target_arch = "aarch64") {
        assert!(all.contains(&Isa::Neon));
        assert!(Isa::detect() == Isa::NeonDot || Isa::detect() == Isa::Neon);
    }
}

/// Scratch of three workers: with the `threads` feature every case runs split over three
/// threads (the tests' work threshold is 0), so the split must not change any output.
fn scratch_for(k: usize, i32s: usize) -> Workers {
    workers_for(k, i32s, 3)
}

/// Scratch of `n` workers.
fn workers_for(k: usize, i32s: usize, n: usize) -> Workers {
    let one = || FastScratch {
        i8s: vec![0; k],
        i32s: vec![0; i32s],
        f32s: vec![0.0; (MR_F32 + 1) * k],
    };
    Workers::new((0..n).map(|_| one()).collect())
}

fn dw_case(rng: &mut Rng, case: usize) -> ([usize; 4], [usize; 4], [usize; 4], DepthwiseParams) {
    let k = [3, 3, 3, 5, 1, 2][case % 6];
    // Some non-square windows: 2, 3, 6 and 7 taps (every count of taps modulo 4).
    let (kh, kw) = match case % 8 {
        3 => (1, 2),
        5 => (3, 1),
        7 if case % 16 == 7 => (2, 3),
        7 => (1, 7),
        _ => (k, k),
    };
    let stride = 1 + case % 2;
    let dil = if case.is_multiple_of(11) { 2 } else { 1 };
    // Up to 200 channels: several 64-channel blocks of the AVX-512 layout, odd tails;
    // rows up to ~93 pixels wide.
    let c = 1 + rng.below(if case % 3 == 1 { 200 } else { 100 });
    let wide = if case % 5 == 4 { 90 } else { 10 };
    let (h, w) = (kh * dil + rng.below(10), kw * dil + rng.below(wide));
    let pad = if case.is_multiple_of(3) {
        0
    } else {
        (kh.max(kw) - 1) * dil / 2 + rng.below(2)
    };
    let oh = (h + 2 * pad - (kh - 1) * dil - 1) / stride + 1;
    let ow = (w + 2 * pad - (kw - 1) * dil - 1) / stride + 1;
    let p = DepthwiseParams {
        stride_h: stride,
        stride_w: stride,
        dilation_h: dil,
        dilation_w: dil,
        pad_top: pad,
        pad_left: pad.min(1),
        depth_multiplier: 1,
        activation: [Activation::None, Activation::Relu6, Activation::Relu][case % 3],
    };
    let b = 1 + case % 2;
    ([b, h, w, c], [1, kh, kw, c], [b, oh, ow, c], p)
}

fn close(got: &[f32], want: &[f32], what: &str) {
    let peak = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * peak.max(b.abs()),
            "{what} at {i}: {a} vs {b}"
        );
    }
}

/// [`close`] with an error bound of at least 1e-5 absolute: a few outputs of small sums
/// may cancel to near zero, where the relative error of the summation order is large.
fn close_abs(got: &[f32], want: &[f32], what: &str) {
    let peak = want.iter().fold(1f32, |m, v| m.max(v.abs()));
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= 1e-5 * peak, "{what} at {i}: {a} vs {b}");
    }
}

/// Which GEMMs split by output channels: ResNet18's last layers (16 and 49 pixels, 256-512
/// channels) where that is more even, not its stem (one block of channels) nor a layer of
/// many rows.
#[cfg(feature = "threads")]
#[test]
fn few_rows_and_many_channels_split_by_channels() {
    let gemm = |m, n, k, mr, cols| GemmBlocks { m, n, k, mr, cols };
    for threads in [2, 3, 4] {
        assert!(by_channels(&gemm(16, 512, 4608, MR_F32, COLS_F32), threads));
        assert!(by_channels(&gemm(16, 512, 4608, 8, COLS_I8), threads));
        assert!(by_channels(&gemm(9, 1280, 112, 8, COLS_I8), threads));
        assert!(!by_channels(
            &gemm(3136, 64, 147, MR_F32, COLS_F32),
            threads
        ));
        assert!(!by_channels(
            &gemm(3136, 256, 64, MR_F32, COLS_F32),
            threads
        ));
    }
    // 49 rows on 3 threads: 3 of 9 tiles each, against 2 of 4 blocks of channels.
    assert!(by_channels(&gemm(49, 256, 2304, MR_F32, COLS_F32), 2));
    assert!(!by_channels(&gemm(49, 256, 2304, MR_F32, COLS_F32), 3));
    assert!(by_channels(&gemm(49, 256, 2304, MR_F32, COLS_F32), 4));
    assert!(!by_channels(&gemm(196, 128, 576, MR_F32, COLS_F32), 2));
    assert!(!by_channels(&gemm(16, 512, 4608, MR_F32, COLS_F32), 1));
}

/// The split threshold weighs work by the kernel's speed on the ISA: a 12x12x96 3x3 depthwise
/// layer (124k multiply-accumulates) splits with AVX2 kernels, where it took ~14 µs, not with
/// AVX-512 ones (~3 µs, slower on two threads); a GEMM splits sooner with narrower vectors, and
/// without a dot-product instruction sooner still.
#[cfg(feature = "threads")]
#[test]
fn the_split_threshold_follows_the_isa() {
    let dw = Work::Depthwise(12 * 12 * 96 * 9);
    assert!(dw.cost(Isa::Avx2) >= PARALLEL_MIN_COST);
    assert!(dw.cost(Isa::Avx512Vnni) < PARALLEL_MIN_COST);
    let gemm = |isa: Isa, macs| Work::GemmI8(macs).cost(isa) >= PARALLEL_MIN_COST;
    assert!(!gemm(Isa::Avx512Vnni, 12 * 12 * 96 * 9));
    assert!(gemm(Isa::Avx2, 6 * 6 * 24 * 144));
    let smallest = |isa: Isa| (1..1 << 16).find(|&m| gemm(isa, m << 8)).unwrap();
    assert!(smallest(Isa::Avx2) < smallest(Isa::AvxVnni));
    assert!(smallest(Isa::AvxVnni) < smallest(Isa::Avx512Vnni));
    assert!(smallest(Isa::Neon) < smallest(Isa::NeonDot));
    let f32_cost = |isa: Isa| Work::GemmF32(1 << 16).cost(isa);
    assert!(f32_cost(Isa::Avx2) > f32_cost(Isa::Avx512Vnni));
    // A transformer's 32-token dense layer stays whole on every ISA; many rows split.
    let fc = |isa: Isa, rows, k| fc_row_work(rows, rows * 64 * k).cost(isa) >= PARALLEL_MIN_COST;
    assert!(!fc(Isa::Avx512Vnni, 32, 256));
    assert!(!fc(Isa::Avx2, 32, 256));
    assert!(!fc(Isa::Neon, 16, 64));
    assert!(fc(Isa::Avx512Vnni, 196, 256));
    assert!(fc(Isa::Avx2, 48, 64));
    // The same for int8, and a large layer of few rows splits.
    let fc_i8 =
        |isa: Isa, rows| fc_row_work_i8(isa, rows, rows * 64 * 256).cost(isa) >= PARALLEL_MIN_COST;
    assert!(!fc_i8(Isa::Avx512Vnni, 32));
    assert!(fc_i8(Isa::Avx2, 32));
    assert!(fc_i8(Isa::Avx512Vnni, 196));
    let big = 32 * 768 * 3072;
    assert!(fc_row_work(32, big).cost(Isa::Avx2) >= PARALLEL_MIN_COST);
    assert!(fc_row_work_i8(Isa::Avx512Vnni, 32, big).cost(Isa::Avx512Vnni) >= PARALLEL_MIN_COST);
}
