//! Arbitrary bytes into the TOML configuration reader: a validated
//! configuration or an error that names the origin, never a panic; an
//! accepted configuration, written out in full under its own preset, reads
//! back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use simfa_std::config::config_from_bytes;

fuzz_target!(|data: &[u8]| {
    match config_from_bytes(data, "fuzz.toml") {
        Err(e) => assert!(e.to_string().starts_with("fuzz.toml"), "{e}"),
        Ok(cfg) => {
            cfg.validate().expect("an accepted configuration is valid");
            let mut table = match toml::Value::try_from(&cfg).expect("serialises") {
                toml::Value::Table(t) => t,
                _ => unreachable!("a struct serialises to a table"),
            };
            table.insert("preset".into(), toml::Value::String("h800".into()));
            let text = toml::to_string(&table).expect("prints");
            let again = config_from_bytes(text.as_bytes(), "again.toml")
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(again, cfg);
        }
    }
});
