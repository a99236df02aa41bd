//! supervisor
