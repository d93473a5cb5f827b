//! The tables of a config file whose paths are files next to it (`[notify]`, `[github]`,
//! a client `[profile.NAME]`): each says how its relative paths are taken from the file's
//! directory.

use std::path::Path;

/// A table whose paths are files next to the config file (`[notify]`, `[github]`, a
/// client's `[profile.NAME]`, which also expands a leading `~`).
pub trait RelativePaths {
    /// Takes each relative path from `base`, the config file's directory.
    fn resolve_paths(&mut self, base: &Path);
}
