//! ONNX Attention through literun against a direct evaluation of the operator's definition.

use super::builder::{ftensor, itensor, Attr as A, OnnxBuilder as B};
use crate::convert::{convert_bytes, ConvertOptions};
use crate::npy::{NpyArray, NpyData};

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
            ((s >> 8) as f32 / (1u32 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Attention over 4-D Q [b, hq, sq, d], K [b, hk, skv, d], V [b, hk, skv, dv] with the key/value
/// heads shared by groups of query heads; `allowed(b, h, i, j)` says whether query i may attend
/// key j. Fully-masked rows give zeros.
#[allow(clippy::too_many_arguments)]
fn reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    [b, hq, sq, d]: [usize; 4],
    [hk, skv, dv]: [usize; 3],
    scale: f32,
    softcap: f32,
    allowed: impl Fn(usize, usize, usize, usize) -> bool,
) -> Vec<f32> {
    let mut y = vec![0.0f32; b * hq * sq * dv];
    let group = hq / hk;
    for bi in 0..b {
        for h in 0..hq {
            let kh = h / group;
            for i in 0..sq {
                let qrow = &q[((bi * hq + h) * sq + i) * d..][..d];
                let mut logits = vec![f32::NEG_INFINITY; skv];
                for (j, l) in logits.iter_mut().enumerate() {
                    if !allowed(bi, h, i, j) {
                        continue;
                    }
                    let krow = &k[((bi * hk + kh) * skv + j) * d..][..d];
                    let mut dot: f32 = qrow.iter().zip(krow).map(|(a, b)| a * b).sum();
                    dot *= scale;
                    if softcap > 0.0 {
                        dot = softcap * (dot / softcap).tanh();
                    }
                    *l = dot;
                }
                let max = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                if max == f32::NEG_INFINITY {
                    continue;
                }
                let e: Vec<f32> = logits.iter().map(|l| (l - max).exp()).collect();
                let sum: f32 = e.iter().sum();
                let out = &mut y[((bi * hq + h) * sq + i) * dv..][..dv];
                for (j, p) in e.iter().enumerate() {
                    let vrow = &v[((bi * hk + kh) * skv + j) * dv..][..dv];
                    for (o, x) in out.iter_mut().zip(vrow) {
                        *o += p / sum * x;
                    }
                }
            }
        }
    }
    y
}

fn run(b: &B, inputs: Vec<(&str, NpyArray)>) -> Vec<(String, NpyArray)> {
    let conv = convert_bytes(&b.bytes(), "model.onnx", &ConvertOptions::default()).unwrap();
    let named: Vec<(Option<String>, NpyArray)> = inputs
        .into_iter()
        .map(|(n, a)| (Some(n.to_string()), a))
        .collect();
    crate::runtime::run_lite(&conv.bytes, "model.lite", &named).unwrap()
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 + 1e-4 * w.abs(),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn grouped_causal_attention_with_a_bool_mask_and_softcap() {
    // 4 query heads over 2 key/value heads. Query i sees keys 0..=i, less key 1, which the
    // bool mask hides: query 0 and 1 see key 0 alone, query 2 keys 0 and 2.
    let (b, hq, hk, sq, skv, d, dv) = (2, 4, 2, 3, 3, 4, 5);
    let q = values(b * hq * sq * d, 1);
    let k = values(b * hk * skv * d, 2);
    let v = values(b * hk * skv * dv, 3);
    let mask: Vec<bool> = (0..sq * skv).map(|i| i % skv != 1).collect();
    let mut m = B::new(23);
    m.input("Q", &[2, 4, 3, 4])
        .input("K", &[2, 2, 3, 4])
        .input("V", &[2, 2, 3, 5])
        .typed_input("mask", &[3, 3], 9)
        .node(
            "Attention",
            "att",
            &["Q", "K", "V", "mask"],
            &["Y"],
            vec![("is_causal", A::I(1)), ("softcap", A::F(2.0))],
        )
        .output("Y");
    let out = run(
        &m,
        vec![
            ("Q", NpyArray::f32(vec![b, hq, sq, d], q.clone())),
            ("K", NpyArray::f32(vec![b, hk, skv, d], k.clone())),
            ("V", NpyArray::f32(vec![b, hk, skv, dv], v.clone())),
            (
                "mask",
                NpyArray {
                    shape: vec![sq, skv],
                    data: NpyData::Bool(mask.clone()),
                },
            ),
        ],
    );
    let scale = 1.0 / (d as f32).sqrt();
    let want = reference(
        &q,
        &k,
        &v,
        [b, hq, sq, d],
        [hk, skv, dv],
        scale,
        2.0,
        |_, _, i, j| j <= i && mask[i * skv + j],
    );
    assert_eq!(out[0].1.shape, vec![b, hq, sq, dv]);
    assert_close(&out[0].1.to_f32(), &want, "Y");
}

#[test]
fn three_d_attention_with_a_past_cache_and_present_outputs() {
    // 3-D inputs [batch, seq, heads·size], 2 heads; 2 cached keys before 3 new ones; a query
    // row whose float mask is all -inf comes out as zeros.
    let (b, h, sq, sk, past, d) = (1, 2, 2, 3, 2, 3);
    let skv = past + sk;
    let q = values(b * sq * h * d, 4);
    let k = values(b * sk * h * d, 5);
    let v = values(b * sk * h * d, 6);
    let pk = values(b * h * past * d, 7);
    let pv = values(b * h * past * d, 8);
    let mut mask = vec![0.0f32; sq * skv];
    mask[skv..].fill(f32::NEG_INFINITY);
    let mut m = B::new(23);
    m.input("Q", &[1, 2, 6])
        .input("K", &[1, 3, 6])
        .input("V", &[1, 3, 6])
        .input("mask", &[2, 5])
        .input("past_key", &[1, 2, 2, 3])
        .input("past_value", &[1, 2, 2, 3])
        .node(
            "Attention",
            "att",
            &["Q", "K", "V", "mask", "past_key", "past_value"],
            &["Y", "present_key", "present_value", "qk"],
            vec![
                ("q_num_heads", A::I(2)),
                ("kv_num_heads", A::I(2)),
                ("scale", A::F(0.5)),
                ("qk_matmul_output_mode", A::I(3)),
            ],
        )
        .output("Y")
        .output("present_key")
        .output("present_value")
        .output("qk");
    let out = run(
        &m,
        vec![
            ("Q", NpyArray::f32(vec![b, sq, h * d], q.clone())),
            ("K", NpyArray::f32(vec![b, sk, h * d], k.clone())),
            ("V", NpyArray::f32(vec![b, sk, h * d], v.clone())),
            ("mask", NpyArray::f32(vec![sq, skv], mask)),
            ("past_key", NpyArray::f32(vec![b, h, past, d], pk.clone())),
            ("past_value", NpyArray::f32(vec![b, h, past, d], pv.clone())),
        ],
    );
    // [b, s, h·d] → [b, h, s, d], the past prepended along s.
    let heads = |x: &[f32], s: usize| -> Vec<f32> {
        let mut o = Vec::new();
        for hh in 0..h {
            for si in 0..s {
                o.extend_from_slice(&x[(si * h + hh) * d..][..d]);
            }
        }
        o
    };
    let cat = |p: &[f32], x: &[f32]| -> Vec<f32> {
        let mut o = Vec::new();
        for hh in 0..h {
            o.extend_from_slice(&p[hh * past * d..][..past * d]);
            o.extend_from_slice(&x[hh * sk * d..][..sk * d]);
        }
        o
    };
    let (q4, k4, v4) = (
        heads(&q, sq),
        cat(&pk, &heads(&k, sk)),
        cat(&pv, &heads(&v, sk)),
    );
    let y4 = reference(
        &q4,
        &k4,
        &v4,
        [b, h, sq, d],
        [h, skv, d],
        0.5,
        0.0,
        |_, _, i, _| i == 0,
    );
    let mut want = Vec::new();
    for si in 0..sq {
        for hh in 0..h {
            want.extend_from_slice(&y4[(hh * sq + si) * d..][..d]);
        }
    }
    let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["Y", "present_key", "present_value", "qk"]);
    assert_eq!(out[0].1.shape, vec![b, sq, h * d]);
    assert_close(&out[0].1.to_f32(), &want, "Y");
    assert_close(&out[1].1.to_f32(), &k4, "present_key");
    assert_close(&out[2].1.to_f32(), &v4, "present_value");
    // Mode 3: the probabilities, the fully-masked second query row zero.
    let probs = out[3].1.to_f32();
    assert_eq!(out[3].1.shape, vec![b, h, sq, skv]);
    for hh in 0..h {
        let row0: f32 = probs[hh * sq * skv..][..skv].iter().sum();
        assert!((row0 - 1.0).abs() < 1e-5, "{row0}");
        assert!(probs[(hh * sq + 1) * skv..][..skv]
            .iter()
            .all(|&p| p == 0.0));
    }
}

#[test]
fn attention_refuses_what_it_cannot_express_exactly() {
    let refusal = |attrs: Vec<(&str, A)>, nonpad: bool| {
        let mut m = B::new(24);
        m.input("Q", &[1, 1, 2, 4])
            .input("K", &[1, 1, 2, 4])
            .input("V", &[1, 1, 2, 4]);
        let mut ins = vec!["Q", "K", "V"];
        if nonpad {
            m.typed_input("lens", &[1], 7);
            ins.extend(["", "", "", "lens"]);
        }
        m.node("Attention", "att", &ins, &["Y", "", "", "qk"], attrs)
            .output("Y")
            .output("qk");
        format!("{:#}", m.import().unwrap_err())
    };
    let err = refusal(vec![("softmax_precision", A::I(11))], false);
    assert!(
        err.contains("'att' (Attention): softmax_precision 11"),
        "{err}"
    );
    let err = refusal(vec![("softcap", A::F(1.0))], false);
    assert!(
        err.contains("qk_matmul_output_mode 0 with softcap"),
        "{err}"
    );
    let err = refusal(vec![], true);
    assert!(
        err.contains("nonpad_kv_seqlen (input 6) must be constant"),
        "{err}"
    );
    // A constant cache length is built into the mask.
    let mut m = B::new(24);
    m.input("Q", &[1, 1, 2, 4])
        .input("K", &[1, 1, 2, 4])
        .input("V", &[1, 1, 2, 4])
        .init(itensor("lens", &[1], vec![1]))
        .node(
            "Attention",
            "att",
            &["Q", "K", "V", "", "", "", "lens"],
            &["Y"],
            vec![],
        )
        .output("Y");
    m.import().unwrap();
}

#[test]
fn a_row_max_equal_to_minus_infinity_means_every_element_is() {
    // How Attention's function body finds fully-masked rows: Equal(ReduceMax(bias), -inf).
    // TFLite's reference REDUCE_MAX gives the lowest finite float for a row of -inf (XNNPACK's
    // gives -inf); the comparison is rewritten to ask ONNX's question in either runtime.
    let mut b = B::new(18);
    b.input("x", &[4, 3])
        .init(ftensor("neg_inf", &[], vec![f32::NEG_INFINITY]))
        .node("ReduceMax", "max", &["x", "axes_i"], &["m"], vec![])
        .node("Equal", "eq", &["m", "neg_inf"], &["all_masked"], vec![])
        .output("all_masked");
    b.init(itensor("axes_i", &[1], vec![1]));
    let ninf = f32::NEG_INFINITY;
    let x = vec![
        ninf,
        ninf,
        ninf, // every element -inf
        ninf,
        f32::MIN,
        ninf, // the lowest finite float is not -inf
        1.0,
        ninf,
        -2.0, //
        f32::INFINITY,
        ninf,
        ninf,
    ];
    let out = run(&b, vec![("x", NpyArray::f32(vec![4, 3], x))]);
    assert_eq!(
        out[0].1.data,
        NpyData::Bool(vec![true, false, false, false])
    );
}
