//! Untrusted model files: crafted files that claim huge sizes must give `Err` quickly (no huge
//! allocation), and every input the fuzzer (`fuzz/`) ever crashed on must now give `Ok` or `Err`.

use literun::{AlignedBytes, Interpreter, Model};

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
