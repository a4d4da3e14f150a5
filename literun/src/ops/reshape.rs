//! RESHAPE, SQUEEZE and EXPAND_DIMS: a copy of the bytes under a new shape.
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

use super::context::{tag, Ctx};
use super::Kind;
use crate::error::{format, Result};
use crate::model::DType;
use crate::schema;
use crate::schema::BuiltinOperator as B;
use alloc::vec;
use alloc::vec::Vec;

/// Prepares RESHAPE, SQUEEZE or EXPAND_DIMS: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    reshape(c, code)
}

fn reshape(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    let i = c.input(0)?;
    let o = c.output(0)?;
    if i.dtype == DType::F16 {
        return Err(c.err("FLOAT16 tensors are only supported as DEQUANTIZE inputs"));
    }
    let expected: Vec<usize> = match code {
        B::SQUEEZE => {
            let dims = match c.options(tag::SQUEEZE)? {
                Some(t) => c
                    .opt(t.vec_i32(schema::SqueezeOptions::VT_SQUEEZE_DIMS))?
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            let mut drop = vec![false; i.shape.len()];
            if dims.is_empty() {
                for (d, &s) in i.shape.iter().enumerate() {
                    drop[d] = s == 1;
                }
            } else {
                for &d in &dims {
                    let a = c.axis(i64::from(d), i.shape.len())?;
                    if i.shape[a] != 1 {
                        return Err(c.err(format!(
                            "cannot squeeze dimension {a} of size {}",
                            i.shape[a]
                        )));
                    }
                    drop[a] = true;
                }
            }
            i.shape
                .iter()
                .zip(&drop)
                .filter(|(_, &d)| !d)
                .map(|(&s, _)| s)
                .collect()
        }
        B::EXPAND_DIMS => {
            let a = c.const_ints(1)?;
            if a.len() != 1 {
                return Err(c.err("axis must have one element"));
            }
            let ax = c.axis(a[0], i.shape.len() + 1)?;
            // Built in order: `Vec::insert`'s memmove would be 1.5 KiB of firmware code.
            let (head, tail) = i.shape.split_at(ax);
            [head, &[1], tail].concat()
        }
        #[cfg(feature = "dynamic-shapes")]
        _ if c.inferring() => reshape_target(c, i.elements)?.unwrap_or_else(|| o.shape.clone()),
        _ => {
            if o.elements != i.elements {
                return Err(c.err(format!(
                    "cannot reshape {:?} ({} elements) to {:?} ({} elements)",
                    i.shape, i.elements, o.shape, o.elements
                )));
            }
            o.shape.clone()
        }
    };
    c.check_out(0, &expected, i.dtype)?;
    c.same_q(0, 0)?;
    Ok(Kind::Copy)
}

#[cfg(feature = "dynamic-shapes")]
/// The shape a RESHAPE with a constant shape input (input 1, or one whose values are known
/// before running) gives `elements` elements, its one `-1` resolved; `None` without one.
fn reshape_target(c: &Ctx<'_, '_>, elements: usize) -> Result<Option<Vec<usize>>> {
    if !c.has_input(1) || (c.input(1)?.data.is_none() && c.known_ints(1).is_none()) {
        return Ok(None);
    }
    let dims = c.const_ints(1)?;
    let mut known = 1usize;
    let mut free = None;
    for (a, &d) in dims.iter().enumerate() {
        match usize::try_from(d) {
            Ok(d) => known = known.saturating_mul(d),
            Err(_) if d == -1 && free.is_none() => free = Some(a),
            Err(_) => return Err(c.err(format!("bad shape {dims:?}"))),
        }
    }
    let mut shape: Vec<usize> = dims
        .iter()
        .map(|&d| usize::try_from(d).unwrap_or(0))
        .collect();
    if let Some(a) = free {
        if known == 0 || !elements.is_multiple_of(known) {
            return Err(c.err(format!("cannot reshape {elements} elements to {dims:?}")));
        }
        shape[a] = elements / known;
    }
    Ok(Some(shape))
}
