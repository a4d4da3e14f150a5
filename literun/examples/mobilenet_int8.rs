//! Runs the full-int8 MobileNetV2-style fixture block, embedded in the binary, once, and checks the
//! output bit for bit against literun's x86-64 result. `scripts/footprint.sh` builds it for
//! aarch64 (profile `min-size`, stripped) to measure what literun adds to an app.
//!
//!     cargo run -p literun --example mobilenet_int8 --target aarch64-unknown-linux-gnu

use literun::{Interpreter, Model};

#[repr(C, align(16))]
struct Aligned<T: ?Sized>(T);

/// 16-byte aligned, so literun reads the model in place.
static MODEL: &Aligned<[u8]> = &Aligned(*include_bytes!("models/mobilenetv2_block.int8.lite"));
static INPUT_NPY: &[u8] = include_bytes!("../../fixtures/mobilenetv2_block.input.npy");
static EXPECTED_NPY: &[u8] = include_bytes!("models/mobilenetv2_block.int8.expected.npy");

fn npy_data(npy: &[u8]) -> &[u8] {
    let header = u16::from_le_bytes([npy[8], npy[9]]) as usize;
    &npy[10 + header..]
}

fn main() -> Result<(), literun::Error> {
    let model = Model::from_bytes(&MODEL.0)?;
    let mut it = Interpreter::new(&model)?;
    it.input_mut(0)?
        .bytes_mut()
        .copy_from_slice(npy_data(INPUT_NPY));
    it.invoke()?;
    let out = it.output(0)?;
    let logits = out.as_f32()?;
    let top = (0..logits.len())
        .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
        .unwrap_or(0);
    let exact = out.bytes() == npy_data(EXPECTED_NPY);
    println!(
        "top-1 class {top}, arena {} bytes, bit-exact with x86-64: {exact}",
        it.arena_bytes()
    );
    if !exact {
        std::process::exit(1);
    }
    Ok(())
}
