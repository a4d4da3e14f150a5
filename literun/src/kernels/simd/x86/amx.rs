//! The int8 GEMM on Intel AMX tiles (`tdpbusd`): blocks of up to 32 rows by 32 output
//! channels, as up to 2x2 tiles of 16x16 i32 sums, requantized from memory by the AVX-512
//! output stage ([`Rq16`], the VNNI tile's), so the output bytes are the VNNI path's.
//!
//! The operands are the VNNI path's packings: a row block's left-hand side is `rows` rows of
//! unsigned bytes (`x + 128`) whose stride is `a_stride` bytes, zero past `k`; the weights are
//! [`super::super::GemmI8`]'s panels (group `g`, channel `j`, byte `t` at `(g * 32 + j) * 4 +
//! t`), so a tile of 16 channels by 16 groups is a strided load of them (rows of 64 bytes, 128
//! apart). A step takes 16 groups (64 values of `k`); the groups past `k` must be readable and
//! are multiplied by the left-hand side's zeros.
//!
//! Linux hands out the tile data state per process on request (`arch_prctl`), and the tile
//! configuration (`ldtilecfg`) is per thread: [`Tiles::configure`] at the start of every GEMM
//! call that uses them, released when the call ends.

use super::*;
use core::arch::asm;

/// Whether the CPU has AMX-TILE and AMX-INT8 and the OS lets this process use the tile
/// registers (asked once; without std, or off Linux, never).
pub(crate) fn amx_usable() -> bool {
    #[cfg(all(feature = "std", target_os = "linux"))]
    {
        use core::sync::atomic::{AtomicU8, Ordering};
        // 0: not asked yet, 1: usable, 2: not.
        static STATE: AtomicU8 = AtomicU8::new(0);
        match STATE.load(Ordering::Relaxed) {
            1 => true,
            2 => false,
            _ => {
                let ok = request_tile_data();
                STATE.store(if ok { 1 } else { 2 }, Ordering::Relaxed);
                ok
            }
        }
    }
    #[cfg(not(all(feature = "std", target_os = "linux")))]
    {
        false
    }
}

/// CPUID leaf 7's AMX-TILE and AMX-INT8 bits, then the permission for the tile data state
/// (`ARCH_REQ_XCOMP_PERM`, feature 18), then the permitted set (`ARCH_GET_XCOMP_PERM`) holds
/// both tile states (17, 18): without that permission a tile instruction raises SIGILL.
#[cfg(all(feature = "std", target_os = "linux"))]
fn request_tile_data() -> bool {
    const ARCH_GET_XCOMP_PERM: usize = 0x1022;
    const ARCH_REQ_XCOMP_PERM: usize = 0x1023;
    const XFEATURE_XTILEDATA: usize = 18;
    const TILE_STATES: u64 = 3 << 17;
    // SAFETY: CPUID exists on every x86-64 CPU and leaf 7 is defined on any CPU that has
    // AVX-512 (checked by the callers first); a safe function from Rust 1.87.
    #[allow(unused_unsafe)]
    let leaf7 = unsafe { __cpuid_count(7, 0) };
    if (leaf7.edx >> 24) & 3 != 3 {
        return false;
    }
    if arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0 {
        return false;
    }
    let mut permitted = 0u64;
    if arch_prctl(ARCH_GET_XCOMP_PERM, &mut permitted as *mut u64 as usize) != 0 {
        return false;
    }
    permitted & TILE_STATES == TILE_STATES
}

/// The `arch_prctl` system call (158 on x86-64 Linux) for the two codes above: the first only
/// changes the process's permitted state set, the second writes one u64 at `arg`.
#[cfg(all(feature = "std", target_os = "linux"))]
fn arch_prctl(code: usize, arg: usize) -> isize {
    const SYS_ARCH_PRCTL: isize = 158;
    let ret: isize;
    // SAFETY: a system call touches no registers but rax (the result), rcx and r11 (declared),
    // and no memory but what the call's code defines: ARCH_REQ_XCOMP_PERM none,
    // ARCH_GET_XCOMP_PERM the u64 at `arg`, which the caller passes as a live `&mut u64`.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") SYS_ARCH_PRCTL => ret,
            in("rdi") code,
            in("rsi") arg,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// The tile configuration of every block: palette 1, all eight tiles 16 rows of 64 bytes
/// (sums tmm0-3, left-hand sides tmm4-5, weights tmm6-7).
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

const CONFIG: TileConfig = {
    let mut c = [0u8; 64];
    c[0] = 1;
    let mut t = 0;
    while t < 8 {
        c[16 + 2 * t] = 64; // bytes per row (u16, little-endian)
        c[48 + t] = 16; // rows
        t += 1;
    }
    TileConfig(c)
};

/// The tile registers of this thread, configured for [`tile_rq_i8_amx`]: released when
/// dropped (an idle thread's tile state is then cheap to switch out).
pub(crate) struct Tiles(());

impl Tiles {
    /// Loads [`CONFIG`] on this thread. Only when [`amx_usable`] (the only caller is the AMX
    /// GEMM, which exists only then).
    pub(crate) fn configure() -> Tiles {
        assert!(amx_usable());
        // SAFETY: the CPU has AMX and the process the tile permission (asserted); CONFIG is a
        // valid 64-byte configuration (palette 1, rows and widths within its limits).
        unsafe { asm!("ldtilecfg [{0}]", in(reg) CONFIG.0.as_ptr(), options(nostack, readonly)) };
        Tiles(())
    }
}

impl Drop for Tiles {
    fn drop(&mut self) {
        // SAFETY: a `Tiles` exists only after `configure`, so AMX is usable here.
        unsafe { asm!("tilerelease", options(nostack, nomem)) };
    }
}

/// The sums of a block as 32 rows of 32 channels (16x16 tiles stored at rows 0/16, lanes
/// 0/16).
#[repr(C, align(64))]
pub(crate) struct Sums(pub(crate) [[i32; 32]; 32]);

/// One block on the tiles: `out[r * stride + j] = requant(sum_k a[r][k] · b[k][c0 + j])` for
/// `r < rows <= 32`, `j < cn <= 32`, with `a` rows `a_stride` bytes apart (whole steps of 64
/// bytes: `steps` of them) and `b` the panel of channels `c0..c0 + 32` (`steps * 16` groups of
/// 128 bytes). `fused`: [`fused_cache`] of `rq` with its fused form. `_tiles` proves this
/// thread's tiles are configured.
#[allow(clippy::too_many_arguments)]
pub(crate) fn tile_rq_i8_amx(
    _tiles: &Tiles,
    rows: usize,
    a: &[i32],
    a_stride: usize,
    steps: usize,
    b: &[i8],
    rq: &Requant,
    fused: &[i32],
    c0: usize,
    cn: usize,
    out: &mut [i8],
    stride: usize,
    sums: &mut Sums,
) {
    // (Always both column tiles: a panel of at most 16 channels is only a wider layer's last
    // one, `amx_pays`, whose missing channels have zero weights.)
    let row_tiles = if rows > 16 { 2 } else { 1 };
    assert!(steps >= 1 && a_stride >= steps * 64 && a_stride.is_multiple_of(4));
    assert!(
        (1..=32).contains(&rows) && a.len() * 4 >= (16 * row_tiles - 1) * a_stride + steps * 64
    );
    assert!(b.len() >= steps * 16 * 128 && (1..=32).contains(&cn) && c0 + 32 <= rq.bias.len());
    assert!(out.len() >= (rows - 1) * stride + cn);
    let (a, b, c) = (
        a.as_ptr() as *const u8,
        b.as_ptr(),
        sums.0.as_mut_ptr() as *mut i32,
    );
    // SAFETY: tiles configured on this thread (`_tiles`); the loads read 16 rows of 64 bytes
    // per tile, at most `16 * row_tiles` rows of `a` (`a_stride` apart, step `s` at byte 64 s,
    // inside `a` as asserted) and 16 rows of `b` per step (128 apart, 128 bytes each
    // from `s * 2048`, inside `b` as asserted); the stores write 16 rows of 64 bytes, 128 apart,
    // inside `sums` (32 rows of 128 bytes).
    unsafe { sums_on_tiles(a, a_stride, b, steps, c, row_tiles) };
    // SAFETY: the AVX-512 output stage (AMX CPUs have AVX-512 F/BW/VL: `available`); `rq`
    // covers c0..c0 + 32 and `out` every (row, channel) stored (asserted).
    unsafe { requant_sums(rq, fused, c0, &sums.0, rows, cn, out.as_mut_ptr(), stride) };
}

/// The 32 `prefetcht0` of the weights 16 KiB ahead of `{b}` (the next 2 KiB step's lines), in
/// every form of the block loop: the tile loads of ResNet18's weights from L2/L3 stalled.
macro_rules! prefetch_b_ahead {
    () => {
        concat!(
            "prefetcht0 [{b} + 16384]\n",
            "prefetcht0 [{b} + 16448]\n",
            "prefetcht0 [{b} + 16512]\n",
            "prefetcht0 [{b} + 16576]\n",
            "prefetcht0 [{b} + 16640]\n",
            "prefetcht0 [{b} + 16704]\n",
            "prefetcht0 [{b} + 16768]\n",
            "prefetcht0 [{b} + 16832]\n",
            "prefetcht0 [{b} + 16896]\n",
            "prefetcht0 [{b} + 16960]\n",
            "prefetcht0 [{b} + 17024]\n",
            "prefetcht0 [{b} + 17088]\n",
            "prefetcht0 [{b} + 17152]\n",
            "prefetcht0 [{b} + 17216]\n",
            "prefetcht0 [{b} + 17280]\n",
            "prefetcht0 [{b} + 17344]\n",
            "prefetcht0 [{b} + 17408]\n",
            "prefetcht0 [{b} + 17472]\n",
            "prefetcht0 [{b} + 17536]\n",
            "prefetcht0 [{b} + 17600]\n",
            "prefetcht0 [{b} + 17664]\n",
            "prefetcht0 [{b} + 17728]\n",
            "prefetcht0 [{b} + 17792]\n",
            "prefetcht0 [{b} + 17856]\n",
            "prefetcht0 [{b} + 17920]\n",
            "prefetcht0 [{b} + 17984]\n",
            "prefetcht0 [{b} + 18048]\n",
            "prefetcht0 [{b} + 18112]\n",
            "prefetcht0 [{b} + 18176]\n",
            "prefetcht0 [{b} + 18240]\n",
            "prefetcht0 [{b} + 18304]\n",
            "prefetcht0 [{b} + 18368]\n",
        )
    };
}

/// # Safety
/// This thread's tiles configured ([`Tiles`]); `a` readable for `16 * row_tiles` rows of
/// `steps * 64` bytes `a_stride` apart, `b` for `steps * 16` rows of 128 bytes, `c` writable
/// for 32 rows of 32 i32.
#[inline(always)]
unsafe fn sums_on_tiles(
    a: *const u8,
    a_stride: usize,
    b: *const i8,
    steps: usize,
    c: *mut i32,
    row_tiles: usize,
) {
    // Both forms prefetch the weights 8 steps (16 KiB) ahead, the next panel's
    // at a panel's end: ResNet18's 3x3 layers read theirs from L2 or L3, and the tile loads
    // stalled on them (0.85-0.92x the layers' time with the prefetches, on a Xeon with AMX,
    // family 6 model 207). A prefetch never faults, so past the weights' end is harmless.
    // (The second row tile's rows start 16 rows on.)
    let a1 = a.wrapping_add(16 * a_stride);
    let c1 = c.wrapping_add(16 * 32);
    // SAFETY: the caller's contract; every form reads and writes within it (prefetches are
    // hints, not accesses).
    unsafe {
        match row_tiles {
            2 => asm!(
                "tilezero tmm0",
                "tilezero tmm1",
                "tilezero tmm2",
                "tilezero tmm3",
                "2:",
                "tileloadd tmm4, [{a} + {sa}*1]",
                "tileloadd tmm6, [{b} + {bs}*1]",
                "tileloadd tmm7, [{b} + {bs}*1 + 64]",
                prefetch_b_ahead!(),
                "tdpbusd tmm0, tmm4, tmm6",
                "tdpbusd tmm1, tmm4, tmm7",
                "tileloadd tmm5, [{a1} + {sa}*1]",
                "tdpbusd tmm2, tmm5, tmm6",
                "tdpbusd tmm3, tmm5, tmm7",
                "add {a}, 64",
                "add {a1}, 64",
                "add {b}, 2048",
                "dec {n}",
                "jnz 2b",
                "tilestored [{c} + {cs}*1], tmm0",
                "tilestored [{c} + {cs}*1 + 64], tmm1",
                "tilestored [{c1} + {cs}*1], tmm2",
                "tilestored [{c1} + {cs}*1 + 64], tmm3",
                a = inout(reg) a => _,
                a1 = inout(reg) a1 => _,
                b = inout(reg) b => _,
                n = inout(reg) steps => _,
                sa = in(reg) a_stride,
                bs = in(reg) 128usize,
                c = in(reg) c,
                c1 = in(reg) c1,
                cs = in(reg) 128usize,
                options(nostack),
            ),
            _ => asm!(
                "tilezero tmm0",
                "tilezero tmm1",
                "2:",
                "tileloadd tmm4, [{a} + {sa}*1]",
                "tileloadd tmm6, [{b} + {bs}*1]",
                "tileloadd tmm7, [{b} + {bs}*1 + 64]",
                prefetch_b_ahead!(),
                "tdpbusd tmm0, tmm4, tmm6",
                "tdpbusd tmm1, tmm4, tmm7",
                "add {a}, 64",
                "add {b}, 2048",
                "dec {n}",
                "jnz 2b",
                "tilestored [{c} + {cs}*1], tmm0",
                "tilestored [{c} + {cs}*1 + 64], tmm1",
                a = inout(reg) a => _,
                b = inout(reg) b => _,
                n = inout(reg) steps => _,
                sa = in(reg) a_stride,
                bs = in(reg) 128usize,
                c = in(reg) c,
                cs = in(reg) 128usize,
                options(nostack),
            ),
        }
    }
}

/// `out[r * stride + j] = requant(sums[r][j] + bias)` for `r < rows`, `j < cn <= 32`.
///
/// # Safety
/// AVX-512 F/BW/VL; `rq` covers channels `c0..c0 + 32` (and `fused` is [`fused_cache`] of it
/// with its fused form), `out` writable at `r * stride + j` for those rows and channels.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
unsafe fn requant_sums(
    rq: &Requant,
    fused: &[i32],
    c0: usize,
    sums: &[[i32; 32]; 32],
    rows: usize,
    cn: usize,
    out: *mut i8,
    stride: usize,
) {
    for half in 0..cn.div_ceil(16) {
        let p = Rq16::load_cached(rq, fused, c0 + 16 * half);
        let mask = lanes16(cn - 16 * half);
        for (r, row) in sums.iter().enumerate().take(rows) {
            // SAFETY: 16 lanes of a row of 32 (half < 2); row r's channels 16 half.. of `cn`
            // are writable (the caller's contract), the mask keeps the store to them.
            unsafe {
                let acc = _mm512_loadu_si512(row.as_ptr().add(16 * half) as *const __m512i);
                _mm_mask_storeu_epi8(out.add(r * stride + 16 * half), mask, p.apply(acc));
            }
        }
    }
}
