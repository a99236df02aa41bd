//! The `tprof` command: a thin wrapper around [`tprof::command`].
//!
//! Exit codes: 0 success (and when standard output's reader went away, `| head`: tprof then
//! ends quietly); 2 bad usage; 3 bad input (a file that is not a profile, or is damaged); 4 a
//! program that cannot be run or wrote no profile, or an output that cannot be written; for
//! `run`, the program's own exit code when it failed (1 when a signal ended it).
//!
//! While `run` waits for its program, Ctrl-C (and SIGTERM) do not stop tprof: they reach the
//! program, and tprof writes the profile once it has stopped.

mod args;
mod attach;
mod top;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use tprof::command::{self, CommandError, Opened, RunOptions};

use args::{Args, Cmd};

fn main() -> ExitCode {
    let args = Args::parse();
    match execute(args.command) {
        Ok(code) => code,
        Err(CommandError::BrokenPipe) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tprof: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

fn execute(command: Cmd) -> Result<ExitCode, CommandError> {
    match command {
        Cmd::Run {
            mode,
            rate,
            sample_rate,
            sampler,
            hz,
            cpu_source,
            sample_n,
            trace_type,
            flat,
            percentiles,
            percentile_precision,
            events,
            out,
            format,
            snapshot_every,
            signals,
            heap_snapshot,
            filters,
            command: mut argv,
        } => {
            let program = argv.remove(0);
            // Ctrl-C reaches the program too (same process group): tprof waits for it to stop
            // and writes what it gathered, rather than dying first and losing it.
            if let Err(e) = ctrlc::set_handler(|| {}) {
                eprintln!("tprof: cannot wait out Ctrl-C: {e}");
            }
            // Sample mode unless asked for trace mode, or a trace option says so.
            let trace_asked = trace_type.is_some() || flat || percentiles || events;
            let alloc_asked = rate.is_some() || sample_rate.is_some();
            let sample_asked = sampler.is_some()
                || hz.is_some()
                || cpu_source.is_some()
                || sample_n.is_some()
                || alloc_asked;
            let tracing = match mode.as_deref() {
                Some("trace") => true,
                Some(_) => false,
                None => trace_asked && !sample_asked,
            };
            let alloc = mode.as_deref() == Some("alloc")
                || sampler == Some(runtime::sample::Sampler::Alloc)
                || (mode.is_none() && sampler.is_none() && alloc_asked);
            let mut run_mode = command::Mode::Trace;
            if !tracing {
                run_mode = command::Mode::sample();
                if let command::Mode::Sample {
                    sampler: s,
                    hz: h,
                    cpu_source: c,
                    n,
                    alloc_rate,
                } = &mut run_mode
                {
                    *c = cpu_source.unwrap_or(*c);
                    *s = if alloc {
                        runtime::sample::Sampler::Alloc
                    } else {
                        sampler.unwrap_or(*s)
                    };
                    *h = hz.unwrap_or(*h);
                    *n = sample_n.map_or(*n, |v| usize::try_from(v).unwrap_or(usize::MAX));
                    if let Some(bytes) = rate {
                        *alloc_rate = runtime::sample::AllocRate::Bytes(bytes);
                    }
                    if let Some(p) = sample_rate {
                        *alloc_rate = runtime::sample::AllocRate::SampleRate(p);
                    }
                }
                let cpu = !alloc && sampler.unwrap_or_default() == runtime::sample::Sampler::Cpu;
                if cpu_source.is_some() && !cpu {
                    eprintln!(
                        "tprof: warning: --cpu-source does nothing with the {} sampler: it \
                         chooses how the cpu sampler takes its samples",
                        if alloc {
                            runtime::sample::Sampler::Alloc
                        } else {
                            sampler.unwrap_or_default()
                        }
                    );
                }
                if alloc_asked && !alloc {
                    eprintln!(
                        "tprof: warning: --rate and --sample-rate do nothing with the {} \
                         sampler: they are allocation mode options (--mode alloc)",
                        sampler.unwrap_or_default()
                    );
                }
            } else if sample_asked {
                eprintln!(
                    "tprof: warning: --sampler, --hz, --cpu-source, --sample-n, --rate and \
                     --sample-rate do nothing in trace mode: they are sample mode options \
                     (--mode sample or alloc)"
                );
            }
            let trace_type = trace_type.unwrap_or_default();
            let options = RunOptions {
                mode: run_mode,
                trace_type,
                call_tree: !flat,
                percentiles,
                percentile_precision,
                events,
                out,
                format,
                snapshot_every: (snapshot_every > 0.0)
                    .then(|| std::time::Duration::from_secs_f64(snapshot_every.min(1e9))),
                signals,
                heap_snapshot,
                ..RunOptions::new(program, argv)
            };
            let shown = args::export_of(options.format, options.out.as_deref());
            let options = RunOptions {
                samples: filters.apply(options.samples.clone(), false, shown),
                ..options
            };
            let outcome = command::run(&options)?;
            for path in &outcome.heap_snapshots {
                eprintln!("tprof: heap snapshot written to {}", path.display());
            }
            for line in outcome.summary() {
                eprintln!("tprof: {line}");
            }
            command::warn_once(&outcome.profile);
            Ok(match outcome.status.code() {
                Some(0) => ExitCode::SUCCESS,
                Some(code) => ExitCode::from(code.clamp(1, 255) as u8),
                None => ExitCode::FAILURE, // killed by a signal
            })
        }
        Cmd::Report {
            list: Some(pattern),
            out,
            file,
            source_path,
            list_sampler,
            ..
        } => {
            let mut options = tprof::listing::ListOptions::new();
            if let Some(dir) = source_path {
                options = options.source_root(dir);
            }
            if let Some(sampler) = list_sampler {
                options = options.sampler(sampler);
            }
            command::list(&file, &pattern, &options, out.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Report {
            callers: Some(function),
            out,
            file,
            samples,
            sampler,
            ..
        } => {
            let options = samples.options(None, None).sampler(sampler);
            command::callers(&file, &function, &options, out.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Report {
            format,
            out,
            file,
            samples,
            sampler,
            ..
        } => {
            let to_terminal = out.as_deref().is_none_or(|o| o.as_os_str() == "-")
                && std::io::stdout().is_terminal();
            let terminal = to_terminal
                .then(|| console::Term::stdout().size_checked())
                .flatten()
                .map(|(_rows, columns)| usize::from(columns));
            command::report_sampler(
                &file,
                format,
                out.as_deref(),
                &samples.options(terminal, args::export_of(format, out.as_deref())),
                sampler,
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Merge { out, inputs } => {
            let bar = progress_bar(&inputs);
            let merged = command::merge(&inputs, &out, &mut |i, path| {
                if let Some(bar) = &bar {
                    bar.set_position(i as u64);
                    bar.set_message(path.display().to_string());
                }
            });
            if let Some(bar) = &bar {
                bar.finish_and_clear();
            }
            let merged = merged?;
            eprintln!(
                "tprof: {} run(s) merged into {}",
                merged.meta.runs.len(),
                if out.as_os_str() == "-" {
                    "standard output".to_owned()
                } else {
                    out.display().to_string()
                }
            );
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Attach {
            target,
            commands,
            auth,
        } => Ok(attach::attach(&target, commands.as_deref(), &auth)),
        Cmd::Top {
            target,
            auth,
            interval,
            sort,
            iterations,
            once,
            rows,
        } => Ok(top::top(
            &target,
            &auth,
            &top::TopOptions {
                interval: std::time::Duration::from_secs_f64(interval),
                sort,
                iterations: if once { Some(1) } else { iterations },
                rows,
            },
        )),
        Cmd::Snapshot { target, out, auth } => Ok(snapshot(&target, &out, &auth)),
        Cmd::View { out, file } => {
            let (page, opened) = command::view(&file, out.as_deref())?;
            match (page, opened) {
                (Some(page), Opened::Yes) => eprintln!("tprof: opened {}", page.display()),
                (Some(page), Opened::No(why)) => {
                    eprintln!("tprof: no browser showed the page ({why}): open it yourself");
                    let mut stdout = std::io::stdout().lock();
                    writeln!(stdout, "{}", page.display())
                        .and_then(|()| stdout.flush())
                        .map_err(|e| match e.kind() {
                            std::io::ErrorKind::BrokenPipe => CommandError::BrokenPipe,
                            _ => CommandError::Output {
                                path: None,
                                reason: e.to_string(),
                            },
                        })?;
                }
                _ => {}
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `tprof snapshot`: the heap snapshot of a live program, through its control endpoint.
fn snapshot(target: &str, out: &std::path::Path, auth: &args::TokenArgs) -> ExitCode {
    use tprof::control::protocol::{Command, Reply};

    let taken =
        attach::connect(target, auth).and_then(|mut client| client.request(Command::HeapSnapshot));
    let text = match taken {
        Ok(Reply::Text { text }) => text,
        Ok(other) => {
            eprintln!("tprof: the endpoint answered {other:?}, not a snapshot");
            return ExitCode::from(4);
        }
        Err(e) => {
            eprintln!("tprof: {e}");
            return ExitCode::from(4);
        }
    };
    let written = if out.as_os_str() == "-" {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
    } else {
        std::fs::write(out, text.as_bytes())
    };
    match written {
        Ok(()) => {
            if out.as_os_str() != "-" {
                eprintln!("tprof: heap snapshot written to {}", out.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tprof: cannot write {}: {e}", out.display());
            ExitCode::from(4)
        }
    }
}

/// A progress bar over the inputs, on a terminal and for big inputs (over 8 MiB in all).
fn progress_bar(inputs: &[std::path::PathBuf]) -> Option<ProgressBar> {
    let bytes: u64 = inputs
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    if !std::io::stderr().is_terminal() || bytes < 8 << 20 {
        return None;
    }
    let bar = ProgressBar::new(inputs.len() as u64);
    if let Ok(style) = ProgressStyle::with_template("merging {pos}/{len} {wide_bar} {msg}") {
        bar.set_style(style);
    }
    Some(bar)
}
