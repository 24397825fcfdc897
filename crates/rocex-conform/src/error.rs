//! Why a replay could not run at all (as opposed to a mismatch, which is a result).

use core::fmt;

use rocex_dump::capture::CaptureError;
use rocex_proto::VerbsError;

use crate::connection::Connection;

/// A replay that could not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConformError {
    /// The capture could not be read.
    Capture(CaptureError),
    /// The capture holds no RoCE frame.
    NothingToReplay,
    /// The responder could not be set up as the capture requires.
    Setup {
        /// The connection, as printed in reports.
        connection: String,
        /// What was being set up.
        step: &'static str,
        /// The engine's refusal.
        error: VerbsError,
    },
}

impl ConformError {
    /// Maps the engine's refusal of `step`, setting up `conn`'s replayed QP, to an error
    /// that names the connection.
    pub(crate) fn setup<'a>(
        conn: &'a Connection,
        step: &'static str,
    ) -> impl Fn(VerbsError) -> Self + 'a {
        move |error| Self::Setup {
            connection: conn.label(),
            step,
            error,
        }
    }
}

impl fmt::Display for ConformError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Capture(e) => write!(f, "{e}"),
            Self::NothingToReplay => write!(f, "no RoCE frame in the capture: nothing to replay"),
            Self::Setup {
                connection,
                step,
                error,
            } => {
                write!(
                    f,
                    "{connection}: cannot set up the responder ({step}): {error}"
                )
            }
        }
    }
}

impl std::error::Error for ConformError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Capture(e) => Some(e),
            Self::NothingToReplay => None,
            Self::Setup { error, .. } => Some(error),
        }
    }
}

impl From<CaptureError> for ConformError {
    fn from(e: CaptureError) -> Self {
        Self::Capture(e)
    }
}
