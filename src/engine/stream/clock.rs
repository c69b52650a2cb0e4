//! The engine-time clock of a session ([`EngineClock`]): the calling
//! thread's CPU time where the platform gives it. It measures only; what a
//! session does past its budget is decided in the session.

use std::time::{Duration, Instant};

/// Measures the engine time of a call: the calling thread's CPU time where
/// the platform gives it, so that a session on a busy machine is not charged
/// for the time other threads held its CPU; the monotonic clock otherwise.
pub(super) enum EngineClock {
    Cpu(Duration),
    Wall(Instant),
}

impl EngineClock {
    pub(super) fn start() -> Self {
        match thread_cpu_time() {
            Some(t) => Self::Cpu(t),
            None => Self::Wall(Instant::now()),
        }
    }

    pub(super) fn elapsed(&self) -> Duration {
        match self {
            Self::Cpu(t) => thread_cpu_time().map_or(Duration::ZERO, |now| now.saturating_sub(*t)),
            Self::Wall(t) => t.elapsed(),
        }
    }
}

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
#[cfg(target_os = "linux")]
fn thread_cpu_time() -> Option<Duration> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    let secs = u64::try_from(t.tv_sec).ok()?;
    let nanos = u32::try_from(t.tv_nsec).ok()?;
    Some(Duration::new(secs, nanos))
}

/// The calling thread's CPU time: not available here.
#[cfg(not(target_os = "linux"))]
fn thread_cpu_time() -> Option<Duration> {
    None
}
