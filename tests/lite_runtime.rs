//! `litecvt run`'s runner on files TensorFlow's converter wrote: inputs given by the signature key
//! or by the tensor name LiteRT shows.

use litecvt::npy;
use litecvt::runtime::run_lite;
use std::path::PathBuf;

fn tf_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/tf")
        .join(name)
}

#[test]
fn inputs_resolve_by_signature_key_and_tensor_name() {
    let bytes = std::fs::read(tf_fixture("cnn_float.tflite")).unwrap();
    let input = npy::read(&tf_fixture("cnn_float.input0.npy")).unwrap();
    let by_key = run_lite(
        &bytes,
        "cnn_float",
        &[(Some("image".into()), input.clone())],
    )
    .unwrap();
    let by_tensor = run_lite(
        &bytes,
        "cnn_float",
        &[(Some("serving_default_image:0".into()), input.clone())],
    )
    .unwrap();
    assert_eq!(by_key[0].1.data, by_tensor[0].1.data);
    let err = run_lite(&bytes, "cnn_float", &[(Some("nope".into()), input)]).unwrap_err();
    assert!(format!("{err}").contains("no input named 'nope'"), "{err}");
}

#[test]
fn inputs_of_another_length_resize_the_model() {
    let bytes = std::fs::read(tf_fixture("dynamic_length.tflite")).unwrap();
    for n in [64, 203] {
        let input = npy::read(&tf_fixture(&format!("dynamic_length.len{n}.input0.npy"))).unwrap();
        let want = npy::read(&tf_fixture(&format!("dynamic_length.len{n}.litert.npy"))).unwrap();
        let got = run_lite(&bytes, "dynamic_length", &[(None, input)]).unwrap();
        assert_eq!(got[0].1.shape, want.shape);
        for (a, b) in got[0].1.to_f32().iter().zip(want.to_f32()) {
            assert!(
                (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                "len {n}: {a} vs {b}"
            );
        }
    }
    // A fixed dimension cannot change.
    let input = litecvt::npy::NpyArray::f32(vec![2, 64], vec![0.0; 128]);
    let err = run_lite(&bytes, "dynamic_length", &[(None, input)]).unwrap_err();
    assert!(format!("{err}").contains("only -1 dimensions"), "{err}");
}
