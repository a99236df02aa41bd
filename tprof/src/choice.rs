//! A command-line choice: one of an option's names, parsed case-insensitively, and the error
//! that names the choices when it is none of them. Shared by the reports' options (the flat
//! tables' sort, the sample report's layout) and the commands that read them: it uses no
//! other module.

use std::fmt;

/// A command-line value that is not one of an option's choices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionError {
    /// The option.
    pub option: &'static str,
    /// What was given.
    pub input: String,
    /// The choices.
    pub expected: &'static str,
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a {} choice: expected {}",
            self.input, self.option, self.expected
        )
    }
}

impl std::error::Error for OptionError {}

/// Parses `input` as one of `choices` (each a name and its value), for [`OptionError`]'s
/// `option` with `expected` listing them.
pub(crate) fn choose<T: Copy>(
    input: &str,
    option: &'static str,
    expected: &'static str,
    choices: &[(&str, T)],
) -> Result<T, OptionError> {
    let wanted = input.trim().trim_start_matches(':').to_ascii_lowercase();
    choices
        .iter()
        .find(|(name, _)| *name == wanted)
        .map(|(_, v)| *v)
        .ok_or_else(|| OptionError {
            option,
            input: input.to_owned(),
            expected,
        })
}
