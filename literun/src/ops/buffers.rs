//! Where an operator's tensors live while it runs, its inputs while its output is borrowed
//! mutably, and the kernels' scratch.
// With some `ops-*` features off, helpers only the left-out operators use are unused; without
// `error-details`, values only error messages mention.
#![cfg_attr(
    not(all(feature = "all-ops", feature = "error-details")),
    allow(
        dead_code,
        unused_imports,
        unused_variables,
        unused_macros,
        unreachable_code
    )
)]

use crate::error::{format, Error, Result};
use crate::kernels::simd::Workers;
use crate::model::{OpDesc, TensorDesc};
use alloc::vec::Vec;

/// Where a tensor's bytes live while running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    /// Never used by anything, or zero-sized.
    Empty,
    /// Constant data in the model.
    Const,
    /// `len` bytes at `off` in the arena.
    Arena { off: usize, len: usize },
    /// `len` bytes at `off` in the prepacked buffer (constants dequantized in `new`).
    Packed { off: usize, len: usize },
}

/// Run-time scratch of the quantized kernels, sized when the interpreter is built.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    pub(crate) i8s: Vec<i8>,
    pub(crate) f32s: Vec<f32>,
    pub(crate) i32s: Vec<i32>,
    /// One per thread (the first is the calling thread's; more with `with_threads`).
    pub(crate) fast: Workers,
}

/// The inputs of one operator while one of its outputs is borrowed mutably.
pub(crate) struct Ins<'b> {
    pub(crate) lo: &'b [u8],
    pub(crate) hi: &'b [u8],
    pub(crate) hi_start: usize,
    pub(crate) packed: &'b [u8],
    pub(crate) locs: &'b [Loc],
    pub(crate) tensors: &'b [TensorDesc<'b>],
    pub(crate) ids: &'b [Option<usize>],
    /// Read as input 0 instead of `ids[0]` (a convolution with a PAD folded into it).
    pub(crate) in0: Option<usize>,
}

impl<'b> Ins<'b> {
    /// Input `k` as f32 values, `None` when the operator omits it.
    pub(crate) fn optional_f32(&self, k: usize) -> Result<Option<&'b [f32]>> {
        if self.has(k) {
            Ok(Some(self.typed::<f32>(k)?))
        } else {
            Ok(None)
        }
    }

    pub(crate) fn bytes(&self, k: usize) -> Option<&'b [u8]> {
        let t = match (k, self.in0) {
            (0, Some(t)) => t,
            _ => (*self.ids.get(k)?)?,
        };
        match *self.locs.get(t)? {
            Loc::Empty => Some(&[]),
            Loc::Const => self.tensors.get(t)?.data,
            Loc::Packed { off, len } => self.packed.get(off..off + len),
            Loc::Arena { off, len } => {
                if off + len <= self.lo.len() {
                    self.lo.get(off..off + len)
                } else {
                    let s = off.checked_sub(self.hi_start)?;
                    self.hi.get(s..s + len)
                }
            }
        }
    }

    pub(crate) fn has(&self, k: usize) -> bool {
        matches!(self.ids.get(k), Some(Some(_)))
    }

    pub(crate) fn typed<T: bytemuck::Pod>(&self, k: usize) -> Result<&'b [T]> {
        let b = self
            .bytes(k)
            .ok_or_else(|| Error::Tensor(format!("input {k} unavailable")))?;
        bytemuck::try_cast_slice(b).map_err(|_| Error::Misaligned)
    }
}

pub(crate) fn split_io<'b>(
    arena: &'b mut [u8],
    packed: &'b [u8],
    locs: &'b [Loc],
    tensors: &'b [TensorDesc<'b>],
    op: &'b OpDesc<'b>,
    in0: Option<usize>,
    out: usize,
) -> (Ins<'b>, &'b mut [u8]) {
    let (s, e) = match locs.get(out) {
        Some(&Loc::Arena { off, len }) => (off, off + len),
        _ => (0, 0),
    };
    let (lo, rest) = arena.split_at_mut(s.min(arena.len()));
    let (o, hi) = rest.split_at_mut((e - s).min(rest.len()));
    (
        Ins {
            lo,
            hi,
            hi_start: e,
            packed,
            locs,
            tensors,
            ids: &op.inputs,
            in0,
        },
        o,
    )
}

pub(crate) fn cast_out<T: bytemuck::Pod>(b: &mut [u8]) -> Result<&mut [T]> {
    bytemuck::try_cast_slice_mut(b).map_err(|_| Error::Misaligned)
}

/// Runs `$body` with `$i`/`$o` bound to input `$k` and the output as the unsigned type of
/// `$size` bytes.
macro_rules! by_size {
    ($size:expr, $ins:expr, $k:expr, $out:expr, |$i:ident, $o:ident| $body:expr) => {
        match $size {
            1 => {
                let $i = $ins.typed::<u8>($k)?;
                let $o = cast_out::<u8>($out)?;
                $body
            }
            2 => {
                let $i = $ins.typed::<u16>($k)?;
                let $o = cast_out::<u16>($out)?;
                $body
            }
            4 => {
                let $i = $ins.typed::<u32>($k)?;
                let $o = cast_out::<u32>($out)?;
                $body
            }
            _ => {
                let $i = $ins.typed::<u64>($k)?;
                let $o = cast_out::<u64>($out)?;
                $body
            }
        }
    };
}
pub(crate) use by_size;

pub(crate) fn bias_i64<'b>(ins: &Ins<'b>) -> Result<Option<&'b [i64]>> {
    if ins.has(2) {
        Ok(Some(ins.typed::<i64>(2)?))
    } else {
        Ok(None)
    }
}

pub(crate) fn bias_i32<'b>(ins: &Ins<'b>) -> Result<Option<&'b [i32]>> {
    if ins.has(2) {
        Ok(Some(ins.typed::<i32>(2)?))
    } else {
        Ok(None)
    }
}
