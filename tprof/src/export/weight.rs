//! The name a frame goes by in every stack-shaped export.

use crate::Function;

/// The name of a frame: `module::name` (`module::<Type as Trait>::method`).
pub(super) fn frame_name(function: &Function) -> String {
    if function.module.is_empty() {
        function.name.clone()
    } else {
        format!("{}::{}", function.module, function.name)
    }
}
