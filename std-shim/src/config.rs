//! GPU configuration files (TOML).
