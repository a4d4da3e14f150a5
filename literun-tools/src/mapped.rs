//! A model file mapped into memory rather than read, so the pages of weights literun has
//! prepacked can go back to the OS and the weights are not held twice
//! ([`literun::Interpreter::with_options_releasing`]).

use anyhow::{Context, Result};
use std::path::Path;

/// A model file's bytes: mapped (Unix), or read into aligned memory elsewhere.
pub struct ModelFile {
    #[cfg(unix)]
    map: memmap2::Mmap,
    #[cfg(not(unix))]
    bytes: literun::AlignedBytes,
}

impl ModelFile {
    pub fn open(path: &Path) -> Result<ModelFile> {
        let label = path.display();
        #[cfg(unix)]
        {
            let file = std::fs::File::open(path).with_context(|| format!("cannot read {label}"))?;
            // SAFETY: a zero-copy view of the file. The mapping is read-only; if another process
            // rewrote or truncated the file while it is mapped, reads could see other bytes or
            // fault (as with any tool that maps its model, LiteRT included). litecvt and
            // literun-bench map files they are about to benchmark and do not change them.
            let map = unsafe { memmap2::Mmap::map(&file) }
                .with_context(|| format!("cannot map {label}"))?;
            Ok(ModelFile { map })
        }
        #[cfg(not(unix))]
        {
            let bytes = literun::AlignedBytes::read_file(path)
                .map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
            Ok(ModelFile { bytes })
        }
    }

    /// The whole file (page-aligned when mapped).
    pub fn bytes(&self) -> &[u8] {
        #[cfg(unix)]
        return &self.map;
        #[cfg(not(unix))]
        return &self.bytes;
    }

    /// Gives the whole pages inside `part` (a sub-slice of [`bytes`](Self::bytes), else
    /// nothing happens) back to the OS; reading them again brings the same bytes back from the
    /// file. Returns the bytes released. Does nothing when the file was read, not mapped.
    pub fn release(&self, part: &[u8]) -> usize {
        #[cfg(unix)]
        {
            const PAGE: usize = 4096;
            let base = self.map.as_ptr() as usize;
            let start = (part.as_ptr() as usize).wrapping_sub(base);
            let Some(end) = start
                .checked_add(part.len())
                .filter(|&e| e <= self.map.len())
            else {
                return 0;
            };
            // Whole pages only: the partial ones at either end hold other data. (The mapping
            // starts on a page boundary; 4 KiB divides every page size.)
            let (first, last) = (start.div_ceil(PAGE) * PAGE, end / PAGE * PAGE);
            if first >= last {
                return 0;
            }
            // SAFETY: the mapping is shared, read-only and backed by the file, so dropping its
            // pages cannot change what any later read of them sees: the same bytes fault back in
            // from the file (this is not so for private or anonymous memory, which would read as
            // zeros; this type only maps files that way).
            let dropped = unsafe {
                self.map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    first,
                    last - first,
                )
            };
            if dropped.is_ok() {
                return last - first;
            }
        }
        let _ = part;
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_pages_read_back_the_same_bytes() {
        let dir = std::env::temp_dir().join(format!("literun-tools-mapped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.bin");
        let data: Vec<u8> = (0..5 * 4096 + 123).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let f = ModelFile::open(&path).unwrap();
        assert_eq!(f.bytes(), &data[..]);
        // Bytes 100 .. 3*4096+5 hold whole pages 1 and 2.
        let released = f.release(&f.bytes()[100..3 * 4096 + 5]);
        if cfg!(unix) {
            assert_eq!(released, 2 * 4096);
        }
        // Not a part of the file: nothing.
        assert_eq!(f.release(&data[..]), 0);
        assert_eq!(f.bytes(), &data[..]);
        drop(f);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
