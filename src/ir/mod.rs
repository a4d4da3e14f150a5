//! litecvt's intermediate representation: a typed graph of tensors and ops with static shapes.
//!
//! The importer builds it with ONNX semantics (NCHW for images); `passes::layout` rewrites it to
//! NHWC, after which every shape, axis and weight layout is the physical one the exporter writes.

mod data;
pub mod eval;
mod graph;
mod op;
pub mod shape;

pub use data::{ConstData, DType};
pub use graph::{Graph, Node, NodeId, QuantParams, Tensor, TensorId};
pub use op::*;
