//! Ceil and Round (halves to even): TFLite's CEIL and ROUND, which take float only.

use super::{unsup, Importer, R};
use crate::ir::{DType, Op, UnaryOp};
use tract_onnx::pb::NodeProto;

impl Importer<'_> {
    /// A float-only elementwise op: `u` of input 0.
    pub(super) fn float_unary(&mut self, n: &NodeProto, u: UnaryOp) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let dt = self.dtype(x);
        if dt != DType::F32 {
            return unsup(format!("{} of {} is not supported", n.op_type, dt.name()));
        }
        let out = self.out0(n)?;
        self.emit_to(Op::Unary(u), &[x], out)?;
        Ok(())
    }
}
