//! gen_server
