//! The checked-in `include/simfa.h` is what cbindgen makes of the crate
//! now: CI fails when someone changes the ABI and forgets the header.
//! `SIMFA_BLESS=1` rewrites it instead of failing.

use std::path::Path;

#[test]
fn header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).unwrap();
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen runs");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let path = crate_dir.join("../include/simfa.h");
    if std::env::var_os("SIMFA_BLESS").is_some() {
        std::fs::write(&path, &fresh).unwrap();
        return;
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == fresh,
        "include/simfa.h is stale: run `SIMFA_BLESS=1 cargo test -p simfa-ffi --test header` and commit it"
    );
}
