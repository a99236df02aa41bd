//! Where control endpoints live: the folder they are made in ([`runtime_dir`]) and the
//! socket's name there, after the OS pid and the node ([`default_path`]).

use std::path::PathBuf;

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
