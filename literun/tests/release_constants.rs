//! `Interpreter::with_options_releasing`: every constant buffer the interpreter has copied into
//! its own layout (prepacked weights, dequantized constants) is reported exactly once, and a
//! buffer something still reads at run time is never reported.

mod common;

use common::{opts, ModelBuilder, F};
use literun::schema::{self as s, BuiltinOperator as B, TensorType};
use literun::{Interpreter, Isa, Model, Options};

fn conv_opts() -> Option<common::Opts> {
    opts(
        1,
        vec![
            F::I8(s::Conv2DOptions::VT_PADDING, 1),
            F::I32(s::Conv2DOptions::VT_STRIDE_W, 1),
            F::I32(s::Conv2DOptions::VT_STRIDE_H, 1),
        ],
    )
}

/// x [1,4,4,3] -> CONV_2D 1x1 (4 outputs) -> ADD of the conv's own bias tensor.
/// Returns the model and the tensor indices of (weights, bias).
fn conv_then_add_bias() -> (literun::AlignedBytes, [usize; 2]) {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[1, 4, 4, 3]);
    let w: Vec<f32> = (0..12).map(|i| i as f32 * 0.1 - 0.5).collect();
    let w = m.const_f32("w", &[4, 1, 1, 3], &w);
    let b = m.const_f32("b", &[4], &[0.5, -1.0, 2.0, 0.25]);
    let y = m.f32("y", &[1, 4, 4, 4]);
    m.op(B::CONV_2D, &[x, w, b], &[y], conv_opts());
    let z = m.f32("z", &[1, 4, 4, 4]);
    m.op(B::ADD, &[y, b], &[z], None);
    (m.finish(&[x], &[z]), [w as usize, b as usize])
}

/// x [1,4,4,3] -> CONV_2D 1x1 with float16 weights through a DEQUANTIZE.
/// Returns the model and the tensor indices of (float16 weights, bias).
fn fp16_conv() -> (literun::AlignedBytes, [usize; 2]) {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[1, 4, 4, 3]);
    // float16 bit patterns of small values (0x3c00 = 1.0, 0xbc00 = -1.0, 0x3800 = 0.5).
    let halves: Vec<u8> = (0..12)
        .flat_map(|i| [0x3c00u16, 0xbc00, 0x3800][i % 3].to_le_bytes())
        .collect();
    let wh = m.const_bytes("w16", &[4, 1, 1, 3], TensorType::FLOAT16, halves);
    let w = m.f32("w", &[4, 1, 1, 3]);
    m.op(B::DEQUANTIZE, &[wh], &[w], None);
    let b = m.const_f32("b", &[4], &[0.5, -1.0, 2.0, 0.25]);
    let y = m.f32("y", &[1, 4, 4, 4]);
    m.op(B::CONV_2D, &[x, w, b], &[y], conv_opts());
    (m.finish(&[x], &[y]), [wh as usize, b as usize])
}

/// [`fp16_conv`] with the same weights stored as float32.
fn f32_conv() -> literun::AlignedBytes {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[1, 4, 4, 3]);
    let w: Vec<f32> = (0..12).map(|i| [1.0, -1.0, 0.5][i % 3]).collect();
    let w = m.const_f32("w", &[4, 1, 1, 3], &w);
    let b = m.const_f32("b", &[4], &[0.5, -1.0, 2.0, 0.25]);
    let y = m.f32("y", &[1, 4, 4, 4]);
    m.op(B::CONV_2D, &[x, w, b], &[y], conv_opts());
    m.finish(&[x], &[y])
}

/// x [1,6,6,16] -> CONV_2D 3x3 stride 1 VALID, 16 outputs (Winograd with AVX-512).
/// Returns the model and the tensor indices of (weights, bias).
fn conv3x3() -> (literun::AlignedBytes, [usize; 2]) {
    let mut m = ModelBuilder::new();
    // 12x12 outputs: 36 tiles of 2x2, enough for Winograd (`WINO_MIN_TILES`).
    let x = m.f32("x", &[1, 14, 14, 16]);
    let w: Vec<f32> = (0..16 * 9 * 16)
        .map(|i| (i % 13) as f32 * 0.05 - 0.3)
        .collect();
    let w = m.const_f32("w", &[16, 3, 3, 16], &w);
    let b: Vec<f32> = (0..16).map(|i| i as f32 * 0.1).collect();
    let b = m.const_f32("b", &[16], &b);
    let y = m.f32("y", &[1, 12, 12, 16]);
    m.op(B::CONV_2D, &[x, w, b], &[y], conv_opts());
    (m.finish(&[x], &[y]), [w as usize, b as usize])
}

/// Tensor indices of the buffers reported while preparing `model` with `isa`, in order.
fn released(model: &Model<'_>, isa: Isa) -> Vec<usize> {
    let mut got: Vec<usize> = Vec::new();
    let tensors = model.tensors();
    let _interp =
        Interpreter::with_options_releasing(model, Options::with_isa(isa), &mut |bytes| {
            let t = tensors
                .iter()
                .position(|t| t.data.is_some_and(|d| core::ptr::eq(d, bytes)))
                .expect("a released buffer is a constant tensor's data");
            got.push(t);
        })
        .unwrap();
    got
}

fn fast_isa() -> Option<Isa> {
    Some(Isa::detect()).filter(|&i| i != Isa::Portable)
}

#[test]
fn a_constant_still_read_at_run_time_is_kept() {
    let (bytes, [w, _b]) = conv_then_add_bias();
    let model = Model::from_bytes(&bytes).unwrap();
    // The portable kernels read the file's weights: nothing is released.
    assert_eq!(released(&model, Isa::Portable), Vec::<usize>::new());
    // The SIMD kernel packs weights and bias, but ADD still reads the bias.
    if let Some(isa) = fast_isa() {
        assert_eq!(released(&model, isa), vec![w]);
    }
}

#[test]
fn every_packing_kernel_releases_its_weights() {
    // 3x3 stride 1 with 16 channels: Winograd on AVX-512, the direct GEMM elsewhere.
    let (bytes, [w, b]) = conv3x3();
    let model = Model::from_bytes(&bytes).unwrap();
    if let Some(isa) = fast_isa() {
        assert_eq!(released(&model, isa), vec![w, b]);
    }
}

#[test]
fn dequantized_and_packed_constants_are_released_once() {
    let (bytes, [wh, b]) = fp16_conv();
    let model = Model::from_bytes(&bytes).unwrap();
    // The float16 weights are dequantized once while preparing, whatever the kernels.
    assert_eq!(released(&model, Isa::Portable), vec![wh]);
    if let Some(isa) = fast_isa() {
        assert_eq!(released(&model, isa), vec![wh, b]);
    }
}

#[test]
fn results_do_not_depend_on_releasing() {
    for (bytes, _) in [conv_then_add_bias(), fp16_conv()] {
        let model = Model::from_bytes(&bytes).unwrap();
        let x: Vec<f32> = (0..48).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut plain = Interpreter::new(&model).unwrap();
        plain.input_f32_mut(0).unwrap().copy_from_slice(&x);
        plain.invoke().unwrap();
        let mut n = 0;
        let mut it =
            Interpreter::with_options_releasing(&model, Options::default(), &mut |_| n += 1)
                .unwrap();
        it.input_f32_mut(0).unwrap().copy_from_slice(&x);
        it.invoke().unwrap();
        assert_eq!(
            it.output(0).unwrap().as_f32().unwrap(),
            plain.output(0).unwrap().as_f32().unwrap()
        );
    }
}

#[test]
fn a_constant_dequantized_only_for_prepacked_weights_is_not_kept() {
    let (half_bytes, _) = fp16_conv();
    let float_bytes = f32_conv();
    let half = Model::from_bytes(&half_bytes).unwrap();
    let float = Model::from_bytes(&float_bytes).unwrap();
    let x: Vec<f32> = (0..48).map(|i| (i as f32 * 0.61).cos()).collect();
    let run = |model: &Model<'_>, isa: Isa| {
        let mut it = Interpreter::with_options(model, Options::with_isa(isa)).unwrap();
        it.input_f32_mut(0).unwrap().copy_from_slice(&x);
        it.invoke().unwrap();
        let out = it.output(0).unwrap().as_f32().unwrap().to_vec();
        // The DEQUANTIZE output (tensor 2 in fp16_conv) as the interpreter holds it.
        (
            out,
            it.prepacked_bytes(),
            it.tensor(2).unwrap().bytes().len(),
        )
    };
    // Portable kernels read the dequantized weights: kept (12 floats).
    let (want, _, _) = run(&float, Isa::Portable);
    let (got, packed, held) = run(&half, Isa::Portable);
    assert_eq!(got, want);
    assert_eq!((packed, held), (48, 48));
    if let Some(isa) = fast_isa() {
        // SIMD kernels prepack them: held once, as packed, like float32 weights.
        let (want, float_packed, _) = run(&float, isa);
        let (got, packed, held) = run(&half, isa);
        assert_eq!(got, want);
        assert_eq!((packed, held), (float_packed, 0));
        // Observing the run skips it rather than showing an empty tensor.
        let mut it = Interpreter::with_options(&half, Options::with_isa(isa)).unwrap();
        it.input_f32_mut(0).unwrap().copy_from_slice(&x);
        let mut seen = Vec::new();
        it.invoke_observed(&mut |_, t, v| seen.push((t, v.bytes().len())))
            .unwrap();
        assert_eq!(seen, vec![(4, 4 * 4 * 4 * 4)]);
    }
}

#[test]
fn prepacked_3x3_weights_are_the_files_size_with_or_without_winograd() {
    let (bytes, [w, b]) = conv3x3();
    let model = Model::from_bytes(&bytes).unwrap();
    let tensors = model.tensors();
    let weights = tensors[w].data.unwrap().len() + tensors[b].data.unwrap().len();
    let x: Vec<f32> = (0..14 * 14 * 16).map(|i| (i as f32 * 0.37).sin()).collect();
    let run = |winograd: bool| {
        let options = Options {
            winograd,
            ..Options::default()
        };
        let mut it = Interpreter::with_options(&model, options).unwrap();
        it.input_f32_mut(0).unwrap().copy_from_slice(&x);
        it.invoke().unwrap();
        let y = it.output(0).unwrap().as_f32().unwrap().to_vec();
        (y, it.prepacked_bytes())
    };
    let (wino, wino_bytes) = run(true);
    let (direct, direct_bytes) = run(false);
    let peak = direct.iter().fold(1f32, |m, v| m.max(v.abs()));
    for (a, b) in wino.iter().zip(&direct) {
        assert!((a - b).abs() <= 1e-5 * peak, "{a} vs {b}");
    }
    if fast_isa().is_some() {
        // The direct GEMM's panels hold the weights and bias once (16 channels: no padding).
        assert_eq!(direct_bytes, weights);
        // Winograd (AVX-512 only) keeps the nine taps packed the same way and builds its
        // transformed weights (16/9 of them) per call: the same bytes, plus a zero bias for
        // its GEMMs (16 channels). `run`'s interpreters take their ISA from `Options::default`
        // (LITERUN_ISA where set).
        if Options::default().isa == Isa::Avx512Vnni {
            assert_eq!(wino_bytes, direct_bytes + 16 * 4);
        }
    }
}
