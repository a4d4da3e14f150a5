//! Reading the committed `.npy` fixture files (inputs, expected outputs) in literun's tests.
#![allow(dead_code)]

use std::path::Path;

/// A `.npy` array: shape, numpy dtype string, little-endian data bytes.
pub struct Npy {
    pub shape: Vec<usize>,
    pub descr: String,
    pub data: Vec<u8>,
}

pub fn read_npy(path: &Path) -> Npy {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&b[..6], b"\x93NUMPY", "{}: not .npy", path.display());
    let (hlen, start) = if b[6] == 1 {
        (u16::from_le_bytes([b[8], b[9]]) as usize, 10)
    } else {
        (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
    };
    let header = std::str::from_utf8(&b[start..start + hlen]).unwrap();
    let field = |key: &str| {
        let i = header.find(key).unwrap() + key.len();
        header[i..].trim_start_matches([' ', ':']).to_string()
    };
    let descr = field("'descr'");
    let descr = descr[1..].split('\'').next().unwrap().to_string();
    assert!(
        field("'fortran_order'").starts_with("False"),
        "{}",
        path.display()
    );
    let shape = field("'shape'");
    let shape = shape[1..shape.find(')').unwrap()]
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().unwrap())
        .collect();
    Npy {
        shape,
        descr,
        data: b[start + hlen..].to_vec(),
    }
}
