//! What the int8 kernel tests share: a seeded generator, int8 parameters, one-operator models run
//! in float and int8 (optionally dumped for `tests/litert_compare.py`), and the step-bound check.

use super::ModelBuilder;
use literun::schema::TensorType;
use literun::{AlignedBytes, Interpreter, Model};

pub struct Rng(pub u64);
impl Rng {
    pub fn f(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    pub fn i8s(&mut self, n: usize) -> Vec<i8> {
        (0..n).map(|_| (self.f() * 127.9).floor() as i8).collect()
    }
    pub fn f32s(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.f() * scale).collect()
    }
}

/// Asymmetric int8 parameters covering `[lo, hi]` (and 0).
pub fn qparams(lo: f32, hi: f32) -> (f32, i64) {
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    let scale = ((hi - lo) / 255.0).max(1e-6);
    let zp = (-128.0 - lo / scale).round().clamp(-128.0, 127.0) as i64;
    (scale, zp)
}

pub fn deq(q: &[i8], scale: f32, zp: i64) -> Vec<f32> {
    q.iter().map(|&v| scale * (v as i64 - zp) as f32).collect()
}

pub fn range(v: &[f32]) -> (f32, f32) {
    v.iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        })
}

/// With `LITERUN_DUMP_DIR` set, every model run here is written there (`<n>.tflite` and
/// `<n>.json` with the inputs and literun's output) for `tests/litert_compare.py`, which runs
/// the same files with LiteRT and reports the differences.
pub fn dump<T: std::fmt::Display>(bytes: &[u8], dtype: &str, inputs: &[Vec<String>], out: &[T]) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let Ok(dir) = std::env::var("LITERUN_DUMP_DIR") else {
        return;
    };
    let name = std::thread::current()
        .name()
        .unwrap_or("t")
        .replace("::", "_");
    let n = N.fetch_add(1, Ordering::SeqCst);
    let base = format!("{dir}/{name}_{n}");
    std::fs::write(format!("{base}.tflite"), bytes).unwrap();
    let ins: Vec<String> = inputs
        .iter()
        .map(|v| format!("[{}]", v.join(",")))
        .collect();
    let outs: Vec<String> = out.iter().map(|v| v.to_string()).collect();
    std::fs::write(
        format!("{base}.json"),
        format!(
            "{{\"dtype\":\"{dtype}\",\"inputs\":[{}],\"output\":[{}]}}",
            ins.join(","),
            outs.join(",")
        ),
    )
    .unwrap();
}

pub fn run_f32(bytes: &AlignedBytes, inputs: &[&[f32]]) -> Vec<f32> {
    let model = Model::from_bytes(bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    for (k, x) in inputs.iter().enumerate() {
        it.input_f32_mut(k).unwrap().copy_from_slice(x);
    }
    it.invoke().unwrap();
    let out = it.output(0).unwrap().as_f32().unwrap().to_vec();
    // JSON (as Python reads it) spells the non-finite values Infinity and NaN.
    let f = |x: &f32| {
        if x.is_nan() {
            "NaN".to_string()
        } else if x.is_infinite() {
            if *x > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
        } else {
            format!("{x:e}")
        }
    };
    let ins: Vec<Vec<String>> = inputs.iter().map(|v| v.iter().map(f).collect()).collect();
    let outs: Vec<String> = out.iter().map(f).collect();
    dump(bytes, "float32", &ins, &outs);
    out
}

pub fn run_i8(bytes: &AlignedBytes, inputs: &[&[i8]]) -> Vec<i8> {
    let model = Model::from_bytes(bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    for (k, x) in inputs.iter().enumerate() {
        it.input_mut(k)
            .unwrap()
            .as_i8_mut()
            .unwrap()
            .copy_from_slice(x);
    }
    it.invoke().unwrap();
    let out = it.output(0).unwrap().as_i8().unwrap().to_vec();
    let ins: Vec<Vec<String>> = inputs
        .iter()
        .map(|v| v.iter().map(|x| x.to_string()).collect())
        .collect();
    dump(bytes, "int8", &ins, &out);
    out
}

/// Asserts the dequantized int8 output is within `steps` output steps of the float output
/// (clamped to the representable range).
pub fn check(name: &str, got: &[i8], out_scale: f32, out_zp: i64, want: &[f32], steps: f32) {
    assert_eq!(got.len(), want.len());
    let lo = out_scale * (-128 - out_zp) as f32;
    let hi = out_scale * (127 - out_zp) as f32;
    let mut worst = 0.0f32;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = out_scale * (g as i64 - out_zp) as f32;
        let d = (g - w.clamp(lo, hi)).abs() / out_scale;
        worst = worst.max(d);
        assert!(
            d <= steps + 1e-3,
            "{name}: element {i}: int8 gives {g}, float {w} ({d} steps, scale {out_scale})"
        );
    }
    // The comparison must be able to fail: a wrong result is many steps off somewhere.
    assert!(worst.is_finite());
}

/// A tensor that is float or int8 depending on the model being built.
pub fn act(m: &mut ModelBuilder, q: bool, name: &str, shape: &[i32], p: (f32, i64)) -> i32 {
    if q {
        m.q(name, shape, TensorType::INT8, p.0, p.1)
    } else {
        m.f32(name, shape)
    }
}

/// Interpreter creation must fail (not panic) with a message containing `needle`.
pub fn expect_err(bytes: &AlignedBytes, needle: &str) {
    let model = Model::from_bytes(bytes).unwrap();
    let e = Interpreter::new(&model).err().expect("accepted");
    assert!(e.to_string().contains(needle), "{e}");
}
