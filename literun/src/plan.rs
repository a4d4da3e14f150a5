//! Arena memory planning: assigns each non-constant tensor an offset in one buffer so that
//! tensors alive at the same time never overlap. Independent of the schema; shared with the
//! converter (which reports arena sizes).
// Without `error-details`, values only error messages mention are unused.
#![cfg_attr(not(feature = "error-details"), allow(unused_variables))]

use alloc::vec::Vec;

/// Alignment of every tensor in the arena, in bytes.
pub const ARENA_ALIGN: usize = 16;

/// One tensor to place: its size and the inclusive range of operator indices during which it must
/// hold its value (`first` = the op writing it, or 0 for model inputs; `last` = the last op
/// reading it, or the op count for model outputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorUse {
    pub bytes: usize,
    pub first: usize,
    pub last: usize,
}

impl TensorUse {
    fn overlaps(&self, o: &TensorUse) -> bool {
        self.first <= o.last && o.first <= self.last
    }
}

/// The result of planning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArenaPlan {
    /// Byte offset of each tensor, in input order; multiples of [`ARENA_ALIGN`].
    pub offsets: Vec<usize>,
    /// Total arena size in bytes (a multiple of [`ARENA_ALIGN`]).
    pub total: usize,
}

fn round_up(n: usize) -> Option<usize> {
    n.checked_add(ARENA_ALIGN - 1)
        .map(|v| v / ARENA_ALIGN * ARENA_ALIGN)
}

/// Sorts `v` so that `less` holds between no later and earlier element. Every order sorted here
/// is total, so the result is the same as a stable sort's; heapsort is a few hundred bytes of
/// code where the standard sorts are kilobytes per element type (this runs on microcontrollers).
fn heapsort<T>(v: &mut [T], less: impl Fn(&T, &T) -> bool) {
    let sift = |v: &mut [T], mut root: usize, end: usize| loop {
        let mut child = 2 * root + 1;
        if child >= end {
            break;
        }
        if child + 1 < end && less(&v[child], &v[child + 1]) {
            child += 1;
        }
        if !less(&v[root], &v[child]) {
            break;
        }
        v.swap(root, child);
        root = child;
    };
    let n = v.len();
    for i in (0..n / 2).rev() {
        sift(v, i, n);
    }
    for end in (1..n).rev() {
        v.swap(0, end);
        sift(v, 0, end);
    }
}

/// Greedy-by-size placement: largest tensors first, each at the lowest offset that does not
/// overlap an already-placed tensor with an overlapping lifetime. `None` when sizes overflow.
pub fn plan_arena(uses: &[TensorUse]) -> Option<ArenaPlan> {
    let mut order: Vec<usize> = (0..uses.len()).collect();
    heapsort(&mut order, |&a, &b| (uses[b].bytes, a) < (uses[a].bytes, b));
    let mut offsets = alloc::vec![0usize; uses.len()];
    let mut placed: Vec<usize> = Vec::with_capacity(uses.len());
    let mut total = 0usize;
    let mut live: Vec<(usize, usize)> = Vec::new();
    for &i in &order {
        let size = round_up(uses[i].bytes)?;
        if size == 0 {
            continue;
        }
        live.clear();
        for &j in &placed {
            if uses[i].overlaps(&uses[j]) {
                live.push((offsets[j], offsets[j] + round_up(uses[j].bytes)?));
            }
        }
        heapsort(&mut live, |a, b| a < b);
        let mut off = 0usize;
        for &(s, e) in &live {
            if off.checked_add(size)? <= s {
                break;
            }
            off = off.max(e);
        }
        offsets[i] = off;
        total = total.max(off.checked_add(size)?);
        placed.push(i);
    }
    Some(ArenaPlan { offsets, total })
}

/// Name of the metadata entry holding a stored plan (TFLite Micro's offline memory plan).
pub const OFFLINE_PLAN_METADATA: &str = "OfflineMemoryAllocation";

/// Where each tensor of subgraph 0 lives in the arena.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryPlan {
    /// Per tensor: its byte offset in the arena, or `None` (constant, unused, empty, or
    /// computed once at load time).
    pub offsets: Vec<Option<usize>>,
    /// Arena size in bytes (a multiple of [`ARENA_ALIGN`]).
    pub total: usize,
    /// Whether the plan came from the file's `OfflineMemoryAllocation` metadata.
    pub stored: bool,
}

impl MemoryPlan {
    /// The plan in TFLite Micro's `OfflineMemoryAllocation` layout: `[version 1, subgraph 0,
    /// tensor count, offset per tensor (-1: not planned offline)]`, as i32. `None` if an offset
    /// does not fit in an i32.
    pub fn to_offline_metadata(&self) -> Option<Vec<i32>> {
        let mut v = alloc::vec![1, 0, i32::try_from(self.offsets.len()).ok()?];
        for o in &self.offsets {
            v.push(match o {
                Some(off) => i32::try_from(*off).ok()?,
                None => -1,
            });
        }
        Some(v)
    }
}

/// Parses TFLite Micro's `OfflineMemoryAllocation` buffer for subgraph 0 of a model with
/// `tensors` tensors: one offset per tensor, `-1` for "not planned".
pub fn parse_offline_metadata(
    bytes: &[u8],
    tensors: usize,
) -> Result<Vec<i32>, alloc::string::String> {
    use crate::error::format;
    if !bytes.len().is_multiple_of(4) || bytes.len() < 12 {
        return Err(format!(
            "{} bytes is not a list of i32 of at least 3",
            bytes.len()
        ));
    }
    let words: Vec<i32> = bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if words[0] != 1 {
        return Err(format!("version {} (only 1 is known)", words[0]));
    }
    if words[1] != 0 {
        return Err(format!(
            "plan for subgraph {} (only subgraph 0 is run)",
            words[1]
        ));
    }
    if words[2] < 0 || words[2] as usize != tensors || words.len() != 3 + tensors {
        return Err(format!(
            "{} offsets ({} stored) for a subgraph of {tensors} tensors",
            words[2],
            words.len() - 3
        ));
    }
    Ok(words[3..].to_vec())
}

/// Room a stored plan may leave unused beyond twice its tensors laid end to end (the online
/// planner never exceeds them once; plans written by hand leave gaps).
pub const STORED_PLAN_SLACK: usize = 64 << 10;

/// Checks a stored plan: every tensor of `uses` has an aligned, non-negative offset that keeps it
/// within twice the tensors laid end to end plus [`STORED_PLAN_SLACK`] (a file of a few hundred
/// bytes must not make the interpreter allocate gigabytes), and no two tensors alive at the same
/// time share bytes. Returns the arena size.
pub fn verify_offsets(
    uses: &[TensorUse],
    offsets: &[usize],
) -> Result<usize, (usize, Option<usize>)> {
    let limit = uses
        .iter()
        .try_fold(0usize, |a, u| {
            round_up(u.bytes).and_then(|b| a.checked_add(b))
        })
        .and_then(|n| n.checked_mul(2))
        .and_then(|n| n.checked_add(STORED_PLAN_SLACK));
    let mut total = 0usize;
    let mut spans = Vec::with_capacity(uses.len());
    for (i, (u, &off)) in uses.iter().zip(offsets).enumerate() {
        if off % ARENA_ALIGN != 0 {
            return Err((i, None));
        }
        let end = round_up(u.bytes)
            .and_then(|b| off.checked_add(b))
            .filter(|&end| limit.is_some_and(|limit| end <= limit))
            .ok_or((i, None))?;
        total = total.max(end);
        spans.push((off, off + u.bytes));
    }
    // Sweep over offsets: only tensors whose byte ranges overlap are compared.
    let mut order: Vec<usize> = (0..uses.len()).filter(|&i| uses[i].bytes > 0).collect();
    heapsort(&mut order, |&a, &b| (spans[a].0, a) < (spans[b].0, b));
    for (a_pos, &a) in order.iter().enumerate() {
        for &b in &order[a_pos + 1..] {
            if spans[b].0 >= spans[a].1 {
                break;
            }
            if uses[a].overlaps(&uses[b]) {
                return Err((a, Some(b)));
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {

    #[test]
    fn heapsort_matches_the_standard_sort() {
        let mut seed = 7u32;
        for n in 0..60usize {
            let mut v: Vec<(u32, usize)> = (0..n)
                .map(|i| {
                    seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
                    (seed >> 28, i)
                })
                .collect();
            let mut want = v.clone();
            want.sort();
            heapsort(&mut v, |a, b| a < b);
            assert_eq!(v, want);
        }
    }
    use super::*;

    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) as usize) % n
        }
    }

    fn check(uses: &[TensorUse], p: &ArenaPlan) {
        let sum: usize = uses.iter().map(|u| round_up(u.bytes).unwrap()).sum();
        assert!(p.total <= sum, "total {} > sum {}", p.total, sum);
        for (i, a) in uses.iter().enumerate() {
            assert_eq!(p.offsets[i] % ARENA_ALIGN, 0);
            assert!(p.offsets[i] + a.bytes <= p.total || a.bytes == 0);
            for (j, b) in uses.iter().enumerate().skip(i + 1) {
                if a.bytes == 0 || b.bytes == 0 || !a.overlaps(b) {
                    continue;
                }
                let (sa, sb) = (p.offsets[i], p.offsets[j]);
                assert!(
                    sa + a.bytes <= sb || sb + b.bytes <= sa,
                    "tensors {i} and {j} overlap: {a:?}@{sa} {b:?}@{sb}"
                );
            }
        }
    }

    #[test]
    fn random_lifetimes_never_overlap() {
        let mut rng = Lcg(42);
        for _ in 0..300 {
            let n = 1 + rng.next(40);
            let ops = 1 + rng.next(30);
            let uses: Vec<TensorUse> = (0..n)
                .map(|_| {
                    let first = rng.next(ops);
                    let last = first + rng.next(ops - first + 1);
                    TensorUse {
                        bytes: rng.next(5000),
                        first,
                        last,
                    }
                })
                .collect();
            let p = plan_arena(&uses).unwrap();
            check(&uses, &p);
        }
    }

    #[test]
    fn chain_reuses_memory() {
        // a -> b -> c -> d: a and c can share, b and d can share.
        let uses = [
            TensorUse {
                bytes: 100,
                first: 0,
                last: 0,
            },
            TensorUse {
                bytes: 100,
                first: 0,
                last: 1,
            },
            TensorUse {
                bytes: 100,
                first: 1,
                last: 2,
            },
            TensorUse {
                bytes: 100,
                first: 2,
                last: 3,
            },
        ];
        let p = plan_arena(&uses).unwrap();
        check(&uses, &p);
        assert_eq!(p.total, 224);
    }

    #[test]
    fn empty_and_zero_sized() {
        assert_eq!(plan_arena(&[]).unwrap().total, 0);
        let p = plan_arena(&[TensorUse {
            bytes: 0,
            first: 0,
            last: 3,
        }])
        .unwrap();
        assert_eq!(p.total, 0);
    }

    #[test]
    fn overflow_is_none() {
        let uses = [
            TensorUse {
                bytes: usize::MAX - 3,
                first: 0,
                last: 1,
            },
            TensorUse {
                bytes: 8,
                first: 0,
                last: 1,
            },
        ];
        assert!(plan_arena(&uses).is_none());
    }

    #[test]
    fn offline_metadata_roundtrip_and_errors() {
        let p = MemoryPlan {
            offsets: alloc::vec![Some(0), None, Some(32)],
            total: 48,
            stored: false,
        };
        let words = p.to_offline_metadata().unwrap();
        assert_eq!(words, [1, 0, 3, 0, -1, 32]);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(parse_offline_metadata(&bytes, 3).unwrap(), [0, -1, 32]);
        assert!(parse_offline_metadata(&bytes, 4).is_err());
        assert!(parse_offline_metadata(&bytes[..10], 3).is_err());
        let mut v2 = bytes.clone();
        v2[0] = 2;
        assert!(parse_offline_metadata(&v2, 3).is_err());
        let mut sg = bytes.clone();
        sg[4] = 1;
        assert!(parse_offline_metadata(&sg, 3).is_err());
    }

    #[test]
    fn verify_offsets_finds_overlaps_and_misalignment() {
        let u = |bytes, first, last| TensorUse { bytes, first, last };
        let uses = [u(100, 0, 1), u(64, 1, 2), u(64, 2, 3)];
        // 0 and 2 are never alive together: they may share bytes.
        assert_eq!(verify_offsets(&uses, &[0, 112, 0]), Ok(176));
        assert_eq!(verify_offsets(&uses, &[0, 96, 0]), Err((0, Some(1))));
        assert_eq!(verify_offsets(&uses, &[0, 120, 0]), Err((1, None)));
        // Past twice the tensors laid end to end (112 + 64 + 64 bytes) and the slack: refused,
        // however aligned.
        let limit = 2 * 240 + STORED_PLAN_SLACK;
        assert_eq!(verify_offsets(&uses, &[0, limit - 64, 0]), Ok(limit));
        assert_eq!(verify_offsets(&uses, &[0, limit - 48, 0]), Err((1, None)));
        assert_eq!(verify_offsets(&uses, &[0, 112, 1 << 30]), Err((2, None)));
        // The online planner's result always verifies.
        let p = plan_arena(&uses).unwrap();
        assert_eq!(verify_offsets(&uses, &p.offsets), Ok(p.total));
    }
}
