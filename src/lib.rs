//! litecvt: converts ONNX models to TFLite-compatible FlatBuffers that literun (and LiteRT) run.
//!
//! The data flows one way: `import` (ONNX → IR) → `passes` (prune, fold, fuse, NHWC layout,
//! lowering) → `quantize` (fp16 / int8, calibrated on the float file) → `export` (IR →
//! FlatBuffer bytes). `convert` wires them together; `cli` is the command line.

pub mod bench;
pub mod cli;
pub mod convert;
pub mod export;
pub mod import;
pub mod ir;
pub mod npy;
pub mod passes;
pub mod quantize;
pub mod runtime;
pub mod util;
