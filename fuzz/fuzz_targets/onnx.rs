//! Any bytes → the converter (`litecvt::convert::convert_bytes`: ONNX import, optimization passes,
//! export, then literun's own verification and preparation of the written file).
//! It must return `Ok` or `Err`: no panic, no allocation the file does not justify, no hang.
//! An error must name the file it is about.
#![no_main]

use libfuzzer_sys::fuzz_target;
use litecvt::convert::{convert_bytes, ConvertOptions};

fuzz_target!(|data: &[u8]| {
    if let Err(e) = convert_bytes(data, "fuzz.onnx", &ConvertOptions::default()) {
        let msg = format!("{e:#}");
        assert!(
            msg.contains("fuzz.onnx"),
            "error without the file name: {msg}"
        );
    }
});
