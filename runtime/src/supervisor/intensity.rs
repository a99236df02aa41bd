//! Restart intensity: how many restarts a supervisor allows in a sliding window of time.
//!
//! OTP's rule: a supervisor may restart at most `intensity` children within any `period`.
//! Each restart is recorded with the time it happens; restarts older than `period` are
//! forgotten. The restart that makes the count in the window exceed `intensity` is refused, and
//! the supervisor then stops all its children and exits with [`reached_max_restart_intensity`].
//! So intensity 0 refuses the first restart, and the OTP default (1 in 5 s) allows one restart,
//! then refuses a second within 5 s of it.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use crate::ExitReason;

/// The text of the reason a supervisor exits with when its children needed more restarts than
/// its intensity allows: see [`reached_max_restart_intensity`].
pub const REACHED_MAX_RESTART_INTENSITY: &str = "reached_max_restart_intensity";

/// The reason a supervisor exits with when one restart too many was needed within its period:
/// `ExitReason::Custom("reached_max_restart_intensity")` (OTP's
/// `{shutdown, reached_max_restart_intensity}`).
///
/// ```
/// use runtime::supervisor::reached_max_restart_intensity;
/// assert_eq!(reached_max_restart_intensity().to_string(), "reached_max_restart_intensity");
/// ```
pub fn reached_max_restart_intensity() -> ExitReason {
    ExitReason::custom(REACHED_MAX_RESTART_INTENSITY)
}

/// What [`RestartIntensity::record_restart`] decides.
#[must_use = "a refused restart must stop the supervisor"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RestartVerdict {
    /// The restart is within the limit: go ahead.
    Allowed,
    /// One restart too many in the window: stop every child and exit.
    Exceeded,
}

/// The restarts of one supervisor within the last `period`.
///
/// ```text
///                 record_restart: at most `intensity` restarts in the window
///                ┌─────────┐
///                ▼         │
///  new ──► [ Allowed ] ────┘
///                │ record_restart: one more than `intensity` in the window
///                ▼
///          [ Exceeded ]   terminal: the supervisor stops every child and exits
/// ```
///
/// Restarts older than `period` fall out of the window, so a supervisor that restarts slowly
/// enough keeps going for ever.
#[derive(Debug)]
pub(crate) struct RestartIntensity {
    intensity: u32,
    period: Duration,
    /// When the restarts in the window happened, oldest first.
    restarts: VecDeque<Instant>,
}

impl RestartIntensity {
    /// At most `intensity` restarts in any `period`.
    pub(crate) fn new(intensity: u32, period: Duration) -> RestartIntensity {
        RestartIntensity {
            intensity,
            period,
            restarts: VecDeque::new(),
        }
    }

    /// Records a restart at `now` and says whether it is allowed.
    pub(crate) fn record_restart(&mut self, now: Instant) -> RestartVerdict {
        while let Some(&oldest) = self.restarts.front() {
            if now.saturating_duration_since(oldest) >= self.period {
                self.restarts.pop_front();
            } else {
                break;
            }
        }
        self.restarts.push_back(now);
        if self.restarts.len() > self.intensity as usize {
            RestartVerdict::Exceeded
        } else {
            RestartVerdict::Allowed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_intensity_restarts_per_period_then_refuses() {
        let t0 = Instant::now();
        let mut window = RestartIntensity::new(2, Duration::from_secs(5));
        assert_eq!(window.record_restart(t0), RestartVerdict::Allowed);
        assert_eq!(
            window.record_restart(t0 + Duration::from_secs(1)),
            RestartVerdict::Allowed
        );
        assert_eq!(
            window.record_restart(t0 + Duration::from_secs(2)),
            RestartVerdict::Exceeded
        );
    }

    #[test]
    fn old_restarts_fall_out_of_the_window() {
        let t0 = Instant::now();
        let mut window = RestartIntensity::new(1, Duration::from_secs(5));
        assert_eq!(window.record_restart(t0), RestartVerdict::Allowed);
        assert_eq!(
            window.record_restart(t0 + Duration::from_secs(5)),
            RestartVerdict::Allowed
        );
        assert_eq!(
            window.record_restart(t0 + Duration::from_secs(11)),
            RestartVerdict::Allowed
        );
        assert_eq!(
            window.record_restart(t0 + Duration::from_secs(12)),
            RestartVerdict::Exceeded
        );
    }

    #[test]
    fn intensity_zero_refuses_the_first_restart() {
        let mut window = RestartIntensity::new(0, Duration::from_secs(5));
        assert_eq!(
            window.record_restart(Instant::now()),
            RestartVerdict::Exceeded
        );
    }
}
