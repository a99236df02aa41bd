//! `tprof attach`'s command language: one command per line (or `;`-separated), named like
//! tprof's functions, and the replies as text.
//!
//! ```text
//! start call_time            start [call_count|call_time|call_memory] [--call-tree]
//! set_pattern app _ _        set_pattern | clear_pattern MODULE|_ [FUNCTION|_ [ARITY|_]]
//! enable_trace all           enable_trace | disable_trace all|new|existing|PID|NAME [--no-spawn]
//! pause                      pause | resume | restart | stop
//! collect                    collect [process|total|pretty|json|folded|speedscope|chrome|svg|html]
//! inspect total calls descending   inspect | format [process|total] [COLUMN [ascending|descending]]
//! peek 0.5                   peek [SECONDS] (every process's state, then samples)
//! sample 2 wall 99           sample SECONDS [cpu|wall] [HZ]
//! prof sample 2s             prof sample SECONDS [cpu|wall] [HZ]: as sample (Eta's :prof)
//! prof trace call_time 2s    prof trace [call_count|call_time|call_memory] SECONDS
//! heap_snapshot > FILE       heap_snapshot (the node's .heapsnapshot)
//! processes                  processes | registered | functions | hello | help
//! top mailbox 20             top [polls|mailbox|heap|state|name|pid] [ROWS]
//! ```
//!
//! ```
//! use tprof::control::protocol::Command;
//! use tprof::control::script::parse_line;
//!
//! let command = parse_line("set_pattern app render _").unwrap();
//! assert_eq!(
//!     command,
//!     Some(Command::SetPattern {
//!         module: Some("app".into()),
//!         function: Some("render".into()),
//!         arity: None,
//!     })
//! );
//! assert_eq!(parse_line("  # a comment").unwrap(), None);
//! assert!(parse_line("set_pattern app render two").is_err());
//! ```
//!
//! Here, the commands read; `help`'s text in `help`, replies as text in `reply`.

use super::protocol::Command;

mod help;
mod reply;

pub use super::paths::find_endpoint;
pub use help::{HELP, help, is_help};
pub use reply::render;

/// The commands, for `help` and completion.
pub const COMMANDS: &[&str] = &[
    "start",
    "stop",
    "set_pattern",
    "clear_pattern",
    "enable_trace",
    "disable_trace",
    "pause",
    "resume",
    "restart",
    "collect",
    "inspect",
    "format",
    "peek",
    "sample",
    "prof",
    "heap_snapshot",
    "processes",
    "top",
    "registered",
    "functions",
    "hello",
    "help",
];

/// The trace types, as `start` and `prof trace` take them.
pub const TRACE_TYPES: &[&str] = &["call_count", "call_time", "call_memory"];

/// The command on `line`; `None` for a blank line, a `#` comment or `help` (which the caller
/// answers with [`HELP`]: see [`is_help`]).
///
/// # Errors
/// A sentence saying what is wrong and what the command takes.
pub fn parse_line(line: &str) -> Result<Option<Command>, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let Some((&name, args)) = words.split_first() else {
        return Ok(None);
    };
    if name.starts_with('#') || name == "help" {
        return Ok(None);
    }
    let no_args = |command: Command| {
        if args.is_empty() {
            Ok(Some(command))
        } else {
            Err(format!("{name} takes no arguments"))
        }
    };
    match name {
        "hello" => no_args(Command::Hello { token: None }),
        "processes" | "ps" => no_args(Command::Processes),
        "registered" => no_args(Command::Registered),
        "top" => {
            let usage = "top [polls|mailbox|heap|state|name|pid] [ROWS]";
            let (sort, rows) = match args {
                [] => ("polls", "25"),
                [sort] if sort.parse::<usize>().is_ok() => ("polls", *sort),
                [sort] => (*sort, "25"),
                [sort, rows] => (*sort, *rows),
                _ => return Err(usage.to_owned()),
            };
            let sort = sort.parse::<super::top::SortKey>()?;
            let rows = rows
                .parse()
                .map_err(|_| format!("{rows:?} is not a number of rows: {usage}"))?;
            Ok(Some(Command::Top {
                sort: sort.name().to_owned(),
                rows,
                baseline: 0,
            }))
        }
        "functions" => no_args(Command::Functions),
        "heap_snapshot" => no_args(Command::HeapSnapshot),
        "stop" => no_args(Command::Stop),
        "pause" => no_args(Command::Pause),
        "resume" | "continue" => no_args(Command::Resume),
        "restart" => no_args(Command::Restart),
        "start" => {
            let mut trace_type = "call_count".to_owned();
            let mut call_tree = false;
            for arg in args {
                match *arg {
                    "--call-tree" => call_tree = true,
                    t @ ("call_count" | "call_time" | "call_memory") => {
                        t.clone_into(&mut trace_type)
                    }
                    other => {
                        return Err(format!(
                            "start: {other:?}? start [call_count|call_time|call_memory] [--call-tree]"
                        ));
                    }
                }
            }
            Ok(Some(Command::Start {
                trace_type,
                call_tree,
            }))
        }
        "set_pattern" | "clear_pattern" => {
            let (module, function, arity) = mfa(name, args)?;
            Ok(Some(if name == "set_pattern" {
                Command::SetPattern {
                    module,
                    function,
                    arity,
                }
            } else {
                Command::ClearPattern {
                    module,
                    function,
                    arity,
                }
            }))
        }
        "enable_trace" | "disable_trace" => {
            let spawn = !args.contains(&"--no-spawn");
            let specs: Vec<&str> = args
                .iter()
                .copied()
                .filter(|a| *a != "--no-spawn")
                .collect();
            let [processes] = specs[..] else {
                return Err(format!(
                    "{name} takes one of all, new, existing, a pid or a registered name"
                ));
            };
            Ok(Some(if name == "enable_trace" {
                Command::EnableTrace {
                    processes: processes.to_owned(),
                    set_on_spawn: spawn,
                }
            } else {
                Command::DisableTrace {
                    processes: processes.to_owned(),
                }
            }))
        }
        "collect" => match args {
            [] => Ok(Some(Command::Collect {
                format: "process".into(),
            })),
            [format] => Ok(Some(Command::Collect {
                format: (*format).to_owned(),
            })),
            _ => Err("collect takes one layout: process, total or a text format".to_owned()),
        },
        "inspect" | "format" => inspect(name, args).map(Some),
        "peek" => match args {
            [] => Ok(Some(Command::Peek { seconds: None })),
            [seconds] => Ok(Some(Command::Peek {
                seconds: Some(
                    self::seconds(seconds)
                        .ok_or_else(|| format!("{seconds:?} is not seconds: peek [SECONDS]"))?,
                ),
            })),
            _ => Err("peek [SECONDS]".to_owned()),
        },
        "sample" => sample(args, "sample SECONDS [cpu|wall] [HZ]").map(Some),
        "prof" => match args.split_first() {
            Some((&"sample", args)) => {
                sample(args, "prof sample SECONDS [cpu|wall] [HZ]").map(Some)
            }
            Some((&"trace", args)) => prof_trace(args).map(Some),
            _ => Err("prof sample SECONDS [cpu|wall] [HZ] | prof trace [TYPE] SECONDS".to_owned()),
        },
        other => Err(format!(
            "{other}: not a command (help lists them: {})",
            COMMANDS.join(", ")
        )),
    }
}

/// `SECONDS [cpu|wall] [HZ]`: a sample of the next seconds.
fn sample(args: &[&str], usage: &str) -> Result<Command, String> {
    let seconds = args
        .first()
        .and_then(|s| seconds(s))
        .ok_or_else(|| format!("how many seconds? {usage}"))?;
    let sampler = args.get(1).copied().unwrap_or("cpu").to_owned();
    let hz = match args.get(2) {
        Some(hz) => hz
            .parse()
            .map_err(|_| format!("{hz:?} is not a rate: {usage}"))?,
        None => 99,
    };
    if args.len() > 3 {
        return Err(usage.to_owned());
    }
    Ok(Command::Sample {
        seconds,
        sampler,
        hz,
    })
}

/// `[process|total] [COLUMN [ascending|descending]]`: tprof's `inspect/3` laid out by
/// `format/1`. Each word is checked here, so that a typo is told before the profile is
/// collected.
fn inspect(name: &str, args: &[&str]) -> Result<Command, String> {
    let usage = format!("{name} [process|total] [COLUMN [ascending|descending]]");
    let (group_by, column, direction) = match args {
        [] => ("process", "percent", "ascending"),
        [group_by] => (*group_by, "percent", "ascending"),
        [group_by, column] => (*group_by, *column, "ascending"),
        [group_by, column, direction] => (*group_by, *column, *direction),
        _ => return Err(usage),
    };
    let told = |e: crate::sample_report::OptionError| format!("{e}: {usage}");
    group_by.parse::<crate::Aggregate>().map_err(told)?;
    column.parse::<crate::Column>().map_err(told)?;
    direction.parse::<crate::Direction>().map_err(told)?;
    Ok(Command::Inspect {
        group_by: group_by.to_owned(),
        column: column.to_owned(),
        direction: direction.to_owned(),
    })
}

/// `[call_count|call_time|call_memory] SECONDS`: a trace of the next seconds.
fn prof_trace(args: &[&str]) -> Result<Command, String> {
    let usage = "prof trace [call_count|call_time|call_memory] SECONDS";
    let (trace_type, time) = match args {
        [time] => ("call_count", *time),
        [trace_type, time] if TRACE_TYPES.contains(trace_type) => (*trace_type, *time),
        [other, _] => return Err(format!("{other:?} is not a trace type: {usage}")),
        _ => return Err(usage.to_owned()),
    };
    let seconds = seconds(time).ok_or_else(|| format!("{time:?} is not seconds: {usage}"))?;
    Ok(Command::Trace {
        trace_type: trace_type.to_owned(),
        seconds,
    })
}

/// `2`, `2s` or `0.5s`.
fn seconds(text: &str) -> Option<f64> {
    text.strip_suffix('s')
        .unwrap_or(text)
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite())
}

/// A pattern's module, function and arity; `None` for `_`.
type Mfa = (Option<String>, Option<String>, Option<u8>);

/// `MODULE|_ [FUNCTION|_ [ARITY|_]]`.
fn mfa(name: &str, args: &[&str]) -> Result<Mfa, String> {
    let any = |s: &&str| (*s != "_").then(|| (*s).to_owned());
    match args {
        [] => Err(format!("{name} MODULE|_ [FUNCTION|_ [ARITY|_]]")),
        [m] => Ok((any(m), None, None)),
        [m, f] => Ok((any(m), any(f), None)),
        [m, f, a] => {
            let arity = match *a {
                "_" => None,
                a => Some(
                    a.parse::<u8>()
                        .map_err(|_| format!("{name}: the arity {a:?} is not a number or _"))?,
                ),
            };
            Ok((any(m), any(f), arity))
        }
        _ => Err(format!("{name} takes at most MODULE FUNCTION ARITY")),
    }
}

/// The commands of a `-c` script: split at `;` and newlines.
pub fn script_lines(script: &str) -> impl Iterator<Item = &str> {
    script
        .split(['\n', ';'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_parses_and_bad_ones_say_why() {
        let parsed = |l: &str| parse_line(l).unwrap().unwrap();
        assert_eq!(
            parsed("start call_time --call-tree"),
            Command::Start {
                trace_type: "call_time".into(),
                call_tree: true
            }
        );
        assert_eq!(
            parsed("enable_trace <0.5.0> --no-spawn"),
            Command::EnableTrace {
                processes: "<0.5.0>".into(),
                set_on_spawn: false
            }
        );
        assert_eq!(
            parsed("sample 2s wall 200"),
            Command::Sample {
                seconds: 2.0,
                sampler: "wall".into(),
                hz: 200
            }
        );
        assert_eq!(
            parsed("prof sample 2s"),
            Command::Sample {
                seconds: 2.0,
                sampler: "cpu".into(),
                hz: 99
            }
        );
        assert_eq!(
            parsed("inspect total calls descending"),
            Command::Inspect {
                group_by: "total".into(),
                column: "calls".into(),
                direction: "descending".into()
            }
        );
        assert_eq!(
            parsed("format"),
            parsed("inspect process percent ascending")
        );
        assert_eq!(parsed("peek"), Command::Peek { seconds: None });
        assert_eq!(parsed("peek 0.5s"), Command::Peek { seconds: Some(0.5) });
        for bad in [
            "inspect all",
            "inspect total time",
            "inspect total calls down",
            "inspect a b c d",
            "peek soon",
            "peek 1 2",
        ] {
            assert!(parse_line(bad).is_err(), "{bad}");
        }
        assert!(
            parse_line("inspect total callz")
                .unwrap_err()
                .contains("measurement_per_call")
        );
        assert_eq!(
            parsed("prof trace call_time 0.5s"),
            Command::Trace {
                trace_type: "call_time".into(),
                seconds: 0.5
            }
        );
        assert_eq!(
            parsed("top mailbox 5"),
            Command::Top {
                sort: "mailbox".into(),
                rows: 5,
                baseline: 0
            }
        );
        assert_eq!(
            parsed("top 7"),
            Command::Top {
                sort: "polls".into(),
                rows: 7,
                baseline: 0
            }
        );
        assert_eq!(
            parsed("prof trace 3"),
            Command::Trace {
                trace_type: "call_count".into(),
                seconds: 3.0
            }
        );
        assert_eq!(
            parsed("clear_pattern _"),
            Command::ClearPattern {
                module: None,
                function: None,
                arity: None
            }
        );
        assert_eq!(
            parsed("collect total"),
            Command::Collect {
                format: "total".into()
            }
        );
        for bad in [
            "launch",
            "pause now",
            "start call_tim",
            "enable_trace",
            "sample x",
            "set_pattern a b c d",
            "prof",
            "prof sample",
            "prof trace call_tim 2",
            "prof trace call_time",
            "prof trace call_time 2s extra",
            "top memory",
            "top heap x",
        ] {
            let error = parse_line(bad).unwrap_err();
            assert!(!error.is_empty(), "{bad}");
        }
        assert!(is_help("help"));
        assert_eq!(help("help"), HELP);
        assert_eq!(
            help("help resume"),
            "pause | resume | restart | stop                          as tprof's functions\n"
        );
        let prof = help("help prof");
        assert_eq!(prof.lines().count(), 3, "{prof}");
        assert!(
            prof.contains("tprof's table (beside any started server)"),
            "{prof}"
        );
        assert_eq!(help("help nonsense"), HELP);
        assert_eq!(
            script_lines("start; set_pattern app\n\ncollect").collect::<Vec<_>>(),
            ["start", "set_pattern app", "collect"]
        );
    }
}
