//! A model file mapped into memory rather than read, so the pages of weights literun has
//! prepacked can go back to the OS and the weights are not held twice
//! ([`literun::Interpreter::with_options_releasing`]).

use anyhow::{Context, Result};
use std::cell::RefCell;
use std::ops::Range;
use std::path::Path;

/// Bytes between two released parts that are released with them when they hold no constant
/// data ([`ModelFile::set_constants`]): the flatbuffer length prefixes, `Buffer` tables and
/// alignment padding between constant buffers (litecvt writes the constants' data together),
/// which literun reads only while loading. Without this, the page two weights share would stay
/// resident though neither is read again. (Dropping a page of a shared read-only file mapping
/// is always safe: a later read brings the same bytes back from the file.)
const GAP: usize = 256;

/// A model file's bytes: mapped (Unix), or read into aligned memory elsewhere.
pub struct ModelFile {
    #[cfg(unix)]
    map: memmap2::Mmap,
    #[cfg(not(unix))]
    bytes: literun::AlignedBytes,
    /// Byte ranges given back so far, sorted and merged (across gaps up to [`GAP`]).
    released: RefCell<Vec<Range<usize>>>,
    /// The model's constant data, sorted: a gap holding any of it is not released.
    constants: RefCell<Option<Vec<Range<usize>>>>,
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
            // Pages are given back one by one; a huge page-cache folio mapped whole (the kernel
            // can hold a freshly written file in 2 MiB folios) would bring 2 MiB back for one
            // byte read. A hint: where the OS has no such advice, nothing changes.
            #[cfg(target_os = "linux")]
            let _ = map.advise(memmap2::Advice::NoHugePage);
            Ok(ModelFile {
                map,
                released: RefCell::default(),
                constants: RefCell::default(),
            })
        }
        #[cfg(not(unix))]
        {
            let bytes = literun::AlignedBytes::read_file(path)
                .map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
            Ok(ModelFile {
                bytes,
                released: RefCell::default(),
                constants: RefCell::default(),
            })
        }
    }

    /// The whole file (page-aligned when mapped).
    pub fn bytes(&self) -> &[u8] {
        #[cfg(unix)]
        return &self.map;
        #[cfg(not(unix))]
        return &self.bytes;
    }

    /// Where the model's constant data lies (each `Some` a sub-slice of
    /// [`bytes`](Self::bytes)): [`release`](Self::release) then also gives back the small gaps
    /// between released parts that hold none of it. Without this, only the parts' own pages go.
    pub fn set_constants<'a>(&self, parts: impl IntoIterator<Item = &'a [u8]>) {
        let base = self.bytes().as_ptr() as usize;
        let mut ranges: Vec<Range<usize>> = parts
            .into_iter()
            .map(|p| {
                let start = (p.as_ptr() as usize).wrapping_sub(base);
                start..start.saturating_add(p.len())
            })
            .collect();
        ranges.sort_by_key(|r| r.start);
        *self.constants.borrow_mut() = Some(ranges);
    }

    /// Whether bytes `gap` may be released with the parts on either side.
    fn gap_is_free(&self, gap: Range<usize>) -> bool {
        let constants = self.constants.borrow();
        let Some(constants) = constants.as_ref() else {
            return gap.is_empty();
        };
        if gap.len() > GAP {
            return false;
        }
        // The constants starting before the gap's end; any of them reaching into it holds it.
        let before_end = constants.partition_point(|c| c.start < gap.end);
        !constants[..before_end]
            .iter()
            .any(|c| c.end > gap.start && !c.is_empty())
    }

    /// Gives the whole pages inside `part` (a sub-slice of [`bytes`](Self::bytes), else
    /// nothing happens) back to the OS, together with the pages it now fills with earlier
    /// released parts (see [`GAP`]); reading them again brings the same bytes back from the
    /// file. Returns the bytes newly released. Does nothing when the file was read, not mapped.
    pub fn release(&self, part: &[u8]) -> usize {
        let base = self.bytes().as_ptr() as usize;
        let start = (part.as_ptr() as usize).wrapping_sub(base);
        let Some(end) = start
            .checked_add(part.len())
            .filter(|&e| e <= self.bytes().len())
        else {
            return 0;
        };
        if !cfg!(unix) || start == end {
            return 0;
        }
        let mut ranges = self.released.borrow_mut();
        let before = whole_pages(&ranges);
        // Merge `start..end` with every range it overlaps or is separated from by a free gap.
        let mut merged = start..end;
        ranges.retain(|r| {
            let gap = merged.end.min(r.end)..merged.start.max(r.start);
            let near = gap.is_empty() || self.gap_is_free(gap);
            if near {
                merged = merged.start.min(r.start)..merged.end.max(r.end);
            }
            !near
        });
        let at = ranges.partition_point(|r| r.start < merged.start);
        ranges.insert(at, merged.clone());
        let pages = page_range(&merged);
        // (A part with no whole page of its own stays recorded: it is given back, and its
        // bytes join the gaps later parts may release.)
        if !pages.is_empty() && !self.drop_pages(pages) {
            ranges.remove(at);
            return 0;
        }
        whole_pages(&ranges) - before
    }

    /// After the interpreter is prepared, gives back every whole page that holds no constant
    /// still read at run time (one of [`set_constants`](Self::set_constants) that was never
    /// [`release`](Self::release)d): the file's metadata (tensor tables, names, per-channel
    /// scales) is read while loading and preparing only. A later read of such a page brings it
    /// back from the file. Returns the bytes newly released; nothing without `set_constants`
    /// (what is read at run time is then unknown).
    pub fn release_unread(&self) -> usize {
        let (len, constants) = (self.bytes().len(), self.constants.borrow());
        let Some(constants) = constants.as_ref() else {
            return 0;
        };
        if !cfg!(unix) || len == 0 {
            return 0;
        }
        let pages = len.div_ceil(PAGE);
        let mut ranges = self.released.borrow_mut();
        // Pages held: those of the constants still read, and the last, partial one (a
        // mapping's tail past the file's end cannot be dropped on its own).
        let mut held = vec![false; pages];
        held[pages - 1] = len % PAGE != 0;
        for c in constants {
            let given_back = ranges.iter().any(|r| r.start <= c.start && c.end <= r.end);
            if c.is_empty() || c.start >= len || given_back {
                continue;
            }
            held[c.start / PAGE..c.end.min(len).div_ceil(PAGE)].fill(true);
        }
        let mut released = vec![false; pages];
        for r in ranges.iter() {
            let p = page_range(r);
            released[p.start / PAGE..p.end / PAGE].fill(true);
        }
        let mut newly = 0;
        let mut p = 0;
        while p < pages {
            if held[p] {
                p += 1;
                continue;
            }
            let run = p..(p..pages).find(|&q| held[q]).unwrap_or(pages);
            if self.drop_pages(run.start * PAGE..run.end * PAGE) {
                newly += released[run.clone()].iter().filter(|&&r| !r).count() * PAGE;
                ranges.push(run.start * PAGE..run.end * PAGE);
            }
            p = run.end;
        }
        ranges.sort_by_key(|r| r.start);
        newly
    }

    /// Drops the mapped pages `pages` (page-aligned offsets); whether the OS did.
    fn drop_pages(&self, pages: Range<usize>) -> bool {
        #[cfg(unix)]
        {
            // SAFETY: the mapping is shared, read-only and backed by the file, so dropping its
            // pages cannot change what any later read of them sees: the same bytes fault back in
            // from the file (this is not so for private or anonymous memory, which would read as
            // zeros; this type only maps files that way).
            unsafe {
                self.map
                    .unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        pages.start,
                        pages.len(),
                    )
                    .is_ok()
            }
        }
        #[cfg(not(unix))]
        {
            let _ = pages;
            false
        }
    }
}

const PAGE: usize = 4096;

/// The whole pages inside `r`. (The mapping starts on a page boundary; 4 KiB divides every
/// page size, and where pages are larger the OS refuses the range and nothing is released.)
fn page_range(r: &Range<usize>) -> Range<usize> {
    let (first, last) = (r.start.div_ceil(PAGE) * PAGE, r.end / PAGE * PAGE);
    first..last.max(first)
}

/// Bytes of the whole pages inside `ranges`.
fn whole_pages(ranges: &[Range<usize>]) -> usize {
    ranges.iter().map(|r| page_range(r).len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_pages_read_back_the_same_bytes() {
        let dir = std::env::temp_dir().join(format!("literun-tools-mapped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.bin");
        let data: Vec<u8> = (0..9 * 4096 + 123).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let f = ModelFile::open(&path).unwrap();
        assert_eq!(f.bytes(), &data[..]);
        let pages = |n: usize| if cfg!(unix) { n * 4096 } else { 0 };
        let (a, b, c, d) = (
            &f.bytes()[100..3 * 4096 + 5],
            &f.bytes()[3 * 4096 + 10..4 * 4096 + 2000],
            // Page 4 holds the end of `b` and the start of `c` (a small gap between them, as
            // between two weight buffers).
            &f.bytes()[4 * 4096 + 2100..6 * 4096 + 50],
            // Page 7 holds `d`, a small constant that is read at run time, and `e`.
            &f.bytes()[6 * 4096 + 100..7 * 4096 + 1000],
        );
        let kept = &f.bytes()[7 * 4096 + 1050..7 * 4096 + 1100];
        let e = &f.bytes()[7 * 4096 + 1150..9 * 4096];
        f.set_constants([a, b, c, d, kept, e]);
        // Bytes 100 .. 3*4096+5 hold whole pages 1 and 2.
        assert_eq!(f.release(a), pages(2));
        // Pages 3 (the gap before `b` and `b` itself)...
        assert_eq!(f.release(b), pages(1));
        // ... then 4 (shared by `b` and `c`) and 5.
        assert_eq!(f.release(c), pages(2));
        assert_eq!(f.release(d), pages(1));
        // Page 7 stays: `kept` is in the (small) gap between `d` and `e`; page 8 goes.
        assert_eq!(f.release(e), pages(1));
        // Released again: nothing new. Not a part of the file: nothing.
        assert_eq!(f.release(&f.bytes()[4 * 4096..4 * 4096 + 8]), 0);
        assert_eq!(f.release(&data[..]), 0);
        // Then everything but the page of `kept` (a constant never released: still read) and
        // the file's partial last page: only page 0 (before `a`) was not released yet.
        assert_eq!(f.release_unread(), pages(1));
        assert_eq!(f.release_unread(), 0);
        assert_eq!(f.bytes(), &data[..]);
        drop(f);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
