//! Fast paths for the operators where the time goes: int8 and float CONV_2D (1x1 as a GEMM, any
//! other size through an im2col row buffer), DEPTHWISE_CONV_2D (depth multiplier 1, any kernel,
//! stride, dilation and padding) and FULLY_CONNECTED; on x86-64 also int8 ADD/SUB and QUANTIZE
//! from float32; int16 ADD/SUB/MUL (x86-64 and NEON); and int8 and float MAX_POOL_2D, float
//! ADD/SUB/MUL and constant PAD (no weights: chosen per operator like the others, bit-exact
//! with the scalar kernels, split over the workers like the convolutions).
//!
//! Everything here is chosen once, when the interpreter is prepared: [`Isa::detect`] picks the
//! best instruction set the CPU has, and the `pack_*` functions re-lay the constant weights for
//! it (counted in `Interpreter::prepacked_bytes`). At run time the drivers walk the output in
//! tiles and call the ISA's micro-kernels. Operators whose weights are not constant, grouped
//! convolutions and depth multipliers other than 1 keep the portable kernels.
//!
//! # Layout
//! One module per kernel family holds the packed weights, the drivers and the one place that
//! picks the ISA's kernel for each step: `gemm_i8` (int8 CONV_2D and FULLY_CONNECTED),
//! `gemm_f32` (float; `batch_matmul_f32` runs its tile on two activations), `winograd` (float 3x3), `depthwise_i8` and `depthwise_f32`
//! (sharing `depthwise`'s window walk), `elementwise` (int8 ADD/SUB/MUL, QUANTIZE, float
//! unary and ADD/SUB/MUL, TRANSPOSE), `elementwise_i16` (int16 ADD/SUB/MUL), `pool`
//! (MAX_POOL_2D), `pad` (constant PAD by rows); `requant` is the int8 output stage and `im2col` the GEMMs' rows. The
//! micro-kernels live beside them by ISA, one file per family: `x86` (AVX2, AVX-VNNI,
//! AVX-512) and `aarch64` (NEON, and `sdot` where the CPU has it). This module holds the
//! ISA detection ([`Isa`]) and what every family shares: the workers' scratch
//! (`FastScratch`) and the split of an operator's output over them (by rows, or a GEMM's by
//! output channels).
//!
//! # Exactness
//! The int8 paths compute the same integers as the portable kernels: the accumulation is exact
//! (wrapping i32 arithmetic is associative), padding taps read the input zero point (which
//! contributes `w * (zp - zp) = 0`, as the reference's skipped taps), `input_offset * sum(w)`
//! and the bias are folded into one per-channel constant, and the requantization reproduces
//! `MultiplyByQuantizedMultiplier` bit for bit (see `x86::Rq8`). Float paths reorder the
//! sums (and fuse multiply-adds), so they agree with the portable kernels to ~1e-6 relative.

// The fast paths exist for x86-64 and aarch64: elsewhere `Isa::detect` is always `Portable`,
// these functions are never reached, and their SIMD calls compile away.
#![cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(unused_variables, unused_mut, dead_code)
)]

// What the family modules use, through `use super::*`.
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use super::conv::Conv2dParams;
use super::depthwise_conv::DepthwiseParams;
use super::Activation;
use crate::quant::OutputStage;

#[cfg(target_arch = "aarch64")]
pub mod aarch64;
#[cfg(target_arch = "x86_64")]
pub mod x86;

#[cfg(all(feature = "ops-batch-matmul", feature = "ops-float"))]
mod batch_matmul_f32;
#[cfg(all(feature = "ops-batch-matmul", feature = "ops-int8"))]
mod batch_matmul_i8;
mod depthwise;
mod depthwise_f32;
mod depthwise_i8;
mod elementwise;
#[cfg(all(
    feature = "ops-int16",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod elementwise_i16;
mod fully_connected_f32;
mod gemm_f32;
mod gemm_i8;
mod gemm_i8_amx;
mod im2col;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod pad;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod pool;
mod requant;
#[cfg(feature = "threads")]
mod thread_pool;
mod winograd;

#[cfg(all(feature = "ops-batch-matmul", feature = "ops-float"))]
pub(crate) use batch_matmul_f32::*;
#[cfg(all(feature = "ops-batch-matmul", feature = "ops-int8"))]
pub(crate) use batch_matmul_i8::*;
pub(crate) use depthwise::*;
pub use depthwise_f32::*;
pub use depthwise_i8::*;
pub(crate) use elementwise::*;
#[cfg(all(
    feature = "ops-int16",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub(crate) use elementwise_i16::*;
pub(crate) use fully_connected_f32::*;
pub use gemm_f32::*;
pub use gemm_i8::*;
pub(crate) use gemm_i8_amx::*;
pub(crate) use im2col::*;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) use pad::*;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) use pool::*;
pub(crate) use requant::*;
pub use winograd::*;

/// Whether this target has fast kernels at all (x86-64 and aarch64): elsewhere the interpreter
/// leaves them, and the packing code, out of the build.
pub(crate) const FAST_KERNELS: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// The instruction set the fast kernels use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Isa {
    /// The portable kernels only.
    #[default]
    Portable,
    /// x86-64 AVX2 + FMA.
    Avx2,
    /// AVX2 + FMA + AVX-VNNI (256-bit `vpdpbusd`).
    AvxVnni,
    /// AVX-512 F/BW/VL + VNNI (512-bit `vpdpbusd`).
    Avx512Vnni,
    /// [`Isa::Avx512Vnni`] with the int8 GEMM (CONV_2D, FULLY_CONNECTED) on AMX tiles
    /// (`tdpbusd`, AMX-INT8), where the CPU has them and the OS grants this process their state
    /// (x86-64 Linux, feature `amx`). Every other kernel is AVX-512 VNNI's.
    Avx512Amx,
    /// aarch64 NEON (Advanced SIMD).
    Neon,
    /// NEON + the dot-product instructions (`sdot`, Armv8.2 `dotprod`).
    NeonDot,
}

impl Isa {
    /// The best instruction set this CPU supports.
    pub fn detect() -> Isa {
        for isa in [
            Isa::Avx512Amx,
            Isa::Avx512Vnni,
            Isa::AvxVnni,
            Isa::Avx2,
            Isa::NeonDot,
            Isa::Neon,
        ] {
            if isa.available() {
                return isa;
            }
        }
        Isa::Portable
    }

    /// Whether this CPU can run `self`'s kernels.
    pub fn available(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            _ => x86::available(self),
            #[cfg(target_arch = "aarch64")]
            _ => aarch64::available(self),
            #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
            _ => false,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::AvxVnni => "avx-vnni",
            Isa::Avx512Vnni => "avx512-vnni",
            Isa::Avx512Amx => "avx512-amx",
            Isa::Neon => "neon",
            Isa::NeonDot => "neon-dot",
        }
    }

    /// The ISA of the vector kernels: `self`, but [`Isa::Avx512Vnni`] for [`Isa::Avx512Amx`]
    /// (whose tiles serve the int8 GEMM alone, which takes the full ISA).
    pub fn vector(self) -> Isa {
        match self {
            Isa::Avx512Amx => Isa::Avx512Vnni,
            isa => isa,
        }
    }

    /// Rows of the int8 GEMM tile.
    fn mr_i8(self) -> usize {
        match self {
            Isa::Avx512Vnni => 8,
            Isa::AvxVnni => 6,
            _ => 4,
        }
    }

    /// Columns (output channels) of the int8 GEMM tile.
    fn nr_i8(self) -> usize {
        match self {
            Isa::Avx512Vnni => 32,
            _ => 16,
        }
    }

    /// Bytes of `k` per 32-bit lane in the int8 tile: 4 with `vpdpbusd` and `sdot`, 2 with
    /// `vpmaddwd` and NEON's `vmull_s16`.
    fn kg_i8(self) -> usize {
        match self {
            Isa::Avx512Vnni | Isa::AvxVnni | Isa::NeonDot => 4,
            _ => 2,
        }
    }

    /// Whether the int8 GEMM's left-hand side is offset to unsigned (`vpdpbusd` multiplies
    /// unsigned by signed bytes; `sdot` is signed by signed).
    fn vnni(self) -> bool {
        matches!(self, Isa::Avx512Vnni | Isa::AvxVnni)
    }

    /// Whether the int8 GEMM multiplies 4 bytes per 32-bit lane in one instruction
    /// (`vpdpbusd`, `sdot`).
    #[cfg_attr(not(feature = "threads"), allow(dead_code))]
    fn dot_product(self) -> bool {
        self.kg_i8() == 4
    }

    /// Whether `self` is one of the aarch64 ISAs.
    fn neon(self) -> bool {
        matches!(self, Isa::Neon | Isa::NeonDot)
    }
}

/// Scratch of the fast kernels, sized once by the interpreter ([`Fast::scratch`]).
#[derive(Debug, Default)]
pub(crate) struct FastScratch {
    pub(crate) i8s: Vec<i8>,
    pub(crate) i32s: Vec<i32>,
    pub(crate) f32s: Vec<f32>,
}

/// The kernels' workers: one scratch each, the first the calling thread's, and (feature
/// `threads`, more than one) the [`thread_pool::Pool`] that runs the others, started by the first
/// operator big enough to split.
#[derive(Debug, Default)]
pub(crate) struct Workers {
    scratch: Vec<FastScratch>,
    #[cfg(feature = "threads")]
    pool: Option<thread_pool::Pool>,
    /// The kernels' ISA, which sets how long an operator's [`Work`] takes.
    #[cfg(feature = "threads")]
    isa: Isa,
    /// One output buffer per worker for blocks of output channels ([`for_gemm_blocks`]),
    /// grown by the first operator split that way.
    #[cfg(feature = "threads")]
    channel_blocks: ChannelBlocks,
}

/// Per-worker outputs of blocks of output channels, one kind per element type.
#[cfg(feature = "threads")]
#[derive(Debug, Default)]
pub(crate) struct ChannelBlocks {
    f32s: Vec<Vec<f32>>,
    i8s: Vec<Vec<i8>>,
}

/// An output element type that [`for_gemm_blocks`] can split by output channels.
pub(crate) trait BlockElem: Copy + Default + Send + Sync {
    /// The per-worker buffers of this type.
    #[cfg(feature = "threads")]
    fn buffers(blocks: &mut ChannelBlocks) -> &mut Vec<Vec<Self>>;
    /// `macs` multiply-accumulates of a GEMM of this type.
    fn gemm_work(macs: usize) -> Work;
}

impl BlockElem for f32 {
    #[cfg(feature = "threads")]
    fn buffers(blocks: &mut ChannelBlocks) -> &mut Vec<Vec<f32>> {
        &mut blocks.f32s
    }
    fn gemm_work(macs: usize) -> Work {
        Work::GemmF32(macs)
    }
}

impl BlockElem for i8 {
    #[cfg(feature = "threads")]
    fn buffers(blocks: &mut ChannelBlocks) -> &mut Vec<Vec<i8>> {
        &mut blocks.i8s
    }
    fn gemm_work(macs: usize) -> Work {
        Work::GemmI8(macs)
    }
}

impl Workers {
    /// Workers with these scratch buffers (no threads started yet).
    pub(crate) fn new(scratch: Vec<FastScratch>) -> Self {
        Workers {
            scratch,
            #[cfg(feature = "threads")]
            pool: None,
            #[cfg(feature = "threads")]
            isa: Isa::Portable,
            #[cfg(feature = "threads")]
            channel_blocks: ChannelBlocks::default(),
        }
    }

    /// Sets the ISA whose speed decides which operators split ([`Work::cost`]).
    #[cfg(feature = "threads")]
    pub(crate) fn set_isa(&mut self, isa: Isa) {
        self.isa = isa;
    }

    /// The scratch buffers, one per worker.
    pub(crate) fn scratch(&self) -> &[FastScratch] {
        &self.scratch
    }

    /// The calling thread's scratch, for kernels that run on it alone.
    #[cfg_attr(not(feature = "ops-batch-matmul"), allow(dead_code))]
    pub(crate) fn caller_scratch(&mut self) -> Option<&mut FastScratch> {
        self.scratch.first_mut()
    }
}

/// An operator's work as the split over workers weighs it: a count of its inner steps, of a
/// kind whose speed on the running ISA turns it into an estimated time ([`Work::cost`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Work {
    /// Multiply-accumulates of a float GEMM (a Winograd convolution counts the direct one's).
    GemmF32(usize),
    /// Multiply-accumulates of an int8 GEMM.
    GemmI8(usize),
    /// Multiply-accumulates of a depthwise convolution (float or int8).
    Depthwise(usize),
    /// Values an elementwise operator writes (an int8 ADD's rescalings, a float one's loads
    /// and store).
    Values(usize),
    /// Pooling window taps or values a PAD copies (a compare or a copy each).
    Copies(usize),
}

impl Work {
    /// Estimated single-thread time on `isa`, in multiply-accumulates of a GEMM with AVX-512
    /// kernels: a kernel of half the vector width (AVX2, AVX-VNNI) takes twice as long, NEON
    /// (128-bit, on ~2 GHz cores) four times; an int8 GEMM without a dot-product instruction
    /// (AVX2's `vpmaddwd`, NEON's `smlal`) twice again, and so does a depthwise convolution
    /// off AVX-512; an elementwise value costs 8, a pooling tap or a copied value 1. With AVX-512
    /// kernels this is the count of multiply-accumulates (elementwise values 8) the split was
    /// tuned with.
    /// Measured per operator (`litecvt bench --profile`, MobileNetV2-0.35 at 96x96 int8, on the
    /// Xeon): the 12x12 and 6x6 1x1 convolutions ran 70-130 multiply-accumulates per ns with
    /// AVX-512 kernels, 25-45 with AVX2 ones; the depthwise ones 20-40 and 5-10.
    #[cfg_attr(not(feature = "threads"), allow(dead_code))]
    fn cost(self, isa: Isa) -> usize {
        let (steps, weight) = match self {
            Work::GemmF32(n) => (n, 1),
            Work::GemmI8(n) => (n, if isa.dot_product() { 1 } else { 2 }),
            Work::Depthwise(n) => (n, if isa == Isa::Avx512Vnni { 1 } else { 2 }),
            Work::Values(n) => (n, 8),
            Work::Copies(n) => (n, 1),
        };
        let width = match isa {
            Isa::Avx512Vnni => 1,
            Isa::Avx2 | Isa::AvxVnni => 2,
            _ => 4,
        };
        steps.saturating_mul(weight * width)
    }
}

/// [`Work::cost`] below which an operator stays on the calling thread: 2^17 AVX-512 GEMM
/// multiply-accumulates take about a microsecond, about what handing a block to a worker and
/// the next operator's reads of what the worker wrote (from the other core's cache) cost.
#[cfg(feature = "threads")]
const PARALLEL_MIN_COST: usize = 1 << 17;

/// Whether an operator of `work` splits over the workers: always in the unit tests, which run
/// every case split to check that the blocks compute what one thread does.
#[cfg(feature = "threads")]
fn worth_splitting(work: Work, isa: Isa) -> bool {
    cfg!(test) || work.cost(isa) >= PARALLEL_MIN_COST
}

/// Runs `f(rows, out_block, scratch)` over rows `0..m_count` of `row_len` outputs each: on the
/// calling thread, or (feature `threads`, several `workers`, enough `work`) split into one
/// contiguous block per worker, each a multiple of `align` rows, so every output is computed
/// exactly as on one thread.
fn for_row_blocks<T: Send>(
    m_count: usize,
    align: usize,
    row_len: usize,
    work: Work,
    out: &mut [T],
    workers: &mut Workers,
    f: impl Fn(Range<usize>, &mut [T], &mut FastScratch) + Sync,
) {
    if workers.scratch.is_empty() {
        return;
    }
    #[cfg(feature = "threads")]
    {
        let align = align.max(1);
        let wanted = workers.scratch.len().min(m_count / align);
        if wanted > 1 && row_len > 0 && worth_splitting(work, workers.isa) {
            let n = workers.scratch.len();
            let pool = workers
                .pool
                .get_or_insert_with(|| thread_pool::Pool::new(n - 1));
            let blocks = wanted.min(pool.workers() + 1);
            if blocks > 1 {
                let per = m_count.div_ceil(blocks).div_ceil(align) * align;
                // One slot per block, each taken by the one task that runs it.
                type Slot<'a, T> =
                    std::sync::Mutex<Option<(Range<usize>, &'a mut [T], &'a mut FastScratch)>>;
                let slots: Vec<Slot<'_, T>> = out[..m_count * row_len]
                    .chunks_mut(per * row_len)
                    .zip(workers.scratch.iter_mut())
                    .enumerate()
                    .map(|(i, (block, s))| {
                        let rows = i * per..((i + 1) * per).min(m_count);
                        std::sync::Mutex::new(Some((rows, block, s)))
                    })
                    .collect();
                pool.run(slots.len(), &|t| {
                    let taken = slots[t].lock().ok().and_then(|mut slot| slot.take());
                    if let Some((rows, block, s)) = taken {
                        f(rows, block, s);
                    }
                });
                return;
            }
        }
    }
    let _ = (align, row_len, work);
    f(0..m_count, out, &mut workers.scratch[0]);
}

/// A GEMM's output as [`for_gemm_blocks`] splits it: `m` rows of `n` output channels, `k`
/// multiply-accumulates each, computed in tiles of `mr` rows; a block of channels starts at a
/// multiple of `cols` (whole tiles of the kernel).
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmBlocks {
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) mr: usize,
    #[cfg_attr(not(feature = "threads"), allow(dead_code))]
    pub(crate) cols: usize,
}

/// Runs `f(rows, channels, out_block, scratch)` over a GEMM's output `out` (`g.m` rows of
/// `g.n`): as [`for_row_blocks`] splits it, each block all channels (`out_block` rows of
/// `g.n`), or (feature `threads`) in one block of output channels per worker when that shares
/// the work more evenly, or as evenly while the weights outweigh the rows (each worker then
/// reads only its share of the weights). A block of channels (all rows, `out_block` rows of
/// `channels.len()`) is computed into its worker's buffer and copied into `out` when all have
/// finished. Every output is computed as on one thread: the row tiles are the same, and no
/// channel's sum depends on another channel.
pub(crate) fn for_gemm_blocks<T: BlockElem>(
    g: GemmBlocks,
    out: &mut [T],
    workers: &mut Workers,
    f: impl Fn(Range<usize>, Range<usize>, &mut [T], &mut FastScratch) + Sync,
) {
    let work = T::gemm_work(g.m * g.n * g.k);
    #[cfg(feature = "threads")]
    if worth_splitting(work, workers.isa)
        && by_channels(&g, workers.scratch.len())
        && for_channel_blocks(&g, out, workers, &f)
    {
        return;
    }
    for_row_blocks(g.m, g.mr, g.n, work, out, workers, |ms, o, s| {
        f(ms, 0..g.n, o, s)
    });
}

/// Whether [`for_gemm_blocks`] splits `g` over `threads` workers by output channels: the
/// largest block of channels is a smaller share of the channels than the largest block of
/// rows (in whole tiles, as [`for_row_blocks`] makes them) of the rows, by at least 5%, or an
/// equal or smaller one with at least as many channels as rows (weights as big as the rows).
#[cfg(feature = "threads")]
fn by_channels(g: &GemmBlocks, threads: usize) -> bool {
    let (mr, cols) = (g.mr.max(1), g.cols.max(1));
    let units = g.n.div_ceil(cols);
    if threads < 2 || units < 2 {
        return false;
    }
    let tiles = g.m.div_ceil(mr);
    let row_blocks = threads.min(g.m / mr);
    // The largest block of rows, in tiles (all of them when the rows do not split).
    let row_max = if row_blocks > 1 {
        g.m.div_ceil(row_blocks).div_ceil(mr).min(tiles)
    } else {
        tiles
    };
    let col_max = (units.div_ceil(threads.min(units)) * cols).min(g.n);
    // col_max / n against row_max / tiles.
    let (col_share, row_share) = (col_max * tiles, row_max * g.n);
    20 * col_share < 19 * row_share || (col_share <= row_share && g.n >= g.m)
}

/// [`for_gemm_blocks`]'s split by output channels; false (nothing run) when fewer than two
/// blocks can run or a worker's buffer cannot grow.
#[cfg(feature = "threads")]
fn for_channel_blocks<T: BlockElem>(
    g: &GemmBlocks,
    out: &mut [T],
    workers: &mut Workers,
    f: &(impl Fn(Range<usize>, Range<usize>, &mut [T], &mut FastScratch) + Sync),
) -> bool {
    let (m, n) = (g.m, g.n);
    let Workers {
        scratch,
        pool,
        channel_blocks,
        ..
    } = workers;
    let threads = scratch.len();
    let pool = pool.get_or_insert_with(|| thread_pool::Pool::new(threads - 1));
    let units = n.div_ceil(g.cols.max(1));
    let wanted = units.min(threads).min(pool.workers() + 1);
    if wanted < 2 || out.len() < m * n {
        return false;
    }
    let per = units.div_ceil(wanted) * g.cols.max(1);
    let blocks = n.div_ceil(per);
    let channels = |i: usize| i * per..((i + 1) * per).min(n);
    let bufs = T::buffers(channel_blocks);
    if bufs.len() < blocks {
        bufs.resize_with(blocks, Vec::new);
    }
    for (i, buf) in bufs.iter_mut().enumerate().take(blocks) {
        let need = m * channels(i).len();
        if buf.len() < need {
            if buf.try_reserve(need - buf.len()).is_err() {
                return false;
            }
            buf.resize(need, T::default());
        }
    }
    // One slot per block, each taken by the one task that runs it.
    type Slot<'a, T> = std::sync::Mutex<Option<(&'a mut [T], &'a mut FastScratch)>>;
    let slots: Vec<Slot<'_, T>> = bufs
        .iter_mut()
        .zip(scratch.iter_mut())
        .take(blocks)
        .map(|(buf, s)| std::sync::Mutex::new(Some((&mut buf[..], s))))
        .collect();
    pool.run(slots.len(), &|t| {
        let taken = slots[t].lock().ok().and_then(|mut slot| slot.take());
        if let Some((buf, s)) = taken {
            let cs = channels(t);
            f(0..m, cs.clone(), &mut buf[..m * cs.len()], s);
        }
    });
    drop(slots);
    for (i, buf) in bufs.iter().enumerate().take(blocks) {
        let cs = channels(i);
        let width = cs.len();
        for (dst, src) in out[..m * n]
            .chunks_exact_mut(n)
            .zip(buf[..m * width].chunks_exact(width))
        {
            dst[cs.clone()].copy_from_slice(src);
        }
    }
    true
}

#[cfg(test)]
mod tests;
