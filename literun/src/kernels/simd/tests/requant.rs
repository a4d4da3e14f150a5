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
