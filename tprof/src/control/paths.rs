//! Where control endpoints live: the folder they are made in ([`runtime_dir`]), the
//! socket's name there, after the OS pid and the node ([`default_path`]), and the endpoint a
//! person names by OS pid or path ([`find_endpoint`]).

use std::path::{Path, PathBuf};

/// `$XDG_RUNTIME_DIR/tprof-<ospid>-<node>.sock`, or in the temp dir.
pub fn default_path(os_pid: u32, node: u32) -> PathBuf {
    runtime_dir().join(format!("tprof-{os_pid}-{node}.sock"))
}

/// Where endpoints are made: `$XDG_RUNTIME_DIR`, or the temp dir.
pub fn runtime_dir() -> PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(std::env::temp_dir)
}

/// The endpoint `target` names: a socket path, or an OS pid whose endpoint is in
/// [`runtime_dir`] (one per node: a program of several nodes needs the
/// path, which the error lists).
///
/// # Errors
/// A sentence: nothing listens, or several nodes do.
pub fn find_endpoint(target: &str) -> Result<PathBuf, String> {
    if let Ok(os_pid) = target.parse::<u32>() {
        let dir = runtime_dir();
        let prefix = format!("tprof-{os_pid}-");
        let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".sock"))
            })
            .collect();
        found.sort();
        return match found.len() {
            0 => Err(format!(
                "process {os_pid} has no control endpoint in {}: start it with TPROF_CONTROL=1 \
                 (and tprof::control::ControlEndpoint::open_from_env), or give the socket's path",
                dir.display()
            )),
            1 => Ok(found.remove(0)),
            _ => Err(format!(
                "process {os_pid} has {} nodes with an endpoint; name one: {}",
                found.len(),
                found
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        };
    }
    let path = Path::new(target);
    if path.exists() {
        Ok(path.to_owned())
    } else {
        Err(format!(
            "{target}: no such socket (give an OS pid or a socket's path)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_path_names_the_program_and_the_node() {
        let path = default_path(4242, 3);
        assert_eq!(path.file_name().unwrap(), "tprof-4242-3.sock");
        assert!(path.is_absolute());
    }
}
