//! Minimal `.npy` reading and writing (C order, little-endian; float32/64, int8/32/64, uint8,
//! bool), for the command-line tools' inputs and outputs.

use anyhow::{anyhow, bail, Context, Result};
use std::path::Path;

/// An n-d array read from or written to `.npy`.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    pub shape: Vec<usize>,
    pub data: NpyData,
}

#[derive(Clone, Debug, PartialEq)]
pub enum NpyData {
    F32(Vec<f32>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    Bool(Vec<bool>),
}

impl NpyArray {
    pub fn f32(shape: Vec<usize>, data: Vec<f32>) -> NpyArray {
        NpyArray {
            shape,
            data: NpyData::F32(data),
        }
    }

    /// Element `i` along the first axis, with a leading axis of 1 (one sample of a batch).
    pub fn index_axis0(&self, i: usize) -> NpyArray {
        let per: usize = self.shape.iter().skip(1).product();
        let r = i * per..(i + 1) * per;
        let data = match &self.data {
            NpyData::F32(v) => NpyData::F32(v[r].to_vec()),
            NpyData::I32(v) => NpyData::I32(v[r].to_vec()),
            NpyData::I64(v) => NpyData::I64(v[r].to_vec()),
            NpyData::U8(v) => NpyData::U8(v[r].to_vec()),
            NpyData::I8(v) => NpyData::I8(v[r].to_vec()),
            NpyData::I16(v) => NpyData::I16(v[r].to_vec()),
            NpyData::Bool(v) => NpyData::Bool(v[r].to_vec()),
        };
        let mut shape = self.shape.clone();
        if let Some(d) = shape.first_mut() {
            *d = 1;
        }
        NpyArray { shape, data }
    }

    /// The values as f32 (for comparisons).
    pub fn to_f32(&self) -> Vec<f32> {
        match &self.data {
            NpyData::F32(v) => v.clone(),
            NpyData::I32(v) => v.iter().map(|&x| x as f32).collect(),
            NpyData::I64(v) => v.iter().map(|&x| x as f32).collect(),
            NpyData::U8(v) => v.iter().map(|&x| x as f32).collect(),
            NpyData::I8(v) => v.iter().map(|&x| x as f32).collect(),
            NpyData::I16(v) => v.iter().map(|&x| x as f32).collect(),
            NpyData::Bool(v) => v.iter().map(|&x| x as u8 as f32).collect(),
        }
    }

    pub fn dtype_name(&self) -> &'static str {
        match self.data {
            NpyData::F32(_) => "float32",
            NpyData::I32(_) => "int32",
            NpyData::I64(_) => "int64",
            NpyData::U8(_) => "uint8",
            NpyData::I8(_) => "int8",
            NpyData::I16(_) => "int16",
            NpyData::Bool(_) => "bool",
        }
    }

    /// Writes the data's little-endian bytes to `out` (a tensor's buffer), without a copy of
    /// its own; `false` (and nothing written) when `out` has another length.
    pub fn write_le_bytes(&self, out: &mut [u8]) -> bool {
        fn put<const N: usize, T: Copy>(v: &[T], out: &mut [u8], le: fn(T) -> [u8; N]) -> bool {
            if out.len() != v.len() * N {
                return false;
            }
            for (o, &x) in out.chunks_exact_mut(N).zip(v) {
                o.copy_from_slice(&le(x));
            }
            true
        }
        match &self.data {
            NpyData::F32(v) => put(v, out, f32::to_le_bytes),
            NpyData::I32(v) => put(v, out, i32::to_le_bytes),
            NpyData::I64(v) => put(v, out, i64::to_le_bytes),
            NpyData::U8(v) => put(v, out, |x: u8| [x]),
            NpyData::I8(v) => put(v, out, i8::to_le_bytes),
            NpyData::I16(v) => put(v, out, i16::to_le_bytes),
            NpyData::Bool(v) => put(v, out, |x: bool| [x as u8]),
        }
    }

    /// Little-endian bytes of the data.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match &self.data {
            NpyData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            NpyData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            NpyData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            NpyData::U8(v) => v.clone(),
            NpyData::I8(v) => v.iter().map(|&x| x as u8).collect(),
            NpyData::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            NpyData::Bool(v) => v.iter().map(|&x| x as u8).collect(),
        }
    }
}

/// Parses `.npy` bytes; `label` names the source in errors.
pub fn parse(bytes: &[u8], label: &str) -> Result<NpyArray> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        bail!("{label}: not a .npy file");
    }
    let major = bytes[6];
    let (header_len, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                bail!("{label}: truncated .npy header");
            }
            (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            )
        }
        v => bail!("{label}: unsupported .npy version {v}"),
    };
    let header = bytes
        .get(start..start + header_len)
        .ok_or_else(|| anyhow!("{label}: truncated .npy header"))?;
    let header =
        std::str::from_utf8(header).map_err(|_| anyhow!("{label}: .npy header is not text"))?;
    let field = |key: &str| -> Result<&str> {
        let at = header
            .find(&format!("'{key}'"))
            .ok_or_else(|| anyhow!("{label}: .npy header lacks '{key}'"))?;
        Ok(header[at + key.len() + 2..]
            .trim_start()
            .trim_start_matches(':')
            .trim_start())
    };
    let descr = field("descr")?;
    let descr = descr
        .get(1..)
        .and_then(|d| d.split('\'').next())
        .unwrap_or("");
    if field("fortran_order")?.starts_with("True") {
        bail!("{label}: Fortran-ordered .npy is not supported");
    }
    let shape_text = field("shape")?;
    let shape_text = shape_text
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| anyhow!("{label}: bad shape in .npy header"))?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| anyhow!("{label}: bad shape in .npy header"))
        })
        .collect::<Result<Vec<_>>>()?;
    let count = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| anyhow!("{label}: shape too large"))?;
    let body = &bytes[start + header_len..];
    let take = |size: usize| -> Result<&[u8]> {
        let n = count
            .checked_mul(size)
            .ok_or_else(|| anyhow!("{label}: shape too large"))?;
        body.get(..n)
            .ok_or_else(|| anyhow!("{label}: expected {n} bytes of data, found {}", body.len()))
    };
    let data = match descr {
        "<f4" => NpyData::F32(
            take(4)?
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        // float16 (e.g. calibration sets stored at half the size) widens to float32
        "<f2" => NpyData::F32(
            take(2)?
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
        ),
        "<f8" => NpyData::F32(
            take(8)?
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()) as f32)
                .collect(),
        ),
        "<i4" => NpyData::I32(
            take(4)?
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        "<i8" => NpyData::I64(
            take(8)?
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        "|u1" => NpyData::U8(take(1)?.to_vec()),
        "|i1" => NpyData::I8(take(1)?.iter().map(|&b| b as i8).collect()),
        "<i2" => NpyData::I16(
            take(2)?
                .chunks_exact(2)
                .map(|c| i16::from_le_bytes([c[0], c[1]]))
                .collect(),
        ),
        "|b1" => NpyData::Bool(take(1)?.iter().map(|&b| b != 0).collect()),
        other => bail!("{label}: unsupported .npy dtype '{other}'"),
    };
    Ok(NpyArray { shape, data })
}

pub fn read(path: &Path) -> Result<NpyArray> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse(&bytes, &path.display().to_string())
}

/// Serializes to `.npy` (version 1.0).
pub fn to_bytes(a: &NpyArray) -> Vec<u8> {
    let descr = match a.data {
        NpyData::F32(_) => "<f4",
        NpyData::I32(_) => "<i4",
        NpyData::I64(_) => "<i8",
        NpyData::U8(_) => "|u1",
        NpyData::I8(_) => "|i1",
        NpyData::I16(_) => "<i2",
        NpyData::Bool(_) => "|b1",
    };
    let shape = match a.shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", a.shape[0]),
        _ => format!(
            "({})",
            a.shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(a.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_each_dtype() {
        for a in [
            NpyArray::f32(vec![2, 3], vec![1.0, -2.5, 3.0, 0.0, 5.5, 6.0]),
            NpyArray {
                shape: vec![3],
                data: NpyData::I64(vec![1, -2, 3]),
            },
            NpyArray {
                shape: vec![],
                data: NpyData::I32(vec![7]),
            },
            NpyArray {
                shape: vec![2],
                data: NpyData::Bool(vec![true, false]),
            },
        ] {
            assert_eq!(parse(&to_bytes(&a), "t").unwrap(), a);
        }
    }

    #[test]
    fn rejects_garbage_and_truncation() {
        assert!(parse(b"hello", "t").is_err());
        let good = to_bytes(&NpyArray::f32(vec![4], vec![1.0; 4]));
        assert!(parse(&good[..good.len() - 1], "t").is_err());
        assert!(parse(&good[..20], "t").is_err());
    }

    #[test]
    fn float16_widens_to_float32_and_batches_split() {
        // np.save of np.array([[1.0, -2.5], [0.099975586, 65504.0]], np.float16)
        let header = "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 2), }";
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        for v in [1.0f32, -2.5, 0.099975586, 65504.0] {
            bytes.extend_from_slice(&half::f16::from_f32(v).to_le_bytes());
        }
        let a = parse(&bytes, "t").unwrap();
        assert_eq!(
            a,
            NpyArray::f32(vec![2, 2], vec![1.0, -2.5, 0.099975586, 65504.0])
        );
        assert_eq!(
            a.index_axis0(1),
            NpyArray::f32(vec![1, 2], vec![0.099975586, 65504.0])
        );
    }
}
