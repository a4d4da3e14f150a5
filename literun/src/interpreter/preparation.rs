//! Preparing a model for the interpreter: every operator's parameters, the prepacked constants,
//! the kernels' scratch and the arena plan.
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

use super::*;

/// Float operators whose output a QUANTIZE reads keep LiteRT's reference math
/// ([`Kind::keep_reference_math`]), so the requantized values are LiteRT's.
#[cfg(all(
    feature = "ops-float",
    any(feature = "ops-softmax", feature = "ops-elementwise")
))]
fn keep_reference_math_before_quantize(model: &Model<'_>, ops: &mut [Prepared]) {
    let operators = model.operators();
    let quantized: Vec<usize> = operators
        .iter()
        .filter(|op| op.code == crate::schema::BuiltinOperator::QUANTIZE)
        .filter_map(|op| op.inputs.first().copied().flatten())
        .collect();
    if quantized.is_empty() {
        return;
    }
    for p in ops.iter_mut() {
        if operators[p.index]
            .outputs
            .iter()
            .any(|t| quantized.contains(t))
        {
            p.kind.keep_reference_math();
        }
    }
}

/// Prepares `model`: every operator's parameters, the prepacked constants, the kernels' scratch
/// and the arena plan (allocating everything but the arena).
pub(super) fn prepare<'m>(
    model: &Model<'m>,
    options: Options,
    mut done: Option<&mut dyn FnMut(&'m [u8])>,
) -> Result<Parts> {
    {
        let isa = if options.isa.available() {
            options.isa
        } else {
            Isa::Portable
        };
        let tensors = model.tensors();
        let nops = model.operators().len();
        let mut ops = Vec::with_capacity(nops);
        types_compiled_in(model)?;
        for (i, op) in model.operators().iter().enumerate() {
            ops.push(Prepared {
                index: i,
                kind: prepare_op(model, i, op)?,
                fast: None,
                input0: None,
                folded: false,
                #[cfg(all(
                    feature = "ops-reduce",
                    feature = "ops-elementwise",
                    feature = "ops-float"
                ))]
                fused_away: false,
                #[cfg(all(
                    feature = "ops-reduce",
                    feature = "ops-elementwise",
                    feature = "ops-float"
                ))]
                layer_norm: None,
            });
        }
        compiled_in(model, &ops)?;
        #[cfg(all(
            feature = "ops-float",
            any(feature = "ops-softmax", feature = "ops-elementwise")
        ))]
        keep_reference_math_before_quantize(model, &mut ops);
        let plan = model.memory_plan()?;
        fold_pads(model, &mut ops, &plan)?;

        // Everything allocated below is charged to `memory` first. Constant DEQUANTIZE outputs
        // are at most 4x their data in the file; the arena and scratch follow claimed shapes.
        let mut memory = 0usize;

        // Constant buffers the interpreter copies into its own layout, counted so `done` hears
        // of each once its last reader has copied it.
        let mut copies = ConstCopies::new(model);

        // In operator order (a constant is dequantized before its readers pack it, and dropped
        // once they have): DEQUANTIZE of constant data, done once here into the prepacked
        // buffer; weights pre-packed for the fast kernels (constants of the file, or dequantized).
        let mut packed_parts: Vec<(usize, Vec<f32>)> = Vec::new();
        for p in ops.iter_mut() {
            let op = &model.operators()[p.index];
            let const_input = op.inputs.first().copied().flatten().and_then(|src| {
                let data = tensors[src].data?;
                Some((tensors[src].elements, data))
            });
            if let (
                Some((n, data)),
                Kind::Quantize(
                    dq @ (Quantize::DequantizeF16
                    | Quantize::DequantizeAffine { .. }
                    | Quantize::DequantizePerChannel { .. }),
                ),
            ) = (const_input, &p.kind)
            {
                charge(&mut memory, n.checked_mul(4), "prepacked constants")?;
                let mut out = try_vec::<f32>(n)?;
                dequantize_values(dq, data, &mut out).map_err(|e| op_err(p.index, op, e))?;
                packed_parts.push((op.outputs[0], out));
                p.kind = Kind::Precomputed;
                copies.copied(p.index, &[0], &mut done, &mut |_| {});
                continue;
            }
            {
                let constant = |t: usize| -> Option<&[u8]> {
                    if let Some(d) = tensors.get(t)?.data {
                        return Some(d);
                    }
                    packed_parts
                        .iter()
                        .find(|(pt, _)| *pt == t)
                        .map(|(_, v)| bytemuck::cast_slice(v))
                };
                p.fast = Fast::prepare(isa, options.winograd, &p.kind, op, &constant);
                if p.fast.is_some() {
                    p.kind.drop_portable_requant();
                }
            }
            let packed_inputs: &[usize] = match &p.fast {
                Some(f) if f.packs_weights() => &[1, 2],
                _ => &[],
            };
            // A dequantized constant that only fed prepacked weights is not kept twice (float16
            // weights of a SIMD convolution would be held dequantized and packed).
            copies.copied(p.index, packed_inputs, &mut done, &mut |t| {
                if !model.outputs().iter().any(|o| o.tensor == t) {
                    packed_parts.retain(|(pt, _)| *pt != t);
                }
            });
        }
        let mut packed_locs = Vec::new();
        let mut packed_bytes = 0usize;
        for (t, v) in &packed_parts {
            let len = v.len() * 4;
            packed_locs.push((*t, packed_bytes, len));
            packed_bytes += len.div_ceil(16) * 16;
        }
        charge(&mut memory, Some(packed_bytes), "prepacked constants")?;
        let mut packed = try_vec::<u128>(packed_bytes / 16)?;
        {
            let pb = bytemuck::cast_slice_mut::<u128, u8>(&mut packed);
            for ((_, v), &(_, off, len)) in packed_parts.iter().zip(&packed_locs) {
                pb[off..off + len].copy_from_slice(bytemuck::cast_slice(v));
            }
        }
        drop(packed_parts);
        let fast_bytes: usize = ops
            .iter()
            .filter_map(|p| p.fast.as_ref())
            .map(Fast::bytes)
            .sum();

        // Scratch for the quantized kernels.
        let mut scratch = Scratch::default();
        let (mut n8, mut nf, mut n32) = (0, 0, 0);
        let (mut f8, mut f32n, mut ff) = (0, 0, 0);
        for p in &ops {
            let (a, b, c) = p.kind.scratch();
            n8 = n8.max(a);
            nf = nf.max(b);
            n32 = n32.max(c);
            if let Some(f) = &p.fast {
                let (a, b, c) = f.scratch();
                f8 = f8.max(a);
                f32n = f32n.max(b);
                ff = ff.max(c);
            }
        }
        let scratch_bytes = nf
            .checked_mul(4)
            .and_then(|b| b.checked_add(n32.checked_mul(4)?))
            .and_then(|b| b.checked_add(n8))
            .and_then(|b| b.checked_add(f8))
            .and_then(|b| b.checked_add(f32n.checked_mul(4)?))
            .and_then(|b| b.checked_add(ff.checked_mul(4)?));
        charge(&mut memory, scratch_bytes, "kernel scratch")?;
        scratch.i8s = try_vec(n8)?;
        scratch.f32s = try_vec(nf)?;
        scratch.i32s = try_vec(n32)?;
        scratch.fast = Workers::new(vec![FastScratch {
            i8s: try_vec(f8)?,
            i32s: try_vec(f32n)?,
            f32s: try_vec(ff)?,
        }]);

        let nt = tensors.len();
        let mut locs = vec![Loc::Empty; nt];
        for &(t, off, len) in &packed_locs {
            locs[t] = Loc::Packed { off, len };
        }
        for t in 0..nt {
            if tensors[t].data.is_some() {
                locs[t] = Loc::Const;
            } else if let Some(off) = plan.offsets[t] {
                locs[t] = Loc::Arena {
                    off,
                    len: tensors[t].bytes,
                };
            } else if !matches!(locs[t], Loc::Packed { .. }) && tensors[t].bytes > 0 {
                // Used tensors are planned; anything else must be unused, the output of a
                // folded PAD, or a dequantized constant only prepacked kernels read.
                debug_assert!(
                    ops.iter().any(|p| {
                        let outputs = &model.operators()[p.index].outputs;
                        (p.folded || matches!(p.kind, Kind::Precomputed)) && outputs.contains(&t)
                    }) || !model
                        .operators()
                        .iter()
                        .any(|op| op.outputs.contains(&t) || op.inputs.contains(&Some(t)))
                );
            }
        }
        #[cfg(all(
            feature = "ops-reduce",
            feature = "ops-elementwise",
            feature = "ops-float"
        ))]
        {
            layer_norm::fuse_layer_norms(model, &mut ops, &locs, isa.vector());
            // A row for each chain whose output shares bytes with its input.
            let row = ops
                .iter()
                .filter_map(|p| {
                    let out = *model.operators()[p.index].outputs.first()?;
                    Some(layer_norm::row_scratch(p.layer_norm.as_ref()?, out, &locs))
                })
                .max()
                .unwrap_or(0);
            if row > scratch.f32s.len() {
                charge(&mut memory, row.checked_mul(4), "kernel scratch")?;
                scratch.f32s = try_vec(row)?;
            }
        }
        // Every operator's outputs must be disjoint from its inputs (the planner guarantees it;
        // checked so invoke can rely on it).
        for (i, op) in model.operators().iter().enumerate() {
            for &o in &op.outputs {
                if let Loc::Arena { off, len } = locs[o] {
                    for &t in op.inputs.iter().flatten() {
                        if let Loc::Arena { off: a, len: l } = locs[t] {
                            if a < off + len && off < a + l {
                                return Err(op_err(i, op, "output overlaps an input in the arena"));
                            }
                        }
                    }
                }
            }
        }
        Ok(Parts {
            locs,
            ops,
            packed,
            packed_bytes: packed_bytes + fast_bytes,
            scratch,
            isa,
            arena_bytes: plan.total,
            memory,
        })
    }
}
