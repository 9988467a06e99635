//! Errors in the TOML input files the std shim reads besides
//! configurations (sweep plans, `simfa gemm --tune` spaces): the file, the
//! line, the key and what is wrong, printed `FILE:LINE: key: message`.

/// A TOML input file that cannot be used: the file, the line, the key and
/// why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {key}: {message}")]
pub struct FileError {
    /// The file.
    pub file: String,
    /// 1-based line of the offending entry (1 when the file is unreadable).
    pub line: usize,
    /// The key (an axis key, `workload`, `gpu`, `tiles`, ...).
    pub key: String,
    /// What is wrong.
    pub message: String,
}

/// A TOML file's parse error (`text` read from `file`) as a [`FileError`]:
/// its line, the field serde names in its message (else `whole`, what the
/// file is) and the message.
pub(crate) fn toml_error(text: &str, file: &str, e: &toml::de::Error, whole: &str) -> FileError {
    let at = e.span().map_or(0, |s| s.start);
    let message = e.message().trim().replace('\n', "; ");
    // The key the error's line assigns, else the field serde names in
    // its message (a missing field's table), else the file.
    let line = text[..at.min(text.len())].rsplit('\n').next().unwrap_or("");
    let assigned = text[at.min(text.len()) - line.len()..]
        .split(['=', '\n'])
        .next()
        .map(str::trim)
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_alphanumeric() || "_-.".contains(c)));
    let named = message
        .split('`')
        .nth(1)
        .filter(|k| k.chars().all(|c| c.is_alphanumeric() || c == '_'));
    let key = assigned.or(named).unwrap_or(whole).to_string();
    FileError {
        file: file.to_string(),
        line: crate::config::line_col(text, at).0,
        key,
        message,
    }
}

/// The text of the `what` file at `path` (`what` names it in errors, e.g.
/// `plan`) and its name as errors give it.
pub(crate) fn read(path: &std::path::Path, what: &str) -> Result<(String, String), FileError> {
    let file = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => Ok((text, file)),
        Err(e) => Err(FileError {
            file,
            line: 1,
            key: what.into(),
            message: format!("cannot read the {what}: {e}"),
        }),
    }
}
