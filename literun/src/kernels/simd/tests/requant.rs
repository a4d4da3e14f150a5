//! The int8 output stage: vector requantization against the scalar one.

use super::*;

#[test]
fn requant_matches_scalar_on_extreme_accumulators() {
    let mut rng = Rng(99);
    for isa in isas() {
        for i in 0..600 {
            // A quarter with single rounding (LiteRT's int8 FULLY_CONNECTED).
            let single = i % 4 == 3;
            let mut q = rng.stage(32, 1, single);
            for s in q.shifts.iter_mut() {
                // A third of the cases with right shifts only (no channel shifts left), a
                // third shifting right by 1..=23 (the fused AVX-512 form; larger shifts only
                // have it with small output offsets).
                *s = match i % 3 {
                    0 => rng.below(62) as i32 - 31,
                    1 => -(rng.below(32) as i32),
                    _ => -1 - rng.below(23) as i32,
                };
            }
            if i % 6 == 5 {
                // Output offsets far outside int8's (the fused form's constant grows with
                // them; it falls back where it would not fit).
                q.output_offset = (rng.u() as i32) >> rng.below(32);
            }
            let rq = Requant::new(&q, 32, |c| [0, i32::MAX, i32::MIN, -7][c % 4]).unwrap();
            if i % 3 == 2 && i % 6 != 5 && !single {
                assert!(rq.fused, "fused form expected: {q:?}");
            }
            let mut acc = [0i32; 32];
            for a in acc.iter_mut() {
                *a = match rng.below(4) {
                    0 => rng.u() as i32,
                    1 => (rng.u() as i32) >> rng.below(32),
                    2 => [i32::MIN, i32::MAX, 0, -1, 1][rng.below(5)],
                    // Ties of the rounding shift.
                    _ => (rng.below(1000) as i32 - 500) << 10 | 1 << 9,
                };
            }
            let mut got = [0i8; 32];
            requant_row(isa, &rq, 0, &acc, &mut got);
            for j in 0..32 {
                assert_eq!(
                    got[j],
                    rq.apply(acc[j], j),
                    "{isa:?} lane {j} acc {}",
                    acc[j]
                );
            }
        }
    }
}

/// The parameters the vector kernels derive from `shift` (x86 `Rq16::load`, `Rq8::load`)
/// are `Mbqm::new`'s and the fused form's constants as stored before (`2^30 + 2^(30 + e) +
/// off * 2^(31 + e)` with `e - 1`), for every shift and output offsets up to i32's range;
/// and the fused form applies exactly where it did.
#[test]
fn derived_requant_params_match() {
    let offsets = [
        0,
        -1,
        1,
        -128,
        127,
        -7,
        1000,
        -70_000,
        1 << 20,
        -(1 << 24),
        i32::MAX,
        i32::MIN,
    ];
    let mut rng = Rng(7);
    for &off in &offsets {
        for pattern in 0..66 {
            // 63 uniform shifts, then shifts right only (mixed), then every shift mixed.
            let n: usize = if pattern % 2 == 0 { 32 } else { 27 };
            let shifts: Vec<i32> = (0..n)
                .map(|c| match pattern {
                    0..=62 => pattern - 31,
                    63 => -1 - ((c as i32 * 7) % 31),
                    64 => -1 - rng.below(31) as i32,
                    _ => rng.below(63) as i32 - 31,
                })
                .collect();
            let q = OutputStage {
                input_offset: 0,
                output_offset: off,
                multipliers: (0..n).map(|c| (1 << 30) + c as i32 * 12345).collect(),
                shifts: shifts.clone(),
                act_min: -128,
                act_max: 127,
                single_rounding: false,
            };
            let rq = Requant::new(&q, 32, |_| 0).unwrap();
            let old_add =
                |e: i32| (1i128 << 30) + (1i128 << (30 + e)) + (i128::from(off) << (31 + e));
            let fused = shifts
                .iter()
                .all(|&s| s <= -1 && old_add(-s).abs() < 1i128 << 62);
            assert_eq!(rq.fused, fused, "off {off} shifts {shifts:?}");
            #[cfg(target_arch = "x86_64")]
            for c0 in [0, 16] {
                let Some(d) = x86::derived(&rq, c0) else {
                    continue;
                };
                for i in 0..16 {
                    let c = c0 + i;
                    if c >= n {
                        continue;
                    }
                    let m = Mbqm::new(q.multipliers[c], shifts[c]).unwrap();
                    let want = [m.left, m.right, m.mask, m.thr];
                    for (k, w) in want.iter().enumerate() {
                        assert_eq!(
                            d.stages_8[k][i], *w,
                            "Rq8 {k} off {off} shift {}",
                            shifts[c]
                        );
                        if !fused {
                            assert_eq!(d.stages[k][i], *w, "Rq16 {k} shift {}", shifts[c]);
                        }
                    }
                    if fused {
                        let e = m.right;
                        assert_eq!(i128::from(d.add[i]), old_add(e), "off {off} e {e}");
                        assert_eq!(d.rshift[i], e - 1, "off {off} e {e}");
                        let (add, rshift) = d.cached.unwrap();
                        assert_eq!((add[i], rshift[i]), (d.add[i], d.rshift[i]), "cached");
                    }
                }
            }
        }
    }
}

/// The AVX2 output stage's unsigned-product form (`x86::RqU8`, through the tile output stage)
/// against the scalar one: accumulators up to the bound it was enabled for (both ends), ties
/// of both roundings (multipliers of exactly 2^30 over every residue), every right shift,
/// output offsets inside and outside int8's range, clamped and not, 32, 16, 8 and 5 channels.
#[cfg(target_arch = "x86_64")]
#[test]
fn unsigned_requant_matches_scalar() {
    if !Isa::Avx2.available() {
        return;
    }
    let mut rng = Rng(31);
    let mut enabled = 0;
    for i in 0..1000 {
        let bound: i64 = [
            128 * 128,
            27 * 256 * 128,
            9 * 256 * 128,
            1280 * 256 * 128,
            1 << 28,
        ][i % 5];
        let mut q = rng.stage(32, 1, false);
        for (c, s) in q.shifts.iter_mut().enumerate() {
            *s = -1 - rng.below(if i % 2 == 0 { 31 } else { 12 }) as i32;
            if c % 4 == 0 {
                q.multipliers[c] = 1 << 30;
            }
        }
        if i % 7 == 6 {
            q.output_offset = (rng.u() as i32) >> rng.below(32);
        }
        if i % 3 == 0 {
            (q.act_min, q.act_max) = (-128, 127);
        }
        let bias: Vec<i32> = (0..32)
            .map(|_| match rng.below(3) {
                0 => 0,
                1 => (rng.u() as i32) >> 12,
                _ => (rng.u() as i32) >> rng.below(32),
            })
            .collect();
        let mut rq = Requant::new(&q, 32, |c| bias[c]).unwrap();
        rq.allow_unsigned(bound);
        if !rq.unsigned {
            continue;
        }
        enabled += 1;
        let mut scratch = vec![0; fused_cache_scratch(Isa::Avx2, &rq)];
        let cache = fused_cache_in(&mut scratch, fused_cache_scratch(Isa::Avx2, &rq)).unwrap();
        x86::unsigned_cache(&rq, cache, 0..32);
        let b = bound as i32;
        let mut rows = [[0i32; 32]; 4];
        for (r, row) in rows.iter_mut().enumerate() {
            for a in row.iter_mut() {
                *a = match (r + rng.below(5)) % 5 {
                    0 => [b, -b, 0, -1, 1][rng.below(5)],
                    1 => (rng.below(2 * bound as usize + 1) as i64 - bound) as i32,
                    2 => rng.below(4096) as i32 - 2048,
                    // Ties of the rounding shift.
                    3 => ((rng.below(64) as i32 - 32) << 12 | 1 << 11) % b,
                    _ => (rng.below(1 << 20) as i32 - (1 << 19)) % b,
                };
            }
        }
        for cn in [32, 16, 8, 5] {
            let mut out = [0i8; 4 * 32];
            x86::requant_tile(Isa::Avx2, &rq, cache, 0, &rows, cn, &mut out, 32);
            for (r, row) in rows.iter().enumerate() {
                for j in 0..cn {
                    assert_eq!(
                        out[r * 32 + j],
                        rq.apply(row[j], j),
                        "case {i} cn {cn} lane {j} acc {} bias {} m {} shift {} off {}",
                        row[j],
                        bias[j],
                        q.multipliers[j],
                        q.shifts[j],
                        q.output_offset
                    );
                }
            }
        }
    }
    assert!(
        enabled > 300,
        "the unsigned form was enabled in {enabled} cases"
    );
}
