//! TFLite Micro's builtins on small hand-built models: L2_POOL_2D (which TensorFlow's converter
//! no longer writes), the integer forms and run-time errors of FLOOR_DIV and FLOOR_MOD (int32,
//! int8, int16), ADD_N, CUMSUM (int32, and int8 as TFLite Micro computes them) and REDUCE_ALL,
//! hybrid EMBEDDING_LOOKUP
//! and int8 ZEROS_LIKE, RFFT2D's cropping and padding and the parts of COMPLEX64 values, and
//! malformed operands of these and of UNIDIRECTIONAL_SEQUENCE_LSTM (TensorFlow-made files are in
//! `tf_builtins.rs` and `tf_models.rs`).

mod common;

use common::{assert_close, opts, run1, ModelBuilder, F};
use literun::schema::{self as s, BuiltinOperator as B, TensorType};
use literun::{Interpreter, Model};

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// L2_POOL_2D with SAME padding: windows cut by the border average over their in-bounds part
/// (LiteRT 2.3.0's builtin and reference kernels give these values on this file; TensorFlow's
/// converter writes no L2_POOL_2D).
#[test]
fn l2_pool_same_padding() {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[1, 3, 3, 1]);
    let y = m.f32("y", &[1, 2, 2, 1]);
    use s::Pool2DOptions as P;
    m.op(
        B::L2_POOL_2D,
        &[x],
        &[y],
        opts(
            5,
            vec![
                F::I8(P::VT_PADDING, 0),
                F::I32(P::VT_STRIDE_W, 2),
                F::I32(P::VT_STRIDE_H, 2),
                F::I32(P::VT_FILTER_WIDTH, 2),
                F::I32(P::VT_FILTER_HEIGHT, 2),
            ],
        ),
    );
    let x_vals: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    let got = run1(&m.finish(&[x], &[y]), &x_vals);
    let want = [11.5f32.sqrt(), 22.5f32.sqrt(), 56.5f32.sqrt(), 9.0];
    assert_close(&got, &want);
}

/// Runs a two-input INT32 operator on constant operands; `Err` from `invoke`.
fn run_i32_binary(code: B, a: &[i32], b: &[i32]) -> Result<Vec<i32>, literun::Error> {
    let mut m = ModelBuilder::new();
    let n = a.len() as i32;
    let x = m.tensor("x", &[n], TensorType::INT32);
    let y = m.const_i32("y", &[n], b);
    let o = m.tensor("o", &[n], TensorType::INT32);
    m.op(code, &[x, y], &[o], None);
    let bytes = m.finish(&[x], &[o]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.input_mut(0)
        .unwrap()
        .bytes_mut()
        .copy_from_slice(&i32_bytes(a));
    it.invoke()?;
    Ok(it.output(0).unwrap().as_i32().unwrap().to_vec())
}

/// Integer FLOOR_DIV and FLOOR_MOD round toward negative infinity; a zero divisor fails the
/// invocation (as TFLite).
#[test]
fn int32_floor_div_and_mod() {
    let (a, b) = ([7, -7, 7, -7], [2, 2, -2, -2]);
    assert_eq!(
        run_i32_binary(B::FLOOR_DIV, &a, &b).unwrap(),
        [3, -4, -4, 3]
    );
    assert_eq!(
        run_i32_binary(B::FLOOR_MOD, &a, &b).unwrap(),
        [1, 1, -1, -1]
    );
    for code in [B::FLOOR_DIV, B::FLOOR_MOD] {
        let e = run_i32_binary(code, &a, &[2, 0, 1, 1]).unwrap_err();
        assert!(e.to_string().contains("division by zero"), "{e}");
    }
}

/// FLOOR_DIV and FLOOR_MOD of int8 or int16 (`size` bytes) `x` by the constant `y`, broadcast
/// over its rows; both outputs widened to i16. `Err` from `invoke`.
fn run_narrow_floor_div_mod(
    ty: TensorType,
    size: usize,
    x: &[i16; 8],
    y: &[i16; 4],
) -> Result<[Vec<i16>; 2], literun::Error> {
    let bytes_of = |v: &[i16]| -> Vec<u8> {
        v.iter()
            .flat_map(|v| v.to_le_bytes()[..size].to_vec())
            .collect()
    };
    let mut m = ModelBuilder::new();
    let a = m.tensor("a", &[2, 4], ty);
    let b = m.const_bytes("b", &[4], ty, bytes_of(y));
    let q = m.tensor("q", &[2, 4], ty);
    let r = m.tensor("r", &[2, 4], ty);
    m.op(B::FLOOR_DIV, &[a, b], &[q], None);
    m.op(B::FLOOR_MOD, &[a, b], &[r], None);
    let bytes = m.finish(&[a], &[q, r]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.input_mut(0)
        .unwrap()
        .bytes_mut()
        .copy_from_slice(&bytes_of(x));
    it.invoke()?;
    let values = |j: usize| -> Vec<i16> {
        let o = it.output(j).unwrap();
        match size {
            1 => o.as_i8().unwrap().iter().map(|&v| i16::from(v)).collect(),
            _ => o
                .bytes()
                .chunks(2)
                .map(|c| i16::from_le_bytes([c[0], c[1]]))
                .collect(),
        }
    };
    Ok([values(0), values(1)])
}

/// int8 and int16 FLOOR_DIV and FLOOR_MOD on the stored integers (LiteRT's; TFLite Micro has
/// float only), with a broadcast divisor: LiteRT 2.3.0's outputs (builtin and reference kernels
/// agree), the type's minimum divided by -1 wrapping to the minimum as in LiteRT; a zero divisor
/// fails the invocation.
#[test]
fn int8_and_int16_floor_div_and_mod() {
    let x = [-128, 127, -128, -7, 7, -7, 100, 0];
    let y = [3, -2, -1, 5];
    let rem = vec![1, -1, 0, 3, 1, -1, 0, 0];
    let [q, r] = run_narrow_floor_div_mod(TensorType::INT8, 1, &x, &y).unwrap();
    assert_eq!(q, [-43, -64, -128, -2, 2, 3, -100, 0]);
    assert_eq!(r, rem);
    let [q, r] = run_narrow_floor_div_mod(TensorType::INT16, 2, &x, &y).unwrap();
    assert_eq!(q, [-43, -64, 128, -2, 2, 3, -100, 0]);
    assert_eq!(r, rem);
    for (ty, size) in [(TensorType::INT8, 1), (TensorType::INT16, 2)] {
        let e = run_narrow_floor_div_mod(ty, size, &x, &[3, 0, 1, 1]).unwrap_err();
        assert!(e.to_string().contains("division by zero"), "{e}");
    }
}

/// ADD_N of three INT32 inputs, CUMSUM (INT32, exclusive) and REDUCE_ALL (BOOL, keep_dims).
#[test]
fn int32_add_n_cumsum_and_reduce_all() {
    let mut m = ModelBuilder::new();
    let x = m.tensor("x", &[2, 3], TensorType::INT32);
    let c1 = m.const_i32("c1", &[2, 3], &[10, 20, 30, 40, 50, 60]);
    let c2 = m.const_i32("c2", &[2, 3], &[-1; 6]);
    let sum = m.tensor("sum", &[2, 3], TensorType::INT32);
    m.op(B::ADD_N, &[x, c1, c2], &[sum], None);
    let axis = m.const_i32("axis", &[], &[-1]);
    let cs = m.tensor("cs", &[2, 3], TensorType::INT32);
    m.op(
        B::CUMSUM,
        &[sum, axis],
        &[cs],
        opts(102, vec![F::Bool(s::CumsumOptions::VT_EXCLUSIVE, true)]),
    );
    let bools = m.const_bytes("b", &[2, 3], TensorType::BOOL, vec![1, 1, 1, 1, 0, 1]);
    let all = m.tensor("all", &[2, 1], TensorType::BOOL);
    let ax1 = m.const_i32("ax1", &[1], &[1]);
    m.op(
        B::REDUCE_ALL,
        &[bools, ax1],
        &[all],
        opts(27, vec![F::Bool(s::ReducerOptions::VT_KEEP_DIMS, true)]),
    );
    let bytes = m.finish(&[x], &[cs, all]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.input_mut(0)
        .unwrap()
        .bytes_mut()
        .copy_from_slice(&i32_bytes(&[1, 2, 3, 4, 5, 6]));
    it.invoke().unwrap();
    // Sums [10, 21, 32], [43, 54, 65]; exclusive running sums along the last axis.
    assert_eq!(
        it.output(0).unwrap().as_i32().unwrap(),
        [0, 10, 31, 0, 43, 97]
    );
    assert_eq!(it.output(1).unwrap().bytes(), [1, 0]);
}

/// Int8 ADD_N (an input and a constant) then int8 CUMSUM (reverse), as TFLite Micro computes
/// them (LiteRT has neither). ADD_N: input scale 0.5 with zero point 3, output scale 0.25 with
/// zero point -2, so each term is `v - 3`, every sum starts from -3 (TFLite Micro's offset) and
/// a sum `s` gives `2 * s - 2`. CUMSUM: input scale 0.25 with zero point -2, output scale 1
/// with zero point 0, so each term is `v + 2`, every sum starts from 2, and a sum `s` gives
/// `s / 4` rounded half away from zero.
#[test]
fn int8_add_n_and_cumsum_as_tflite_micro() {
    let mut m = ModelBuilder::new();
    let x = m.q("x", &[2, 3], TensorType::INT8, 0.5, 3);
    let c = m.const_i8("c", &[2, 3], &[3, 4, 5, 6, 7, 8]);
    m.quant(c, &[0.5], &[3], 0);
    let sum = m.q("sum", &[2, 3], TensorType::INT8, 0.25, -2);
    m.op(B::ADD_N, &[x, c], &[sum], None);
    let axis = m.const_i32("axis", &[], &[1]);
    let cs = m.q("cs", &[2, 3], TensorType::INT8, 1.0, 0);
    m.op(
        B::CUMSUM,
        &[sum, axis],
        &[cs],
        opts(102, vec![F::Bool(s::CumsumOptions::VT_REVERSE, true)]),
    );
    let bytes = m.finish(&[x], &[sum, cs]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    let input: [i8; 6] = [3, 5, 1, 10, -20, 3];
    it.input_mut(0)
        .unwrap()
        .bytes_mut()
        .copy_from_slice(&input.map(|v| v as u8));
    it.invoke().unwrap();
    // Terms [0, 2, -2] + [0, 1, 2] and [7, -23, 0] + [3, 4, 5], from -3: [-3, 0, -3] and
    // [7, -22, 2]; doubled minus 2.
    assert_eq!(
        it.output(0).unwrap().as_i8().unwrap(),
        [-8, -2, -8, 12, -46, 2]
    );
    // CUMSUM terms [-6, 0, -6] and [14, -44, 4]; running sums from the end, from 2:
    // [-10, -4, -4] and [-24, -38, 6]; quartered.
    assert_eq!(
        it.output(1).unwrap().as_i8().unwrap(),
        [-3, -1, -1, -6, -10, 2]
    );
}

/// Hybrid EMBEDDING_LOOKUP (an int8 table with one scale per row, float32 rows out): LiteRT's
/// outputs (builtin and reference kernels); an id outside the table is an error when invoking.
/// int8 ZEROS_LIKE (TFLite Micro's; LiteRT has none) gives stored zeros whatever the zero point.
#[test]
fn hybrid_embedding_lookup_and_int8_zeros_like() {
    let mut m = ModelBuilder::new();
    let ids = m.tensor("ids", &[3], TensorType::INT32);
    let table: Vec<i8> = (0..12).map(|i| (i * 37 % 255 - 127) as i8).collect();
    let t = m.const_i8("table", &[4, 3], &table);
    m.quant(t, &[0.1, 0.013, 2.5, 0.0007], &[0, 0, 0, 0], 0);
    let rows = m.f32("rows", &[3, 3]);
    m.op(B::EMBEDDING_LOOKUP, &[ids, t], &[rows], None);
    let bytes = m.finish(&[ids], &[rows]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.input_mut(0)
        .unwrap()
        .bytes_mut()
        .copy_from_slice(&i32_bytes(&[2, 0, 3]));
    it.invoke().unwrap();
    let want: [f32; 9] = EMBEDDING_WANT;
    assert_eq!(it.output(0).unwrap().as_f32().unwrap(), want);
    it.input_mut(0)
        .unwrap()
        .bytes_mut()
        .copy_from_slice(&i32_bytes(&[2, 4, 0]));
    let e = it.invoke().unwrap_err().to_string();
    assert!(e.contains("index 4 out of range 0..4"), "{e}");

    let mut m = ModelBuilder::new();
    let x = m.q("x", &[2, 2], TensorType::INT8, 0.5, -7);
    let zeros = m.q("zeros", &[2, 2], TensorType::INT8, 0.5, -7);
    m.op(B::ZEROS_LIKE, &[x], &[zeros], None);
    let bytes = m.finish(&[x], &[zeros]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.input_mut(0)
        .unwrap()
        .bytes_mut()
        .copy_from_slice(&[1, 2, 3, 4]);
    it.invoke().unwrap();
    assert_eq!(it.output(0).unwrap().as_i8().unwrap(), [0; 4]);
}

/// LiteRT 2.3.0's output (builtin and reference kernels, the same bits) of the hybrid
/// EMBEDDING_LOOKUP above for ids [2, 0, 3].
const EMBEDDING_WANT: [f32; 9] = [
    237.5, -307.5, -215.0, -12.7, -9.0, -5.3, -0.0343, -0.0084, 0.0175,
];

/// Inputs of ADD_N that differ in shape (or int8 scale), a CUMSUM axis out of range, an int8
/// CUMSUM TFLite Micro cannot rescale and an int8 L2_NORMALIZATION whose output is not in steps
/// of 1/128 are refused when preparing.
#[test]
fn bad_math_operands_are_refused() {
    let prepare = |build: &dyn Fn(&mut ModelBuilder) -> (i32, i32)| {
        let mut m = ModelBuilder::new();
        let (x, o) = build(&mut m);
        let bytes = m.finish(&[x], &[o]);
        let model = Model::from_bytes(&bytes).unwrap();
        Interpreter::new(&model).map(|_| ())
    };
    assert!(prepare(&|m| {
        let x = m.f32("x", &[2, 3]);
        let c = m.const_f32("c", &[3], &[1.0; 3]);
        let o = m.f32("o", &[2, 3]);
        m.op(B::ADD_N, &[x, c], &[o], None);
        (x, o)
    })
    .is_err());
    for axis in [2, -3, i32::MAX] {
        assert!(prepare(&|m| {
            let x = m.f32("x", &[2, 3]);
            let a = m.const_i32("a", &[], &[axis]);
            let o = m.f32("o", &[2, 3]);
            m.op(B::CUMSUM, &[x, a], &[o], None);
            (x, o)
        })
        .is_err());
    }
    assert!(prepare(&|m| {
        let x = m.q("x", &[1, 4], TensorType::INT8, 0.1, 0);
        let o = m.q("o", &[1, 4], TensorType::INT8, 0.01, 0);
        m.op(B::L2_NORMALIZATION, &[x], &[o], None);
        (x, o)
    })
    .is_err());
    // Int8 ADD_N inputs of different scales; an int8 CUMSUM whose output scale is too small
    // for TFLite Micro's multiplier (2 * input / (2^20 * output) must be below 1).
    assert!(prepare(&|m| {
        let x = m.q("x", &[4], TensorType::INT8, 0.5, 0);
        let y = m.const_i8("y", &[4], &[1; 4]);
        m.quant(y, &[0.25], &[0], 0);
        let o = m.q("o", &[4], TensorType::INT8, 0.5, 0);
        m.op(B::ADD_N, &[x, y], &[o], None);
        (x, o)
    })
    .is_err());
    assert!(prepare(&|m| {
        let x = m.q("x", &[4], TensorType::INT8, 1.0, 0);
        let a = m.const_i32("a", &[], &[0]);
        let o = m.q("o", &[4], TensorType::INT8, 1e-6, 0);
        m.op(B::CUMSUM, &[x, a], &[o], None);
        (x, o)
    })
    .is_err());
}

/// An LSTM whose weights, states or options do not fit together is refused when preparing.
#[test]
fn bad_lstm_operands_are_refused() {
    // batch 1, time 2, input 3, cell 4 (no projection); `bad` breaks one operand.
    let build = |bad: usize| {
        let mut m = ModelBuilder::new();
        let x = m.f32("x", &[1, 2, 3]);
        let mut ins = vec![x];
        for k in 1..24 {
            let shape: Vec<i32> = match k {
                1..=4 => vec![4, 3],
                5..=8 => vec![4, 4],
                12..=15 => vec![4],
                18 | 19 => vec![1, 4],
                _ => {
                    ins.push(-1);
                    continue;
                }
            };
            let shape = if k == bad { vec![5, 3] } else { shape };
            let n: i32 = shape.iter().product();
            let t = if k == 18 || k == 19 {
                let t = m.f32(&format!("state{k}"), &shape);
                m.variable(t);
                t
            } else {
                m.const_f32(&format!("w{k}"), &shape, &vec![0.1; n as usize])
            };
            ins.push(t);
        }
        let o = m.f32("o", &[1, 2, 4]);
        m.op(B::UNIDIRECTIONAL_SEQUENCE_LSTM, &ins, &[o], None);
        m.finish(&[x], &[o])
    };
    let bytes = build(0);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.invoke().unwrap();
    for bad in [1, 5, 13, 18] {
        let bytes = build(bad);
        let model = Model::from_bytes(&bytes).unwrap();
        assert!(Interpreter::new(&model).is_err(), "operand {bad}");
    }
}

/// An SVDF model: batch 2, input 3, 4 filters of rank 2 (2 units), memory 3; float, or int8 with
/// the quantization TFLite's int8 SVDF takes (int16 time weights and state, int32 bias).
fn svdf_model(int8: bool) -> literun::AlignedBytes {
    svdf_model_with(int8, 2, true)
}

/// [`svdf_model`] with another `rank` option, or a state that is not a variable tensor.
fn svdf_model_with(int8: bool, rank: i32, variable: bool) -> literun::AlignedBytes {
    let mut m = ModelBuilder::new();
    let wf: Vec<f32> = (0..12).map(|i| ((i * 7 % 11) as f32 - 5.0) / 8.0).collect();
    let wt: Vec<f32> = (0..12).map(|i| ((i * 5 % 7) as f32 - 3.0) / 4.0).collect();
    let bias = [0.25f32, -0.5];
    let options = opts(
        6,
        vec![
            F::I32(4, rank),
            // RELU (TFLite's int8 SVDF requires it, and applies none).
            F::I8(6, 1),
        ],
    );
    let (x, o) = if int8 {
        let x = m.q("x", &[2, 3], TensorType::INT8, 0.05, 3);
        let wf_q: Vec<i8> = wf.iter().map(|v| (v / 0.01).round() as i8).collect();
        let f = m.const_i8("wf", &[4, 3], &wf_q);
        m.quant(f, &[0.01], &[0], 0);
        let wt_q: Vec<u8> = wt
            .iter()
            .flat_map(|v| ((v / 0.001).round() as i16).to_le_bytes())
            .collect();
        let t = m.const_bytes("wt", &[4, 3], TensorType::INT16, wt_q);
        m.quant(t, &[0.001], &[0], 0);
        let b = m.const_i32("b", &[2], &[40, -80]);
        m.quant(b, &[0.00002], &[0], 0);
        let s = m.q("state", &[2, 12], TensorType::INT16, 0.002, 0);
        if variable {
            m.variable(s);
        }
        let o = m.q("o", &[2, 2], TensorType::INT8, 0.02, -4);
        m.op(B::SVDF, &[x, f, t, b, s], &[o], options);
        (x, o)
    } else {
        let x = m.f32("x", &[2, 3]);
        let f = m.const_f32("wf", &[4, 3], &wf);
        let t = m.const_f32("wt", &[4, 3], &wt);
        let b = m.const_f32("b", &[2], &bias);
        let s = m.f32("state", &[2, 12]);
        if variable {
            m.variable(s);
        }
        let o = m.f32("o", &[2, 2]);
        m.op(B::SVDF, &[x, f, t, b, s], &[o], options);
        (x, o)
    };
    m.finish(&[x], &[o])
}

/// The SVDF inputs of four invocations (its memory is three steps long).
const SVDF_INPUTS: [[f32; 6]; 4] = [
    [0.5, -1.0, 0.25, 1.5, 0.0, -0.75],
    [1.0, 0.5, -0.5, -1.25, 0.75, 0.1],
    [-0.3, 0.9, 1.1, 0.2, -0.6, 0.4],
    [0.0, 0.0, 0.0, 0.7, 0.7, -0.7],
];

/// SVDF keeps its memory across invocations: LiteRT's outputs (builtin and reference kernels
/// agree) of four invocations, float within 1e-5 and int8 exactly; `reset_variables` empties it.
#[test]
fn svdf_memory_persists_until_reset() {
    let want_f32: [[f32; 4]; 4] = SVDF_WANT_F32;
    let bytes = svdf_model(false);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    for (x, want) in SVDF_INPUTS.iter().zip(want_f32) {
        it.input_f32_mut(0).unwrap().copy_from_slice(x);
        it.invoke().unwrap();
        assert_close(it.output(0).unwrap().as_f32().unwrap(), &want);
    }
    let bytes = svdf_model(true);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    for (x, want) in SVDF_INPUTS.iter().zip(SVDF_WANT_I8) {
        let q: Vec<u8> = x
            .iter()
            .map(|v| ((v / 0.05).round() + 3.0) as i8 as u8)
            .collect();
        it.input_mut(0).unwrap().bytes_mut().copy_from_slice(&q);
        it.invoke().unwrap();
        assert_eq!(it.output(0).unwrap().as_i8().unwrap(), want);
    }
    // `reset_variables` empties the memory: the first input gives the first output again.
    it.reset_variables();
    let q: Vec<u8> = SVDF_INPUTS[0]
        .iter()
        .map(|v| ((v / 0.05).round() + 3.0) as i8 as u8)
        .collect();
    it.input_mut(0).unwrap().bytes_mut().copy_from_slice(&q);
    it.invoke().unwrap();
    assert_eq!(it.output(0).unwrap().as_i8().unwrap(), SVDF_WANT_I8[0]);
}

/// LiteRT 2.3.0's outputs (builtin and reference kernels) for `SVDF_INPUTS`.
const SVDF_WANT_F32: [[f32; 4]; 4] = [
    [0.273_437_5, 0.0, 0.554_687_5, 0.835_937_5],
    [0.226_562_5, 0.171_875, 0.607_812_5, 0.0],
    [1.018_75, 0.0, 0.106_25, 0.0],
    [0.0, 0.293_75, 0.0, 0.603_125],
];
const SVDF_WANT_I8: [[i8; 4]; 4] = [
    [-3, 5, 11, 63],
    [-5, 30, 14, -113],
    [35, -102, -11, 17],
    [-27, 36, -25, 51],
];

/// An SVDF rank that does not divide the filters, and a state that nothing keeps, are refused.
#[test]
fn bad_svdf_operands_are_refused() {
    for int8 in [false, true] {
        for rank in [0, -1, 3, 5] {
            let bytes = svdf_model_with(int8, rank, true);
            let model = Model::from_bytes(&bytes).unwrap();
            assert!(Interpreter::new(&model).is_err(), "rank {rank}");
        }
        // Not a variable: nothing writes the state, so the file is refused when loading.
        assert!(Model::from_bytes(&svdf_model_with(int8, 2, false)).is_err());
    }
}

/// RFFT2D cropping the rows and padding the columns (each slice of `[2, 3, 3]` taken as a
/// 2 x 4 array), then COMPLEX_ABS; REAL and IMAG of a COMPLEX64 constant.
#[cfg(feature = "ops-fft")]
#[test]
fn rfft2d_crops_and_pads_and_complex_parts() {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[2, 3, 3]);
    let len = m.const_i32("fft_length", &[2], &[2, 4]);
    let spectrum = m.tensor("spectrum", &[2, 2, 3], TensorType::COMPLEX64);
    m.op(B::RFFT2D, &[x, len], &[spectrum], None);
    let abs = m.f32("abs", &[2, 2, 3]);
    m.op(B::COMPLEX_ABS, &[spectrum], &[abs], None);
    let z: Vec<u8> = [1.5f32, -2.0, 0.25, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let c = m.const_bytes("z", &[2], TensorType::COMPLEX64, z);
    let (re, im) = (m.f32("re", &[2]), m.f32("im", &[2]));
    m.op(B::REAL, &[c], &[re], None);
    m.op(B::IMAG, &[c], &[im], None);
    let bytes = m.finish(&[x], &[abs, re, im]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    let xs: Vec<f32> = (0..18).map(|v| (v * v % 7) as f32 - 2.5).collect();
    it.input_mut(0)
        .unwrap()
        .as_f32_mut()
        .unwrap()
        .copy_from_slice(&xs);
    it.invoke().unwrap();
    // The DFT of each slice's first 2 rows, their 3 columns padded to 4.
    let mut want = Vec::new();
    for slice in xs.chunks(9) {
        for u in 0..2 {
            for v in 0..3 {
                let (mut re, mut im) = (0f64, 0f64);
                for r in 0..2 {
                    for c in 0..3 {
                        let a = -2.0
                            * std::f64::consts::PI
                            * ((u * r) as f64 / 2.0 + (v * c) as f64 / 4.0);
                        re += f64::from(slice[r * 3 + c]) * a.cos();
                        im += f64::from(slice[r * 3 + c]) * a.sin();
                    }
                }
                want.push(re.hypot(im) as f32);
            }
        }
    }
    assert_close(it.output(0).unwrap().as_f32().unwrap(), &want);
    assert_eq!(it.output(1).unwrap().as_f32().unwrap(), [1.5, 0.25]);
    assert_eq!(it.output(2).unwrap().as_f32().unwrap(), [-2.0, 4.0]);
}

/// RFFT2D whose fft_length is not two powers of two (LiteRT's kernel refuses them too), not a
/// constant, not INT32, or disagrees with the output's shape, and COMPLEX_ABS of a float, are
/// refused when preparing.
#[cfg(feature = "ops-fft")]
#[test]
fn bad_rfft2d_operands_are_refused() {
    let prepare = |len: &[i32], len_type: TensorType, constant: bool, out: &[i32]| {
        let mut m = ModelBuilder::new();
        let x = m.f32("x", &[1, 4, 8]);
        let l = if !constant {
            m.tensor("len", &[2], TensorType::INT32)
        } else if len_type == TensorType::INT64 {
            let b = len
                .iter()
                .flat_map(|&v| i64::from(v).to_le_bytes())
                .collect();
            m.const_bytes("len", &[2], TensorType::INT64, b)
        } else {
            m.const_i32("len", &[len.len() as i32], len)
        };
        let o = m.tensor("o", out, TensorType::COMPLEX64);
        m.op(B::RFFT2D, &[x, l], &[o], None);
        let bytes = if constant {
            m.finish(&[x], &[o])
        } else {
            m.finish(&[x, l], &[o])
        };
        let model = Model::from_bytes(&bytes).unwrap();
        Interpreter::new(&model).map(|_| ())
    };
    let i32t = TensorType::INT32;
    prepare(&[4, 8], i32t, true, &[1, 4, 5]).unwrap();
    for len in [[4, 12], [3, 8], [0, 8], [4, -8], [i32::MIN, 8]] {
        let e = prepare(&len, i32t, true, &[1, 4, 5]).unwrap_err();
        assert!(e.to_string().contains("power of two"), "{len:?}: {e}");
    }
    assert!(prepare(&[4, 8, 1], i32t, true, &[1, 4, 5]).is_err());
    assert!(prepare(&[4, 8], TensorType::INT64, true, &[1, 4, 5]).is_err());
    assert!(prepare(&[4, 8], i32t, false, &[1, 4, 5]).is_err());
    assert!(prepare(&[4, 8], i32t, true, &[1, 4, 8]).is_err());

    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[3]);
    let o = m.f32("o", &[3]);
    m.op(B::COMPLEX_ABS, &[x], &[o], None);
    let bytes = m.finish(&[x], &[o]);
    assert!(Interpreter::new(&Model::from_bytes(&bytes).unwrap()).is_err());
}

/// A COMPLEX64 constant is 8 bytes per value: a buffer of another size is an invalid model.
#[cfg(feature = "ops-fft")]
#[test]
fn complex64_constants_are_checked_like_the_others() {
    for (bytes, ok) in [(16, true), (12, false), (8, false)] {
        let mut m = ModelBuilder::new();
        let z = m.const_bytes("z", &[2], TensorType::COMPLEX64, vec![0; bytes]);
        let x = m.f32("x", &[2]);
        let (re, o) = (m.f32("re", &[2]), m.f32("o", &[2]));
        m.op(B::REAL, &[z], &[re], None);
        m.op(B::ADD, &[x, re], &[o], None);
        let file = m.finish(&[x], &[o]);
        let r = Model::from_bytes(&file);
        assert_eq!(r.is_ok(), ok, "{bytes} bytes: {:?}", r.err());
    }
}

/// COMPLEX64 model inputs and outputs through `as_complex64(_mut)`: a RESHAPE passes the values
/// through, COMPLEX_ABS gives their magnitudes.
#[cfg(feature = "ops-fft")]
#[test]
fn complex64_inputs_and_outputs() {
    let mut m = ModelBuilder::new();
    let z = m.tensor("z", &[2], TensorType::COMPLEX64);
    let shape = m.const_i32("shape", &[2], &[1, 2]);
    let r = m.tensor("r", &[1, 2], TensorType::COMPLEX64);
    m.op(B::RESHAPE, &[z, shape], &[r], None);
    let abs = m.f32("abs", &[2]);
    m.op(B::COMPLEX_ABS, &[z], &[abs], None);
    let bytes = m.finish(&[z], &[r, abs]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    let mut t = it.input_mut(0).unwrap();
    assert!(t.as_f32_mut().is_err());
    t.as_complex64_mut()
        .unwrap()
        .copy_from_slice(&[[3.0, 4.0], [-0.5, 0.0]]);
    it.invoke().unwrap();
    assert_eq!(
        it.output(0).unwrap().as_complex64().unwrap(),
        [[3.0, 4.0], [-0.5, 0.0]]
    );
    assert_eq!(it.output(1).unwrap().as_f32().unwrap(), [5.0, 0.5]);
}
