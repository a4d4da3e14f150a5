//! Quantized models: QUANTIZE/DEQUANTIZE, prepacked constants, the observer hook, and
//! verification of quantization parameters.
mod common;

use common::{opts, ModelBuilder, F};
use literun::schema::{BuiltinOperator as B, TensorType};
use literun::{DType, Error, Interpreter, Model};

fn add_opts() -> Option<common::Opts> {
    opts(11, vec![F::I8(4, 0)])
}

#[test]
fn quantize_dequantize_roundtrip_exact() {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[6]);
    let q = m.q("q", &[6], TensorType::INT8, 0.1, 3);
    let y = m.f32("y", &[6]);
    m.op(B::QUANTIZE, &[x], &[q], None);
    m.op(B::DEQUANTIZE, &[q], &[y], None);
    let bytes = m.finish(&[x], &[y]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.input_f32_mut(0)
        .unwrap()
        .copy_from_slice(&[0.0, 0.26, -0.26, 12.0, -13.0, 1.0]);
    let mut seen = Vec::new();
    it.invoke_observed(&mut |op, t, v| {
        seen.push((op, t, v.dtype()));
        if t == q as usize {
            assert_eq!(v.as_i8().unwrap(), &[3, 6, 0, 123, -127, 13]);
        }
    })
    .unwrap();
    assert_eq!(
        seen,
        vec![(0, q as usize, DType::I8), (1, y as usize, DType::F32)]
    );
    let out = it.output(0).unwrap().as_f32().unwrap().to_vec();
    let want: Vec<f32> = [0i32, 3, -3, 120, -130, 10]
        .iter()
        .map(|&d| (0.1f32 as f64 * d as f64) as f32)
        .collect();
    assert_eq!(out, want);
    // invoke gives the same result.
    it.invoke().unwrap();
    assert_eq!(it.output(0).unwrap().as_f32().unwrap(), &want[..]);
    assert_eq!(it.prepacked_bytes(), 0);
}

#[test]
fn requantize_int8_to_int8_and_uint8() {
    let mut m = ModelBuilder::new();
    let x = m.q("x", &[5], TensorType::INT8, 0.1, 0);
    let y = m.q("y", &[5], TensorType::INT8, 0.2, -5);
    let z = m.q("z", &[5], TensorType::UINT8, 0.2, 123);
    m.op(B::QUANTIZE, &[x], &[y], None);
    m.op(B::QUANTIZE, &[y], &[z], None);
    let bytes = m.finish(&[x], &[z]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.input_mut(0)
        .unwrap()
        .as_i8_mut()
        .unwrap()
        .copy_from_slice(&[10, 11, -11, 127, -128]);
    let mut mid = Vec::new();
    it.invoke_observed(&mut |_, t, v| {
        if t == y as usize {
            mid = v.as_i8().unwrap().to_vec();
        }
    })
    .unwrap();
    // x * 0.5 with gemmlowp rounding (ties upwards): 5, 6, -5, 64, -64; then - 5.
    assert_eq!(mid, vec![0, 1, -10, 59, -69]);
    // Same scale, zero point shifted by 128.
    assert_eq!(
        it.output(0).unwrap().as_u8().unwrap(),
        &[128, 129, 118, 187, 59]
    );
}

#[test]
fn constant_dequantize_is_prepacked_per_channel_int8_and_fp16() {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[2, 3]);
    // Per-channel int8 along dim 1 (3 channels).
    let w = m.const_i8("w", &[2, 3], &[1, -2, 3, 127, -128, 0]);
    m.quant(w, &[0.5, 0.25, 2.0], &[0, 1, -1], 1);
    let wf = m.f32("wf", &[2, 3]);
    let h: Vec<u8> = [1.0f32, -2.0, 0.5, 65504.0, 0.0, -0.25]
        .iter()
        .flat_map(|&v| f32_to_f16(v).to_le_bytes())
        .collect();
    let hc = m.const_bytes("h", &[2, 3], TensorType::FLOAT16, h);
    let hf = m.f32("hf", &[2, 3]);
    let s = m.f32("s", &[2, 3]);
    let y = m.f32("y", &[2, 3]);
    m.op(B::DEQUANTIZE, &[w], &[wf], None);
    m.op(B::DEQUANTIZE, &[hc], &[hf], None);
    m.op(B::ADD, &[x, wf], &[s], add_opts());
    m.op(B::ADD, &[s, hf], &[y], add_opts());
    let bytes = m.finish(&[x], &[y]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    assert_eq!(it.prepacked_bytes(), 2 * 32);
    it.input_f32_mut(0).unwrap().copy_from_slice(&[0.0; 6]);
    it.invoke().unwrap();
    let wd = [0.5, -0.75, 8.0, 63.5, -32.25, 2.0];
    let hd = [1.0, -2.0, 0.5, 65504.0, 0.0, -0.25];
    let want: Vec<f32> = wd.iter().zip(hd).map(|(a, b)| a + b).collect();
    assert_eq!(it.output(0).unwrap().as_f32().unwrap(), &want[..]);
    // The dequantized constants are visible as tensors too.
    assert_eq!(it.tensor(wf as usize).unwrap().as_f32().unwrap(), &wd[..]);
}

/// Round-to-nearest f32 -> f16 bits for the normal values used in the tests.
fn f32_to_f16(v: f32) -> u16 {
    if v == 0.0 {
        return 0;
    }
    let b = v.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    let mant = (b >> 13) & 0x3ff;
    sign | ((exp as u16) << 10) | mant as u16
}

#[test]
fn dequantize_int16_and_uint8_at_run_time() {
    let mut m = ModelBuilder::new();
    let x = m.q("x", &[3], TensorType::INT16, 0.5, 0);
    let y = m.f32("y", &[3]);
    m.op(B::DEQUANTIZE, &[x], &[y], None);
    let bytes = m.finish(&[x], &[y]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    let vals: Vec<u8> = [-32768i16, 3, 32767]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    it.input_mut(0).unwrap().bytes_mut().copy_from_slice(&vals);
    it.invoke().unwrap();
    assert_eq!(
        it.output(0).unwrap().as_f32().unwrap(),
        &[-16384.0, 1.5, 16383.5]
    );
}

/// Scales, zero points, quantized dimension.
type Qp = (Vec<f32>, Vec<i64>, i32);

fn int8_add_model(scale: Option<Qp>) -> Vec<u8> {
    let mut m = ModelBuilder::new();
    let a = m.tensor("a", &[2, 3], TensorType::INT8);
    let b = m.q("b", &[2, 3], TensorType::INT8, 0.1, 0);
    let y = m.q("y", &[2, 3], TensorType::INT8, 0.1, 0);
    if let Some((s, z, d)) = scale {
        m.quant(a, &s, &z, d);
    }
    m.op(B::ADD, &[a, b], &[y], add_opts());
    m.finish_raw(&[a, b], &[y])
}

#[test]
fn malformed_quantization_is_an_error_never_a_panic() {
    let cases: Vec<(Option<Qp>, &str)> = vec![
        (Some((vec![f32::NAN], vec![0], 0)), "finite"),
        (Some((vec![0.0], vec![0], 0)), "finite and > 0"),
        (Some((vec![-0.5], vec![0], 0)), "finite and > 0"),
        (Some((vec![f32::INFINITY], vec![0], 0)), "finite"),
        (Some((vec![0.1, 0.2], vec![0, 0], 1)), "dimension 1"),
        (Some((vec![0.1, 0.2, 0.3], vec![0, 0], 1)), "zero points"),
        (
            Some((vec![0.1, 0.2, 0.3], vec![0, 0, 0], 5)),
            "quantized_dimension",
        ),
        (Some((vec![0.1], vec![200], 0)), "outside the range"),
        (Some((vec![0.1], vec![-129], 0)), "outside the range"),
        // Per-channel activation: rejected by the int8 ADD.
        (Some((vec![0.1, 0.2, 0.3], vec![0, 0, 0], 1)), "per tensor"),
        (None, "no quantization parameters"),
    ];
    for (q, msg) in cases {
        let raw = int8_add_model(q.clone());
        let bytes = literun::AlignedBytes::from_slice(&raw);
        let err = match Model::from_bytes(&bytes) {
            Err(e) => e,
            Ok(model) => match Interpreter::new(&model) {
                Err(e) => e,
                Ok(_) => panic!("{q:?} accepted"),
            },
        };
        assert!(
            matches!(err, Error::InvalidModel(_) | Error::Op { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains(msg), "{q:?}: {err}");
    }
    // The valid version runs.
    let raw = int8_add_model(Some((vec![0.1], vec![0], 0)));
    let bytes = literun::AlignedBytes::from_slice(&raw);
    let model = Model::from_bytes(&bytes).unwrap();
    assert!(Interpreter::new(&model).is_ok());
}

#[test]
fn filter_and_bias_checks() {
    // Conv int8 with a per-channel filter whose scale count does not match O.
    let build = |scales: &[f32], fzp: i64, bias_scale: f32| {
        let mut m = ModelBuilder::new();
        let x = m.q("x", &[1, 3, 3, 2], TensorType::INT8, 0.5, 1);
        let w = m.const_i8("w", &[2, 1, 1, 2], &[1, 2, 3, 4]);
        m.quant(w, scales, &vec![fzp; scales.len()], 0);
        let b = m.const_i32("b", &[2], &[0, 0]);
        m.quant(b, &[bias_scale, bias_scale], &[0, 0], 0);
        let y = m.q("y", &[1, 3, 3, 2], TensorType::INT8, 1.0, 0);
        m.op(
            B::CONV_2D,
            &[x, w, b],
            &[y],
            opts(1, vec![F::I32(6, 1), F::I32(8, 1)]),
        );
        m.finish(&[x], &[y])
    };
    let ok = build(&[0.1, 0.1], 0, 0.05);
    let model = Model::from_bytes(&ok).unwrap();
    Interpreter::new(&model).unwrap();
    for (bytes, msg) in [
        (build(&[0.1, 0.1], 3, 0.05), "symmetric"),
        (build(&[0.1, 0.1], 0, 0.5), "bias scale"),
    ] {
        let model = Model::from_bytes(&bytes).unwrap();
        let e = Interpreter::new(&model).err().expect("accepted");
        assert!(e.to_string().contains(msg), "{e}");
    }
}

#[test]
fn observer_sees_every_output_of_a_float_model() {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[4]);
    let a = m.f32("a", &[4]);
    let y = m.f32("y", &[4]);
    m.op(B::RELU, &[x], &[a], None);
    m.op(B::ADD, &[a, x], &[y], add_opts());
    let bytes = m.finish(&[x], &[y]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.input_f32_mut(0)
        .unwrap()
        .copy_from_slice(&[-1.0, 2.0, -3.0, 4.0]);
    let mut ranges = Vec::new();
    it.invoke_observed(&mut |op, t, v| {
        let d = v.as_f32().unwrap();
        let lo = d.iter().cloned().fold(f32::INFINITY, f32::min);
        let hi = d.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        ranges.push((op, t, v.name().to_string(), lo, hi));
    })
    .unwrap();
    assert_eq!(
        ranges,
        vec![
            (0, a as usize, "a".to_string(), 0.0, 4.0),
            (1, y as usize, "y".to_string(), -3.0, 8.0)
        ]
    );
}
