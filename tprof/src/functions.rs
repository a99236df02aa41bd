//! The traced functions and call paths, as plain data, each stored once: the vocabulary the
//! profile's figures ([`Profile`](crate::Profile)) and the samples' stacks
//! ([`samples`](crate::samples)) both index into. The lowest layer: it uses no other module.

use std::collections::HashMap;

use runtime::trace::Callsite;
use serde::{Deserialize, Serialize};

/// A traced function, as plain data: what a [`Callsite`] says about it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Function {
    /// The module path (`module_path!()`, or the one given to `#[traced(module = ..)]`).
    pub module: String,
    /// The function's name (`name`, `Type::method`, `<Type as Trait>::method`).
    pub name: String,
    /// The number of parameters, `self` included.
    pub arity: u8,
    /// The source file it is defined in.
    pub file: String,
    /// The line it is defined on.
    pub line: u32,
}

impl Function {
    /// `module::name/arity`, as tprof's reports name it.
    pub fn mfa(&self) -> String {
        format!("{}::{}/{}", self.module, self.name, self.arity)
    }
}

impl From<&'static Callsite> for Function {
    fn from(cs: &'static Callsite) -> Function {
        Function {
            module: cs.module().to_owned(),
            name: cs.function().to_owned(),
            arity: cs.arity(),
            file: cs.file().to_owned(),
            line: cs.line(),
        }
    }
}

/// One node of a call tree: a call path, as its last function and the path it was called on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathNode {
    /// The path it extends (an index into [`CallTree::nodes`], always smaller than its own);
    /// `None` for a path of one function.
    ///
    /// [`CallTree::nodes`]: crate::CallTree::nodes
    pub parent: Option<u32>,
    /// The function called last on this path: an index into [`Profile::function_table`].
    ///
    /// [`Profile::function_table`]: crate::Profile::function_table
    pub function: u32,
}

/// A function table and call-path nodes being built: each function and each path stored
/// once, in the order first seen, and found again by value. Profiles built from snapshots
/// and merged profiles both unite their call paths through it.
#[derive(Debug, Default)]
pub(crate) struct TreeTable {
    functions: Vec<Function>,
    function_index: HashMap<Function, u32>,
    nodes: Vec<PathNode>,
    node_index: HashMap<(Option<u32>, u32), u32>,
}

impl TreeTable {
    /// The index of `function` in the table, added at the end if it is new.
    pub(crate) fn function(&mut self, function: &Function) -> u32 {
        if let Some(&i) = self.function_index.get(function) {
            return i;
        }
        let i = index32(self.functions.len());
        self.function_index.insert(function.clone(), i);
        self.functions.push(function.clone());
        i
    }

    /// The node of the path that calls `function` (an index into the table) on `parent`
    /// (`None` outermost), added at the end if it is new.
    pub(crate) fn node(&mut self, parent: Option<u32>, function: u32) -> u32 {
        let next = index32(self.nodes.len());
        let node = *self.node_index.entry((parent, function)).or_insert(next);
        if node == next {
            self.nodes.push(PathNode { parent, function });
        }
        node
    }

    /// The function table and the nodes.
    pub(crate) fn into_parts(self) -> (Vec<Function>, Vec<PathNode>) {
        (self.functions, self.nodes)
    }
}

/// A `usize` index as a `u32` (the model's indices are `u32`); `u32::MAX` past that.
pub(crate) fn index32(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}
