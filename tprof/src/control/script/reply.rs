//! The replies of a control endpoint as `tprof attach` prints them ([`render`]).

use super::super::protocol::{ProcessRow, Reply};
use super::super::top::ProcessColumn;

/// A reply as `tprof attach` prints it.
pub fn render(reply: &Reply) -> String {
    match reply {
        Reply::Ok => "ok\n".to_owned(),
        Reply::Matched { count } => format!("{count}\n"),
        Reply::Text { text } => {
            let mut text = text.clone();
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text
        }
        Reply::Hello {
            program,
            os_pid,
            node,
            protocol,
        } => format!("{program} (OS pid {os_pid}), node {node}, protocol {protocol}\n"),
        Reply::Processes { processes } => process_table(processes),
        Reply::Top { frame } => super::super::top::render(frame),
        Reply::Names { names } => names.iter().map(|n| format!("{n}\n")).collect(),
        Reply::Functions { functions } => functions
            .iter()
            .map(|f| format!("{}::{}/{}\n", f.module, f.function, f.arity))
            .collect(),
    }
}

/// The node's processes as a table with a row each.
fn process_table(rows: &[ProcessRow]) -> String {
    super::super::top::process_table(
        [
            ProcessColumn::Pid,
            ProcessColumn::Name,
            ProcessColumn::State,
            ProcessColumn::Mailbox,
            ProcessColumn::Heap,
            ProcessColumn::Polls,
            ProcessColumn::InitialCall,
            ProcessColumn::In,
        ],
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_print_as_text() {
        assert_eq!(render(&Reply::Matched { count: 3 }), "3\n");
        let table = render(&Reply::Processes {
            processes: vec![ProcessRow {
                pid: "<0.5.0>".into(),
                name: Some("kv".into()),
                initial_call: "app::kv".into(),
                message_queue_len: 2,
                heap_bytes: None,
                state: "call".into(),
                callee: Some("<0.9.0>".into()),
                callee_name: Some("db".into()),
                polls: 7,
                current_function: None,
                polled_before_sampling: false,
            }],
        });
        assert!(table.contains("<0.5.0>") && table.contains("kv") && table.contains("app::kv"));
        assert!(
            table.contains("call <0.9.0> (db)") && table.contains("POLLS"),
            "{table}"
        );
    }
}
