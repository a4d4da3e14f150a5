//! `.npy` arrays (the shared reader and writer in `literun_tools::npy`), `.npz` archives, and
//! atomic writes.

pub use literun_tools::npy::*;

use anyhow::{Context, Result};
use std::path::Path;

/// Reads every array of a `.npz` (a zip of `.npy` files, stored or deflated), with the names
/// numpy gave them (`x.npy` → `x`), in archive order.
pub fn read_npz(path: &Path) -> Result<Vec<(String, NpyArray)>> {
    use std::io::Read;
    let label = path.display().to_string();
    let file = std::fs::File::open(path).with_context(|| format!("cannot read {label}"))?;
    let mut zip =
        zip::ZipArchive::new(file).with_context(|| format!("{label}: not a .npz (zip) file"))?;
    let mut out = Vec::new();
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .with_context(|| format!("{label}: entry {i}"))?;
        let name = entry.name().trim_end_matches(".npy").to_string();
        // The declared size bounds the allocation; the npy parser checks the rest.
        let mut bytes = Vec::with_capacity((entry.size() as usize).min(1 << 30));
        entry
            .read_to_end(&mut bytes)
            .with_context(|| format!("{label}: cannot read '{name}'"))?;
        out.push((name.clone(), parse(&bytes, &format!("{label}[{name}]"))?));
    }
    Ok(out)
}

/// Writes atomically (temp file, then rename).
pub fn write(path: &Path, a: &NpyArray) -> Result<()> {
    crate::util::write_atomic(path, &to_bytes(a))
}
