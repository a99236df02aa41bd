//! Registered names: `register`, `unregister`, `whereis`, `registered`.
//!
//! Each node has its own name table. A process has at most one name, a name names at most one
//! process, and a name dies with its process. Names are strings (Erlang's atoms).

use crate::traced;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use crate::Pid;
use crate::node::NodeInner;
use crate::process::{Process, with_current};

pub(crate) use crate::name::Name;

/// Why a registry operation failed; each names its input.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryError {
    /// The name is already registered to another process.
    NameTaken {
        /// The name asked for.
        name: Name,
        /// The process that holds it.
        holder: Pid,
    },
    /// The process already has a (different) name.
    AlreadyNamed {
        /// The process.
        pid: Pid,
        /// The name it has.
        name: Name,
    },
    /// The pid names no live process.
    NoProc(Pid),
    /// The name is not registered.
    NotRegistered(Name),
    /// The empty string cannot be a name.
    EmptyName,
    /// A free registry function was called outside a process: use the node's methods there.
    NotInProcess,
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryError::NameTaken { name, holder } => {
                write!(f, "the name `{name}` is already registered to {holder}")
            }
            RegistryError::AlreadyNamed { pid, name } => write!(
                f,
                "{pid} is already registered as `{name}`; unregister it first"
            ),
            RegistryError::NoProc(pid) => {
                write!(f, "cannot register {pid}: no such process (it has exited)")
            }
            RegistryError::NotRegistered(name) => {
                write!(f, "no process is registered as `{name}`")
            }
            RegistryError::EmptyName => f.write_str("a registered name cannot be empty"),
            RegistryError::NotInProcess => f.write_str(
                "registry function called outside a process: use the node's methods \
                 (NodeHandle::register, whereis, ...) there",
            ),
        }
    }
}

impl std::error::Error for RegistryError {}

/// A node's name table.
#[derive(Default)]
pub(crate) struct Registry {
    names: RwLock<HashMap<Name, Pid>>,
}

impl Registry {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Name, Pid>> {
        self.names.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<Name, Pid>> {
        self.names.write().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn register(&self, name: &Name, process: &Process) -> Result<(), RegistryError> {
        if name.is_empty() {
            return Err(RegistryError::EmptyName);
        }
        let mut names = self.write();
        if let Some(holder) = names.get(name) {
            return Err(RegistryError::NameTaken {
                name: name.clone(),
                holder: *holder,
            });
        }
        match process.set_name(name) {
            Ok(()) => {
                names.insert(name.clone(), process.pid);
                Ok(())
            }
            Err(Some(existing)) => Err(RegistryError::AlreadyNamed {
                pid: process.pid,
                name: existing,
            }),
            Err(None) => Err(RegistryError::NoProc(process.pid)),
        }
    }

    pub(crate) fn unregister(&self, node: &NodeInner, name: &str) -> Result<(), RegistryError> {
        let pid = self
            .write()
            .remove(name)
            .ok_or_else(|| RegistryError::NotRegistered(Arc::from(name)))?;
        if let Some(p) = node.table.get(pid)
            && let Some(p) = p.as_deref()
        {
            p.clear_name();
        }
        Ok(())
    }

    #[inline]
    pub(crate) fn whereis(&self, name: &str) -> Option<Pid> {
        self.read().get(name).copied()
    }

    pub(crate) fn registered(&self) -> Vec<Name> {
        let mut names: Vec<Name> = self.read().keys().cloned().collect();
        names.sort();
        names
    }

    /// Removes `name` if it still names `pid` (an exiting process releasing its name).
    pub(crate) fn remove_if(&self, name: &str, pid: Pid) {
        let mut names = self.write();
        if names.get(name) == Some(&pid) {
            names.remove(name);
        }
    }
}

fn with_node<R>(f: impl FnOnce(&Arc<NodeInner>) -> R) -> Result<R, RegistryError> {
    with_current(|c| c.map(|p| f(&p.node))).ok_or(RegistryError::NotInProcess)
}

/// Registers `pid` under `name` on the caller's node, Erlang's `register/2`.
///
/// # Errors
/// [`RegistryError::NameTaken`], [`RegistryError::AlreadyNamed`], [`RegistryError::NoProc`],
/// [`RegistryError::EmptyName`]; [`RegistryError::NotInProcess`] outside a process.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn register(name: impl Into<Name>, pid: Pid) -> Result<(), RegistryError> {
    let name = name.into();
    with_node(|node| node.register(&name, pid))?
}

/// Removes a registered name on the caller's node, Erlang's `unregister/1`.
///
/// # Errors
/// [`RegistryError::NotRegistered`]; [`RegistryError::NotInProcess`] outside a process.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn unregister(name: &str) -> Result<(), RegistryError> {
    with_node(|node| node.registry.unregister(node, name))?
}

/// The process registered as `name` on the caller's node, Erlang's `whereis/1`; `None` when
/// there is none, or outside a process.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn whereis(name: &str) -> Option<Pid> {
    with_current(|c| c.and_then(|p| p.node.registry.whereis(name)))
}

/// The names registered on the caller's node, sorted; empty outside a process.
#[allow(unsafe_code)]
#[traced(module = "runtime")]
pub fn registered() -> Vec<Name> {
    with_current(|c| c.map(|p| p.node.registry.registered()).unwrap_or_default())
}
