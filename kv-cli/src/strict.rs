//! `kv estimate --strict`: no figure from rules kv has not been checked on.

use std::path::Path;

use crate::input::Problem;

/// `--strict`: a config kv sized by its generic rules (a family it has not
/// been checked on) is refused, naming why (exit 1: the input, not the
/// usage).
pub fn refuse_unverified(
    file: &Path,
    estimate: &kv_engines::estimate::Estimate,
) -> Result<(), Problem> {
    match &estimate.unverified_family {
        Some(why) => Err(Problem::new(
            file,
            format!(
                "{why}, so kv would size it by its generic rules, unverified for this \
                 family; --strict refuses it (without --strict the estimate is printed and \
                 says so)"
            ),
        )),
        None => Ok(()),
    }
}
