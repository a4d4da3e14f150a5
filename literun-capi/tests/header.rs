//! `include/literun.h` must be what cbindgen generates from `src/lib.rs` now.
//! `LITERUN_BLESS=1 cargo test -p literun-capi --test header` rewrites it.

use std::path::Path;

#[test]
fn header_is_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).unwrap();
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen failed")
        .write(&mut generated);
    let generated = String::from_utf8(generated).unwrap();
    let path = dir.join("include/literun.h");
    if std::env::var_os("LITERUN_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is out of date: run `LITERUN_BLESS=1 cargo test -p literun-capi --test header` and commit it",
        path.display()
    );
}
