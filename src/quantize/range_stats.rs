//! Range statistics of every tensor, gathered by running calibration samples through the float
//! model: running min/max, then (for the percentile, MSE, entropy and auto methods) a fixed-size
//! histogram per tensor over that range, so memory stays bounded and activations are never kept.
//! Each method turns a tensor's statistics into the [lo, hi] its int8 parameters cover.

use super::calibrate::{feed_input, Method, Sample};
use super::observe::KeptInterpreters;
use anyhow::{anyhow, Result};
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};

const BINS: usize = 2048;

/// Samples the histogram pass runs at most (evenly spaced over the calibration set): ResNet18 at
/// 224 with 100 samples spent half its calibration filling histograms.
const MAX_HISTOGRAM_SAMPLES: usize = 32;

/// Weighted histograms add each channel weight as an integer count of `max weight / 2^40`: the
/// sums are then exact, so the samples' split over threads (which depends on the machine) cannot
/// change them, as it would change f64 sums' rounding.
const WEIGHT_STEPS: f64 = (1u64 << 40) as f64;

/// SiLU, `x · σ(x)`, in f64 for the expected error of its input's range.
fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// The slope of SiLU at `x`: how much of a rounding error of its input reaches its output.
fn silu_slope(x: f64) -> f64 {
    let s = 1.0 / (1.0 + (-x).exp());
    s * (1.0 + x * (1.0 - s))
}

/// Statistics of one tensor.
#[derive(Clone, Debug, PartialEq)]
struct Stat {
    min: f32,
    max: f32,
    hist: Vec<u64>,
    /// The same histogram with each value counted by its channel's downstream weight
    /// (`downstream::channel_weights`); empty for tensors whose channels weigh alike. Filled
    /// from `weighted_steps` by [`Stat::finish`].
    weighted: Vec<f64>,
    /// `weighted` in units of `weight_unit` ([`WEIGHT_STEPS`]), as accumulated.
    weighted_steps: Vec<u128>,
    weight_unit: f64,
    /// Every reader is a SiLU: a range is judged by the error of SiLU's output.
    silu_input: bool,
}

impl Stat {
    fn new() -> Stat {
        Stat {
            min: f32::INFINITY,
            max: f32::NEG_INFINITY,
            hist: Vec::new(),
            weighted: Vec::new(),
            weighted_steps: Vec::new(),
            weight_unit: 0.0,
            silu_input: false,
        }
    }

    /// The weighted histogram from its exact sums, once every sample is in.
    fn finish(&mut self) {
        let unit = self.weight_unit;
        self.weighted = self
            .weighted_steps
            .iter()
            .map(|&n| n as f64 * unit)
            .collect();
    }

    /// Widens the range to the finite values of `v`.
    fn observe_range(&mut self, v: &[f32]) {
        // Lanes the compiler can keep in vector registers: each takes its own min and max.
        const LANES: usize = 16;
        let (mut lo, mut hi) = ([self.min; LANES], [self.max; LANES]);
        let chunks = v.chunks_exact(LANES);
        let rest = chunks.remainder();
        for chunk in chunks {
            for ((l, h), &x) in lo.iter_mut().zip(hi.iter_mut()).zip(chunk) {
                let finite = x.is_finite();
                *l = if finite && x < *l { x } else { *l };
                *h = if finite && x > *h { x } else { *h };
            }
        }
        for &x in rest {
            if x.is_finite() {
                self.min = self.min.min(x);
                self.max = self.max.max(x);
            }
        }
        for (&l, &h) in lo.iter().zip(&hi) {
            self.min = self.min.min(l);
            self.max = self.max.max(h);
        }
    }

    /// `channel_weights`: per channel (last axis) downstream weights of the values in `v`.
    fn observe_hist(&mut self, v: &[f32], channel_weights: Option<&[f32]>) {
        if self.hist.is_empty() {
            self.hist = vec![0; BINS];
        }
        let (lo, w) = (self.min, (self.max - self.min) / BINS as f32);
        if w.is_nan() || w <= 0.0 {
            self.hist[0] += v.len() as u64;
            return;
        }
        let bin = |x: f32| (((x - lo) / w) as usize).min(BINS - 1);
        for &x in v {
            if x.is_finite() {
                self.hist[bin(x)] += 1;
            }
        }
        if let Some(cw) =
            channel_weights.filter(|cw| !cw.is_empty() && v.len().is_multiple_of(cw.len()))
        {
            let unit = f64::from(cw.iter().fold(0f32, |m, &k| m.max(k))) / WEIGHT_STEPS;
            if unit > 0.0 {
                if self.weighted_steps.is_empty() {
                    self.weighted_steps = vec![0; BINS];
                    self.weight_unit = unit;
                }
                let steps: Vec<u128> = cw
                    .iter()
                    .map(|&k| (f64::from(k.max(0.0)) / self.weight_unit).round() as u128)
                    .collect();
                for row in v.chunks_exact(cw.len()) {
                    for (&x, &n) in row.iter().zip(&steps) {
                        if x.is_finite() {
                            self.weighted_steps[bin(x)] += n;
                        }
                    }
                }
            }
        }
    }

    fn merge(&mut self, o: &Stat) {
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        if self.hist.is_empty() {
            self.hist = o.hist.clone();
        } else {
            for (a, b) in self.hist.iter_mut().zip(&o.hist) {
                *a += b;
            }
        }
        if self.weighted_steps.is_empty() {
            self.weighted_steps = o.weighted_steps.clone();
            self.weight_unit = o.weight_unit;
        } else {
            for (a, b) in self.weighted_steps.iter_mut().zip(&o.weighted_steps) {
                *a += b;
            }
        }
    }

    /// The expected squared error (summed over the histogram) of int8 with range [lo, hi]:
    /// clipping of the values outside, plus rounding (step² / 12) of every value; each value
    /// counts by its channel's downstream weight where the tensor has them. The input of a SiLU
    /// counts the error its readers' output gets: a clipped value `x` gives
    /// `silu(x) - silu(clipped)`, rounding scales by SiLU's slope at `x` (under 0.1 below -2.4),
    /// so the negative tail, which SiLU maps to within 0.28 of zero, is cheap to clip.
    fn expected_error(&self, (lo, hi): (f32, f32)) -> f64 {
        if !self.weighted.is_empty() {
            return self.error_over(&self.weighted, (lo, hi));
        }
        let counts: Vec<f64> = self.hist.iter().map(|&c| c as f64).collect();
        self.error_over(&counts, (lo, hi))
    }

    fn error_over(&self, bins: &[f64], (lo, hi): (f32, f32)) -> f64 {
        let w = (self.max - self.min) / BINS as f32;
        // int8 represents 0 exactly: the range always includes it.
        let (lo, hi) = (lo.min(0.0), hi.max(0.0));
        let step = ((hi - lo) / 255.0).max(f32::MIN_POSITIVE) as f64;
        let mut err = 0f64;
        for (b, &c) in bins.iter().enumerate() {
            if c == 0.0 {
                continue;
            }
            let x = (self.min + w * b as f32 + w / 2.0) as f64;
            let clipped = x.clamp(lo as f64, hi as f64);
            // Values within half a step of zero round to it (zero is exact).
            let rounding = (step * step / 12.0).min(x * x);
            err += c * if self.silu_input {
                (silu(x) - silu(clipped)).powi(2) + silu_slope(x).powi(2) * rounding
            } else {
                (x - clipped).powi(2) + rounding
            };
        }
        err
    }

    /// The chosen [lo, hi].
    fn range(&self, method: Method) -> (f32, f32) {
        if self.min.is_nan() || self.max.is_nan() || self.min > self.max {
            return (0.0, 0.0);
        }
        let total: u64 = self.hist.iter().sum();
        if total == 0 || self.max == self.min {
            return (self.min, self.max);
        }
        let w = (self.max - self.min) / BINS as f32;
        let edge = |b: usize| self.min + w * b as f32;
        match method {
            Method::MinMax => (self.min, self.max),
            Method::Auto => [
                Method::MinMax,
                Method::Percentile(99.9),
                Method::Percentile(99.99),
                Method::Mse,
            ]
            .into_iter()
            .map(|m| self.range(m))
            .map(|r| (self.expected_error(r), r))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map_or((self.min, self.max), |(_, r)| r),
            Method::Percentile(p) => {
                let cut = ((1.0 - p / 100.0) * total as f64).floor() as u64;
                let (mut acc, mut lo_b) = (0u64, 0usize);
                while lo_b < BINS && acc + self.hist[lo_b] <= cut {
                    acc += self.hist[lo_b];
                    lo_b += 1;
                }
                let (mut acc, mut hi_b) = (0u64, BINS);
                while hi_b > lo_b + 1 && acc + self.hist[hi_b - 1] <= cut {
                    acc += self.hist[hi_b - 1];
                    hi_b -= 1;
                }
                (edge(lo_b).min(0.0f32.max(self.min)), edge(hi_b))
            }
            Method::Mse if self.silu_input => self.mse_range_each_side(),
            Method::Mse => {
                // Shrink the range symmetrically around the data toward its centre of zero and
                // keep the candidate with the least expected error (rounding + clipping).
                // Downstream-weighted tensors may need far narrower ranges (a large channel
                // clipped so that small, heavily weighted ones keep their steps): the search
                // goes on geometrically down to about 1/150 of the range.
                let deep = if self.weighted.is_empty() { 0 } else { 25 };
                let factors = (0..=40)
                    .map(|k| 1.0 - k as f32 * 0.02)
                    .chain((1..=deep).map(|j| 0.2 * 0.87f32.powi(j)));
                let mut best = (f64::INFINITY, self.min, self.max);
                for f in factors {
                    let (lo, hi) = (self.min.min(0.0) * f, self.max.max(0.0) * f);
                    let err = self.expected_error((lo, hi));
                    if err < best.0 {
                        best = (err, lo, hi);
                    }
                }
                (best.1, best.2)
            }
            Method::Entropy => {
                // KL divergence between the observed distribution (values outside the candidate
                // range merged into its edge bins) and the same distribution seen through 255
                // quantization levels; the least divergent candidate wins.
                let total = total as f64;
                let mut best = (f64::INFINITY, self.min, self.max);
                for k in 0..=40 {
                    let f = 1.0 - k as f32 * 0.02;
                    let (lo, hi) = (self.min.min(0.0) * f, self.max.max(0.0) * f);
                    let bin_of = |x: f32| (((x - self.min) / w) as usize).min(BINS - 1);
                    let (b_lo, b_hi) = (bin_of(lo.max(self.min)), bin_of(hi.min(self.max)));
                    if b_hi <= b_lo {
                        continue;
                    }
                    let inside: Vec<f64> =
                        self.hist[b_lo..=b_hi].iter().map(|&c| c as f64).collect();
                    let below: u64 = self.hist[..b_lo].iter().sum();
                    let above: u64 = self.hist[b_hi + 1..].iter().sum();
                    let mut p = inside.clone();
                    p[0] += below as f64;
                    let n = p.len();
                    p[n - 1] += above as f64;
                    // Q: the in-range values only, each of 255 levels spreading its mass evenly
                    // over its non-empty bins — so clipped mass shows up as divergence at the edges.
                    let levels = 255.min(n);
                    let mut q = vec![0f64; n];
                    for l in 0..levels {
                        let (a, b) = (
                            l * n / levels,
                            ((l + 1) * n / levels).max(l * n / levels + 1),
                        );
                        let mass: f64 = inside[a..b].iter().sum();
                        let nonzero = p[a..b].iter().filter(|&&v| v > 0.0).count().max(1);
                        for i in a..b {
                            if p[i] > 0.0 {
                                q[i] = mass / nonzero as f64;
                            }
                        }
                    }
                    let kl: f64 = p
                        .iter()
                        .zip(&q)
                        .filter(|(&pi, _)| pi > 0.0)
                        .map(|(&pi, &qi)| {
                            (pi / total) * ((pi / total) / (qi / total).max(1e-12)).ln()
                        })
                        .sum();
                    if kl < best.0 {
                        best = (kl, lo, hi);
                    }
                }
                (best.1, best.2)
            }
        }
    }

    /// The least expected error over ranges whose ends shrink independently (SiLU's input
    /// wants its negative side clipped far more than its positive one): each end in turn takes
    /// its best of 41 candidates with the other fixed, three rounds.
    fn mse_range_each_side(&self) -> (f32, f32) {
        let (lo0, hi0) = (self.min.min(0.0), self.max.max(0.0));
        let (mut lo, mut hi) = (lo0, hi0);
        let mut best = self.expected_error((lo, hi));
        for _ in 0..3 {
            for k in 0..=40 {
                let cand = hi0 * (1.0 - k as f32 * 0.02);
                let err = self.expected_error((lo, cand));
                if err < best {
                    (best, hi) = (err, cand);
                }
            }
            for k in 0..=40 {
                let cand = lo0 * (1.0 - k as f32 * 0.025);
                let err = self.expected_error((cand, hi));
                if err < best {
                    (best, lo) = (err, cand);
                }
            }
        }
        (lo, hi)
    }
}

/// Range statistics of every tensor of a float file, indexed by tensor index in the file.
pub struct Stats(Vec<Stat>);

impl Stats {
    /// Each observed tensor's range chosen by `method` (which the statistics must support:
    /// collected with a histogram unless `method` is min/max). With `downstream`, the error a
    /// range is judged by counts each value by its channel's downstream weight where the
    /// tensor has them; without, every value alike. With `tail_cap` (a percentile), no range
    /// reaches beyond that percentile of its tensor's values on either side (min/max ranges
    /// are not capped).
    pub fn ranges(
        &self,
        method: Method,
        downstream: bool,
        tail_cap: Option<f64>,
    ) -> Vec<Option<(f32, f32)>> {
        self.0
            .iter()
            .map(|s| {
                (s.min <= s.max).then(|| {
                    let (lo, hi) = if downstream || s.weighted.is_empty() {
                        s.range(method)
                    } else {
                        Stat {
                            weighted: Vec::new(),
                            ..s.clone()
                        }
                        .range(method)
                    };
                    match tail_cap {
                        Some(p) if method != Method::MinMax => {
                            let (cap_lo, cap_hi) = s.range(Method::Percentile(p));
                            (lo.max(cap_lo.min(0.0)), hi.min(cap_hi.max(0.0)))
                        }
                        _ => (lo, hi),
                    }
                })
            })
            .collect()
    }

    /// Whether any tensor has downstream channel weights.
    pub fn has_downstream_weights(&self) -> bool {
        self.0.iter().any(|s| !s.weighted.is_empty())
    }
}

/// What a caller reads from calibration's runs of the float file besides the ranges (the float
/// outputs and bias correction's statistics, which would otherwise cost runs of their own).
pub struct Ordered<'a> {
    /// How many of the first samples `f` sees.
    pub samples: usize,
    /// The tensors (by index in the file) `f` sees.
    pub wanted: &'a (dyn Fn(usize) -> bool + Sync),
    /// `f(sample, tensor index, values)`, sample after sample, each sample's tensors in the
    /// order the ops write them (int8 and int16 values dequantized, as `observe` gives them).
    pub f: &'a mut (dyn FnMut(usize, usize, &[f32]) + Send),
}

/// Runs `samples` through the float model: every tensor's min/max and, with `histogram`, a
/// histogram over that range (a second pass), also weighted by `channel_weights` (by tensor
/// index in the file) for the tensors it has. The tensors in `silu_inputs` are judged by the
/// error of the SiLU that reads them. `ordered`, where given, sees values of its first samples on
/// the same runs, in sample order.
pub fn collect_stats(
    model_bytes: &[u8],
    samples: &[Sample],
    histogram: bool,
    channel_weights: &HashMap<usize, Vec<f32>>,
    silu_inputs: &HashSet<usize>,
    progress: bool,
    ordered: Option<Ordered<'_>>,
) -> Result<Stats> {
    let aligned = super::observe::aligned(model_bytes);
    let model = literun::Model::from_bytes(&aligned).map_err(|e| anyhow!("{e}"))?;
    let kept = KeptInterpreters::new(&model);
    collect_stats_kept(
        &kept,
        samples,
        histogram,
        channel_weights,
        silu_inputs,
        progress,
        ordered,
    )
}

/// [`collect_stats`] on interpreters kept for the file's later measurements (its first pass's
/// interpreters run the second pass's samples too: preparing one packs every weight of the
/// file again).
pub fn collect_stats_kept(
    kept: &KeptInterpreters<'_>,
    samples: &[Sample],
    histogram: bool,
    channel_weights: &HashMap<usize, Vec<f32>>,
    silu_inputs: &HashSet<usize>,
    progress: bool,
    ordered: Option<Ordered<'_>>,
) -> Result<Stats> {
    let model = kept.model();
    let nt = model.tensors().len();
    let stateful = super::calibrate::keeps_state(model);
    let passes = if histogram { 2 } else { 1 };
    // Histograms over a range fixed by every sample: evenly spaced samples fill them as well as
    // all of them would, at a fraction of the runs.
    let hist_every = samples.len().div_ceil(MAX_HISTOGRAM_SAMPLES).max(1);
    let bar = if progress {
        let hist_runs = if histogram {
            samples.len().div_ceil(hist_every)
        } else {
            0
        };
        let bar = indicatif::ProgressBar::new((samples.len() + hist_runs) as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("  calibrating {bar:30} {pos}/{len} samples")
                .expect("valid template"),
        );
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut stats = vec![Stat::new(); nt];
    let ordered = std::sync::Mutex::new(ordered);
    for pass in 0..passes {
        let base = stats.clone();
        let every = if pass == 0 { 1 } else { hist_every };
        let used: Vec<&Sample> = samples.iter().step_by(every).collect();
        let chunk = used
            .len()
            .div_ceil(rayon::current_num_threads().max(1))
            .max(1);
        // Ranges and histograms add up alike in any split of the samples; the first pass's
        // first part holds every sample `ordered` sees, run in order on one thread.
        let first = match &*ordered.lock().expect("not poisoned") {
            Some(o) if pass == 0 => chunk.max(o.samples).min(used.len()),
            _ => chunk.min(used.len()),
        };
        let parts: Vec<&[&Sample]> = std::iter::once(&used[..first])
            .chain(used[first..].chunks(chunk))
            .filter(|part| !part.is_empty())
            .collect();
        let partial: Vec<Result<Vec<Stat>>> = parts
            .par_iter()
            .enumerate()
            .map(|(part_index, part)| {
                // (A model with state gets a fresh one for each sample.)
                let mut interp = kept.take()?;
                let mut local = base.clone();
                for s in &mut local {
                    s.hist.clear();
                }
                let mut ordered = match part_index {
                    0 if pass == 0 => ordered.lock().expect("not poisoned").take(),
                    _ => None,
                };
                let mut converted = Vec::new();
                for (k, sample) in part.iter().enumerate() {
                    if stateful && k > 0 {
                        // Each sample from zero state, as the ONNX model runs it.
                        interp = kept.take()?;
                    }
                    for (i, values) in sample.iter().enumerate() {
                        let info = &model.inputs()[i];
                        feed_input(model, &mut interp, i, values)?;
                        let st = &mut local[info.tensor];
                        if pass == 0 {
                            st.observe_range(values);
                        } else {
                            st.observe_hist(
                                values,
                                channel_weights.get(&info.tensor).map(Vec::as_slice),
                            );
                        }
                    }
                    // (Part 0 starts at sample 0.)
                    let mut seen = ordered.as_mut().filter(|o| k < o.samples);
                    interp
                        .invoke_observed(&mut |_op, t, view| {
                            if let Ok(v) = view.as_f32() {
                                if pass == 0 {
                                    local[t].observe_range(v);
                                } else {
                                    local[t].observe_hist(
                                        v,
                                        channel_weights.get(&t).map(Vec::as_slice),
                                    );
                                }
                            }
                            let Some(o) = seen.as_mut().filter(|o| (o.wanted)(t)) else {
                                return;
                            };
                            match view.as_f32() {
                                Ok(v) => {
                                    if !v.is_empty() {
                                        (o.f)(k, t, v);
                                    }
                                }
                                Err(_) => {
                                    let q = model.tensors()[t].qparams.as_ref();
                                    super::observe::float_values(q, &view, &mut converted);
                                    if !converted.is_empty() {
                                        (o.f)(k, t, &converted);
                                    }
                                }
                            }
                        })
                        .map_err(|e| anyhow!("{e}"))?;
                    bar.inc(1);
                }
                kept.give_back(interp);
                Ok(local)
            })
            .collect();
        let mut merged = base;
        for s in &mut merged {
            s.hist.clear();
        }
        for p in partial {
            for (m, s) in merged.iter_mut().zip(p?) {
                if pass == 0 {
                    m.merge(&s);
                } else {
                    // The range is fixed after the first pass; only histograms add up.
                    let (min, max) = (m.min, m.max);
                    m.merge(&s);
                    m.min = min;
                    m.max = max;
                }
            }
        }
        stats = merged;
    }
    bar.finish_and_clear();
    for &t in silu_inputs {
        if let Some(s) = stats.get_mut(t) {
            s.silu_input = true;
        }
    }
    for s in &mut stats {
        s.finish();
    }
    Ok(Stats(stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_of(v: &[f32]) -> Stat {
        let mut s = Stat::new();
        s.observe_range(v);
        s.observe_hist(v, None);
        s
    }

    /// The MobileNetV2 block fixture's bytes and its input's element count.
    fn block_model() -> (Vec<u8>, usize) {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/literun/examples/models/mobilenetv2_block.lite"
        );
        let bytes = std::fs::read(path).unwrap();
        let len = literun::Model::from_bytes(&literun::AlignedBytes::from_slice(&bytes))
            .unwrap()
            .inputs()[0]
            .shape
            .iter()
            .product::<usize>();
        (bytes, len)
    }

    #[test]
    fn statistics_do_not_depend_on_the_thread_count() {
        let (bytes, len) = block_model();
        let samples: Vec<Sample> = (0..13)
            .map(|k| {
                vec![(0..len)
                    .map(|i| ((i * 7919 + k * 104729) % 1000) as f32 / 500.0 - 1.0)
                    .collect()]
            })
            .collect();
        // Channel weights 1e-7 to 1e3 apart, for the 64-channel expansion's output: f64 sums of
        // them round, so the order they are added in would show.
        let cw: Vec<f32> = (0..64)
            .map(|i| 10f32.powf((i % 11) as f32 - 7.0) * (1.0 + i as f32 / 9.0))
            .collect();
        let weights = HashMap::from([(7usize, cw)]);
        let stats = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    collect_stats(
                        &bytes,
                        &samples,
                        true,
                        &weights,
                        &HashSet::new(),
                        false,
                        None,
                    )
                    .unwrap()
                    .0
                })
        };
        let (one, three) = (stats(1), stats(3));
        assert!(!one[7].weighted.is_empty());
        for (t, (a, b)) in one.iter().zip(&three).enumerate() {
            assert_eq!(a, b, "tensor {t}");
        }
    }

    /// Calibration's runs hand the first samples' values to `ordered` in sample order, exactly
    /// as a run of their own (`observe`) gives them, with any number of threads.
    #[test]
    fn ordered_values_are_those_of_runs_of_their_own() {
        let (bytes, len) = block_model();
        let samples: Vec<Sample> = (0..11)
            .map(|k| {
                vec![(0..len)
                    .map(|i| ((i * 31 + k * 977) % 200) as f32 / 100.0 - 1.0)
                    .collect()]
            })
            .collect();
        let wanted = |t: usize| t % 3 != 1;
        let first = 7;
        let mut expected = Vec::new();
        super::super::observe::observe_where(&bytes, &samples[..first], &wanted, |k, t, v| {
            expected.push((k, t, v.to_vec()))
        })
        .unwrap();
        assert!(expected.len() > first);
        for threads in [1, 2, 5] {
            let mut seen = Vec::new();
            let mut f = |k: usize, t: usize, v: &[f32]| seen.push((k, t, v.to_vec()));
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    collect_stats(
                        &bytes,
                        &samples,
                        false,
                        &HashMap::new(),
                        &HashSet::new(),
                        false,
                        Some(Ordered {
                            samples: first,
                            wanted: &wanted,
                            f: &mut f,
                        }),
                    )
                    .unwrap()
                });
            assert!(seen == expected, "{threads} threads");
        }
    }

    #[test]
    fn downstream_weights_clip_a_wide_channel_to_keep_amplified_small_ones() {
        // Channel 0 reaches 100 (mostly small values, a long tail) and the next layer barely
        // reads it; channel 1 spans [0, 0.2] and the next layer multiplies it by large weights.
        let v: Vec<f32> = (0..20000)
            .map(|i| {
                let k = (i / 2) as f32 / 10000.0;
                if i % 2 == 0 {
                    100.0 * k.powi(4)
                } else {
                    0.2 * k
                }
            })
            .collect();
        let mut s = Stat::new();
        s.observe_range(&v);
        s.observe_hist(&v, Some(&[1e-6, 2.0]));
        s.finish();
        let stats = Stats(vec![s]);
        let (_, plain) = stats.ranges(Method::Auto, false, None)[0].unwrap();
        let (_, weighted) = stats.ranges(Method::Auto, true, None)[0].unwrap();
        assert!(plain > 90.0, "unweighted: {plain}");
        assert!(weighted < 30.0, "weighted: {weighted}");
        assert!(stats.has_downstream_weights());
    }

    #[test]
    fn a_silu_input_clips_its_negative_tail_which_silu_flattens() {
        // Pre-activations over [-16, 8], most of them small: SiLU maps the negative tail to
        // within 0.3 of zero, so steps spent there are wasted on its output.
        let v: Vec<f32> = (0..20000)
            .map(|i| {
                let k = (i / 2) as f32 / 10000.0;
                if i % 2 == 0 {
                    -16.0 * k.powi(2)
                } else {
                    8.0 * k.powi(2)
                }
            })
            .collect();
        let mut s = stat_of(&v);
        let (plain_lo, plain_hi) = s.range(Method::Auto);
        s.silu_input = true;
        let (lo, hi) = s.range(Method::Auto);
        assert!(plain_lo < -12.0, "plain: {plain_lo}");
        assert!(
            lo > -8.0 && hi > 0.8 * plain_hi,
            "through SiLU: [{lo}, {hi}]"
        );
        let through_silu = |r| {
            let mut t = s.clone();
            t.silu_input = true;
            t.expected_error(r)
        };
        assert!(through_silu((lo, hi)) < 0.5 * through_silu((plain_lo, plain_hi)));
    }

    #[test]
    fn a_tail_cap_keeps_ranges_within_the_percentile_but_not_minmax() {
        // 10⁵ values in [0, 1) and ten spread up to 6: the tensor's own error keeps most of the
        // tail (each clipped value costs more than a step of rounding), the cap does not.
        let mut v: Vec<f32> = (0..100_000).map(|i| (i % 1000) as f32 / 1000.0).collect();
        v.extend((1..=10).map(|k| 1.0 + k as f32 / 2.0));
        let stats = Stats(vec![stat_of(&v)]);
        let (_, own) = stats.ranges(Method::Auto, true, None)[0].unwrap();
        let (lo, capped) = stats.ranges(Method::Auto, true, Some(99.99))[0].unwrap();
        assert!(own > 3.0, "uncapped: {own}");
        assert!(capped < 1.1 && lo == 0.0, "capped: [{lo}, {capped}]");
        let (_, minmax) = stats.ranges(Method::MinMax, false, Some(99.99))[0].unwrap();
        assert_eq!(minmax, 6.0);
    }

    #[test]
    fn minmax_is_the_observed_range() {
        let s = stat_of(&[-1.0, 0.5, 3.0]);
        assert_eq!(s.range(Method::MinMax), (-1.0, 3.0));
    }

    #[test]
    fn percentile_and_mse_clip_a_lone_outlier() {
        let mut v: Vec<f32> = (0..10000).map(|i| (i % 100) as f32 / 100.0).collect();
        v.push(100.0);
        let s = stat_of(&v);
        let (_, hi) = s.range(Method::Percentile(99.9));
        assert!(hi < 2.0, "percentile kept the outlier: {hi}");
        let (_, hi) = s.range(Method::Mse);
        assert!(hi < 100.0, "mse kept the full range: {hi}");
        let (_, hi) = s.range(Method::Entropy);
        assert!(hi < 100.0, "entropy kept the full range: {hi}");
    }
}
