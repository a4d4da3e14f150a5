//! `LITERUN_TOOLS_BUILD_ID`: a hash of the sources of literun and these tools, so `litecvt
//! bench` only hands a model to a `literun-bench` built from the same code as itself (a stale
//! one left beside it would measure an older literun).

use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::path::Path;

fn hash_dir(dir: &Path, h: &mut DefaultHasher) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            hash_dir(&p, h);
        } else if let Ok(bytes) = std::fs::read(&p) {
            h.write(p.to_string_lossy().as_bytes());
            h.write(&bytes);
        }
    }
}

fn main() {
    let mut h = DefaultHasher::new();
    for dir in [
        "src",
        "../literun/src",
        "../literun/Cargo.toml",
        "Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={dir}");
        let p = Path::new(dir);
        if p.is_dir() {
            hash_dir(p, &mut h);
        } else if let Ok(bytes) = std::fs::read(p) {
            h.write(&bytes);
        }
    }
    // Sources only: a `literun-bench` built for another target or profile from the same code
    // (a static one for measuring memory, docs/performance.md) measures the same literun.
    println!("cargo:rustc-env=LITERUN_TOOLS_BUILD_ID={:016x}", h.finish());
}
