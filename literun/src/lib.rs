//! literun: a small interpreter for TFLite-compatible models written by litecvt.
//!
//! `no_std` + `alloc` without the default `std` feature.
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod schema;

pub mod error;
pub mod interpreter;
pub mod kernels;
pub mod math;
pub mod model;
pub mod ops;
pub mod plan;
pub mod quant;

pub use error::{Error, Result, UnsupportedOp};
pub use interpreter::{Interpreter, Options, TensorMut, TensorRef, DEFAULT_MAX_WHILE_ITERATIONS};
pub use kernels::simd::Isa;
pub use model::{AlignedBytes, DType, Model, QuantParams, TensorInfo};
