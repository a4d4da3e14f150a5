//! The C API from Rust: null checks, bad arguments and bad models give statuses and messages,
//! never a crash; a fixture model runs and matches its expected output.

use literun_capi::*;
use std::ffi::CStr;
use std::ptr;

fn model_bytes() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../literun/examples/models/digits_cnn.int8.lite"
    ))
    .unwrap()
}

fn npy_data(path: &str) -> Vec<u8> {
    let b = std::fs::read(path).unwrap();
    let h = u16::from_le_bytes([b[8], b[9]]) as usize;
    b[10 + h..].to_vec()
}

fn blank() -> LiterunTensorInfo {
    LiterunTensorInfo {
        name: ptr::null(),
        dtype: LiterunDtype::Float32,
        rank: 0,
        dims: [0; LITERUN_MAX_RANK],
        bytes: 0,
        scale: 0.0,
        zero_point: 0,
    }
}

fn last_error() -> String {
    unsafe { CStr::from_ptr(literun_last_error()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn runs_a_fixture_model() {
    let bytes = model_bytes();
    // Misaligned on purpose: the API copies into aligned memory.
    let mut shifted = vec![0u8; bytes.len() + 1];
    shifted[1..].copy_from_slice(&bytes);
    let mut it = ptr::null_mut();
    unsafe {
        assert_eq!(
            literun_interpreter_create(shifted[1..].as_ptr(), bytes.len(), &mut it),
            LiterunStatus::Ok
        );
        drop(shifted);
        assert_eq!(literun_input_count(it), 1);
        assert_eq!(literun_output_count(it), 1);
        let mut info = blank();
        assert_eq!(literun_input_info(it, 0, &mut info), LiterunStatus::Ok);
        assert_eq!(CStr::from_ptr(info.name).to_str().unwrap(), "input");
        assert_eq!(info.dtype, LiterunDtype::Float32);
        assert_eq!(&info.dims[..info.rank], &[1, 1, 8, 8]);
        assert_eq!(info.bytes, 256);
        let x = npy_data("../fixtures/digits_cnn.input.npy");
        assert_eq!(
            literun_set_input(it, 0, x.as_ptr().cast(), x.len()),
            LiterunStatus::Ok
        );
        assert_eq!(literun_invoke(it), LiterunStatus::Ok);
        let want = npy_data("../literun/examples/models/digits_cnn.int8.expected.npy");
        let mut y = vec![0u8; want.len()];
        assert_eq!(
            literun_get_output(it, 0, y.as_mut_ptr().cast(), y.len()),
            LiterunStatus::Ok
        );
        assert_eq!(y, want);
        let (mut p, mut n) = (ptr::null(), 0usize);
        assert_eq!(
            literun_output_data(it, 0, &mut p, &mut n),
            LiterunStatus::Ok
        );
        assert_eq!(std::slice::from_raw_parts(p.cast::<u8>(), n), &want[..]);

        // Bad arguments.
        assert_eq!(
            literun_input_info(it, 1, &mut info),
            LiterunStatus::BadArgument
        );
        assert!(last_error().contains("no input 1"), "{}", last_error());
        assert_eq!(
            literun_set_input(it, 0, x.as_ptr().cast(), x.len() - 1),
            LiterunStatus::BadArgument
        );
        assert_eq!(
            literun_get_output(it, 3, y.as_mut_ptr().cast(), y.len()),
            LiterunStatus::BadArgument
        );
        assert_eq!(
            literun_set_input(it, 0, ptr::null(), 4),
            LiterunStatus::NullArgument
        );
        assert_eq!(
            literun_get_output(it, 0, ptr::null_mut(), 4),
            LiterunStatus::NullArgument
        );
        assert_eq!(
            literun_output_data(it, 0, ptr::null_mut(), &mut n),
            LiterunStatus::NullArgument
        );
        assert_eq!(
            literun_input_info(it, 0, ptr::null_mut()),
            LiterunStatus::NullArgument
        );
        literun_interpreter_destroy(it);
    }
}

#[test]
fn names_resolve_by_signature_key_and_tensor_name() {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/tf/cnn_float.tflite"
    ))
    .unwrap();
    let mut it = ptr::null_mut();
    unsafe {
        assert_eq!(
            literun_interpreter_create(bytes.as_ptr(), bytes.len(), &mut it),
            LiterunStatus::Ok
        );
        let mut i = usize::MAX;
        assert_eq!(
            literun_input_index(it, c"image".as_ptr(), &mut i),
            LiterunStatus::Ok
        );
        assert_eq!(i, 0);
        i = usize::MAX;
        let tensor_name = c"serving_default_image:0";
        assert_eq!(
            literun_input_index(it, tensor_name.as_ptr(), &mut i),
            LiterunStatus::Ok
        );
        assert_eq!(i, 0);
        i = usize::MAX;
        assert_eq!(
            literun_output_index(it, c"output_0".as_ptr(), &mut i),
            LiterunStatus::Ok
        );
        assert_eq!(i, 0);
        i = usize::MAX;
        let out_name = c"StatefulPartitionedCall_1:0";
        assert_eq!(
            literun_output_index(it, out_name.as_ptr(), &mut i),
            LiterunStatus::Ok
        );
        assert_eq!(i, 0);
        assert_eq!(
            literun_input_index(it, c"nope".as_ptr(), &mut i),
            LiterunStatus::BadArgument
        );
        assert!(last_error().contains("no input named"), "{}", last_error());
        assert_eq!(
            literun_input_index(it, ptr::null(), &mut i),
            LiterunStatus::NullArgument
        );
        assert_eq!(
            literun_output_index(ptr::null(), c"x".as_ptr(), &mut i),
            LiterunStatus::NullArgument
        );
        literun_interpreter_destroy(it);
    }
}

#[test]
fn resize_input_follows_the_shape_signature() {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/tf/ops_float.tflite"
    ))
    .unwrap();
    let mut it = ptr::null_mut();
    unsafe {
        assert_eq!(
            literun_interpreter_create(bytes.as_ptr(), bytes.len(), &mut it),
            LiterunStatus::Ok
        );
        let mut info = blank();
        // Both inputs have a dynamic batch ([-1, 6, 8] and [-1, 8, 5]).
        assert_eq!(
            literun_resize_input(it, 0, [3, 6, 8].as_ptr(), 3),
            LiterunStatus::Ok
        );
        assert_eq!(
            literun_resize_input(it, 1, [3, 8, 5].as_ptr(), 3),
            LiterunStatus::Ok
        );
        assert_eq!(literun_input_info(it, 0, &mut info), LiterunStatus::Ok);
        assert_eq!(&info.dims[..info.rank], &[3, 6, 8]);
        assert_eq!(literun_output_info(it, 0, &mut info), LiterunStatus::Ok);
        assert_eq!(info.dims[0], 3);
        let x = vec![0.5f32; 3 * 6 * 8];
        assert_eq!(
            literun_set_input(it, 0, x.as_ptr().cast(), x.len() * 4),
            LiterunStatus::Ok
        );
        let y = vec![0.25f32; 3 * 8 * 5];
        assert_eq!(
            literun_set_input(it, 1, y.as_ptr().cast(), y.len() * 4),
            LiterunStatus::Ok
        );
        assert_eq!(literun_invoke(it), LiterunStatus::Ok, "{}", last_error());
        // A fixed dimension cannot change.
        assert_eq!(
            literun_resize_input(it, 0, [3, 7, 8].as_ptr(), 3),
            LiterunStatus::BadArgument
        );
        assert!(last_error().contains("only -1"), "{}", last_error());
        assert_eq!(
            literun_resize_input(it, 0, ptr::null(), 3),
            LiterunStatus::NullArgument
        );
        literun_interpreter_destroy(it);
    }
}

/// A streaming model (TensorFlow-made, state in resource variables): the same frame gives a
/// different output once the state has moved, and the first output again after a reset.
#[test]
fn reset_variables_starts_a_stream_over() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/tf/");
    let bytes = std::fs::read(format!("{root}streaming_state.tflite")).unwrap();
    let frames = npy_data(&format!("{root}streaming_state.input0.npy"));
    let mut it = ptr::null_mut();
    unsafe {
        assert_eq!(
            literun_interpreter_create(bytes.as_ptr(), bytes.len(), &mut it),
            LiterunStatus::Ok,
            "{}",
            last_error()
        );
        let mut info = blank();
        assert_eq!(literun_input_info(it, 0, &mut info), LiterunStatus::Ok);
        let frame = &frames[..info.bytes];
        assert_eq!(literun_output_info(it, 0, &mut info), LiterunStatus::Ok);
        let step = |it| {
            let mut out = vec![0u8; info.bytes];
            assert_eq!(
                literun_set_input(it, 0, frame.as_ptr().cast(), frame.len()),
                LiterunStatus::Ok
            );
            assert_eq!(literun_invoke(it), LiterunStatus::Ok, "{}", last_error());
            assert_eq!(
                literun_get_output(it, 0, out.as_mut_ptr().cast(), out.len()),
                LiterunStatus::Ok
            );
            out
        };
        let first = step(it);
        let mut moved = step(it);
        for _ in 0..2 {
            moved = step(it);
        }
        assert_ne!(first, moved, "the state should change the output");
        assert_eq!(literun_reset_variables(it), LiterunStatus::Ok);
        assert_eq!(step(it), first);
        assert_eq!(
            literun_reset_variables(ptr::null_mut()),
            LiterunStatus::NullArgument
        );
        literun_interpreter_destroy(it);
    }
}

/// TensorFlow's `control_float` (a WHILE of four passes on its committed input) runs under a
/// limit of four passes and fails with a runtime status naming the WHILE under three.
#[test]
fn while_passes_are_limited() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/tf/");
    let bytes = std::fs::read(format!("{root}control_float.tflite")).unwrap();
    let x = npy_data(&format!("{root}control_float.input0.npy"));
    let mut it = ptr::null_mut();
    unsafe {
        assert_eq!(
            literun_interpreter_create(bytes.as_ptr(), bytes.len(), &mut it),
            LiterunStatus::Ok,
            "{}",
            last_error()
        );
        let run = |it, limit| {
            assert_eq!(
                literun_set_max_while_iterations(it, limit),
                LiterunStatus::Ok
            );
            assert_eq!(
                literun_set_input(it, 0, x.as_ptr().cast(), x.len()),
                LiterunStatus::Ok
            );
            literun_invoke(it)
        };
        assert_eq!(run(it, 4), LiterunStatus::Ok, "{}", last_error());
        assert_eq!(run(it, 3), LiterunStatus::Runtime);
        assert!(last_error().contains("WHILE"), "{}", last_error());
        assert_eq!(
            literun_set_max_while_iterations(ptr::null_mut(), 1),
            LiterunStatus::NullArgument
        );
        literun_interpreter_destroy(it);
    }
}

#[test]
fn a_model_that_only_runs_resized_is_created_with_its_shape() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/tf/");
    let bytes = std::fs::read(format!("{root}dynamic_length.tflite")).unwrap();
    let mut it = ptr::null_mut();
    unsafe {
        // As stored ([1, 1]) its first convolution cannot be prepared.
        assert_ne!(
            literun_interpreter_create(bytes.as_ptr(), bytes.len(), &mut it),
            LiterunStatus::Ok
        );
        let mut dims = [0; LITERUN_MAX_RANK];
        dims[..2].copy_from_slice(&[1, 64]);
        let shape = LiterunInputShape {
            index: 0,
            rank: 2,
            dims,
        };
        assert_eq!(
            literun_interpreter_create_with_shapes(bytes.as_ptr(), bytes.len(), &shape, 1, &mut it),
            LiterunStatus::Ok,
            "{}",
            last_error()
        );
        let x = npy_data(&format!("{root}dynamic_length.len64.input0.npy"));
        assert_eq!(
            literun_set_input(it, 0, x.as_ptr().cast(), x.len()),
            LiterunStatus::Ok
        );
        assert_eq!(literun_invoke(it), LiterunStatus::Ok);
        let want = npy_data(&format!("{root}dynamic_length.len64.litert.npy"));
        let mut got = vec![0u8; want.len()];
        assert_eq!(
            literun_get_output(it, 0, got.as_mut_ptr().cast(), got.len()),
            LiterunStatus::Ok
        );
        for (a, b) in got.chunks(4).zip(want.chunks(4)) {
            let (a, b) = (
                f32::from_le_bytes(a.try_into().unwrap()),
                f32::from_le_bytes(b.try_into().unwrap()),
            );
            assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{a} vs {b}");
        }
        // And then resized on the interpreter.
        let x = npy_data(&format!("{root}dynamic_length.len203.input0.npy"));
        assert_eq!(
            literun_resize_input(it, 0, [1, 203].as_ptr(), 2),
            LiterunStatus::Ok
        );
        assert_eq!(
            literun_set_input(it, 0, x.as_ptr().cast(), x.len()),
            LiterunStatus::Ok
        );
        assert_eq!(literun_invoke(it), LiterunStatus::Ok);
        literun_interpreter_destroy(it);
        let bad = LiterunInputShape {
            index: 0,
            rank: 9,
            dims,
        };
        assert_eq!(
            literun_interpreter_create_with_shapes(bytes.as_ptr(), bytes.len(), &bad, 1, &mut it),
            LiterunStatus::BadArgument
        );
        assert!(it.is_null());
    }
}

#[test]
fn null_interpreter_everywhere() {
    unsafe {
        let mut info = blank();
        let null = ptr::null_mut();
        assert_eq!(literun_input_count(null), 0);
        assert_eq!(literun_output_count(null), 0);
        assert_eq!(literun_arena_bytes(null), 0);
        assert_eq!(
            literun_input_info(null, 0, &mut info),
            LiterunStatus::NullArgument
        );
        assert_eq!(
            literun_output_info(null, 0, &mut info),
            LiterunStatus::NullArgument
        );
        assert_eq!(literun_invoke(null), LiterunStatus::NullArgument);
        assert!(last_error().contains("interpreter is NULL"));
        assert_eq!(
            literun_set_input(null, 0, [0u8; 4].as_ptr().cast(), 4),
            LiterunStatus::NullArgument
        );
        literun_interpreter_destroy(null);
        assert_eq!(
            literun_interpreter_create(ptr::null(), 0, ptr::null_mut()),
            LiterunStatus::NullArgument
        );
        let mut it = ptr::null_mut();
        assert_eq!(
            literun_interpreter_create(ptr::null(), 10, &mut it),
            LiterunStatus::NullArgument
        );
        assert!(it.is_null());
        let name = CStr::from_ptr(literun_status_name(2));
        assert_eq!(name.to_str().unwrap(), "LITERUN_STATUS_INVALID_MODEL");
        assert_eq!(
            CStr::from_ptr(literun_status_name(99)).to_str().unwrap(),
            "?"
        );
    }
}

#[test]
fn corrupted_models_are_errors() {
    let bytes = model_bytes();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for trial in 0..300 {
        let mut b = bytes.clone();
        if trial % 3 == 0 {
            b.truncate(next() as usize % b.len());
        } else {
            for _ in 0..1 + trial % 8 {
                let i = next() as usize % b.len();
                b[i] = next() as u8;
            }
        }
        let mut it = ptr::null_mut();
        let s = unsafe { literun_interpreter_create(b.as_ptr(), b.len(), &mut it) };
        assert_ne!(s, LiterunStatus::Panic, "trial {trial}: {}", last_error());
        if s == LiterunStatus::Ok {
            // Whatever survived verification must run or fail cleanly.
            let s = unsafe { literun_invoke(it) };
            assert_ne!(s, LiterunStatus::Panic, "trial {trial}: {}", last_error());
        } else {
            assert!(it.is_null());
            assert!(!last_error().is_empty());
        }
        unsafe { literun_interpreter_destroy(it) };
    }
}
