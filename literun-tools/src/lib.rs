//! Tools around literun that need `std` but not the converter: `.npy` arrays, the model
//! benchmark behind `literun-bench` and `litecvt bench`, and mapping a model file so prepacked
//! weights are held once.

pub mod bench;
pub mod mapped;
pub mod npy;

/// A hash of the sources of literun and these tools, and the build profile: two programs with
/// the same id run the same literun.
pub const BUILD_ID: &str = env!("LITERUN_TOOLS_BUILD_ID");
