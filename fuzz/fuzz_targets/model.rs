//! Any bytes → `Model::from_bytes` → `Interpreter::new` → fill inputs → `invoke` → read outputs.
//! Every step must return `Ok` or `Err`: no panic, no UB, no allocation the file does not justify.
#![no_main]

use libfuzzer_sys::fuzz_target;
use literun::{AlignedBytes, Interpreter, Model};

/// Skip running models whose tensors add up to more than this: big models are legitimate (their
/// cost is what they claim, bounded by literun's own limits, which tests check), but they only make
/// the fuzzer slow.
const MAX_RUN_BYTES: usize = 8 << 20;

fuzz_target!(|data: &[u8]| {
    let bytes = AlignedBytes::from_slice(data);
    let Ok(model) = Model::from_bytes(&bytes) else {
        return;
    };
    let total: usize = model
        .tensors()
        .iter()
        .fold(0usize, |a, t| a.saturating_add(t.bytes));
    if total > MAX_RUN_BYTES {
        return;
    }
    let Ok(mut interp) = Interpreter::new(&model) else {
        return;
    };
    // Inputs: the fuzz data again, from its end, so mutations steer values too.
    let n = interp.inputs().len();
    let mut k = data.len();
    for i in 0..n {
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
            let o = interp.output(i).expect("output of a model that ran");
            std::hint::black_box(o.bytes());
        }
    }
});
