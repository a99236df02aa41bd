//! The names processes go by in reports and exports: the registered name, with the pid added
//! where several processes of the profile share it, else the pid.

use std::borrow::Cow;
use std::collections::HashMap;

use runtime::Pid;

use super::{Group, ProcessRecord, Profile};

/// What [`Group::All`] goes by.
pub(crate) const ALL: &str = "all processes";

/// The label of every process of a profile, made once ([`Profile::labels`]): each lookup is
/// then a hash lookup, so an export of 100,000 processes stays linear.
#[derive(Clone, Debug, Default)]
pub struct Labels {
    /// The labels of the named processes.
    named: HashMap<Pid, String>,
}

impl Labels {
    /// The name `group` goes by: its registered name, followed by its pid where other
    /// processes of the profile were registered under the same name (`worker <1.5.0>`); its
    /// pid where it had none; `all processes` for [`Group::All`].
    pub fn get(&self, group: Group) -> Cow<'_, str> {
        match group {
            Group::All => Cow::Borrowed(ALL),
            Group::Process(pid) => match self.named.get(&pid) {
                Some(label) => Cow::Borrowed(label),
                None => Cow::Owned(pid.to_string()),
            },
        }
    }
}

impl Profile {
    /// The labels of its processes, for reports and exports that name many of them: see
    /// [`Labels::get`]. Linear in the processes (one pass to count the names, one to label).
    pub fn labels(&self) -> Labels {
        let mut uses: HashMap<&str, usize> = HashMap::new();
        for name in self.processes.iter().filter_map(|p| p.name.as_deref()) {
            *uses.entry(name).or_default() += 1;
        }
        let named = self
            .processes
            .iter()
            .filter_map(|p| {
                let name = p.name.as_deref()?;
                Some((p.pid, label(p, name, uses.get(name).copied().unwrap_or(0))))
            })
            .collect();
        Labels { named }
    }

    /// The name `group` goes by in reports and exports, as [`Labels::get`] gives it. Looks
    /// at every process: to label many, make [`labels`](Profile::labels) once.
    pub fn group_label(&self, group: Group) -> String {
        let Group::Process(pid) = group else {
            return ALL.to_owned();
        };
        let Some(record) = self.processes.iter().find(|p| p.pid == pid) else {
            return pid.to_string();
        };
        match record.name.as_deref() {
            Some(name) => {
                let uses = self
                    .processes
                    .iter()
                    .filter(|p| p.name.as_deref() == Some(name))
                    .count();
                label(record, name, uses)
            }
            None => pid.to_string(),
        }
    }
}

/// The label of `record`, registered as `name`, a name `uses` processes of the profile had.
fn label(record: &ProcessRecord, name: &str, uses: usize) -> String {
    if uses > 1 {
        format!("{name} {}", record.pid)
    } else {
        name.to_owned()
    }
}
