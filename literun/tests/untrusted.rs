//! Untrusted model files: crafted files that claim huge sizes must give `Err` quickly (no huge
//! allocation), and every input the fuzzer (`fuzz/`) ever crashed on must now give `Ok` or `Err`.

mod common;

use std::time::{Duration, Instant};

use common::{opts, ModelBuilder, F};
use literun::schema::{self as s, BuiltinOperator as B, TensorType};
use literun::{AlignedBytes, Error, Interpreter, Model};

/// Runs a model all the way like the fuzz target does; must not panic.
fn run_untrusted(data: &[u8]) {
    let bytes = AlignedBytes::from_slice(data);
    let Ok(model) = Model::from_bytes(&bytes) else {
        return;
    };
    let Ok(mut interp) = Interpreter::new(&model) else {
        return;
    };
    let mut k = data.len();
    for i in 0..interp.inputs().len() {
        let Ok(mut t) = interp.input_mut(i) else {
            continue;
        };
        for b in t.bytes_mut() {
            k = if k == 0 { data.len() } else { k - 1 };
            *b = data.get(k).copied().unwrap_or(0);
        }
    }
    if interp.invoke().is_ok() {
        for i in 0..interp.outputs().len() {
            interp.output(i).unwrap();
        }
    }
}

/// Each file in `tests/data/fuzz/` once crashed the fuzz target (see `fuzz/README.md`).
#[test]
fn fuzz_regressions() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        eprintln!("{}", p.display());
        run_untrusted(&data);
        n += 1;
    }
    assert!(n > 0);
}

#[test]
fn a_stored_plan_past_its_tensors_is_refused_before_allocating() {
    // 800 bytes found by the fuzzer: a SUM of 1x4x6x6 whose OfflineMemoryAllocation puts a
    // tensor at ~1.9 GB, an arena of that size if trusted.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fuzz/offline_plan_offset_past_its_tensors.tflite");
    let bytes = AlignedBytes::from_slice(&std::fs::read(path).unwrap());
    let model = Model::from_bytes(&bytes).expect("the model itself is valid");
    let e = Interpreter::new(&model)
        .err()
        .expect("must not allocate the arena the stored plan claims");
    assert!(
        matches!(&e, Error::InvalidModel(m) if m.contains("stored memory plan")),
        "{e}"
    );
}

fn assert_memory_error(bytes: &AlignedBytes) {
    let t = Instant::now();
    let model = Model::from_bytes(bytes).expect("the shapes alone are valid");
    let e = Interpreter::new(&model)
        .err()
        .expect("must not prepare a model this large");
    assert!(
        matches!(&e, Error::InvalidModel(m) if m.contains("bytes of memory")),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn huge_claimed_activation_shapes_are_refused_before_allocating() {
    // 2 GiB per tensor (the per-tensor limit), five of them alive at the end: 10 GiB of arena
    // claimed by a file of a few hundred bytes.
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[1 << 29]);
    let ys: Vec<i32> = (0..4)
        .map(|i| {
            let y = m.f32(&format!("y{i}"), &[1 << 29]);
            m.op(B::ABS, &[x], &[y], None);
            y
        })
        .collect();
    let bytes = m.finish(&[x], &ys);
    assert!(bytes.len() < 4096);
    assert_memory_error(&bytes);

    // One 2 GiB input and its 2 GiB output (both alive during the op).
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[1 << 14, 1 << 15]);
    let y = m.f32("y", &[1 << 14, 1 << 15]);
    m.op(B::RELU, &[x], &[y], None);
    assert_memory_error(&m.finish(&[x], &[y]));
}

#[test]
fn shapes_whose_size_overflows_are_invalid() {
    for shape in [
        vec![1 << 30, 1 << 30, 1 << 30],
        vec![i32::MAX, i32::MAX, i32::MAX, i32::MAX],
        vec![1 << 29, 2],
        vec![1; 9],
    ] {
        let mut m = ModelBuilder::new();
        let x = m.f32("x", &shape);
        let y = m.f32("y", &shape);
        m.op(B::RELU, &[x], &[y], None);
        let e = Model::from_bytes(&m.finish(&[x], &[y])).unwrap_err();
        assert!(matches!(e, Error::InvalidModel(_)), "{shape:?}: {e}");
    }
}

#[test]
fn huge_quantized_scratch_is_refused() {
    // A transpose convolution with int8 output claims its output shape in an int32 scratch (4x
    // the output tensor); the claimed output alone is within the per-tensor limit.
    let mut m = ModelBuilder::new();
    let t = m.const_i32("out_shape", &[4], &[1, 1 << 15, 1 << 15, 1]);
    let w = m.const_i8("w", &[1, 1, 1, 1], &[1]);
    m.quant(w, &[0.5], &[0], 0);
    let x = m.q("x", &[1, 1 << 15, 1 << 15, 1], TensorType::INT8, 0.5, 0);
    let y = m.q("y", &[1, 1 << 15, 1 << 15, 1], TensorType::INT8, 0.5, 0);
    let o = opts(
        49,
        vec![
            F::I8(s::TransposeConvOptions::VT_PADDING, 1),
            F::I32(s::TransposeConvOptions::VT_STRIDE_W, 1),
            F::I32(s::TransposeConvOptions::VT_STRIDE_H, 1),
        ],
    );
    m.op(B::TRANSPOSE_CONV, &[t, w, x], &[y], o);
    let bytes = m.finish(&[x], &[y]);
    let t0 = Instant::now();
    let model = Model::from_bytes(&bytes).unwrap();
    // Either the kernel refuses it, or preparing refuses the memory: never a 6 GiB allocation.
    let e = Interpreter::new(&model).err().expect("refused");
    assert!(e.to_string().contains("bytes of memory"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5));
}

/// New input shapes from an application reading untrusted sizes (a `.npy` header): any length of
/// a dynamic dimension, huge or empty, gives `Ok` or `Err`, never a panic or a huge allocation;
/// what is accepted runs.
#[test]
#[cfg(feature = "dynamic-shapes")]
fn any_resize_of_a_dynamic_dimension_is_ok_or_an_error() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/tf/dynamic_length.tflite"
    );
    let bytes = AlignedBytes::read_file(path).unwrap();
    let model = Model::from_bytes(&bytes).unwrap();
    let lengths = (0..24).chain([1 << 20, 1 << 29, 1 << 31, usize::MAX / 4, usize::MAX]);
    for n in lengths {
        // Resizing and preparing are quick whatever the length (running a huge one is not).
        let start = Instant::now();
        let Ok(resized) = model.resized(0, &[1, n]) else {
            continue;
        };
        let prepared = Interpreter::new(&resized);
        assert!(start.elapsed() < Duration::from_secs(5), "length {n}");
        if let (Ok(mut it), true) = (prepared, n < 4096) {
            // Lengths 3 and 4 leave the second convolution an empty input (an error at run
            // time); from the filter's width on, every length runs.
            let ran = it.invoke();
            assert!(ran.is_ok() || n < 5, "length {n}: {ran:?}");
        }
    }
    // Wrong rank, a fixed dimension, an input that does not exist.
    assert!(model.resized(0, &[1]).is_err());
    assert!(model.resized(0, &[1, 8, 1]).is_err());
    assert!(model.resized(0, &[2, 8]).is_err());
    assert!(model.resized(3, &[1, 8]).is_err());
}

/// Sets input `k` of `it` to INT32 values.
fn set_i32(it: &mut Interpreter<'_>, k: usize, v: &[i32]) {
    let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    it.input_mut(k).unwrap().bytes_mut().copy_from_slice(&b);
}

/// Operators that read indices or shapes from tensors computed at run time: an index out of
/// range or a shape that disagrees with the planned output is an error of `invoke`, never a
/// panic or a write out of bounds; a start index out of range is clamped (as in TFLite).
#[test]
fn run_time_indices_and_shapes_are_checked() {
    // GATHER_ND: params [3, 2], indices [2, 1] from the input.
    let mut m = ModelBuilder::new();
    let p = m.const_f32("p", &[3, 2], &[1., 2., 3., 4., 5., 6.]);
    let i = m.tensor("i", &[2, 1], TensorType::INT32);
    let o = m.f32("o", &[2, 2]);
    m.op(B::GATHER_ND, &[p, i], &[o], None);
    let bytes = m.finish(&[i], &[o]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    set_i32(&mut it, 0, &[2, 0]);
    it.invoke().unwrap();
    assert_eq!(it.output(0).unwrap().as_f32().unwrap(), [5., 6., 1., 2.]);
    for bad in [[3, 0], [0, -1], [i32::MAX, i32::MIN]] {
        set_i32(&mut it, 0, &bad);
        let e = it.invoke().unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
    }

    // EMBEDDING_LOOKUP: lookup [2] from the input into value [3, 2].
    let mut m = ModelBuilder::new();
    let i = m.tensor("ids", &[2], TensorType::INT32);
    let v = m.const_f32("v", &[3, 2], &[1., 2., 3., 4., 5., 6.]);
    let o = m.f32("o", &[2, 2]);
    m.op(B::EMBEDDING_LOOKUP, &[i, v], &[o], None);
    let bytes = m.finish(&[i], &[o]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    set_i32(&mut it, 0, &[1, 1]);
    it.invoke().unwrap();
    assert_eq!(it.output(0).unwrap().as_f32().unwrap(), [3., 4., 3., 4.]);
    set_i32(&mut it, 0, &[1, 3]);
    assert!(it.invoke().is_err());

    // FILL: dims from the input must equal the planned output shape [2, 3].
    let mut m = ModelBuilder::new();
    let d = m.tensor("dims", &[2], TensorType::INT32);
    let v = m.const_f32("v", &[], &[7.]);
    let o = m.f32("o", &[2, 3]);
    m.op(B::FILL, &[d, v], &[o], None);
    let bytes = m.finish(&[d], &[o]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    set_i32(&mut it, 0, &[2, 3]);
    it.invoke().unwrap();
    assert_eq!(it.output(0).unwrap().as_f32().unwrap(), [7.; 6]);
    for bad in [[3, 2], [-2, -3], [i32::MAX, 1]] {
        set_i32(&mut it, 0, &bad);
        assert!(it.invoke().is_err(), "{bad:?}");
    }

    // DYNAMIC_UPDATE_SLICE: start indices from the input, clamped.
    let mut m = ModelBuilder::new();
    let x = m.const_f32("x", &[2, 3], &[0.; 6]);
    let u = m.const_f32("u", &[1, 2], &[1., 2.]);
    let st = m.tensor("start", &[2], TensorType::INT32);
    let o = m.f32("o", &[2, 3]);
    m.op(B::DYNAMIC_UPDATE_SLICE, &[x, u, st], &[o], None);
    let bytes = m.finish(&[st], &[o]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    set_i32(&mut it, 0, &[i32::MAX, i32::MIN]);
    it.invoke().unwrap();
    assert_eq!(
        it.output(0).unwrap().as_f32().unwrap(),
        [0., 0., 0., 1., 2., 0.]
    );

    // BROADCAST_ARGS: shapes that do not broadcast.
    let mut m = ModelBuilder::new();
    let a = m.tensor("a", &[2], TensorType::INT32);
    let b = m.tensor("b", &[2], TensorType::INT32);
    let o = m.tensor("o", &[2], TensorType::INT32);
    m.op(B::BROADCAST_ARGS, &[a, b], &[o], None);
    let bytes = m.finish(&[a, b], &[o]);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    set_i32(&mut it, 0, &[2, 1]);
    set_i32(&mut it, 1, &[1, 5]);
    it.invoke().unwrap();
    assert_eq!(it.output(0).unwrap().as_i32().unwrap(), [2, 5]);
    set_i32(&mut it, 1, &[3, 5]);
    assert!(it.invoke().is_err());
}

/// Constant block shapes, paddings, crops, axes and block sizes that make no sense are refused
/// when preparing.
#[test]
fn bad_layout_parameters_are_refused() {
    let prepare =
        |code: B, consts: &[(&[i32], &[i32])], opts: Option<common::Opts>, out: &[i32]| {
            let mut m = ModelBuilder::new();
            let x = m.f32("x", &[1, 4, 4, 8]);
            let mut ins = vec![x];
            for (k, (shape, v)) in consts.iter().enumerate() {
                ins.push(m.const_i32(&format!("c{k}"), shape, v));
            }
            let o = m.f32("o", out);
            m.op(code, &ins, &[o], opts);
            let bytes = m.finish(&[x], &[o]);
            let model = Model::from_bytes(&bytes).unwrap();
            Interpreter::new(&model).map(|_| ())
        };
    let ok = prepare(
        B::SPACE_TO_BATCH_ND,
        &[(&[2], &[2, 2]), (&[2, 2], &[0, 0, 0, 0])],
        None,
        &[4, 2, 2, 8],
    );
    assert!(ok.is_ok(), "{ok:?}");
    for (block, pads) in [
        ([0, 2], [0, 0, 0, 0]),
        ([-2, 2], [0, 0, 0, 0]),
        ([2, 2], [-1, 1, 0, 0]),
        ([2, 2], [i32::MAX, 1, 0, 0]),
        ([3, 2], [0, 0, 0, 0]),
    ] {
        let r = prepare(
            B::SPACE_TO_BATCH_ND,
            &[(&[2], &block), (&[2, 2], &pads)],
            None,
            &[4, 2, 2, 8],
        );
        assert!(r.is_err(), "{block:?} {pads:?}");
        let r = prepare(
            B::BATCH_TO_SPACE_ND,
            &[(&[2], &block), (&[2, 2], &pads)],
            None,
            &[1, 8, 8, 8],
        );
        assert!(r.is_err(), "{block:?} {pads:?}");
    }
    // Crops larger than the space.
    let r = prepare(
        B::BATCH_TO_SPACE_ND,
        &[(&[2], &[1, 1]), (&[2, 2], &[3, 3, 0, 0])],
        None,
        &[1, 0, 4, 8],
    );
    assert!(r.is_err());
    for axes in [&[4][..], &[-5], &[1, 1], &[1, -3]] {
        let r = prepare(
            B::REVERSE_V2,
            &[(&[axes.len() as i32], axes)],
            None,
            &[1, 4, 4, 8],
        );
        assert!(r.is_err(), "{axes:?}");
    }
    for block in [0, -1, 3, i32::MAX] {
        let o = opts(
            94,
            vec![F::I32(s::DepthToSpaceOptions::VT_BLOCK_SIZE, block)],
        );
        assert!(prepare(B::DEPTH_TO_SPACE, &[], o, &[1, 8, 8, 2]).is_err());
        let o = opts(
            19,
            vec![F::I32(s::SpaceToDepthOptions::VT_BLOCK_SIZE, block)],
        );
        assert!(prepare(B::SPACE_TO_DEPTH, &[], o, &[1, 2, 2, 32]).is_err());
    }
}

/// `streaming_state.tflite` (TensorFlow's converter: subgraph 0 starts with CALL_ONCE of
/// subgraph 1, which assigns the variable its initial value).
#[cfg(feature = "ops-variables")]
fn streaming_model() -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/tf/streaming_state.tflite");
    std::fs::read(path).unwrap()
}

/// The byte position of field `voff` of the options table of operator `op` of subgraph `sg`.
#[cfg(feature = "ops-variables")]
fn option_field(bytes: &[u8], sg: usize, op: usize, voff: u16) -> usize {
    let m = s::root_as_model(bytes).unwrap();
    let o = m.subgraphs().unwrap().get(sg).operators().unwrap().get(op);
    let t = o.builtin_options().unwrap();
    let off = t.vtable().get(voff);
    assert_ne!(off, 0, "field {voff} absent");
    t.loc() + usize::from(off)
}

/// The operator index of the first `code` in subgraph `sg`.
#[cfg(feature = "ops-variables")]
fn first_op(bytes: &[u8], sg: usize, code: B) -> usize {
    let m = s::root_as_model(bytes).unwrap();
    let codes = m.operator_codes().unwrap();
    let ops = m.subgraphs().unwrap().get(sg).operators().unwrap();
    ops.iter()
        .position(|o| codes.get(o.opcode_index() as usize).builtin_code() == code)
        .unwrap()
}

#[cfg(feature = "ops-variables")]
#[test]
fn call_once_of_a_missing_subgraph_or_itself_is_invalid() {
    let good = streaming_model();
    let call = first_op(&good, 0, B::CALL_ONCE);
    // CallOnceOptions.init_subgraph_index.
    let pos = option_field(&good, 0, call, 4);
    assert_eq!(
        i32::from_le_bytes(good[pos..pos + 4].try_into().unwrap()),
        1
    );
    for (k, why) in [
        (2, "out of range"),
        (-1, "out of range"),
        (i32::MAX, "out of range"),
        (0, "calls itself"),
    ] {
        let mut bad = good.clone();
        bad[pos..pos + 4].copy_from_slice(&k.to_le_bytes());
        let bytes = AlignedBytes::from_slice(&bad);
        let e = Model::from_bytes(&bytes).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidModel(m) if m.contains(why)),
            "index {k}: {e}"
        );
    }
}

#[cfg(feature = "ops-variables")]
#[test]
fn reading_a_variable_before_it_is_assigned_is_an_error() {
    // The initialising subgraph assigns another variable (its VAR_HANDLE's shared_name
    // changed), so subgraph 0 reads its variable before anything assigned it. LiteRT (2.21)
    // invokes such a file and outputs whatever its uninitialised buffer held; literun refuses
    // the read, on every invoke, and does not panic.
    let mut bad = streaming_model();
    let handle = first_op(&bad, 1, B::VAR_HANDLE);
    // VarHandleOptions.shared_name: an offset to the string.
    let pos = option_field(&bad, 1, handle, 6);
    let string = pos + u32::from_le_bytes(bad[pos..pos + 4].try_into().unwrap()) as usize;
    bad[string + 4] ^= 0x20;
    let bytes = AlignedBytes::from_slice(&bad);
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    assert_eq!(it.variable_count(), 2);
    for _ in 0..2 {
        let e = it.invoke().unwrap_err();
        assert!(format!("{e}").contains("before it is assigned"), "{e}");
    }
    it.reset_variables();
    assert!(it.invoke().is_err());
}

#[cfg(feature = "ops-variables")]
#[test]
fn every_changed_byte_of_a_model_with_subgraphs_is_ok_or_an_error() {
    let good = streaming_model();
    for i in 0..good.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut bad = good.clone();
            bad[i] ^= flip;
            run_untrusted(&bad);
        }
    }
}

/// `control_float.tflite` (TensorFlow's converter: a `tf.while_loop` with
/// `maximum_iterations=20`) made to loop for 2^31 passes: its condition subgraph gives the
/// comparison of the counter with the maximum only, and the maximum is `i32::MAX`.
#[cfg(feature = "ops-variables")]
fn endless_while_model() -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/tf/control_float.tflite");
    let mut bytes = std::fs::read(path).unwrap();
    let (outputs_at, counter_test, maximum_at) = {
        let m = s::root_as_model(&bytes).unwrap();
        let at = |b: &[u8]| b.as_ptr() as usize - bytes.as_ptr() as usize;
        let cond = m
            .subgraphs()
            .unwrap()
            .iter()
            .find(|g| g.name() == Some("while_cond"))
            .unwrap();
        let tensors = cond.tensors().unwrap();
        let named = |n: &str| tensors.iter().position(|t| t.name() == Some(n)).unwrap();
        let maximum = tensors.get(named("while/maximum_iterations1")).buffer();
        let data = m.buffers().unwrap().get(maximum as usize).data().unwrap();
        assert_eq!(data.bytes(), 20i32.to_le_bytes());
        (
            at(cond.outputs().unwrap().bytes()),
            named("while/Less_1") as i32,
            at(data.bytes()),
        )
    };
    bytes[outputs_at..outputs_at + 4].copy_from_slice(&counter_test.to_le_bytes());
    bytes[maximum_at..maximum_at + 4].copy_from_slice(&i32::MAX.to_le_bytes());
    bytes
}

/// A WHILE whose condition stays true fails the invoke after the interpreter's limit of passes
/// (no hang, no panic), on every invoke; the unchanged file runs within the default limit and
/// fails under a limit below its trip count.
#[cfg(feature = "ops-variables")]
#[test]
fn a_while_loop_is_stopped_after_the_iteration_limit() {
    let bytes = AlignedBytes::from_slice(&endless_while_model());
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    assert_eq!(
        it.max_while_iterations(),
        literun::DEFAULT_MAX_WHILE_ITERATIONS
    );
    it.set_max_while_iterations(1000);
    for _ in 0..2 {
        let e = it.invoke().unwrap_err();
        assert!(
            matches!(&e, Error::Op { op, reason, .. }
                if op == "WHILE" && reason.contains("more than 1000 loop iterations")),
            "{e}"
        );
    }

    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/tf/control_float.tflite");
    let bytes = AlignedBytes::read_file(path).unwrap();
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    // Sums of |values| 5.2, 9.8, 16.7, 27.05, 42.575: four passes.
    let mut run = |limit: u64| {
        it.set_max_while_iterations(limit);
        it.input_mut(0)
            .unwrap()
            .as_f32_mut()
            .unwrap()
            .copy_from_slice(&[1.0, -0.5, 0.3, 0.2, -1.0, 0.4, -0.2, 0.1]);
        it.invoke()
    };
    run(literun::DEFAULT_MAX_WHILE_ITERATIONS).unwrap();
    run(4).unwrap();
    assert!(run(3).is_err());
}

/// `lstm16_int8io.tflite` (TensorFlow's converter: a full-integer UNIDIRECTIONAL_SEQUENCE_LSTM,
/// its only operator).
#[cfg(feature = "ops-sequence")]
fn int8_lstm_model() -> Vec<u8> {
    fixture("lstm16_int8io.tflite")
}

#[cfg(feature = "ops-sequence")]
fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/tf")
        .join(name);
    std::fs::read(path).unwrap()
}

/// The byte position in `file` of `bytes`, a slice of it.
#[cfg(feature = "ops-sequence")]
fn position(file: &[u8], bytes: &[u8]) -> usize {
    bytes.as_ptr() as usize - file.as_ptr() as usize
}

#[cfg(feature = "ops-sequence")]
#[test]
fn an_int8_lstm_without_its_scales_is_refused_when_preparing() {
    let good = int8_lstm_model();
    let m = s::root_as_model(&good).unwrap();
    let sg = m.subgraphs().unwrap().get(0);
    let op = sg.operators().unwrap().get(0);
    // The cell state (input 19) at a scale that is no power of two.
    let cell = sg
        .tensors()
        .unwrap()
        .get(op.inputs().unwrap().get(19) as usize);
    let scale = position(&good, cell.quantization().unwrap().scale().unwrap().bytes());
    // Four intermediate tensors instead of five (the fifth carries the hidden state's scale).
    let count = position(&good, op.intermediates().unwrap().bytes()) - 4;
    assert_eq!(good[count], 5);
    let mut bad_scale = good.clone();
    bad_scale[scale..scale + 4].copy_from_slice(&1e-4f32.to_le_bytes());
    let mut no_hidden = good.clone();
    no_hidden[count] = 4;
    for (bad, why) in [(bad_scale, "power of two"), (no_hidden, "intermediate")] {
        let bytes = AlignedBytes::from_slice(&bad);
        let model = Model::from_bytes(&bytes).unwrap();
        let e = Interpreter::new(&model).err().expect("must not prepare");
        assert!(format!("{e}").contains(why), "{e}");
    }
}

#[cfg(feature = "ops-sequence")]
#[test]
fn every_changed_byte_of_an_int8_lstm_is_ok_or_an_error() {
    let good = int8_lstm_model();
    for i in 0..good.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut bad = good.clone();
            bad[i] ^= flip;
            run_untrusted(&bad);
        }
    }
    // With layer normalization and a projection (more operands, two sequences, time-major).
    let good = fixture("lstm16_norm_projection_int8io.tflite");
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0xff;
        run_untrusted(&bad);
    }
}
