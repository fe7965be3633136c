//! The seed's rule for the read side of the dashboard: "a handler that cannot answer
//! returns an empty result with HTTP 200 rather than 500". Every feature page and every
//! q/1 shape answers through [`HandlerFailures::or_warning`]; `roost status` reads the last
//! failure back, so an empty answer is never mistaken for an empty store.
//!
//! Only failures of roost's own (the store, a file) become warnings. A client's mistake (an
//! unknown shape, a bad argument) is still its 4xx: an empty 200 would hide it.

use std::sync::Mutex;

use roost_proto::v1::HandlerFailure;
use tracing::warn;

use crate::{
    Error, Result,
    time::{now_ms, timestamp_ms},
};

/// The last read that answered empty with a warning.
#[derive(Default)]
pub struct HandlerFailures {
    last: Mutex<Option<HandlerFailure>>,
}

impl HandlerFailures {
    /// `result`, or — when roost itself failed — an empty `T` with the warning set by
    /// `set_warning`. A client error stays an error.
    pub fn or_warning<T: Default>(
        &self,
        page: &str,
        result: Result<T>,
        set_warning: impl FnOnce(&mut T, String),
    ) -> Result<T> {
        match result {
            Ok(answer) => Ok(answer),
            Err(Error::Api(err)) if !err.reason().is_server_fault() => Err(err.into()),
            Err(err) => {
                let mut empty = T::default();
                set_warning(&mut empty, self.note(page, &err));
                Ok(empty)
            }
        }
    }

    /// Logs a page's failure, keeps it for `roost status`, and returns the warning to show.
    pub fn note(&self, page: &str, err: &Error) -> String {
        warn!(page, error = %err, "answered without its data");
        let failure = HandlerFailure { page: page.into(), error: err.to_string(), at: Some(timestamp_ms(now_ms())) };
        *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(failure);
        format!("the {page} answer could not be built ({err}); this is not an empty store")
    }

    /// The last failure, if any.
    pub fn last(&self) -> Option<HandlerFailure> {
        self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}
