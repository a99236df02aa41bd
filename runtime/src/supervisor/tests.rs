//! Tests of the node's behaviour seen through supervisors: they live here, at the top layer,
//! because the process layer never names the behaviours.

use std::sync::Arc;

use crate::supervisor::{self, StartOptions, SupervisorFlags, SupervisorSpec};
use crate::{Down, ExitReason, Node};

#[test]
fn the_supervisors_kept_for_shutdown_are_pruned_as_they_end() {
    let node = Node::builder().current_thread().build().expect("node");
    let inner = Arc::clone(&node.handle().inner);
    let kept = node
        .run(async move {
            for _ in 0..100 {
                let spec = SupervisorSpec::new(SupervisorFlags::default());
                let sup = supervisor::start(spec, StartOptions::new())
                    .await
                    .expect("started");
                let mref = crate::monitor(sup).expect("in a process");
                crate::exit(sup, ExitReason::Kill);
                let _: Down = crate::receive_where(move |d: &Down| d.monitor_ref == mref).await;
            }
            let spec = SupervisorSpec::new(SupervisorFlags::default());
            let live = supervisor::start(spec, StartOptions::new())
                .await
                .expect("started");
            (live, inner.supervisors.lock().expect("lock").clone())
        })
        .expect("ran");
    let (live, kept) = kept;
    assert!(kept.len() <= 8, "{} supervisors kept", kept.len());
    assert_eq!(kept.last(), Some(&live));
}
