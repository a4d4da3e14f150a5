//! The firmware builds literun with only the digits model's kernels (int8 CONV_2D,
//! FULLY_CONNECTED, shape and quantize ops). A model that needs anything else must fail cleanly
//! with `Error::Unsupported` naming the operators and the missing feature, never panic.
//! Runs on the host: `cargo test -p literun-firmware`.

use literun::{AlignedBytes, Error, Interpreter, Model};

fn load(name: &str) -> AlignedBytes {
    let path = format!(
        "{}/../../literun/examples/models/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    AlignedBytes::from_slice(&std::fs::read(&path).unwrap())
}

/// Whether literun was built with the firmware's features only (building this crate together
/// with other workspace members, e.g. `cargo test --workspace`, unifies literun's features).
fn firmware_features() -> bool {
    let selective = !literun::ops::feature_enabled("ops-float");
    if !selective {
        eprintln!("skipped: literun was built with more features than the firmware selects");
    }
    selective
}

fn unsupported(e: Error) -> Vec<(usize, String)> {
    match e {
        Error::Unsupported(ops) => ops.into_iter().map(|o| (o.index, o.op)).collect(),
        other => panic!("expected Error::Unsupported, got {other}"),
    }
}

#[test]
fn the_digits_int8_model_runs() {
    let bytes = load("digits_cnn.int8.lite");
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.invoke().unwrap();
}

/// Operator families that are compiled out fail when the model is loaded.
#[test]
fn families_compiled_out_fail_at_load() {
    if !firmware_features() {
        return;
    }
    let bytes = load("attention_block.int8.lite");
    let ops = unsupported(Model::from_bytes(&bytes).unwrap_err());
    let names: Vec<&str> = ops.iter().map(|(_, o)| o.as_str()).collect();
    for want in [
        "SOFTMAX (feature ops-softmax is off)",
        "MEAN (feature ops-reduce is off)",
        "ADD (feature ops-elementwise is off)",
    ] {
        assert!(names.contains(&want), "{want} not in {names:?}");
    }
    // Compiled-in families are not listed.
    assert!(
        !names.iter().any(|n| n.starts_with("FULLY_CONNECTED")),
        "{names:?}"
    );
    let shown = Error::Unsupported(vec![]).to_string();
    assert!(shown.starts_with("unsupported operators"));
}

/// Element types that are compiled out fail when the interpreter is prepared.
#[test]
fn float_kernels_compiled_out_fail_at_prepare() {
    if !firmware_features() {
        return;
    }
    let bytes = load("digits_cnn.lite");
    let model = Model::from_bytes(&bytes).unwrap();
    let ops = unsupported(Interpreter::new(&model).err().unwrap());
    assert!(!ops.is_empty());
    for (i, op) in &ops {
        assert!(op.ends_with("(feature ops-float is off)"), "#{i} {op}");
    }
    let names: Vec<&str> = ops.iter().map(|(_, o)| o.as_str()).collect();
    assert!(
        names.contains(&"CONV_2D (feature ops-float is off)"),
        "{names:?}"
    );
    assert!(
        names.contains(&"FULLY_CONNECTED (feature ops-float is off)"),
        "{names:?}"
    );
}
