//! `help`: the command language's usage, whole ([`HELP`]) or the lines of one command.

/// What `help` prints.
pub const HELP: &str = "\
start [call_count|call_time|call_memory] [--call-tree]   start the tprof server
set_pattern MODULE|_ [FUNCTION|_ [ARITY|_]]               trace the functions it matches
clear_pattern MODULE|_ [FUNCTION|_ [ARITY|_]]             stop tracing them
enable_trace all|new|existing|PID|NAME [--no-spawn]      trace processes (and their children)
disable_trace all|new|existing|PID|NAME                  stop tracing them
pause | resume | restart | stop                          as tprof's functions
collect [process|total|FORMAT]                           the profile: tprof's tables or a text export
inspect [process|total] [COLUMN [ascending|descending]]  tprof's tables grouped and sorted (format: the same);
                                                         COLUMN: module function calls measurement
                                                         measurement_per_call percent
peek [SECONDS]                                           every process's state now, then SECONDS of samples
sample SECONDS [cpu|wall] [HZ]                           sample the next seconds, report by process
prof sample SECONDS [cpu|wall] [HZ]                      the same (Eta's :prof)
prof trace [call_count|call_time|call_memory] SECONDS    trace every process for the next seconds:
                                                         tprof's table (beside any started server)
heap_snapshot                                            the node's .heapsnapshot (redirect it to a file)
processes                                                the node's processes
top [polls|mailbox|heap|state|name|pid] [ROWS]           the first processes by a key (polls since the last top)
registered                                               their registered names
functions                                                the traced functions patterns can match
hello                                                    who is at the other end
quit | exit                                              leave the prompt (or Ctrl-D)
Tab completes commands, modules, functions and registered names; Up and Down recall history.
";

/// Whether `line` asks for [`HELP`].
pub fn is_help(line: &str) -> bool {
    line.split_whitespace().next() == Some("help")
}

/// What `help` prints: all of [`HELP`], or with `help COMMAND` its lines for that command
/// (or all of it, when no line names it).
pub fn help(line: &str) -> String {
    let Some(topic) = line.split_whitespace().nth(1) else {
        return HELP.to_owned();
    };
    // A line's usage is what comes before its description, which starts past a gap.
    let about = |usage: &str| {
        usage
            .split(|c: char| c.is_whitespace() || c == '|')
            .any(|word| word == topic)
    };
    let mut found = String::new();
    let mut lines = HELP.lines().peekable();
    while let Some(line) = lines.next() {
        let usage = line.split("  ").next().unwrap_or_default();
        if !usage.is_empty() && about(usage) {
            found.push_str(line);
            found.push('\n');
            // Its description's continuation lines start with blanks.
            while let Some(more) = lines.next_if(|l| l.starts_with(' ')) {
                found.push_str(more);
                found.push('\n');
            }
        }
    }
    if found.is_empty() {
        HELP.to_owned()
    } else {
        found
    }
}
