//! LayerNorm chains recognised when the interpreter is prepared: the operators a converter
//! writes for a LayerNorm over the last axis (litecvt's lowering, in this order)
//!
//! ```text
//! m = MEAN(x, [last], keep_dims)      s = SQUARED_DIFFERENCE(x, m)    v = MEAN(s, [last], keep_dims)
//! e = ADD(v, eps)    r = RSQRT(e)     c = SUB(x, m)    n = MUL(c, r)  [g = MUL(n, gamma)]  [y = ADD(g, beta)]
//! ```
//!
//! run as one pass per row ([`crate::kernels::layer_norm`]) by [`Interpreter::invoke`]: the
//! last operator of the chain computes its output from `x`, the others are skipped, and their
//! outputs (which only the chain reads) are not written, though the file's memory plan still
//! gives them room. The file stays standard TFLite; [`Interpreter::invoke_observed`] runs every
//! operator, so every intermediate tensor is still observed.
//!
//! A chain is fused only when running it so is sound under the memory plan: its operators are
//! consecutive (so nothing else writes the arena while `x` waits for the last one), every
//! intermediate is read by the chain alone and is no graph output, and no QUANTIZE reads the
//! output (a requantized value must round as LiteRT's reference kernels compute the chain).
//! The plan may give the output bytes of `x` (x's last reader in the chain comes before the
//! output's writer): then each row of `x` is copied out before any output row covers it.
//!
//! [`Interpreter::invoke`]: super::Interpreter::invoke
//! [`Interpreter::invoke_observed`]: super::Interpreter::invoke_observed

use super::Prepared;
use crate::error::{format, Error, Result};
use crate::kernels::elementwise::{BinaryOp, UnaryOp};
use crate::kernels::layer_norm::{layer_norm_f32, Affine};
use crate::kernels::reduce::ReduceKind;
use crate::kernels::simd::{self, Isa};
use crate::kernels::Activation;
use crate::model::{DType, Model, TensorDesc};
use crate::ops::buffers::{cast_out, split_io, Loc};
use crate::ops::elementwise::Elementwise;
use crate::ops::reduce::Reduce;
use crate::ops::Kind;
use crate::schema::BuiltinOperator as B;

/// A recognised chain, kept by its last operator.
#[derive(Debug)]
pub(crate) struct LayerNormChain {
    /// `[x, gamma, beta]` (gamma and beta `None` when the chain has no such operator).
    inputs: [Option<usize>; 3],
    eps: f32,
    depth: usize,
    isa: Isa,
}

/// How many operators a chain has: 7, and one each for gamma and beta.
const CORE_OPS: usize = 7;

/// Finds the chains in `ops` and marks them: the last operator of each gets its
/// [`LayerNormChain`], the others `fused_away`.
pub(crate) fn fuse_layer_norms(model: &Model<'_>, ops: &mut [Prepared], locs: &[Loc], isa: Isa) {
    let operators = model.operators();
    if ops.len() != operators.len() || ops.iter().enumerate().any(|(i, p)| p.index != i) {
        return;
    }
    // Readers of every tensor (an operator reading a tensor twice counts twice).
    let mut readers = alloc::vec![0u32; model.tensors().len()];
    for op in operators {
        for &t in op.inputs.iter().flatten() {
            if let Some(r) = readers.get_mut(t) {
                *r += 1;
            }
        }
    }
    for o in model.outputs() {
        if let Some(r) = readers.get_mut(o.tensor) {
            *r += 1;
        }
    }
    let mut i = 0;
    while i + CORE_OPS <= ops.len() {
        match chain_at(model, ops, &readers, locs, i) {
            Some((last, mut chain)) => {
                chain.isa = isa;
                for p in &mut ops[i..last] {
                    p.fused_away = true;
                }
                ops[last].layer_norm = Some(alloc::boxed::Box::new(chain));
                i = last + 1;
            }
            None => i += 1,
        }
    }
}

/// The chain whose first operator is `ops[i]`, with the index of its last operator.
fn chain_at(
    model: &Model<'_>,
    ops: &[Prepared],
    readers: &[u32],
    locs: &[Loc],
    i: usize,
) -> Option<(usize, LayerNormChain)> {
    let operators = model.operators();
    let tensors = model.tensors();
    let io = |j: usize| -> Option<(&[Option<usize>], usize)> {
        let op = operators.get(j)?;
        Some((
            &op.inputs,
            *op.outputs.first().filter(|_| op.outputs.len() == 1)?,
        ))
    };
    let input = |ins: &[Option<usize>], k: usize| ins.get(k).copied().flatten();
    // The other input of a binary operator reading `t` (either side), when it has two.
    let other = |ins: &[Option<usize>], t: usize| match (input(ins, 0)?, input(ins, 1)?) {
        (a, b) if a == t => Some(b),
        (a, b) if b == t => Some(a),
        _ => None,
    };
    let binary = |j: usize, want: BinaryOp| {
        matches!(&ops.get(j)?.kind,
            Kind::Elementwise(Elementwise::Binary { op, act, dtype, .. })
                if *op == want && *act == Activation::None && *dtype == DType::F32)
        .then_some(())
    };
    // Read only by the chain (`n` times) and no graph output.
    let internal = |t: usize, n: u32| (readers.get(t) == Some(&n)).then_some(());

    // m = MEAN(x) over the last axis, keeping it.
    let (ins, m) = io(i)?;
    let x = input(ins, 0)?;
    let xd = tensors.get(x)?;
    let depth = *xd.shape.last()?;
    if !last_axis_mean(&ops[i].kind, xd, tensors.get(m)?) || depth == 0 {
        return None;
    }
    internal(m, 2)?;
    // s = SQUARED_DIFFERENCE(x, m)
    let (ins, s) = io(i + 1)?;
    binary(i + 1, BinaryOp::SquaredDifference)?;
    (other(ins, m)? == x).then_some(())?;
    internal(s, 1)?;
    // v = MEAN(s)
    let (ins, v) = io(i + 2)?;
    (input(ins, 0)? == s && last_axis_mean(&ops[i + 2].kind, tensors.get(s)?, tensors.get(v)?))
        .then_some(())?;
    internal(v, 1)?;
    // e = ADD(v, eps), eps a constant scalar
    let (ins, e) = io(i + 3)?;
    binary(i + 3, BinaryOp::Add)?;
    let eps = scalar_f32(tensors.get(other(ins, v)?)?)?;
    internal(e, 1)?;
    // r = RSQRT(e)
    let (ins, r) = io(i + 4)?;
    let rsqrt = matches!(
        &ops[i + 4].kind,
        Kind::Elementwise(Elementwise::Unary {
            op: UnaryOp::Rsqrt,
            dtype: DType::F32,
            ..
        })
    );
    (rsqrt && input(ins, 0)? == e).then_some(())?;
    internal(r, 1)?;
    // c = SUB(x, m)
    let (ins, c) = io(i + 5)?;
    binary(i + 5, BinaryOp::Sub)?;
    (input(ins, 0)? == x && input(ins, 1)? == m).then_some(())?;
    internal(c, 1)?;
    // n = MUL(c, r)
    let (ins, mut y) = io(i + 6)?;
    binary(i + 6, BinaryOp::Mul)?;
    (other(ins, c)? == r).then_some(())?;
    let mut last = i + 6;
    // [MUL(n, gamma)] [ADD(., beta)], constants along the last axis.
    let mut affine = [None, None];
    for (slot, op) in [(0, BinaryOp::Mul), (1, BinaryOp::Add)] {
        let Some((ins, next)) = io(last + 1) else {
            break;
        };
        if binary(last + 1, op).is_none() || readers.get(y) != Some(&1) {
            continue;
        }
        let Some(k) = other(ins, y) else { continue };
        if !row_constant(tensors.get(k), locs.get(k), depth) {
            continue;
        }
        affine[slot] = Some(k);
        y = next;
        last += 1;
    }
    // The output has x's shape.
    let yd = tensors.get(y)?;
    (yd.shape == xd.shape && yd.dtype == DType::F32 && xd.dtype == DType::F32).then_some(())?;
    let requantized = operators
        .iter()
        .any(|op| op.code == B::QUANTIZE && op.inputs.first() == Some(&Some(y)));
    if requantized {
        return None;
    }
    Some((
        last,
        LayerNormChain {
            inputs: [Some(x), affine[0], affine[1]],
            eps,
            depth,
            isa: Isa::Portable,
        },
    ))
}

/// Whether `kind` is a float MEAN of `from` over its last axis alone, keeping it (`to` has
/// `from`'s shape with a last dimension of 1).
fn last_axis_mean(kind: &Kind, from: &TensorDesc<'_>, to: &TensorDesc<'_>) -> bool {
    let Kind::Reduce(Reduce::F32 {
        shape,
        axes,
        kind: ReduceKind::Mean,
    }) = kind
    else {
        return false;
    };
    let rank = from.shape.len();
    rank > 0
        && *shape == from.shape
        && axes.as_slice() == [rank - 1]
        && to.shape.len() == rank
        && to.shape[..rank - 1] == from.shape[..rank - 1]
        && to.shape[rank - 1] == 1
}

/// The value of a constant float tensor of one element.
fn scalar_f32(t: &TensorDesc<'_>) -> Option<f32> {
    if t.dtype != DType::F32 || t.elements != 1 {
        return None;
    }
    let b: [u8; 4] = t.data?.get(..4)?.try_into().ok()?;
    Some(f32::from_le_bytes(b))
}

/// Whether `t` is a float constant (in the file, or dequantized when preparing) of `depth`
/// values along the last axis (`[depth]`, or 1s then `depth`).
fn row_constant(t: Option<&TensorDesc<'_>>, loc: Option<&Loc>, depth: usize) -> bool {
    let Some(t) = t else { return false };
    matches!(loc, Some(Loc::Const | Loc::Packed { .. }))
        && t.dtype == DType::F32
        && t.elements == depth
        && t.shape.last() == Some(&depth)
}

/// Float values of constant tensor `t`: in the file, or dequantized into `packed`.
fn constant_f32<'a>(
    model: &'a Model<'_>,
    locs: &[Loc],
    packed: &'a [u8],
    t: Option<usize>,
) -> Result<Option<&'a [f32]>> {
    let Some(t) = t else { return Ok(None) };
    let bytes = match locs.get(t) {
        Some(Loc::Const) => model.tensors().get(t).and_then(|d| d.data),
        Some(&Loc::Packed { off, len }) => packed.get(off..off + len),
        _ => None,
    };
    let bytes = bytes.ok_or_else(|| Error::Tensor(format!("constant {t} unavailable")))?;
    bytemuck::try_cast_slice(bytes)
        .map(Some)
        .map_err(|_| Error::Misaligned)
}

/// f32 scratch [`run_layer_norm`] needs for `chain`: a row, where the output shares bytes
/// with `x` in the arena.
pub(crate) fn row_scratch(chain: &LayerNormChain, op_output: usize, locs: &[Loc]) -> usize {
    match overlap(chain, op_output, locs) {
        Some(_) => chain.depth,
        None => 0,
    }
}

/// The arena byte ranges `(x offset, output offset, length)` of the chain's input and output
/// when they share bytes.
fn overlap(chain: &LayerNormChain, out: usize, locs: &[Loc]) -> Option<(usize, usize, usize)> {
    let x = chain.inputs[0]?;
    match (locs.get(x), locs.get(out)) {
        (Some(&Loc::Arena { off: a, len: al }), Some(&Loc::Arena { off: b, len: bl }))
            if a < b + bl && b < a + al && al == bl =>
        {
            Some((a, b, al))
        }
        _ => None,
    }
}

/// Runs the chain kept by operator `p` (its last): reads `x`, gamma and beta, writes the
/// operator's output. `row`: [`row_scratch`] floats.
pub(crate) fn run_layer_norm(
    chain: &LayerNormChain,
    p: &Prepared,
    model: &Model<'_>,
    locs: &[Loc],
    arena: &mut [u8],
    packed: &[u8],
    row: &mut [f32],
) -> Result<()> {
    let op = &model.operators()[p.index];
    let out_t = op.outputs[0];
    let affine = Affine {
        gamma: constant_f32(model, locs, packed, chain.inputs[1])?,
        beta: constant_f32(model, locs, packed, chain.inputs[2])?,
    };
    let (isa, depth, eps) = (chain.isa, chain.depth, chain.eps);
    let norm = |x: &[f32], y: &mut [f32]| {
        if !simd::layer_norm_f32(isa, x, depth, eps, affine, y) {
            layer_norm_f32(x, depth, eps, affine, y);
        }
    };
    let Some((xo, yo, len)) = overlap(chain, out_t, locs) else {
        let (mut ins, out) = split_io(arena, packed, locs, model.tensors(), op, None, out_t);
        ins.ids = &chain.inputs;
        norm(ins.typed::<f32>(0)?, cast_out::<f32>(out)?);
        return Ok(());
    };
    // Output row r covers x's bytes from `yo - xo` before (or after) x's row r: going down
    // the rows when the output starts first (up, when it starts after), each row of x is
    // read before any output row covers it.
    let row = row
        .get_mut(..depth)
        .ok_or_else(|| Error::Tensor("LayerNorm row scratch too small".into()))?;
    let rb = depth * 4;
    let rows = len / rb;
    for k in 0..rows {
        let r = if yo <= xo { k } else { rows - 1 - k };
        let x = arena
            .get(xo + r * rb..xo + (r + 1) * rb)
            .ok_or(Error::Misaligned)?;
        row.copy_from_slice(bytemuck::try_cast_slice(x).map_err(|_| Error::Misaligned)?);
        let y = arena
            .get_mut(yo + r * rb..yo + (r + 1) * rb)
            .ok_or(Error::Misaligned)?;
        norm(row, cast_out::<f32>(y)?);
    }
    Ok(())
}
