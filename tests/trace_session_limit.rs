//! At most 64 trace sessions per OS process (its own test binary: sessions are process-wide).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use runtime::Node;
use runtime::trace::{MAX_SESSIONS, SessionError};

#[test]
fn the_sixty_fifth_session_is_a_typed_error_and_a_dropped_one_frees_its_slot() {
    let node = Node::new().unwrap();
    let mut sessions: Vec<_> = (0..MAX_SESSIONS)
        .map(|_| node.trace_session().unwrap())
        .collect();
    let err = node.trace_session().unwrap_err();
    assert_eq!(err, SessionError::TooManySessions { limit: 64 });
    assert!(err.to_string().contains("64"));
    sessions.pop();
    assert!(node.trace_session().is_ok());
}
