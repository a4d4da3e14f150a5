//! Prints, for each model file given, its size, the activation arena literun plans for it and the
//! constant data it prepares once (dequantized weights): the RAM an app needs besides the model.
//!
//!     cargo run -p literun --example arena -- literun/examples/models/*.lite

use literun::{AlignedBytes, Interpreter, Model};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "{:<44} {:>10} {:>12} {:>10}",
        "model", "file bytes", "arena bytes", "prepacked"
    );
    for path in std::env::args().skip(1) {
        let bytes = AlignedBytes::read_file(&path)?;
        let model = Model::from_bytes(&bytes)?;
        let it = Interpreter::new(&model)?;
        println!(
            "{:<44} {:>10} {:>12} {:>10}",
            path,
            bytes.len(),
            it.arena_bytes(),
            it.prepacked_bytes()
        );
    }
    Ok(())
}
