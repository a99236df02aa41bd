//! The secret a TCP client of the control endpoint must show: 256 random bits from the OS,
//! written as hex to a file only its user can read, compared in constant time.
//!
//! ```
//! use tprof::control::Token;
//!
//! let token = Token::generate().unwrap();
//! assert_eq!(token.as_str().len(), 64);
//! assert!(token.matches(token.as_str()));
//! assert!(!token.matches("guess"));
//! assert_eq!(format!("{token:?}"), "Token(..)", "never printed");
//! assert!(Token::new("short").is_err());
//! ```

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use subtle::ConstantTimeEq;

/// Random bytes in a generated token (256 bits).
const GENERATED_BYTES: usize = 32;

/// The fewest characters a given token may have (a 128-bit secret as hex).
pub const MIN_TOKEN_LEN: usize = 32;

/// The most characters a token may have.
const MAX_TOKEN_LEN: usize = 1024;

/// A TCP client's secret. Its `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// 256 bits from the OS's random generator (`getrandom(2)`), as 64 hex digits.
    ///
    /// # Errors
    /// When the OS has no randomness to give.
    pub fn generate() -> io::Result<Token> {
        let mut bytes = [0u8; GENERATED_BYTES];
        getrandom::fill(&mut bytes).map_err(io::Error::other)?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// A token chosen by the program: printable ASCII without spaces, of at least
    /// [`MIN_TOKEN_LEN`] characters (128 bits as hex).
    ///
    /// # Errors
    /// A sentence saying what the token lacks.
    pub fn new(text: impl Into<String>) -> Result<Token, String> {
        let text = text.into();
        if text.len() < MIN_TOKEN_LEN || text.len() > MAX_TOKEN_LEN {
            return Err(format!(
                "a control token has {MIN_TOKEN_LEN} to {MAX_TOKEN_LEN} characters, not {}: \
                 let the endpoint generate one",
                text.len()
            ));
        }
        if !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(
                "a control token is printable ASCII without spaces: let the endpoint generate one"
                    .to_owned(),
            );
        }
        Ok(Token(text))
    }

    /// The token as the client sends it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `shown` is this token, compared in time that does not depend on where they
    /// differ (only on their lengths).
    pub fn matches(&self, shown: &str) -> bool {
        self.0.as_bytes().ct_eq(shown.as_bytes()).into()
    }

    /// Reads a token from the first line of `path` (the `.token` file beside an endpoint).
    ///
    /// # Errors
    /// When the file cannot be read or holds no valid token.
    pub fn read_file(path: &Path) -> Result<Token, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
        Token::new(text.lines().next().unwrap_or("").trim())
            .map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// Writes `contents` to a new file at `path` that only this user can read and write (0600),
/// replacing an old one. The file is made with `O_EXCL`, so a link planted at the path is
/// not followed.
///
/// # Errors
/// When the file cannot be made or written.
pub(super) fn write_private(path: &Path, contents: &str) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()
}

/// The file beside an endpoint's socket that holds `what` (`token`, `tcp`, `http`):
/// `tprof-<ospid>-<node>.sock` gives `tprof-<ospid>-<node>.token`.
pub(super) fn beside(socket: &Path, what: &str) -> PathBuf {
    socket.with_extension(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_differ_and_match_only_themselves() {
        let a = Token::generate().unwrap();
        let b = Token::generate().unwrap();
        assert_ne!(a, b);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert!(a.matches(a.as_str()));
        assert!(!a.matches(b.as_str()));
        assert!(!a.matches(&a.as_str()[..63]), "a prefix is not the token");
        assert!(!a.matches(""));
        assert!(Token::new("x".repeat(32)).is_ok());
        assert!(Token::new(format!("{} ", "x".repeat(32))).is_err());
    }

    #[test]
    fn a_private_file_is_0600_and_replaces_the_old_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.token");
        write_private(&path, "old\n").unwrap();
        let token = Token::generate().unwrap();
        write_private(&path, &format!("{}\n", token.as_str())).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(Token::read_file(&path).unwrap(), token);
        assert_eq!(
            beside(Path::new("/r/tprof-1-2.sock"), "tcp"),
            Path::new("/r/tprof-1-2.tcp")
        );
    }
}
