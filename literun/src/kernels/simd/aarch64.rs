//! aarch64 micro-kernels: not written yet. NEON (and `sdot` through inline `asm!`, since
//! `vdotq_s32` is unstable on stable Rust) go here, behind an `Isa` variant that
//! [`super::Isa::detect`] selects with `is_aarch64_feature_detected!`; until then aarch64
//! runs the portable kernels.
