//! PAD -> CONV_2D / DEPTHWISE_CONV_2D (VALID): the convolution reads the PAD's input with the
//! padding folded into its own, and the PAD does not run. Results must be bit-identical to
//! running the PAD; the arena keeps the PAD's input alive until the convolution.

mod common;

use common::{opts, ModelBuilder, F};
use literun::schema::{self as s, BuiltinOperator as B, TensorType};
use literun::{Interpreter, Isa, Model, Options};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Ty {
    F32,
    I8,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    /// PAD -> conv, the conv output is the graph output: folded.
    Plain,
    /// The PAD output is also a graph output: not folded (the reference).
    PadIsOutput,
    /// The PAD output also feeds an ADD with itself: not folded.
    TwoReaders,
    /// The conv uses SAME padding: not folded.
    Same,
    /// PADV2 with this pad value (real value 0.0 / zero point: folded; else not).
    PadV2(i32),
    /// Paddings on the channel axis too: not folded.
    ChannelPad,
}

struct Case {
    dw: bool,
    ty: Ty,
    stride: i32,
    dilation: i32,
    /// top, bottom, left, right.
    pads: [i32; 4],
}

const IN_ZP: i64 = -3;

fn lcg(seed: &mut u32) -> u32 {
    *seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
    *seed >> 8
}

/// x [1, 7, 6, 8] -> PAD -> 3x3 conv (5 outputs) or depthwise (8 channels), VALID.
/// Returns (model, [conv output, pad input, pad output]).
fn build(c: &Case, v: Variant) -> (literun::AlignedBytes, [i32; 3]) {
    build_with(c, v, None)
}

/// [`build`], with `plan` as the `OfflineMemoryAllocation` metadata.
fn build_with(c: &Case, v: Variant, plan: Option<&[u8]>) -> (literun::AlignedBytes, [i32; 3]) {
    let [top, bottom, left, right] = c.pads;
    let (h, w, ch) = (7, 6, 8);
    let chan_pad = if v == Variant::ChannelPad { 1 } else { 0 };
    let (ph, pw, pc) = (h + top + bottom, w + left + right, ch + 2 * chan_pad);
    let eff = 2 * c.dilation + 1;
    let (oh, ow) = if v == Variant::Same {
        (
            (ph + c.stride - 1) / c.stride,
            (pw + c.stride - 1) / c.stride,
        )
    } else {
        ((ph - eff) / c.stride + 1, (pw - eff) / c.stride + 1)
    };
    let oc = if c.dw { pc } else { 5 };
    let mut m = ModelBuilder::new();
    if let Some(plan) = plan {
        m.metadata
            .push(("OfflineMemoryAllocation".into(), plan.to_vec()));
    }
    let mut seed = 11u32;
    let (tt, q) = match c.ty {
        Ty::F32 => (TensorType::FLOAT32, false),
        Ty::I8 => (TensorType::INT8, true),
    };
    let act = |m: &mut ModelBuilder, name: &str, shape: &[i32], scale: f32, zp: i64| {
        if q {
            m.q(name, shape, tt, scale, zp)
        } else {
            m.f32(name, shape)
        }
    };
    let x = act(&mut m, "x", &[1, h, w, ch], 0.05, IN_ZP);
    // A RELU first, so the PAD input lives in the arena and the planner could reuse it.
    let x1 = act(&mut m, "x1", &[1, h, w, ch], 0.05, IN_ZP);
    m.op(B::RELU, &[x], &[x1], None);
    let paddings = m.const_i32(
        "paddings",
        &[4, 2],
        &[0, 0, top, bottom, left, right, chan_pad, chan_pad],
    );
    let p = act(&mut m, "padded", &[1, ph, pw, pc], 0.05, IN_ZP);
    match v {
        Variant::PadV2(value) => {
            let val = if q {
                m.const_bytes("value", &[1], tt, vec![value as i8 as u8])
            } else {
                m.const_f32("value", &[1], &[value as f32])
            };
            if q {
                m.quant(val, &[0.05], &[IN_ZP], 0);
            }
            m.op(B::PADV2, &[x1, paddings, val], &[p], None);
        }
        _ => m.op(B::PAD, &[x1, paddings], &[p], None),
    }
    let (fshape, qdim) = if c.dw {
        ([1, 3, 3, pc], 3)
    } else {
        ([oc, 3, 3, pc], 0)
    };
    let n: usize = fshape.iter().map(|&d| d as usize).product();
    let wscales: Vec<f32> = (0..oc).map(|i| 0.01 + 0.002 * i as f32).collect();
    let filter = if q {
        let data: Vec<i8> = (0..n).map(|_| (lcg(&mut seed) % 255) as i8).collect();
        let f = m.const_i8("w", &fshape, &data);
        m.quant(f, &wscales, &vec![0; oc as usize], qdim);
        f
    } else {
        let data: Vec<f32> = (0..n)
            .map(|_| (lcg(&mut seed) % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        m.const_f32("w", &fshape, &data)
    };
    let bias = if q {
        let data: Vec<i32> = (0..oc).map(|i| i * 37 - 90).collect();
        let b = m.const_i32("b", &[oc], &data);
        let bs: Vec<f32> = wscales.iter().map(|s| s * 0.05).collect();
        m.quant(b, &bs, &vec![0; oc as usize], 0);
        b
    } else {
        let data: Vec<f32> = (0..oc).map(|i| i as f32 * 0.1 - 0.2).collect();
        m.const_f32("b", &[oc], &data)
    };
    let y = act(&mut m, "y", &[1, oh, ow, oc], 0.1, 2);
    let padding = if v == Variant::Same { 0 } else { 1 };
    let o = if c.dw {
        opts(
            2,
            vec![
                F::I8(s::DepthwiseConv2DOptions::VT_PADDING, padding),
                F::I32(s::DepthwiseConv2DOptions::VT_STRIDE_W, c.stride),
                F::I32(s::DepthwiseConv2DOptions::VT_STRIDE_H, c.stride),
                F::I32(s::DepthwiseConv2DOptions::VT_DEPTH_MULTIPLIER, 1),
                F::I32(s::DepthwiseConv2DOptions::VT_DILATION_W_FACTOR, c.dilation),
                F::I32(s::DepthwiseConv2DOptions::VT_DILATION_H_FACTOR, c.dilation),
            ],
        )
    } else {
        opts(
            1,
            vec![
                F::I8(s::Conv2DOptions::VT_PADDING, padding),
                F::I32(s::Conv2DOptions::VT_STRIDE_W, c.stride),
                F::I32(s::Conv2DOptions::VT_STRIDE_H, c.stride),
                F::I32(s::Conv2DOptions::VT_DILATION_W_FACTOR, c.dilation),
                F::I32(s::Conv2DOptions::VT_DILATION_H_FACTOR, c.dilation),
            ],
        )
    };
    m.op(
        if c.dw {
            B::DEPTHWISE_CONV_2D
        } else {
            B::CONV_2D
        },
        &[p, filter, bias],
        &[y],
        o,
    );
    let outputs: Vec<i32> = match v {
        Variant::PadIsOutput => vec![y, p],
        Variant::TwoReaders => {
            let z = act(&mut m, "z", &[1, ph, pw, pc], 0.1, IN_ZP);
            m.op(B::ADD, &[p, p], &[z], None);
            vec![y, z]
        }
        _ => vec![y],
    };
    (m.finish(&[x], &outputs), [y, x1, p])
}

fn input(c: &Case) -> Vec<u8> {
    let mut seed = 5u32;
    let n = 7 * 6 * 8;
    match c.ty {
        Ty::F32 => (0..n)
            .flat_map(|_| ((lcg(&mut seed) % 4001) as f32 / 1000.0 - 2.0).to_le_bytes())
            .collect(),
        Ty::I8 => (0..n).map(|_| lcg(&mut seed) as u8).collect(),
    }
}

/// Runs the model: (output 0 bytes, folded PADs).
fn run(bytes: &[u8], isa: Isa, x: &[u8]) -> (Vec<u8>, usize) {
    let model = Model::from_bytes(bytes).unwrap();
    let mut it = Interpreter::with_options(&model, Options::with_isa(isa)).unwrap();
    it.input_mut(0).unwrap().bytes_mut().copy_from_slice(x);
    it.invoke().unwrap();
    (it.output(0).unwrap().bytes().to_vec(), it.folded_pads())
}

fn isas() -> Vec<Isa> {
    let mut v = vec![Isa::Portable];
    if Isa::detect() != Isa::Portable {
        v.push(Isa::detect());
    }
    v
}

fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dw in [false, true] {
        for ty in [Ty::F32, Ty::I8] {
            for (stride, dilation, pads) in [
                (1, 1, [1, 1, 1, 1]),
                (2, 1, [1, 1, 1, 1]),
                (1, 1, [1, 2, 0, 1]),
                (2, 1, [0, 1, 2, 0]),
                (2, 1, [4, 0, 0, 3]),
                (1, 2, [2, 1, 1, 2]),
                (2, 2, [3, 2, 2, 1]),
            ] {
                v.push(Case {
                    dw,
                    ty,
                    stride,
                    dilation,
                    pads,
                });
            }
        }
    }
    v
}

#[test]
fn folded_pad_gives_identical_results() {
    for c in cases() {
        let x = input(&c);
        let (fused, _) = build(&c, Variant::Plain);
        let (reference, _) = build(&c, Variant::PadIsOutput);
        for isa in isas() {
            let what = format!(
                "dw {} {:?} stride {} dilation {} pads {:?} {isa:?}",
                c.dw, c.ty, c.stride, c.dilation, c.pads
            );
            let (got, folded) = run(&fused, isa, &x);
            let (want, unfolded) = run(&reference, isa, &x);
            assert_eq!(folded, 1, "{what}: not folded");
            assert_eq!(
                unfolded, 0,
                "{what}: a PAD whose output is a graph output was folded"
            );
            assert_eq!(got, want, "{what}");
            // The portable kernels on the unfolded model agree too (the fast kernels' own
            // tests compare them with the portable ones; this checks the folded geometry).
            if c.ty == Ty::I8 {
                let (portable, _) = run(&reference, Isa::Portable, &x);
                assert_eq!(got, portable, "{what}: vs portable");
            }
        }
    }
}

#[test]
fn pad_value_must_be_what_the_padding_taps_stand_for() {
    for ty in [Ty::F32, Ty::I8] {
        let c = Case {
            dw: true,
            ty,
            stride: 2,
            dilation: 1,
            pads: [1, 1, 1, 1],
        };
        let x = input(&c);
        let (reference, _) = build(&c, Variant::PadIsOutput);
        let zero = if ty == Ty::I8 { IN_ZP as i32 } else { 0 };
        for (value, folds) in [(zero, 1), (zero + 1, 0)] {
            let (m, _) = build(&c, Variant::PadV2(value));
            let (got, folded) = run(&m, Isa::detect(), &x);
            assert_eq!(folded, folds, "{ty:?} PADV2 value {value}");
            if folds == 1 {
                let (want, _) = run(&reference, Isa::detect(), &x);
                assert_eq!(got, want, "{ty:?} PADV2 value {value}");
            }
        }
    }
}

#[test]
fn pads_not_folded() {
    for ty in [Ty::F32, Ty::I8] {
        for dw in [false, true] {
            let c = Case {
                dw,
                ty,
                stride: 2,
                dilation: 1,
                pads: [1, 1, 1, 1],
            };
            for v in [Variant::TwoReaders, Variant::Same, Variant::ChannelPad] {
                let (m, _) = build(&c, v);
                let (_, folded) = run(&m, Isa::detect(), &input(&c));
                assert_eq!(folded, 0, "{ty:?} dw {dw} {v:?}");
            }
        }
    }
}

fn ranges_overlap(plan: &literun::plan::MemoryPlan, a: i32, b: i32, sizes: &Model<'_>) -> bool {
    let (oa, ob) = (
        plan.offsets[a as usize].unwrap(),
        plan.offsets[b as usize].unwrap(),
    );
    let (na, nb) = (
        sizes.tensors()[a as usize].bytes,
        sizes.tensors()[b as usize].bytes,
    );
    oa < ob + nb && ob < oa + na
}

/// `OfflineMemoryAllocation` words for `offsets`.
fn stored(offsets: &[Option<usize>]) -> Vec<u8> {
    let mut words = vec![1i32, 0, offsets.len() as i32];
    words.extend(offsets.iter().map(|o| o.map_or(-1, |o| o as i32)));
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The planner keeps the PAD input alive until the convolution (it never shares bytes with the
/// convolution's output) and gives the folded PAD's output no memory; stored in the file, that
/// plan is used and the PAD folded. A stored plan made for running the PAD is used as it is: the
/// PAD is folded only when the input's bytes stay intact until the convolution.
#[test]
fn planner_keeps_the_pad_input_until_the_convolution() {
    for ty in [Ty::F32, Ty::I8] {
        let c = Case {
            dw: true,
            ty,
            stride: 1,
            dilation: 1,
            pads: [1, 1, 1, 1],
        };
        let x = input(&c);
        let (bytes, [y, x1, p]) = build(&c, Variant::Plain);
        let model = Model::from_bytes(&bytes).unwrap();
        let plan = model.memory_plan().unwrap();
        assert!(!plan.stored);
        assert!(!ranges_overlap(&plan, x1, y, &model), "{ty:?}");
        assert_eq!(plan.offsets[p as usize], None, "{ty:?}");
        let (want, _) = run(&build(&c, Variant::PadIsOutput).0, Isa::detect(), &x);
        let (got, folded) = run(&bytes, Isa::detect(), &x);
        assert_eq!((&got, folded), (&want, 1), "{ty:?} own plan");

        // The same plan stored in the file (as litecvt does): folded.
        let (own, folded) = run_with_plan(&c, &stored(&plan.offsets));
        assert_eq!((&own.0, folded), (&want, 1), "{ty:?} own plan stored");
        assert_eq!(own.1, plan.total);

        // Plans for running the PAD: x at 0, the RELU output x1 at 4096, the PAD output at
        // 8192, the convolution output where x1 was (x1 is dead once the PAD ran): loads, and
        // the PAD runs; or at 12288: the PAD is folded.
        for (y_at, folds) in [(4096, 0), (12288, 1)] {
            let mut offsets = vec![None; model.tensors().len()];
            offsets[0] = Some(0);
            offsets[x1 as usize] = Some(4096);
            offsets[p as usize] = Some(8192);
            offsets[y as usize] = Some(y_at);
            let (other, folded) = run_with_plan(&c, &stored(&offsets));
            assert_eq!((&other.0, folded), (&want, folds), "{ty:?} y at {y_at}");
        }

        // A plan with no memory for the PAD output that does not keep x1 alive: rejected.
        let mut bad = plan.offsets.clone();
        bad[x1 as usize] = bad[y as usize];
        let (bad, _) = build_with(&c, Variant::Plain, Some(&stored(&bad)));
        let m = Model::from_bytes(&bad).unwrap();
        let e = Interpreter::new(&m).err().expect("plan accepted");
        assert!(e.to_string().contains("overlap"), "{ty:?}: {e}");
    }
}

/// Builds `Variant::Plain` of `c` with `plan` as `OfflineMemoryAllocation` metadata and runs it:
/// ((output 0, arena bytes), folded PADs).
fn run_with_plan(c: &Case, plan: &[u8]) -> ((Vec<u8>, usize), usize) {
    let (bytes, _) = build_with(c, Variant::Plain, Some(plan));
    let model = Model::from_bytes(&bytes).unwrap();
    assert!(model.memory_plan().unwrap().stored);
    // The ISA `run` uses for the expected values (`Interpreter::new` would honour LITERUN_ISA).
    let mut it = Interpreter::with_options(&model, Options::with_isa(Isa::detect())).unwrap();
    it.input_mut(0)
        .unwrap()
        .bytes_mut()
        .copy_from_slice(&input(c));
    it.invoke().unwrap();
    (
        (it.output(0).unwrap().bytes().to_vec(), it.arena_bytes()),
        it.folded_pads(),
    )
}

/// `invoke_observed` still shows the PAD's output (the folded PAD runs there), and
/// `invoke_timed` reports every operator but the folded PAD.
#[test]
fn observers_see_the_padded_tensor() {
    let c = Case {
        dw: false,
        ty: Ty::F32,
        stride: 2,
        dilation: 1,
        pads: [1, 1, 1, 1],
    };
    let x = input(&c);
    let (bytes, [y, _, p]) = build(&c, Variant::Plain);
    let (reference, _) = build(&c, Variant::PadIsOutput);
    let rm = Model::from_bytes(&reference).unwrap();
    let mut rit = Interpreter::new(&rm).unwrap();
    rit.input_mut(0).unwrap().bytes_mut().copy_from_slice(&x);
    rit.invoke().unwrap();
    let want_p = rit.output(1).unwrap().bytes().to_vec();
    let want_y = rit.output(0).unwrap().bytes().to_vec();

    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    assert_eq!(it.folded_pads(), 1);
    it.input_mut(0).unwrap().bytes_mut().copy_from_slice(&x);
    let mut seen = Vec::new();
    it.invoke_observed(&mut |_, t, v| {
        if t == p as usize || t == y as usize {
            seen.push((t, v.bytes().to_vec()));
        }
    })
    .unwrap();
    assert_eq!(seen, vec![(p as usize, want_p), (y as usize, want_y)]);
    let mut ran = Vec::new();
    it.invoke_timed(&mut |op| ran.push(op)).unwrap();
    assert_eq!(ran, vec![0, 2]);
}
