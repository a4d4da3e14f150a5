//! LayerNorm chains (MEAN, SQUARED_DIFFERENCE, MEAN, ADD eps, RSQRT, SUB, MUL, MUL gamma,
//! ADD beta) run as one pass by `invoke`: the same values as the operators one by one
//! (`invoke_observed` runs them so), within float rounding; chains whose intermediates
//! something else reads are left alone.

mod common;

use common::{opts, ModelBuilder, F};
use literun::schema::{self as s, BuiltinOperator as B};
use literun::{Interpreter, Isa, Model, Options};

const ROWS: i32 = 5;
const DEPTH: i32 = 40;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    /// gamma and beta.
    Affine,
    /// gamma only.
    Gamma,
    /// Neither (the chain ends at MUL(centered, rstd)).
    Plain,
    /// The mean is also a graph output: not fused.
    MeanIsOutput,
    /// The normalized rows are also read by another operator: the fused chain ends at them
    /// (MUL gamma and ADD beta run as they are).
    NormalizedReadTwice,
}

/// x -> LEAKY_RELU -> LayerNorm chain [-> ...]; the LEAKY_RELU first, so the chain's input
/// lives in the arena.
fn build(v: Variant) -> literun::AlignedBytes {
    build_with(v, None).0
}

/// [`build`] with `plan` as `OfflineMemoryAllocation` metadata; also the tensors of the chain's
/// input and output.
fn build_with(v: Variant, plan: Option<Vec<u8>>) -> (literun::AlignedBytes, [usize; 2]) {
    let mut m = ModelBuilder::new();
    if let Some(plan) = plan {
        m.metadata.push(("OfflineMemoryAllocation".into(), plan));
    }
    let shape = [1, ROWS, DEPTH];
    let row = [1, ROWS, 1];
    let x = m.f32("x", &shape);
    let r = m.f32("relu", &shape);
    m.op(
        B::LEAKY_RELU,
        &[x],
        &[r],
        opts(75, vec![F::F32(s::LeakyReluOptions::VT_ALPHA, 0.3)]),
    );
    let keep = || opts(27, vec![F::Bool(s::ReducerOptions::VT_KEEP_DIMS, true)]);
    let axes = m.const_i32("axes", &[1], &[-1]);
    let mean = m.f32("mean", &row);
    m.op(B::MEAN, &[r, axes], &[mean], keep());
    let sq = m.f32("sq", &shape);
    m.op(B::SQUARED_DIFFERENCE, &[r, mean], &[sq], None);
    let axes2 = m.const_i32("axes2", &[1], &[2]);
    let var = m.f32("var", &row);
    m.op(B::MEAN, &[sq, axes2], &[var], keep());
    let eps = m.const_f32("eps", &[], &[1e-3]);
    let ve = m.f32("var_eps", &row);
    m.op(B::ADD, &[eps, var], &[ve], None);
    let rs = m.f32("rstd", &row);
    m.op(B::RSQRT, &[ve], &[rs], None);
    let c = m.f32("centered", &shape);
    m.op(B::SUB, &[r, mean], &[c], None);
    let n = m.f32("normalized", &shape);
    m.op(B::MUL, &[rs, c], &[n], None);
    let gamma: Vec<f32> = (0..DEPTH).map(|i| 0.5 + 0.03 * i as f32).collect();
    let beta: Vec<f32> = (0..DEPTH).map(|i| 0.1 * i as f32 - 1.0).collect();
    let mut outputs = vec![];
    let mut y = n;
    if v != Variant::Plain {
        let g = m.const_f32("gamma", &[DEPTH], &gamma);
        let sc = m.f32("scaled", &shape);
        m.op(B::MUL, &[n, g], &[sc], None);
        y = sc;
    }
    if matches!(
        v,
        Variant::Affine | Variant::MeanIsOutput | Variant::NormalizedReadTwice
    ) {
        let b = m.const_f32("beta", &[1, 1, DEPTH], &beta);
        let out = m.f32("y", &shape);
        m.op(B::ADD, &[y, b], &[out], None);
        y = out;
    }
    outputs.push(y);
    match v {
        Variant::MeanIsOutput => outputs.push(mean),
        Variant::NormalizedReadTwice => {
            let z = m.f32("z", &shape);
            m.op(B::RELU, &[n], &[z], None);
            outputs.push(z);
        }
        _ => {}
    }
    (m.finish(&[x], &outputs), [r as usize, y as usize])
}

/// `OfflineMemoryAllocation` words for `offsets`.
fn stored(offsets: &[Option<usize>]) -> Vec<u8> {
    let mut words = vec![1i32, 0, offsets.len() as i32];
    words.extend(offsets.iter().map(|o| o.map_or(-1, |o| o as i32)));
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn input() -> Vec<f32> {
    let mut seed = 7u32;
    (0..ROWS * DEPTH)
        .map(|i| {
            seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
            (seed >> 9) as f32 / (1 << 23) as f32 * 4.0 - 2.0 + (i / DEPTH) as f32 * 2.0
        })
        .collect()
}

/// Output 0 of `invoke`, of `invoke_observed`, and the fused chains.
fn run(bytes: &[u8], isa: Isa) -> (Vec<f32>, Vec<f32>, usize) {
    let model = Model::from_bytes(bytes).unwrap();
    let mut it = Interpreter::with_options(&model, Options::with_isa(isa)).unwrap();
    it.input_f32_mut(0).unwrap().copy_from_slice(&input());
    it.invoke().unwrap();
    let fused = it.output(0).unwrap().as_f32().unwrap().to_vec();
    let out = model.outputs()[0].tensor;
    let mut chain = Vec::new();
    // (`invoke` may have reused the input's bytes.)
    it.input_f32_mut(0).unwrap().copy_from_slice(&input());
    it.invoke_observed(&mut |_, t, v| {
        if t == out {
            chain = v.as_f32().unwrap().to_vec();
        }
    })
    .unwrap();
    (fused, chain, it.fused_layer_norms())
}

fn isas() -> Vec<Isa> {
    let mut v = vec![Isa::Portable];
    v.extend(
        [Isa::Avx2, Isa::Avx512Vnni, Isa::Neon]
            .into_iter()
            .filter(|i| i.available()),
    );
    v
}

/// Within float rounding of the operators one by one: both sum the rows in float, in other
/// orders (rows far from zero mean, relative to their spread, lose more digits to that).
fn assert_close(fused: &[f32], chain: &[f32], what: &str) {
    assert_eq!(fused.len(), chain.len());
    for (i, (g, w)) in fused.iter().zip(chain).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{what} [{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn fused_chain_matches_the_operators() {
    for v in [
        Variant::Affine,
        Variant::Gamma,
        Variant::Plain,
        Variant::NormalizedReadTwice,
    ] {
        let bytes = build(v);
        for isa in isas() {
            let (fused, chain, n) = run(&bytes, isa);
            assert_eq!(n, 1, "{v:?} {isa:?}");
            assert_close(&fused, &chain, &format!("{v:?} {isa:?}"));
        }
    }
}

#[test]
fn chains_with_outside_readers_are_not_fused() {
    for isa in isas() {
        let (fused, chain, n) = run(&build(Variant::MeanIsOutput), isa);
        assert_eq!(n, 0);
        assert_eq!(fused, chain);
    }
}

/// The plan may give the chain's output bytes of its input (the input's last reader in the
/// chain runs before the output's writer): rows of the input are read before output rows
/// cover them, whichever side the output starts on.
#[test]
fn output_sharing_bytes_with_the_input() {
    let (bytes, [x, y]) = build_with(Variant::Affine, None);
    let model = Model::from_bytes(&bytes).unwrap();
    let (want, _, _) = run(&bytes, Isa::Portable);
    let row = DEPTH as i64 * 4;
    for shift in [-row, -48, 0, 48, row, 4 * row] {
        // Every tensor in the arena at its own offset, but the output `shift` bytes from x.
        let mut offsets: Vec<Option<usize>> = (0..model.tensors().len())
            .map(|t| model.tensors()[t].data.is_none().then_some(4096 + 1024 * t))
            .collect();
        offsets[x] = Some(2048);
        offsets[y] = Some((2048 + shift) as usize);
        let (bytes, _) = build_with(Variant::Affine, Some(stored(&offsets)));
        for isa in isas() {
            let (got, chain, n) = run(&bytes, isa);
            assert_eq!(n, 1, "shift {shift} {isa:?}");
            assert_close(&got, &want, &format!("shift {shift} {isa:?}"));
            assert_close(&chain, &want, &format!("shift {shift} {isa:?}, operators"));
        }
    }
}
