//! A tiny, fully bounds-checked reader for FlatBuffers tables.
//!
//! The schema's `BuiltinOptions` union lists only some TFLite option tables; the verifier skips
//! union members it does not know, so their bytes are unverified. Rather than following them
//! with the generated (unchecked) accessors, literun reads option tables with this reader, where
//! every access is checked and a malformed table is an error, never a panic.

use alloc::vec::Vec;

/// Why a raw read failed.
pub(crate) type RawResult<T> = core::result::Result<T, &'static str>;

fn bytes<const N: usize>(buf: &[u8], pos: usize) -> RawResult<[u8; N]> {
    let end = pos.checked_add(N).ok_or("offset overflow")?;
    let s = buf.get(pos..end).ok_or("offset out of range")?;
    let mut out = [0u8; N];
    out.copy_from_slice(s);
    Ok(out)
}

fn read_u16(buf: &[u8], pos: usize) -> RawResult<u16> {
    Ok(u16::from_le_bytes(bytes::<2>(buf, pos)?))
}

fn read_u32(buf: &[u8], pos: usize) -> RawResult<u32> {
    Ok(u32::from_le_bytes(bytes::<4>(buf, pos)?))
}

/// A table at a position in a buffer, with its vtable located and bounds-checked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawTable<'a> {
    buf: &'a [u8],
    loc: usize,
    vt: usize,
    vt_len: usize,
}

#[allow(dead_code)]
impl<'a> RawTable<'a> {
    /// The table at `loc` in `buf`.
    pub(crate) fn new(buf: &'a [u8], loc: usize) -> RawResult<Self> {
        let soff = i32::from_le_bytes(bytes::<4>(buf, loc)?);
        let vt = i64::try_from(loc).map_err(|_| "offset overflow")? - i64::from(soff);
        let vt = usize::try_from(vt).map_err(|_| "vtable out of range")?;
        let vt_len = usize::from(read_u16(buf, vt)?);
        if vt_len < 4 || vt.checked_add(vt_len).is_none_or(|e| e > buf.len()) {
            return Err("bad vtable");
        }
        Ok(RawTable {
            buf,
            loc,
            vt,
            vt_len,
        })
    }

    /// The position of a field's value, `None` when absent.
    fn field(&self, voff: u16) -> RawResult<Option<usize>> {
        let voff = usize::from(voff);
        if voff + 2 > self.vt_len {
            return Ok(None);
        }
        let o = read_u16(self.buf, self.vt + voff)?;
        if o == 0 {
            return Ok(None);
        }
        Ok(Some(
            self.loc
                .checked_add(usize::from(o))
                .ok_or("offset overflow")?,
        ))
    }

    pub(crate) fn u8(&self, voff: u16, default: u8) -> RawResult<u8> {
        match self.field(voff)? {
            None => Ok(default),
            Some(p) => Ok(bytes::<1>(self.buf, p)?[0]),
        }
    }

    pub(crate) fn i8(&self, voff: u16, default: i8) -> RawResult<i8> {
        Ok(self.u8(voff, default as u8)? as i8)
    }

    pub(crate) fn bool(&self, voff: u16, default: bool) -> RawResult<bool> {
        Ok(self.u8(voff, u8::from(default))? != 0)
    }

    pub(crate) fn i32(&self, voff: u16, default: i32) -> RawResult<i32> {
        match self.field(voff)? {
            None => Ok(default),
            Some(p) => Ok(i32::from_le_bytes(bytes::<4>(self.buf, p)?)),
        }
    }

    pub(crate) fn f32(&self, voff: u16, default: f32) -> RawResult<f32> {
        match self.field(voff)? {
            None => Ok(default),
            Some(p) => Ok(f32::from_le_bytes(bytes::<4>(self.buf, p)?)),
        }
    }

    /// Follows an offset field to a sub-table.
    pub(crate) fn table(&self, voff: u16) -> RawResult<Option<RawTable<'a>>> {
        match self.field(voff)? {
            None => Ok(None),
            Some(p) => {
                let off = read_u32(self.buf, p)? as usize;
                let target = p.checked_add(off).ok_or("offset overflow")?;
                Ok(Some(RawTable::new(self.buf, target)?))
            }
        }
    }

    /// Reads a `string` field (UTF-8, borrowed from the buffer), `None` when absent.
    #[cfg_attr(not(feature = "ops-variables"), allow(dead_code))]
    pub(crate) fn str(&self, voff: u16) -> RawResult<Option<&'a str>> {
        let Some(p) = self.field(voff)? else {
            return Ok(None);
        };
        let off = read_u32(self.buf, p)? as usize;
        let spos = p.checked_add(off).ok_or("offset overflow")?;
        let len = read_u32(self.buf, spos)? as usize;
        let start = spos + 4;
        let end = start.checked_add(len).ok_or("string length overflow")?;
        let data = self.buf.get(start..end).ok_or("string out of range")?;
        core::str::from_utf8(data)
            .map(Some)
            .map_err(|_| "string is not UTF-8")
    }

    /// Reads a `[int]` field (copied out), `None` when absent.
    pub(crate) fn vec_i32(&self, voff: u16) -> RawResult<Option<Vec<i32>>> {
        let Some(p) = self.field(voff)? else {
            return Ok(None);
        };
        let off = read_u32(self.buf, p)? as usize;
        let vpos = p.checked_add(off).ok_or("offset overflow")?;
        let len = read_u32(self.buf, vpos)? as usize;
        let start = vpos + 4;
        let end = len
            .checked_mul(4)
            .and_then(|n| n.checked_add(start))
            .ok_or("vector length overflow")?;
        let data = self.buf.get(start..end).ok_or("vector out of range")?;
        Ok(Some(
            data.chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_never_panics() {
        let mut seed = 12345u32;
        for len in 0..64usize {
            let buf: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
                    (seed >> 24) as u8
                })
                .collect();
            for loc in 0..len + 2 {
                if let Ok(t) = RawTable::new(&buf, loc) {
                    for v in (4..20).step_by(2) {
                        let _ = t.i32(v, 0);
                        let _ = t.f32(v, 0.0);
                        let _ = t.u8(v, 0);
                        let _ = t.vec_i32(v);
                        let _ = t.table(v);
                        let _ = t.str(v);
                    }
                }
            }
        }
    }

    #[test]
    fn reads_a_table() {
        // table at 8: soffset 8 -> vtable at 0: [vt_len=8, tbl_len=8, f0 at +4, f1 absent]
        let mut buf = alloc::vec![8u8, 0, 8, 0, 4, 0, 0, 0];
        buf.extend_from_slice(&8i32.to_le_bytes());
        buf.extend_from_slice(&7i32.to_le_bytes());
        let t = RawTable::new(&buf, 8).unwrap();
        assert_eq!(t.i32(4, 0), Ok(7));
        assert_eq!(t.i32(6, 9), Ok(9));
        assert_eq!(t.i32(30, 5), Ok(5));
    }
}
