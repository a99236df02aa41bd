//! `json`: the [`Profile`] itself, through serde.
//!
//! The schema is the model's: an object with `trace_type` (`"call_count"`, `"call_time"` or
//! `"call_memory"`), `functions` (each a `function` — `module`, `name`, `arity`, `file`,
//! `line` — and its `entries`: `group` (`"all"` or a pid such as `"<1.5.0>"`), `calls`,
//! `measurement` (calls, nanoseconds or words), `bytes`, `blocks`), `percentiles`,
//! `processes` (`pid`, `name`, `initial_call`, `run`), `function_table`, `call_tree`
//! (`nodes`: `parent`, `function`; `entries`: `group`, `node`, `calls`, `measurement`,
//! `bytes`, `blocks`), `meta` (`runs`: `program`, `started_unix_ms`, `duration_ns`,
//! `nodes`) and, for a profile of sample mode, `samples` ([`SampleSet`]: `sources`, `frames`,
//! `stacks`, `samples` — each with its `weight`, a number that may be fractional —, `threads`,
//! `mappings`; left out when there is none). Reading it back with
//! `serde_json::from_str::<Profile>` gives the same profile, weights included (every finite
//! `f64` is written so that it reads back exactly).
//!
//! [`SampleSet`]: crate::samples::SampleSet

use std::io::Write;

use super::ExportError;
use crate::Profile;

/// Writes `profile` as pretty-printed JSON.
pub(super) fn write(profile: &Profile, out: &mut dyn Write) -> Result<(), ExportError> {
    serde_json::to_writer_pretty(&mut *out, profile)?;
    out.write_all(b"\n")?;
    Ok(())
}
