//! GPU configuration files (TOML).
//!
//! A configuration file names a preset and overrides any field of
//! [`GpuConfig`], nested ones included:
//!
//! ```toml
//! preset = "h800"
//! name = "mygpu"
//! scheduler = "lrr"
//! wgmma_cycles_per_n = { num = 1, den = 2 }
//!
//! [port]
//! latency = 400
//! ```
//!
//! The preset is serialised to a TOML table, the file's table is merged into
//! it key by key (a key the preset does not have is an error naming its full
//! path), and the result is deserialised and validated. Every error names the
//! file and, where there is one, the key.

use std::path::Path;

use simfa_core::{GpuConfig, PRESETS};
use toml::Value;

/// Why a configuration file (or preset name) could not be turned into a
/// [`GpuConfig`]. Every variant names its origin (usually the file path).
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file could not be read.
    #[error("{origin}: cannot read configuration: {source}")]
    Io {
        /// The file.
        origin: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid TOML.
    #[error("{origin}:{line}:{col}: invalid TOML: {message}")]
    Syntax {
        /// The file.
        origin: String,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in characters) of the error.
        col: usize,
        /// The parser's message.
        message: String,
    },
    /// The required `preset` key is absent.
    #[error("{origin}: missing key 'preset' (one of: {valid})")]
    MissingPreset {
        /// The file.
        origin: String,
        /// The valid preset names, comma-separated.
        valid: String,
    },
    /// The named preset does not exist.
    #[error("{origin}: unknown preset '{name}' (valid presets: {valid})")]
    UnknownPreset {
        /// The file (or `"--gpu"` for a command-line name).
        origin: String,
        /// The name asked for.
        name: String,
        /// The valid preset names, comma-separated.
        valid: String,
    },
    /// A key that no field of the configuration has.
    #[error("{origin}: unknown key '{key}'")]
    UnknownKey {
        /// The file.
        origin: String,
        /// Full dotted path of the key, e.g. `port.latncy`.
        key: String,
    },
    /// A value of the wrong TOML type.
    #[error("{origin}: key '{key}': expected {expected}, found {found}")]
    WrongType {
        /// The file.
        origin: String,
        /// Full dotted path of the key.
        key: String,
        /// The type the field needs.
        expected: &'static str,
        /// The type found.
        found: &'static str,
    },
    /// A negative number where only non-negative ones make sense.
    #[error("{origin}: key '{key}': must not be negative (found {value})")]
    Negative {
        /// The file.
        origin: String,
        /// Full dotted path of the key.
        key: String,
        /// The value found.
        value: i64,
    },
    /// A NaN or infinite float.
    #[error("{origin}: key '{key}': {value} is not a finite number")]
    NotFinite {
        /// The file.
        origin: String,
        /// Full dotted path of the key.
        key: String,
        /// The value as written (`nan`, `inf`, `-inf`).
        value: String,
    },
    /// A value the field's type cannot hold (too large, too long a name,
    /// unknown enumeration value).
    #[error("{origin}: key '{key}': {message}")]
    BadValue {
        /// The file.
        origin: String,
        /// Full dotted path of the key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The merged configuration failed [`GpuConfig::validate`].
    #[error("{origin}: key '{field}': {problem}")]
    Invalid {
        /// The file.
        origin: String,
        /// The field, as a dotted key path.
        field: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
}

fn valid_presets() -> String {
    PRESETS.join(", ")
}

/// Looks a built-in preset up by name; an unknown name is an error that
/// lists the valid ones.
pub fn preset(name: &str) -> Result<GpuConfig, ConfigFileError> {
    preset_from(name, "--gpu")
}

fn preset_from(name: &str, origin: &str) -> Result<GpuConfig, ConfigFileError> {
    GpuConfig::preset(name).ok_or_else(|| ConfigFileError::UnknownPreset {
        origin: origin.to_string(),
        name: name.to_string(),
        valid: valid_presets(),
    })
}

/// Reads and resolves a TOML configuration file.
pub fn load_config(path: &Path) -> Result<GpuConfig, ConfigFileError> {
    let origin = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| ConfigFileError::Io {
        origin: origin.clone(),
        source,
    })?;
    config_from_bytes(&bytes, &origin)
}

/// Resolves a TOML configuration given as bytes: like
/// [`config_from_toml`], but bytes that are not UTF-8 are a syntax error at
/// the line and column of the first bad byte.
pub fn config_from_bytes(bytes: &[u8], origin: &str) -> Result<GpuConfig, ConfigFileError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => config_from_toml(text, origin),
        Err(e) => {
            let good = std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default();
            let (line, col) = line_col(good, good.len());
            let bad = bytes.get(e.valid_up_to()).copied().unwrap_or(0);
            Err(ConfigFileError::Syntax {
                origin: origin.to_string(),
                line,
                col,
                message: format!("invalid UTF-8: unexpected byte 0x{bad:02x}"),
            })
        }
    }
}

/// Resolves the text of a TOML configuration; `origin` names it in errors.
pub fn config_from_toml(text: &str, origin: &str) -> Result<GpuConfig, ConfigFileError> {
    let user: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let (line, col) = line_col(text, e.span().map_or(0, |s| s.start));
        ConfigFileError::Syntax {
            origin: origin.to_string(),
            line,
            col,
            message: e.message().trim().replace('\n', "; "),
        }
    })?;
    config_from_table(user, origin)
}

/// Resolves a configuration already parsed into a TOML table (a `preset`
/// key and overrides, as in a file); `origin` names it in errors.
pub fn config_from_table(user: toml::Table, origin: &str) -> Result<GpuConfig, ConfigFileError> {
    let mut user = user;
    let preset_name = match user.remove("preset") {
        None => {
            return Err(ConfigFileError::MissingPreset {
                origin: origin.to_string(),
                valid: valid_presets(),
            })
        }
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(ConfigFileError::WrongType {
                origin: origin.to_string(),
                key: "preset".to_string(),
                expected: "a string",
                found: kind(&other),
            })
        }
    };
    let base = preset_from(&preset_name, origin)?;
    let base = Value::try_from(&base).map_err(|e| ConfigFileError::BadValue {
        origin: origin.to_string(),
        key: "preset".to_string(),
        message: format!("cannot represent the preset as TOML: {e}"),
    })?;
    let Value::Table(mut merged) = base.clone() else {
        unreachable!("a struct serialises to a table")
    };
    let mut leaves = Vec::new();
    merge(&mut merged, user, "", origin, &mut leaves)?;
    let cfg = match Value::Table(merged).try_into::<GpuConfig>() {
        Ok(cfg) => cfg,
        Err(e) => return Err(blame(&base, &leaves, origin, e)),
    };
    cfg.validate().map_err(|e| ConfigFileError::Invalid {
        origin: origin.to_string(),
        field: e.field,
        problem: e.problem,
    })?;
    Ok(cfg)
}

/// 1-based line and column of byte offset `at` in `text`.
pub(crate) fn line_col(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date-time",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// A value of an older form, as its key's type now has it:
/// `transaction.arrival_controller` was a boolean before `"auto"`
/// (`true` is `"on"`, `false` is `"off"`).
fn legacy(path: &str, value: Value) -> Value {
    match (path, value) {
        ("transaction.arrival_controller", Value::Boolean(b)) => {
            Value::String(if b { "on" } else { "off" }.to_string())
        }
        (_, value) => value,
    }
}

/// Merges `user` into `base`, checking that every key exists in `base` with
/// a value of the same TOML type, and records the paths of the leaves set.
fn merge(
    base: &mut toml::Table,
    user: toml::Table,
    prefix: &str,
    origin: &str,
    leaves: &mut Vec<(Vec<String>, Value)>,
) -> Result<(), ConfigFileError> {
    for (key, value) in user {
        let path = join(prefix, &key);
        let value = legacy(&path, value);
        let Some(slot) = base.get_mut(&key) else {
            return Err(ConfigFileError::UnknownKey {
                origin: origin.to_string(),
                key: path,
            });
        };
        if let Value::Float(f) = value {
            if !f.is_finite() {
                return Err(ConfigFileError::NotFinite {
                    origin: origin.to_string(),
                    key: path,
                    value: f.to_string(),
                });
            }
        }
        if let (Value::Integer(_), Value::Integer(i)) = (&*slot, &value) {
            if *i < 0 {
                return Err(ConfigFileError::Negative {
                    origin: origin.to_string(),
                    key: path,
                    value: *i,
                });
            }
        }
        if std::mem::discriminant(slot) != std::mem::discriminant(&value) {
            return Err(ConfigFileError::WrongType {
                origin: origin.to_string(),
                key: path,
                expected: kind(slot),
                found: kind(&value),
            });
        }
        match (slot, value) {
            (Value::Table(b), Value::Table(u)) => merge(b, u, &path, origin, leaves)?,
            (slot, value) => {
                leaves.push((path.split('.').map(str::to_string).collect(), value.clone()));
                *slot = value;
            }
        }
    }
    Ok(())
}

/// Finds which overridden key makes deserialisation fail, by applying each
/// override alone to the preset.
fn blame(
    base: &Value,
    leaves: &[(Vec<String>, Value)],
    origin: &str,
    whole: toml::de::Error,
) -> ConfigFileError {
    for (path, value) in leaves {
        let mut one = base.clone();
        let mut slot = &mut one;
        for p in path {
            slot = match slot {
                Value::Table(t) => t.get_mut(p).expect("merge checked the path"),
                _ => unreachable!("merge checked the path"),
            };
        }
        *slot = value.clone();
        if let Err(e) = one.try_into::<GpuConfig>() {
            return ConfigFileError::BadValue {
                origin: origin.to_string(),
                key: path.join("."),
                message: e.message().trim().to_string(),
            };
        }
    }
    ConfigFileError::BadValue {
        origin: origin.to_string(),
        key: leaves
            .iter()
            .map(|(p, _)| p.join("."))
            .collect::<Vec<_>>()
            .join(", "),
        message: whole.message().trim().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use simfa_core::SchedulerPolicy;

    fn err(text: &str) -> ConfigFileError {
        config_from_toml(text, "gpu.toml").unwrap_err()
    }

    /// The test-only fault is neither in serialised presets nor settable
    /// from a file: configurations always load with `Fault::None`.
    #[test]
    fn fault_is_not_a_file_key() {
        let c = config_from_toml("preset = \"h800\"\n", "x.toml").unwrap();
        assert_eq!(c.fault, simfa_core::Fault::None);
        let table = toml::Value::try_from(GpuConfig::h800()).unwrap();
        assert!(table.get("fault").is_none());
        match err("preset = \"h800\"\nfault = \"early_hit\"\n") {
            ConfigFileError::UnknownKey { key, .. } => assert_eq!(key, "fault"),
            e => panic!("expected an unknown key, got {e}"),
        }
    }

    #[test]
    fn preset_only() {
        let c = config_from_toml("preset = \"h20\"\n", "x.toml").unwrap();
        assert_eq!(c, GpuConfig::h20());
    }

    #[test]
    fn overrides_nested_fields() {
        let c = config_from_toml(
            "preset = \"h800\"\nname = \"mygpu\"\nscheduler = \"lrr\"\n\
             wgmma_cycles_per_n = { num = 3, den = 4 }\nsms = 8\n[port]\nlatency = 400\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!(c.name.as_str(), "mygpu");
        assert_eq!(c.scheduler, SchedulerPolicy::Lrr);
        assert_eq!(c.wgmma_cycles_per_n, simfa_core::Ratio::new(3, 4));
        assert_eq!(c.sms, 8);
        assert_eq!(c.port.latency, 400);
        // Untouched fields keep the preset's values.
        assert_eq!(
            c.port.bytes_per_cycle,
            GpuConfig::h800().port.bytes_per_cycle
        );
        assert_eq!(c.clock_mhz, 1830);
    }

    #[test]
    fn partial_nested_table() {
        let c =
            config_from_toml("preset = \"h800\"\n[port.bytes_per_cycle]\nnum = 7\n", "x").unwrap();
        assert_eq!(c.port.bytes_per_cycle.num, 7);
        assert_eq!(
            c.port.bytes_per_cycle.den,
            GpuConfig::h800().port.bytes_per_cycle.den
        );
    }

    #[test]
    fn unknown_key_names_path() {
        let e = err("preset = \"h800\"\n[port]\nlatncy = 400\n");
        assert!(
            matches!(&e, ConfigFileError::UnknownKey { key, .. } if key == "port.latncy"),
            "{e}"
        );
        let s = e.to_string();
        assert!(s.contains("gpu.toml") && s.contains("port.latncy"), "{s}");
        let e = err("preset = \"h800\"\nsmz = 4\n");
        assert!(e.to_string().contains("unknown key 'smz'"), "{e}");
    }

    #[test]
    fn negative_value() {
        let e = err("preset = \"h800\"\n[port]\nlatency = -5\n");
        assert!(
            matches!(&e, ConfigFileError::Negative { key, value: -5, .. } if key == "port.latency"),
            "{e}"
        );
    }

    #[test]
    fn wrong_type() {
        let e = err("preset = \"h800\"\nsms = \"many\"\n");
        assert!(
            matches!(&e, ConfigFileError::WrongType { key, .. } if key == "sms"),
            "{e}"
        );
        let e = err("preset = \"h800\"\nport = 5\n");
        assert!(
            matches!(&e, ConfigFileError::WrongType { key, .. } if key == "port"),
            "{e}"
        );
        let e = err("preset = \"h800\"\nclock_mhz = 1.5\n");
        assert!(
            matches!(&e, ConfigFileError::WrongType { key, .. } if key == "clock_mhz"),
            "{e}"
        );
        let e = err("preset = 3\n");
        assert!(
            matches!(&e, ConfigFileError::WrongType { key, .. } if key == "preset"),
            "{e}"
        );
    }

    #[test]
    fn nan_and_inf() {
        let e = err("preset = \"h800\"\nclock_mhz = nan\n");
        assert!(
            matches!(&e, ConfigFileError::NotFinite { key, .. } if key == "clock_mhz"),
            "{e}"
        );
        let e = err("preset = \"h800\"\n[units]\nfp32 = -inf\n");
        assert!(
            matches!(&e, ConfigFileError::NotFinite { key, .. } if key == "units.fp32"),
            "{e}"
        );
    }

    #[test]
    fn out_of_range_and_bad_values() {
        let e = err("preset = \"h800\"\nsms = 70000\n");
        assert!(
            matches!(&e, ConfigFileError::BadValue { key, .. } if key == "sms"),
            "{e}"
        );
        let e = err("preset = \"h800\"\nname = \"a-name-that-is-far-too-long-for-24\"\n");
        assert!(
            matches!(&e, ConfigFileError::BadValue { key, .. } if key == "name"),
            "{e}"
        );
        let e = err("preset = \"h800\"\nscheduler = \"fifo\"\n");
        assert!(
            matches!(&e, ConfigFileError::BadValue { key, .. } if key == "scheduler"),
            "{e}"
        );
        let e = err("preset = \"h800\"\nwarps_per_sm = 6\n");
        assert!(
            matches!(
                &e,
                ConfigFileError::Invalid {
                    field: "warps_per_sm",
                    ..
                }
            ),
            "{e}"
        );
        let e = err("preset = \"h800\"\nsms = 0\n");
        assert!(e.to_string().contains("gpu.toml: key 'sms'"), "{e}");
    }

    #[test]
    fn presets_and_syntax() {
        assert!(matches!(
            err("sms = 4\n"),
            ConfigFileError::MissingPreset { .. }
        ));
        let e = err("preset = \"a100\"\n");
        assert!(e.to_string().contains("h800-pcie"), "{e}");
        let e = err("preset = \"h800\"\nsms = = 3\n");
        assert!(
            matches!(e, ConfigFileError::Syntax { line: 2, .. }),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("gpu.toml:2:7: "), "{e}");
        assert!(preset("h200").is_ok());
        let e = preset("nosuch").unwrap_err();
        assert!(
            e.to_string().contains("nosuch") && e.to_string().contains("h800"),
            "{e}"
        );
    }

    #[test]
    fn non_utf8_is_located() {
        let e = config_from_bytes(b"preset = \"h800\"\nname = \"\xff\"\n", "gpu.toml").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("gpu.toml:2:9: invalid TOML: invalid UTF-8: unexpected byte 0xff"),
            "{e}"
        );
        assert!(config_from_bytes(b"preset = \"h20\"\n", "x").is_ok());
    }

    #[test]
    fn missing_file() {
        let e = load_config(Path::new("/nonexistent/simfa/gpu.toml")).unwrap_err();
        assert!(matches!(e, ConfigFileError::Io { .. }));
        assert!(e.to_string().contains("/nonexistent/simfa/gpu.toml"));
    }
}
