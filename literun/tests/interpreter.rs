mod common;

use common::{assert_close, opts, run1, ModelBuilder, F};
use literun::schema::{self as s, BuiltinOperator as B, TensorType};
use literun::{DType, Error, Interpreter, Model};

#[test]
fn add_broadcast_relu() {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[2, 3]);
    let b = m.const_f32("b", &[3], &[1.0, -10.0, 0.5]);
    let y = m.f32("y", &[2, 3]);
    m.op(
        B::ADD,
        &[x, b],
        &[y],
        opts(
            11,
            vec![F::I8(s::AddOptions::VT_FUSED_ACTIVATION_FUNCTION, 1)],
        ),
    );
    let bytes = m.finish(&[x], &[y]);
    let out = run1(&bytes, &[1.0, 2.0, 3.0, -4.0, 5.0, -6.0]);
    assert_close(&out, &[2.0, 0.0, 3.5, 0.0, 0.0, 0.0]);
}

#[test]
fn conv2d_valid_and_same() {
    // 1x3x3x1 input, one 2x2 filter.
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[1, 3, 3, 1]);
    let w = m.const_f32("w", &[1, 2, 2, 1], &[1.0, 2.0, 3.0, 4.0]);
    let b = m.const_f32("b", &[1], &[0.5]);
    let y = m.f32("y", &[1, 2, 2, 1]);
    let o = |pad: i8, stride: i32| {
        opts(
            1,
            vec![
                F::I8(s::Conv2DOptions::VT_PADDING, pad),
                F::I32(s::Conv2DOptions::VT_STRIDE_W, stride),
                F::I32(s::Conv2DOptions::VT_STRIDE_H, stride),
            ],
        )
    };
    m.op(B::CONV_2D, &[x, w, b], &[y], o(1, 1));
    let input: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    let out = run1(&m.finish(&[x], &[y]), &input);
    // [1 2;4 5]·[1 2;3 4] = 1+4+12+20 = 37 ...
    assert_close(&out, &[37.5, 47.5, 67.5, 77.5]);

    // SAME, stride 2: out 2x2, pad_total = (2-1)*2+2-3 = 1 -> pad_top 0.
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[1, 3, 3, 1]);
    let w = m.const_f32("w", &[1, 2, 2, 1], &[1.0, 2.0, 3.0, 4.0]);
    let y = m.f32("y", &[1, 2, 2, 1]);
    m.op(B::CONV_2D, &[x, w, -1], &[y], o(0, 2));
    let out = run1(&m.finish(&[x], &[y]), &input);
    // (0,0): 37; (0,2): 3*1 + 6*3 = 21; (2,0): 7+2*8 = 23; (2,2): 9
    assert_close(&out, &[37.0, 21.0, 23.0, 9.0]);
}

#[test]
fn wrong_output_shape_is_an_error_naming_the_op() {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[1, 3, 3, 1]);
    let w = m.const_f32("w", &[1, 2, 2, 1], &[1.0, 2.0, 3.0, 4.0]);
    let y = m.f32("y", &[1, 3, 3, 1]);
    m.op(
        B::CONV_2D,
        &[x, w],
        &[y],
        opts(
            1,
            vec![
                F::I8(s::Conv2DOptions::VT_PADDING, 1),
                F::I32(s::Conv2DOptions::VT_STRIDE_W, 1),
                F::I32(s::Conv2DOptions::VT_STRIDE_H, 1),
            ],
        ),
    );
    let bytes = m.finish(&[x], &[y]);
    let model = Model::from_bytes(&bytes).unwrap();
    let e = Interpreter::new(&model).err().unwrap();
    let msg = e.to_string();
    assert!(msg.contains("#0") && msg.contains("CONV_2D"), "{msg}");
}

#[test]
fn chain_of_data_movement_ops() {
    // x[2,3] -> transpose [3,2] -> reshape [6] -> strided_slice(1::2)=[3] -> concat with const -> [5]
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[2, 3]);
    let perm = m.const_i32("perm", &[2], &[1, 0]);
    let t = m.f32("t", &[3, 2]);
    m.op(B::TRANSPOSE, &[x, perm], &[t], None);
    let r = m.f32("r", &[6]);
    m.op(B::RESHAPE, &[t], &[r], None);
    let (b, e, st) = (
        m.const_i32("b", &[1], &[1]),
        m.const_i32("e", &[1], &[0]),
        m.const_i32("s", &[1], &[2]),
    );
    let ss = m.f32("ss", &[3]);
    m.op(
        B::STRIDED_SLICE,
        &[r, b, e, st],
        &[ss],
        opts(32, vec![F::I32(s::StridedSliceOptions::VT_END_MASK, 1)]),
    );
    let c = m.const_f32("c", &[2], &[100.0, 200.0]);
    let y = m.f32("y", &[5]);
    m.op(
        B::CONCATENATION,
        &[ss, c],
        &[y],
        opts(10, vec![F::I32(s::ConcatenationOptions::VT_AXIS, 0)]),
    );
    let out = run1(&m.finish(&[x], &[y]), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // transpose: [1,4,2,5,3,6]; [1::2] = [4,5,6]
    assert_close(&out, &[4.0, 5.0, 6.0, 100.0, 200.0]);
}

#[test]
fn strided_slice_negative_stride_and_shrink() {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[2, 4]);
    let (b, e, st) = (
        m.const_i32("b", &[2], &[1, -1]),
        m.const_i32("e", &[2], &[2, 0]),
        m.const_i32("s", &[2], &[1, -2]),
    );
    let y = m.f32("y", &[2]);
    m.op(
        B::STRIDED_SLICE,
        &[x, b, e, st],
        &[y],
        opts(
            32,
            vec![
                F::I32(s::StridedSliceOptions::VT_SHRINK_AXIS_MASK, 1),
                F::I32(s::StridedSliceOptions::VT_END_MASK, 2),
            ],
        ),
    );
    let out = run1(
        &m.finish(&[x], &[y]),
        &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
    );
    // row 1 = [4,5,6,7], from index 3 backwards by 2 to the start: [7,5]
    assert_close(&out, &[7.0, 5.0]);
}

#[test]
fn split_gather_pad_tile_mean_softmax() {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[2, 4]);
    let axis = m.const_i32("axis", &[], &[1]);
    let (a, b) = (m.f32("a", &[2, 2]), m.f32("b", &[2, 2]));
    m.op(
        B::SPLIT,
        &[axis, x],
        &[a, b],
        opts(35, vec![F::I32(s::SplitOptions::VT_NUM_SPLITS, 2)]),
    );
    // gather rows [1, 0] of b
    let idx = m.const_i32("idx", &[2], &[1, 0]);
    let g = m.f32("g", &[2, 2]);
    m.op(
        B::GATHER,
        &[b, idx],
        &[g],
        opts(23, vec![F::I32(s::GatherOptions::VT_AXIS, 0)]),
    );
    let pads = m.const_i32("pads", &[2, 2], &[0, 0, 1, 0]);
    let p = m.f32("p", &[2, 3]);
    m.op(B::PAD, &[a, pads], &[p], None);
    let mult = m.const_i32("mult", &[2], &[1, 2]);
    let t = m.f32("t", &[2, 4]);
    m.op(B::TILE, &[g, mult], &[t], None);
    let ax = m.const_i32("ax", &[1], &[1]);
    let mean = m.f32("mean", &[2, 1]);
    m.op(
        B::MEAN,
        &[p, ax],
        &[mean],
        opts(27, vec![F::Bool(s::ReducerOptions::VT_KEEP_DIMS, true)]),
    );
    let sm = m.f32("sm", &[2, 4]);
    m.op(
        B::SOFTMAX,
        &[t],
        &[sm],
        opts(9, vec![F::F32(s::SoftmaxOptions::VT_BETA, 1.0)]),
    );
    let bytes = m.finish(&[x], &[t, mean, sm]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.input_f32_mut(0)
        .unwrap()
        .copy_from_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    it.invoke().unwrap();
    // a = [[1,2],[5,6]], b = [[3,4],[7,8]]; g = [[7,8],[3,4]]; t = [[7,8,7,8],[3,4,3,4]]
    assert_close(
        it.output(0).unwrap().as_f32().unwrap(),
        &[7.0, 8.0, 7.0, 8.0, 3.0, 4.0, 3.0, 4.0],
    );
    // p = [[0,1,2],[0,5,6]] -> mean [1, 11/3]
    assert_close(it.output(1).unwrap().as_f32().unwrap(), &[1.0, 11.0 / 3.0]);
    let e7 = 1.0f32 / (1.0 + std::f32::consts::E);
    let sm = it.output(2).unwrap();
    assert_eq!(sm.shape(), &[2, 4]);
    assert_close(&sm.as_f32().unwrap()[..2], &[e7 / 2.0, (1.0 - e7) / 2.0]);
}

#[test]
fn cast_argmax_and_dequantize_f16() {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[2, 3]);
    let ax = m.const_i32("ax", &[], &[1]);
    let am = m.tensor("am", &[2], TensorType::INT64);
    m.op(B::ARG_MAX, &[x, ax], &[am], None);
    let ci = m.tensor("ci", &[2, 3], TensorType::INT32);
    m.op(B::CAST, &[x], &[ci], None);
    // f16 constant [1.0, -2.0, 0.5] dequantized and added to a slice
    let h: Vec<u8> = [0x3c00u16, 0xc000, 0x3800]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let hc = m.const_bytes("h", &[3], TensorType::FLOAT16, h);
    let hf = m.f32("hf", &[3]);
    m.op(B::DEQUANTIZE, &[hc], &[hf], None);
    let y = m.f32("y", &[2, 3]);
    m.op(B::MUL, &[x, hf], &[y], None);
    let bytes = m.finish(&[x], &[am, ci, y]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.input_f32_mut(0)
        .unwrap()
        .copy_from_slice(&[1.5, 9.0, -3.7, 2.0, 2.0, 1.0]);
    it.invoke().unwrap();
    assert_eq!(it.output(0).unwrap().as_i64().unwrap(), &[1, 0]);
    assert_eq!(
        it.output(1).unwrap().as_i32().unwrap(),
        &[1, 9, -3, 2, 2, 1]
    );
    assert_close(
        it.output(2).unwrap().as_f32().unwrap(),
        &[1.5, -18.0, -1.85, 2.0, -4.0, 0.5],
    );
    assert!(it.output(0).unwrap().as_f32().is_err());
}

#[test]
fn fully_connected_and_signature_names() {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[1, 3]);
    let w = m.const_f32("w", &[2, 3], &[1.0, 0.0, -1.0, 0.5, 0.5, 0.5]);
    let b = m.const_f32("b", &[2], &[0.0, 1.0]);
    let y = m.f32("y", &[1, 2]);
    m.op(B::FULLY_CONNECTED, &[x, w, b], &[y], None);
    m.signature = Some((vec![("input_0".into(), x)], vec![("logits".into(), y)]));
    let bytes = m.finish(&[x], &[y]);
    let model = Model::from_bytes(&bytes).unwrap();
    assert_eq!(model.inputs()[0].name, "input_0");
    assert_eq!(model.outputs()[0].name, "logits");
    assert_eq!(model.inputs()[0].dtype, DType::F32);
    let mut it = Interpreter::new(&model).unwrap();
    it.input_by_name("input_0")
        .unwrap()
        .copy_from_f32(&[1.0, 2.0, 3.0])
        .unwrap();
    it.invoke().unwrap();
    assert_close(
        it.output_by_name("logits").unwrap().as_f32().unwrap(),
        &[-2.0, 4.0],
    );
    assert!(it.input_by_name("nope").is_err());
}

#[test]
fn inputs_and_outputs_resolve_by_signature_key_and_tensor_name() {
    let mut m = ModelBuilder::new();
    let x = m.f32("serving_default_input_1:0", &[1, 2]);
    let y = m.f32("StatefulPartitionedCall:0", &[1, 2]);
    m.op(B::RELU, &[x], &[y], None);
    m.signature = Some((vec![("input_1".into(), x)], vec![("output_0".into(), y)]));
    let bytes = m.finish(&[x], &[y]);
    let model = Model::from_bytes(&bytes).unwrap();
    assert_eq!(model.input_index("input_1"), Some(0));
    assert_eq!(model.input_index("serving_default_input_1:0"), Some(0));
    assert_eq!(model.output_index("output_0"), Some(0));
    assert_eq!(model.output_index("StatefulPartitionedCall:0"), Some(0));
    assert_eq!(model.input_index("output_0"), None);
    let mut it = Interpreter::new(&model).unwrap();
    it.input_by_name("serving_default_input_1:0")
        .unwrap()
        .copy_from_f32(&[-1.0, 2.0])
        .unwrap();
    it.invoke().unwrap();
    let by_key = it
        .output_by_name("output_0")
        .unwrap()
        .as_f32()
        .unwrap()
        .to_vec();
    let by_tensor = it.output_by_name("StatefulPartitionedCall:0").unwrap();
    assert_eq!(by_tensor.as_f32().unwrap(), &by_key[..]);
    assert_eq!(by_key, [0.0, 2.0]);
}

#[test]
fn arena_reuses_memory_in_a_chain() {
    let mut m = ModelBuilder::new();
    let mut cur = m.f32("x", &[256]);
    let x = cur;
    for i in 0..6 {
        let n = m.f32(&format!("t{i}"), &[256]);
        m.op(B::RELU, &[cur], &[n], None);
        cur = n;
    }
    let bytes = m.finish(&[x], &[cur]);
    let model = Model::from_bytes(&bytes).unwrap();
    let it = Interpreter::new(&model).unwrap();
    // 7 tensors of 1 KiB, but at most 2 (the input stays live only until op 0) + 1 live at once.
    assert!(it.arena_bytes() <= 3 * 1024, "{}", it.arena_bytes());
    let out = run1(&bytes, &vec![-1.0; 256]);
    assert!(out.iter().all(|&v| v == 0.0));
}

#[test]
fn unsupported_ops_are_all_listed() {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[4]);
    let a = m.f32("a", &[4]);
    let b = m.f32("b", &[4]);
    let c = m.f32("c", &[4]);
    m.op(B::LSTM, &[x], &[a], None);
    m.op(B::RELU, &[a], &[b], None);
    m.op(B::LSH_PROJECTION, &[b], &[c], None);
    let bytes = m.finish(&[x], &[c]);
    match Model::from_bytes(&bytes) {
        Err(Error::Unsupported(ops)) => {
            assert_eq!(ops.len(), 2);
            assert_eq!((ops[0].index, ops[0].op.as_str()), (0, "LSTM"));
            assert_eq!((ops[1].index, ops[1].op.as_str()), (2, "LSH_PROJECTION"));
        }
        other => panic!("{other:?}"),
    }
}

fn simple_model() -> ModelBuilder {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[4]);
    let w = m.const_f32("w", &[4], &[1.0, 2.0, 3.0, 4.0]);
    let y = m.f32("y", &[4]);
    m.op(B::MUL, &[x, w], &[y], None);
    m
}

#[test]
fn malformed_models_are_errors() {
    let m = simple_model();
    let good = m.finish_raw(&[0], &[2]);
    let aligned = literun::AlignedBytes::from_slice(&good);
    assert!(Model::from_bytes(&aligned).is_ok());
    // Truncated at every length.
    for n in 0..good.len() {
        let a = literun::AlignedBytes::from_slice(&good[..n]);
        assert!(Model::from_bytes(&a).is_err(), "truncated to {n}");
    }
    // Wrong identifier.
    let mut bad = good.clone();
    bad[4..8].copy_from_slice(b"XXXX");
    let e = Model::from_bytes(&literun::AlignedBytes::from_slice(&bad)).unwrap_err();
    assert!(e.to_string().contains("identifier"), "{e}");
    // Out-of-range tensor index in an op.
    let mut m2 = simple_model();
    m2.op(B::RELU, &[7], &[2], None);
    let e = Model::from_bytes(&m2.finish(&[0], &[2])).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    // Subgraph output index out of range.
    assert!(Model::from_bytes(&m.finish(&[0], &[9])).is_err());
    // Constant buffer too short for its shape.
    let mut m3 = ModelBuilder::new();
    let x = m3.f32("x", &[4]);
    let w = m3.const_f32("w", &[4], &[1.0, 2.0]);
    let y = m3.f32("y", &[4]);
    m3.op(B::MUL, &[x, w], &[y], None);
    let e = Model::from_bytes(&m3.finish(&[x], &[y])).unwrap_err();
    assert!(e.to_string().contains("needs 16"), "{e}");
    // Wrong version.
    let mut m4 = simple_model();
    m4.version = 2;
    assert!(Model::from_bytes(&m4.finish(&[0], &[2])).is_err());
    // Reading a tensor nobody wrote.
    let mut m5 = ModelBuilder::new();
    let x = m5.f32("x", &[4]);
    let z = m5.f32("z", &[4]);
    let y = m5.f32("y", &[4]);
    m5.op(B::ADD, &[x, z], &[y], None);
    let e = Model::from_bytes(&m5.finish(&[x], &[y])).unwrap_err();
    assert!(
        e.to_string().contains("before any operator writes it"),
        "{e}"
    );
}

#[test]
fn misaligned_constant_data_is_a_clear_error() {
    let good = simple_model().finish_raw(&[0], &[2]);
    let mut shifted = vec![0u8; good.len() + 1];
    shifted[1..].copy_from_slice(&good);
    let a = literun::AlignedBytes::from_slice(&shifted);
    // The flatbuffer verifier may itself reject unaligned data; either way an error, not a panic.
    let e = Model::from_bytes(&a[1..]).unwrap_err();
    assert!(
        matches!(e, Error::Misaligned) || matches!(e, Error::InvalidModel(_)),
        "{e}"
    );
}

#[test]
fn corrupted_models_never_panic() {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[1, 4, 4, 2]);
    let w = m.const_f32("w", &[3, 2, 2, 2], &[0.5; 24]);
    let c = m.f32("c", &[1, 3, 3, 3]);
    m.op(
        B::CONV_2D,
        &[x, w],
        &[c],
        opts(
            1,
            vec![
                F::I8(s::Conv2DOptions::VT_PADDING, 1),
                F::I32(s::Conv2DOptions::VT_STRIDE_W, 1),
                F::I32(s::Conv2DOptions::VT_STRIDE_H, 1),
            ],
        ),
    );
    let pads = m.const_i32("pads", &[4, 2], &[0, 0, 1, 1, 1, 1, 0, 0]);
    let p = m.f32("p", &[1, 5, 5, 3]);
    m.op(B::PAD, &[c, pads], &[p], None);
    let ax = m.const_i32("ax", &[2], &[1, 2]);
    let y = m.f32("y", &[1, 3]);
    m.op(B::MEAN, &[p, ax], &[y], None);
    let good = m.finish_raw(&[x], &[y]);
    assert_eq!(
        run1(&literun::AlignedBytes::from_slice(&good), &[1.0; 32]).len(),
        3
    );
    let mut seed = 0x1234_5678u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    for _ in 0..3000 {
        let mut bad = good.clone();
        for _ in 0..1 + next() % 4 {
            let i = next() % bad.len();
            bad[i] = next() as u8;
        }
        let a = literun::AlignedBytes::from_slice(&bad);
        if let Ok(model) = Model::from_bytes(&a) {
            if let Ok(mut it) = Interpreter::new(&model) {
                if let Ok(mut t) = it.input_mut(0) {
                    if let Ok(d) = t.as_f32_mut() {
                        d.fill(1.0);
                    }
                }
                let _ = it.invoke();
                for k in 0..it.outputs().len() {
                    let _ = it.output(k);
                }
            }
        }
    }
}

#[test]
fn heavy_kernel_dispatch() {
    // TRANSPOSE_CONV: stride 2, SAME, 3x3 ones filter, [1,2,2,1] -> [1,4,4,1]; pad 0 as TFLite.
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[1, 2, 2, 1]);
    let os = m.const_i32("os", &[4], &[1, 4, 4, 1]);
    let w = m.const_f32("w", &[1, 3, 3, 1], &[1.0; 9]);
    let y = m.f32("y", &[1, 4, 4, 1]);
    m.op(
        B::TRANSPOSE_CONV,
        &[os, w, x],
        &[y],
        opts(
            49,
            vec![
                F::I8(s::TransposeConvOptions::VT_PADDING, 0),
                F::I32(s::TransposeConvOptions::VT_STRIDE_W, 2),
                F::I32(s::TransposeConvOptions::VT_STRIDE_H, 2),
            ],
        ),
    );
    let out = run1(&m.finish(&[x], &[y]), &[1.0, 2.0, 3.0, 4.0]);
    #[rustfmt::skip]
    assert_close(&out, &[1.0, 1.0, 3.0, 2.0, 1.0, 1.0, 3.0, 2.0, 4.0, 4.0, 10.0, 6.0, 3.0, 3.0, 7.0, 4.0]);

    // DEPTHWISE_CONV_2D, VALID.
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[1, 2, 2, 2]);
    let w = m.const_f32(
        "w",
        &[1, 2, 2, 2],
        &[1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0],
    );
    let y = m.f32("y", &[1, 1, 1, 2]);
    m.op(
        B::DEPTHWISE_CONV_2D,
        &[x, w, -1],
        &[y],
        opts(
            2,
            vec![
                F::I8(s::DepthwiseConv2DOptions::VT_PADDING, 1),
                F::I32(s::DepthwiseConv2DOptions::VT_STRIDE_W, 1),
                F::I32(s::DepthwiseConv2DOptions::VT_STRIDE_H, 1),
                F::I32(s::DepthwiseConv2DOptions::VT_DEPTH_MULTIPLIER, 1),
            ],
        ),
    );
    let out = run1(
        &m.finish(&[x], &[y]),
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
    );
    assert_close(&out, &[16.0, 40.0]);

    // AVERAGE_POOL_2D and MAX_POOL_2D.
    for (code, want) in [(B::AVERAGE_POOL_2D, 2.5), (B::MAX_POOL_2D, 4.0)] {
        let mut m = ModelBuilder::new();
        let x = m.f32("x", &[1, 2, 2, 1]);
        let y = m.f32("y", &[1, 1, 1, 1]);
        use s::Pool2DOptions as P;
        m.op(
            code,
            &[x],
            &[y],
            opts(
                5,
                vec![
                    F::I8(P::VT_PADDING, 1),
                    F::I32(P::VT_STRIDE_W, 2),
                    F::I32(P::VT_STRIDE_H, 2),
                    F::I32(P::VT_FILTER_WIDTH, 2),
                    F::I32(P::VT_FILTER_HEIGHT, 2),
                ],
            ),
        );
        assert_close(&run1(&m.finish(&[x], &[y]), &[1.0, 2.0, 3.0, 4.0]), &[want]);
    }

    // BATCH_MATMUL with a broadcast rhs.
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[1, 2, 2]);
    let r = m.const_f32("r", &[2, 2], &[5.0, 6.0, 7.0, 8.0]);
    let y = m.f32("y", &[1, 2, 2]);
    m.op(B::BATCH_MATMUL, &[x, r], &[y], None);
    assert_close(
        &run1(&m.finish(&[x], &[y]), &[1.0, 2.0, 3.0, 4.0]),
        &[19.0, 22.0, 43.0, 50.0],
    );

    // RESIZE_NEAREST_NEIGHBOR 1x2 -> 2x4.
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[1, 1, 2, 1]);
    let sz = m.const_i32("sz", &[2], &[2, 4]);
    let y = m.f32("y", &[1, 2, 4, 1]);
    m.op(B::RESIZE_NEAREST_NEIGHBOR, &[x, sz], &[y], None);
    assert_close(
        &run1(&m.finish(&[x], &[y]), &[1.0, 2.0]),
        &[1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0],
    );
}

#[test]
fn int32_add_and_gather_out_of_range_is_runtime_error() {
    let mut m = ModelBuilder::new();
    let p = m.const_f32("p", &[3], &[1.0, 2.0, 3.0]);
    let i = m.tensor("i", &[2], TensorType::INT32);
    let one = m.const_i32("one", &[], &[1]);
    let j = m.tensor("j", &[2], TensorType::INT32);
    m.op(B::ADD, &[i, one], &[j], None);
    let y = m.f32("y", &[2]);
    m.op(B::GATHER, &[p, j], &[y], None);
    let bytes = m.finish(&[i], &[y]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.input_mut(0)
        .unwrap()
        .as_i32_mut()
        .unwrap()
        .copy_from_slice(&[1, -1]);
    it.invoke().unwrap();
    assert_close(it.output(0).unwrap().as_f32().unwrap(), &[3.0, 1.0]);
    it.input_mut(0)
        .unwrap()
        .as_i32_mut()
        .unwrap()
        .copy_from_slice(&[2, 0]);
    let e = it.invoke().unwrap_err();
    assert!(e.to_string().contains("#1 (GATHER)"), "{e}");
}

#[test]
fn compare_logic_select_and_topk() {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[2, 3]);
    let zero = m.const_f32("zero", &[], &[0.0]);
    let gt = m.tensor("gt", &[2, 3], TensorType::BOOL);
    m.op(B::GREATER, &[x, zero], &[gt], None);
    let lim = m.const_f32("lim", &[3], &[1.0, 1.0, 10.0]);
    let lt = m.tensor("lt", &[2, 3], TensorType::BOOL);
    m.op(B::LESS, &[x, lim], &[lt], None);
    let both = m.tensor("both", &[2, 3], TensorType::BOOL);
    m.op(B::LOGICAL_AND, &[gt, lt], &[both], None);
    let not = m.tensor("not", &[2, 3], TensorType::BOOL);
    m.op(B::LOGICAL_NOT, &[both], &[not], None);
    let fill = m.const_f32("fill", &[], &[-5.0]);
    let y = m.f32("y", &[2, 3]);
    m.op(B::SELECT_V2, &[not, fill, x], &[y], None);
    let k = m.const_i32("k", &[], &[2]);
    let v = m.f32("v", &[2, 2]);
    let i = m.tensor("i", &[2, 2], TensorType::INT32);
    m.op(B::TOPK_V2, &[y, k], &[v, i], None);
    let bytes = m.finish(&[x], &[y, v, i]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.input_f32_mut(0)
        .unwrap()
        .copy_from_slice(&[0.5, 2.0, 3.0, -1.0, 0.5, 0.5]);
    it.invoke().unwrap();
    // kept where 0 < x < lim: [0.5, -, 3.0], [-, 0.5, 0.5]
    assert_close(
        it.output(0).unwrap().as_f32().unwrap(),
        &[0.5, -5.0, 3.0, -5.0, 0.5, 0.5],
    );
    assert_close(
        it.output(1).unwrap().as_f32().unwrap(),
        &[3.0, 0.5, 0.5, 0.5],
    );
    // ties: the lower index first
    assert_eq!(it.output(2).unwrap().as_i32().unwrap(), &[2, 0, 1, 2]);
}

#[test]
fn bad_compare_select_and_topk_are_errors() {
    let prepare = |m: &ModelBuilder, ins: &[i32], outs: &[i32]| {
        let bytes = m.finish(ins, outs);
        let model = Model::from_bytes(&bytes).unwrap();
        Interpreter::new(&model).err().map(|e| e.to_string())
    };
    // TOPK_V2 with k larger than the axis.
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[2, 3]);
    let k = m.const_i32("k", &[], &[4]);
    let v = m.f32("v", &[2, 4]);
    let i = m.tensor("i", &[2, 4], TensorType::INT32);
    m.op(B::TOPK_V2, &[x, k], &[v, i], None);
    let e = prepare(&m, &[x], &[v, i]).expect("k > n must fail");
    assert!(e.contains("TOPK_V2") && e.contains("k = 4"), "{e}");
    // SELECT_V2 whose operands do not broadcast.
    let mut m = ModelBuilder::new();
    let c = m.tensor("c", &[2], TensorType::BOOL);
    let x = m.f32("x", &[3]);
    let y = m.f32("y", &[3]);
    m.op(B::SELECT_V2, &[c, x, x], &[y], None);
    let e = prepare(&m, &[c, x], &[y]).expect("no broadcast");
    assert!(e.contains("SELECT_V2") && e.contains("broadcast"), "{e}");
    // Int8 comparison with an input scale of 1 or more (TFLite cannot rescale it).
    let mut m = ModelBuilder::new();
    let a = m.q("a", &[4], TensorType::INT8, 2.0, 0);
    let b = m.q("b", &[4], TensorType::INT8, 0.5, 0);
    let o = m.tensor("o", &[4], TensorType::BOOL);
    m.op(B::EQUAL, &[a, b], &[o], None);
    let e = prepare(&m, &[a, b], &[o]).expect("scale >= 1");
    assert!(e.contains("EQUAL") && e.contains("scale"), "{e}");
    // Comparison output must be BOOL.
    let mut m = ModelBuilder::new();
    let a = m.f32("a", &[4]);
    let o = m.f32("o", &[4]);
    m.op(B::LESS, &[a, a], &[o], None);
    assert!(prepare(&m, &[a], &[o]).is_some());
}

#[test]
fn ceil_and_round_halves_to_even() {
    let x_in = [-2.5f32, -1.5, -0.4, 0.5, 1.5, 2.5, 2.6, 7.0];
    for (code, want) in [
        (B::CEIL, [-2.0f32, -1.0, -0.0, 1.0, 2.0, 3.0, 3.0, 7.0]),
        (B::ROUND, [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 3.0, 7.0]),
    ] {
        let mut m = ModelBuilder::new();
        let x = m.f32("x", &[8]);
        let y = m.f32("y", &[8]);
        m.op(code, &[x], &[y], None);
        let bytes = m.finish(&[x], &[y]);
        assert_eq!(run1(&bytes, &x_in), want, "{code:?}");
    }
}
