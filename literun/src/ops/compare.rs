//! Comparisons (EQUAL ... GREATER_EQUAL), LOGICAL_AND/OR/NOT, SELECT_V2 and TOPK_V2.
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

use super::buffers::{cast_out, Ins, Scratch};
use super::context::Ctx;
use super::Kind;
use crate::error::{format, Result};
use crate::kernels::{compare as cmp, elementwise as ew};
use crate::model::{DType, OpDesc};
use crate::schema::BuiltinOperator as B;

/// A prepared comparison, logical operator, SELECT_V2 or TOPK_V2.
#[derive(Debug)]
pub(crate) enum Compare {
    /// A comparison with a BOOL output; `q` rescales int8 operands.
    Relation {
        op: cmp::CompareOp,
        bc: ew::Broadcast,
        dtype: DType,
        q: Option<(cmp::CompareSide, cmp::CompareSide)>,
    },
    /// LOGICAL_AND (`and`) / LOGICAL_OR.
    Logical {
        and: bool,
        bc: ew::Broadcast,
    },
    LogicalNot,
    /// SELECT_V2 over elements of `size` bytes.
    Select {
        plan: cmp::Select3,
        size: usize,
    },
    /// TOPK_V2 over the last axis: rows of `n`, keeping `k`.
    TopK {
        n: usize,
        k: usize,
        dtype: DType,
    },
}

/// Prepares a comparison, logical operator, SELECT_V2 or TOPK_V2: this family's entry in the
/// operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    match code {
        B::LOGICAL_AND | B::LOGICAL_OR => logical(c, code == B::LOGICAL_AND),
        B::LOGICAL_NOT => {
            c.want_dtype(0, &[DType::Bool])?;
            c.check_out(0, c.shape(0)?, DType::Bool)?;
            Ok(Kind::Compare(Compare::LogicalNot))
        }
        B::SELECT_V2 => select_v2(c),
        B::TOPK_V2 => topk(c),
        _ => compare(c, code),
    }
}

fn compare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    use cmp::CompareOp as O;
    let op = match code {
        B::EQUAL => O::Equal,
        B::NOT_EQUAL => O::NotEqual,
        B::LESS => O::Less,
        B::LESS_EQUAL => O::LessEqual,
        B::GREATER => O::Greater,
        _ => O::GreaterEqual,
    };
    let equality = matches!(op, O::Equal | O::NotEqual);
    let allowed: &[DType] = if equality {
        &[DType::F32, DType::I32, DType::I64, DType::I8, DType::Bool]
    } else {
        &[DType::F32, DType::I32, DType::I64, DType::I8]
    };
    let dtype = c.want_dtype(0, allowed)?;
    if c.dtype(1)? != dtype {
        return Err(c.err("inputs have different types"));
    }
    let (a, b) = (c.shape(0)?, c.shape(1)?);
    let out = ew::broadcast_shapes(a, b)
        .ok_or_else(|| c.err(format!("shapes {a:?} and {b:?} do not broadcast")))?;
    c.check_out(0, &out, DType::Bool)?;
    let bc = ew::Broadcast::new(a, b).ok_or_else(|| c.err("bad broadcast"))?;
    let q = if dtype == DType::I8 {
        let side = |k: usize| -> Result<cmp::CompareSide> {
            let q = c.in_q8(k)?;
            cmp::CompareSide::new(q.scale, q.zero_point).ok_or_else(|| {
                c.err(format!(
                    "input {k} scale {} must be in (0, 1) for an int8 comparison",
                    q.scale
                ))
            })
        };
        Some((side(0)?, side(1)?))
    } else {
        None
    };
    Ok(Kind::Compare(Compare::Relation { op, bc, dtype, q }))
}

fn logical(c: &Ctx<'_, '_>, and: bool) -> Result<Kind> {
    c.want_dtype(0, &[DType::Bool])?;
    c.want_dtype(1, &[DType::Bool])?;
    let (a, b) = (c.shape(0)?, c.shape(1)?);
    let out = ew::broadcast_shapes(a, b)
        .ok_or_else(|| c.err(format!("shapes {a:?} and {b:?} do not broadcast")))?;
    c.check_out(0, &out, DType::Bool)?;
    let bc = ew::Broadcast::new(a, b).ok_or_else(|| c.err("bad broadcast"))?;
    Ok(Kind::Compare(Compare::Logical { and, bc }))
}

fn select_v2(c: &Ctx<'_, '_>) -> Result<Kind> {
    c.want_dtype(0, &[DType::Bool])?;
    let dt = c.want_dtype(
        1,
        &[
            DType::F32,
            DType::I32,
            DType::I64,
            DType::I8,
            DType::U8,
            DType::Bool,
        ],
    )?;
    if c.dtype(2)? != dt {
        return Err(c.err("x and y have different types"));
    }
    let (s0, s1, s2) = (c.shape(0)?, c.shape(1)?, c.shape(2)?);
    let out = ew::broadcast_shapes(s0, s1)
        .and_then(|o| ew::broadcast_shapes(&o, s2))
        .ok_or_else(|| c.err(format!("shapes {s0:?}, {s1:?} and {s2:?} do not broadcast")))?;
    c.check_out(0, &out, dt)?;
    // Values are copied: quantized x, y and output must agree.
    c.same_q(1, 0)?;
    c.same_q(2, 0)?;
    let plan = cmp::Select3::new(s0, s1, s2).ok_or_else(|| c.err("bad broadcast"))?;
    Ok(Kind::Compare(Compare::Select {
        plan,
        size: dt.size(),
    }))
}

fn topk(c: &Ctx<'_, '_>) -> Result<Kind> {
    let dtype = c.want_dtype(
        0,
        &[DType::F32, DType::I32, DType::I64, DType::I8, DType::U8],
    )?;
    let s = c.shape(0)?;
    let Some((&n, lead)) = s.split_last() else {
        return Err(c.err("input must have rank >= 1"));
    };
    let k = c.const_ints(1)?;
    if k.len() != 1 {
        return Err(c.err("k must have one element"));
    }
    let k = usize::try_from(k[0])
        .ok()
        .filter(|&k| k <= n)
        .ok_or_else(|| c.err(format!("k = {} is not in 0..={n}", k[0])))?;
    if n > u32::MAX as usize {
        return Err(c.err("last axis too long"));
    }
    let mut out = lead.to_vec();
    out.push(k);
    c.check_out(0, &out, dtype)?;
    c.same_q(0, 0)?;
    let idx = c.output(1)?.dtype;
    if idx != DType::I32 {
        return Err(c.err(format!("indices output must be INT32, not {}", idx.name())));
    }
    c.check_out(1, &out, DType::I32)?;
    Ok(Kind::Compare(Compare::TopK { n, k, dtype }))
}

/// One output of TOPK_V2: the values (`indices` false) or the int32 indices.
pub(crate) fn run_topk(
    ins: &Ins<'_>,
    n: usize,
    k: usize,
    dtype: DType,
    order: &mut [u32],
    out: &mut [u8],
    indices: bool,
) -> Result<()> {
    macro_rules! go {
        ($t:ty) => {{
            let x = ins.typed::<$t>(0)?;
            if indices {
                cmp::topk(x, n, k, order, None, Some(cast_out::<i32>(out)?));
            } else {
                cmp::topk(x, n, k, order, Some(cast_out::<$t>(out)?), None);
            }
        }};
    }
    match dtype {
        DType::F32 => go!(f32),
        DType::I32 => go!(i32),
        DType::I64 => go!(i64),
        DType::I8 => go!(i8),
        _ => go!(u8),
    }
    Ok(())
}

impl Compare {
    /// Runs the operator reading `ins`, writing `out`.
    pub(super) fn run<'b>(
        &self,
        _index: usize,
        _op: &'b OpDesc<'b>,
        ins: Ins<'b>,
        out: &mut [u8],
        _scratch: &mut Scratch,
    ) -> Result<()> {
        match self {
            Compare::Relation {
                op: cop,
                bc,
                dtype,
                q,
            } => {
                #[cfg(feature = "ops-compare")]
                {
                    {
                        let o = cast_out::<u8>(out)?;
                        match (dtype, q) {
                            (DType::I8, Some((sa, sb))) => {
                                cmp::compare_i8(*cop, bc, ins.typed(0)?, *sa, ins.typed(1)?, *sb, o)
                            }
                            (DType::F32, _) => {
                                cmp::compare::<f32>(*cop, bc, ins.typed(0)?, ins.typed(1)?, o)
                            }
                            (DType::I32, _) => {
                                cmp::compare::<i32>(*cop, bc, ins.typed(0)?, ins.typed(1)?, o)
                            }
                            (DType::I64, _) => {
                                cmp::compare::<i64>(*cop, bc, ins.typed(0)?, ins.typed(1)?, o)
                            }
                            _ => cmp::compare_bool(*cop, bc, ins.typed(0)?, ins.typed(1)?, o),
                        }
                    }
                }
                #[cfg(not(feature = "ops-compare"))]
                return Err(super::compiled_out(_index, _op));
            }
            Compare::Logical { and, bc } => {
                #[cfg(feature = "ops-compare")]
                {
                    {
                        cmp::logical(*and, bc, ins.typed(0)?, ins.typed(1)?, cast_out(out)?)
                    }
                }
                #[cfg(not(feature = "ops-compare"))]
                return Err(super::compiled_out(_index, _op));
            }
            Compare::LogicalNot => {
                #[cfg(feature = "ops-compare")]
                {
                    cmp::logical_not(ins.typed(0)?, cast_out(out)?)
                }
                #[cfg(not(feature = "ops-compare"))]
                return Err(super::compiled_out(_index, _op));
            }
            Compare::Select { plan, size } => {
                #[cfg(feature = "ops-compare")]
                {
                    {
                        let c = ins.typed::<u8>(0)?;
                        match size {
                            1 => plan.apply(
                                c,
                                ins.typed::<u8>(1)?,
                                ins.typed::<u8>(2)?,
                                cast_out(out)?,
                            ),
                            4 => plan.apply(
                                c,
                                ins.typed::<u32>(1)?,
                                ins.typed::<u32>(2)?,
                                cast_out(out)?,
                            ),
                            _ => plan.apply(
                                c,
                                ins.typed::<u64>(1)?,
                                ins.typed::<u64>(2)?,
                                cast_out(out)?,
                            ),
                        }
                    }
                }
                #[cfg(not(feature = "ops-compare"))]
                return Err(super::compiled_out(_index, _op));
            }
            Compare::TopK { .. } => {
                #[cfg(feature = "ops-compare")]
                {
                    {}
                }
                #[cfg(not(feature = "ops-compare"))]
                return Err(super::compiled_out(_index, _op));
            }
        }
        Ok(())
    }
}

impl Compare {
    /// Scratch this operator needs at run time: (i8 values, f32 values, i32 values).
    pub(super) fn scratch(&self) -> (usize, usize, usize) {
        match self {
            Compare::TopK { n, .. } => (0, 0, *n),
            Compare::Relation { .. }
            | Compare::Logical { .. }
            | Compare::LogicalNot
            | Compare::Select { .. } => (0, 0, 0),
        }
    }
}
