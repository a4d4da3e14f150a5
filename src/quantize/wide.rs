//! Weight rounding's f64 loops built for the widest vectors the CPU has: AVX-512 or AVX2 where
//! detected at run time (each with FMA), else the target's baseline (SSE2 on x86-64, NEON on
//! aarch64). Each build runs the same IEEE operations in the same order (Rust never fuses a
//! multiply and an add on its own, `mul_add` is one correctly rounded operation on every build,
//! and a compiler may not reorder float sums), only more of them side by side: the results are
//! the same bit for bit on every build and CPU. (The x86-64 baseline computes `mul_add` in
//! software: correct, slow, and only for CPUs without AVX2.)

/// The vector width a loop runs with: only made by [`Isa::detect`] and (in tests)
/// [`Isa::all_available`], so an `Isa` names only instructions the CPU has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Isa(Width);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Width {
    Baseline,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    /// The widest this CPU has.
    pub(super) fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            let fma = std::is_x86_feature_detected!("fma");
            if fma && std::is_x86_feature_detected!("avx512f") {
                return Isa(Width::Avx512);
            }
            if fma && std::is_x86_feature_detected!("avx2") {
                return Isa(Width::Avx2);
            }
        }
        Isa(Width::Baseline)
    }

    /// Every width this CPU can run (for tests comparing them).
    #[cfg(test)]
    pub(super) fn all_available() -> Vec<Isa> {
        #[allow(unused_mut)]
        let mut v = vec![Isa(Width::Baseline)];
        #[cfg(target_arch = "x86_64")]
        {
            let fma = std::is_x86_feature_detected!("fma");
            if fma && std::is_x86_feature_detected!("avx2") {
                v.push(Isa(Width::Avx2));
            }
            if fma && std::is_x86_feature_detected!("avx512f") {
                v.push(Isa(Width::Avx512));
            }
        }
        v
    }

    pub(super) fn width(self) -> Width {
        self.0
    }
}

/// `fn name(isa: Isa, args...) -> T` running `body` built for `isa`: the body is inlined into
/// one function per width (closures inside it would not be: keep them out of the body, or
/// calling other functions of this kind).
macro_rules! per_isa {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name(isa: $crate::quantize::wide::Isa, $($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            fn body($($arg: $ty),*) $(-> $ret)? $body
            /// # Safety
            /// The CPU has AVX2 and FMA.
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                body($($arg),*)
            }
            /// # Safety
            /// The CPU has AVX-512F and FMA.
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,fma")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn avx512($($arg: $ty),*) $(-> $ret)? {
                body($($arg),*)
            }
            match isa.width() {
                $crate::quantize::wide::Width::Baseline => body($($arg),*),
                // SAFETY: only `Isa::detect` and `Isa::all_available` make an `Isa`, and they
                // name only what the CPU has.
                #[cfg(target_arch = "x86_64")]
                $crate::quantize::wide::Width::Avx2 => unsafe { avx2($($arg),*) },
                // SAFETY: as above.
                #[cfg(target_arch = "x86_64")]
                $crate::quantize::wide::Width::Avx512 => unsafe { avx512($($arg),*) },
            }
        }
    };
}
pub(super) use per_isa;
