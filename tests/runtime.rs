//! Behaviour of the runtime as a whole, one module per topic (one test binary, to keep link
//! time down on a 2-core CI).

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod runtime {
    mod failure;
    mod fairness;
    mod gen_server;
    mod introspection;
    mod messages;
    mod names;
    mod node;
    mod shutdown;
    mod spawn;
    mod supervisor;
}
