//! Which operators of a model this build's Cargo features leave out.
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

use super::Prepared;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::model::{Model, OpDesc};
use crate::ops::{missing_kernel_feature, missing_type_feature};

/// `Err(Unsupported)` listing the prepared operators whose kernels this build leaves out (Cargo
/// features, see [`crate::ops::missing_kernel_feature`]).
pub(crate) fn compiled_in(model: &Model<'_>, ops: &[Prepared]) -> Result<()> {
    let mut missing = Vec::new();
    for p in ops {
        if let Some(f) = missing_kernel_feature(&p.kind) {
            missing.push(unsupported_op(p.index, &model.operators()[p.index], f));
        }
    }
    unsupported(missing)
}

pub(crate) fn unsupported_op(index: usize, op: &OpDesc<'_>, feature: &str) -> crate::UnsupportedOp {
    crate::UnsupportedOp {
        index,
        op: [op.name().as_str(), " (feature ", feature, " is off)"].concat(),
    }
}

pub(crate) fn unsupported(missing: Vec<crate::UnsupportedOp>) -> Result<()> {
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::Unsupported(missing))
    }
}

/// `Err(Unsupported)` listing the operators whose preparation needs an element-type feature this
/// build lacks (see [`crate::ops::missing_type_feature`]), before preparing any.
pub(crate) fn types_compiled_in(model: &Model<'_>) -> Result<()> {
    let tensors = model.tensors();
    let mut missing = Vec::new();
    for (i, op) in model.operators().iter().enumerate() {
        if let [Some(Some(a)), Some(Some(b))] = [op.inputs.first(), op.inputs.get(1)] {
            let (a, b) = (tensors[*a].dtype, tensors[*b].dtype);
            if let Some(f) = missing_type_feature(op.code, a, b) {
                missing.push(unsupported_op(i, op, f));
            }
        }
    }
    unsupported(missing)
}
