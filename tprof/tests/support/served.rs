//! Waiting until a control endpoint serves a new connection, for the tests that fill its slots
//! and then free one. Included with `#[path = "support/served.rs"] mod served;`.

use std::path::Path;
use std::time::{Duration, Instant};

use tprof::control::ControlClient;
use tprof::control::protocol::{Command, Reply};

/// Connects to the endpoint at `path` and asks it `registered` again and again until a
/// connection is served (its freed slot counted out first); panics, with the last answer, if
/// none is served `within`.
pub(crate) fn wait_until_served(path: &Path, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        match ControlClient::connect(path).map(|mut c| c.request(Command::Registered)) {
            Ok(Ok(Reply::Names { .. })) => break,
            other => assert!(Instant::now() < deadline, "never served again: {other:?}"),
        }
    }
}
