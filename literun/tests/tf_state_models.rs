//! `.tflite` files written by TensorFlow's own converter that need more than a fixed graph
//! (`fixtures/tf/make_tf_state_fixtures.py`), run by literun and compared with LiteRT's outputs
//! committed next to them (float: within 1e-5 relative to the output's largest magnitude).
#![cfg(feature = "dynamic-shapes")]

use literun::{AlignedBytes, Interpreter, Model};
use std::path::{Path, PathBuf};

mod npy;
use npy::read_npy;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/tf")
}

fn f32s(data: &[u8]) -> Vec<f32> {
    data.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Largest |a - b| relative to the largest |b|.
fn max_rel(a: &[f32], b: &[f32]) -> f32 {
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-30);
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / scale)
        .fold(0.0, f32::max)
}

const LENGTHS: [usize; 2] = [64, 203];

/// Writes the committed input for length `n`, runs, and compares with LiteRT's output.
fn check_length(it: &mut Interpreter<'_>, n: usize) {
    let x = read_npy(&dir().join(format!("dynamic_length.len{n}.input0.npy")));
    let want = read_npy(&dir().join(format!("dynamic_length.len{n}.litert.npy")));
    let mut t = it.input_by_name("audio").unwrap();
    assert_eq!(t.shape(), &x.shape[..]);
    t.bytes_mut().copy_from_slice(&x.data);
    it.invoke().unwrap();
    let out = it.output_by_name("scores").unwrap();
    assert_eq!(out.shape(), &want.shape[..]);
    let r = max_rel(out.as_f32().unwrap(), &f32s(&want.data));
    eprintln!("dynamic_length len {n}: max relative difference {r:.2e}");
    assert!(r <= 1e-5, "len {n}: {r}");
}

#[test]
fn dynamic_length_is_refused_as_stored_and_runs_resized() {
    let bytes = AlignedBytes::read_file(dir().join("dynamic_length.tflite")).unwrap();
    let model = Model::from_bytes(&bytes).unwrap();
    let input = &model.tensors()[model.inputs()[0].tensor];
    assert_eq!(input.shape, [1, 1]);
    assert_eq!(input.shape_signature.as_deref(), Some(&[1, -1][..]));
    // As stored ([1, 1]) the first convolution's filter (5, VALID) does not fit.
    assert!(Interpreter::new(&model).is_err());

    // Resized before preparing, then resized again on the interpreter, and back.
    let first = model.resized(0, &[1, LENGTHS[0]]).unwrap();
    let mut it = Interpreter::new(&first).unwrap();
    check_length(&mut it, LENGTHS[0]);
    let small_arena = it.arena_bytes();
    it.resize_input(0, &[1, LENGTHS[1]]).unwrap();
    assert!(it.arena_bytes() > small_arena);
    check_length(&mut it, LENGTHS[1]);
    it.resize_input(0, &[1, LENGTHS[0]]).unwrap();
    check_length(&mut it, LENGTHS[0]);

    // Only the -1 dimension may change; a failed resize leaves the interpreter as it was.
    let err = it.resize_input(0, &[2, LENGTHS[0]]).unwrap_err();
    assert!(format!("{err}").contains("only -1 dimensions"), "{err}");
    assert!(it.resize_input(0, &[1, LENGTHS[0], 1]).is_err());
    assert!(it.resize_input(1, &[1, 8]).is_err());
    assert!(it.resize_input(0, &[1, 1]).is_err());
    check_length(&mut it, LENGTHS[0]);
}

#[test]
fn dynamic_length_in_an_app_arena() {
    let bytes = AlignedBytes::read_file(dir().join("dynamic_length.tflite")).unwrap();
    let model = Model::from_bytes(&bytes).unwrap();
    let long = model.resized(0, &[1, LENGTHS[1]]).unwrap();
    let need = Interpreter::new(&long).unwrap().arena_bytes();
    let first = model.resized(0, &[1, LENGTHS[0]]).unwrap();

    // An arena sized for the short input cannot take the long one: an error, nothing changes.
    let short_need = Interpreter::new(&first).unwrap().arena_bytes();
    let mut small = vec![0u8; short_need + 16];
    let mut it = Interpreter::with_arena(&first, &mut small).unwrap();
    let err = it.resize_input(0, &[1, LENGTHS[1]]).unwrap_err();
    assert!(format!("{err}").contains("arena"), "{err}");
    check_length(&mut it, LENGTHS[0]);

    // One sized for the long input takes both.
    let mut big = vec![0u8; need + 16];
    let mut it = Interpreter::with_arena(&first, &mut big).unwrap();
    check_length(&mut it, LENGTHS[0]);
    it.resize_input(0, &[1, LENGTHS[1]]).unwrap();
    check_length(&mut it, LENGTHS[1]);
}

/// LiteRT's output after each of the committed frames of `streaming_state`, one per invoke.
#[cfg(feature = "ops-variables")]
fn streaming_steps() -> (Vec<Vec<u8>>, Vec<Vec<f32>>) {
    let frames = read_npy(&dir().join("streaming_state.input0.npy"));
    let want = read_npy(&dir().join("streaming_state.litert.npy"));
    let steps = frames.shape[0];
    assert_eq!(want.shape[0], steps);
    let frame_bytes = frames.data.len() / steps;
    let want = f32s(&want.data);
    let per_step = want.len() / steps;
    (
        frames
            .data
            .chunks(frame_bytes)
            .map(<[u8]>::to_vec)
            .collect(),
        want.chunks(per_step).map(<[f32]>::to_vec).collect(),
    )
}

/// Runs `frames` from the interpreter's current state, comparing each output with LiteRT's.
#[cfg(feature = "ops-variables")]
fn run_steps(it: &mut Interpreter<'_>, frames: &[Vec<u8>], want: &[Vec<f32>]) {
    for (step, (x, w)) in frames.iter().zip(want).enumerate() {
        it.input_by_name("frame")
            .unwrap()
            .bytes_mut()
            .copy_from_slice(x);
        it.invoke().unwrap();
        let out = it.output_by_name("scores").unwrap();
        let r = max_rel(out.as_f32().unwrap(), w);
        assert!(r <= 1e-5, "step {step}: {r}");
    }
}

#[cfg(feature = "ops-variables")]
#[test]
fn streaming_state_matches_litert_every_step_and_restarts_after_reset() {
    let bytes = AlignedBytes::read_file(dir().join("streaming_state.tflite")).unwrap();
    let model = Model::from_bytes(&bytes).unwrap();
    assert!(
        model.subgraph_count() >= 2,
        "TensorFlow initialises variables in a subgraph"
    );
    let names: Vec<String> = model.operators().iter().map(|o| o.name()).collect();
    for op in [
        "CALL_ONCE",
        "VAR_HANDLE",
        "READ_VARIABLE",
        "ASSIGN_VARIABLE",
    ] {
        assert!(names.iter().any(|n| n == op), "{op} not in {names:?}");
    }
    let (frames, want) = streaming_steps();
    assert_eq!(frames.len(), 50);

    let mut it = Interpreter::new(&model).unwrap();
    assert_eq!(it.variable_count(), 1);
    run_steps(&mut it, &frames, &want);
    // Reset: the sequence starts over from the variables' initial values.
    it.reset_variables();
    run_steps(&mut it, &frames[..10], &want[..10]);
    // Without a reset the state goes on: the first frame again gives another output.
    it.input_by_name("frame")
        .unwrap()
        .bytes_mut()
        .copy_from_slice(&frames[0]);
    it.invoke().unwrap();
    let out = it.output_by_name("scores").unwrap();
    assert!(max_rel(out.as_f32().unwrap(), &want[0]) > 1e-3);
}
