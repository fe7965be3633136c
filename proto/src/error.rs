//! The error table: one reason, one HTTP status, one gRPC code (docs/architecture.md#errors).
//!
//! The core fails with an [`ApiError`]; it travels as a `tonic::Status` whose details hold a
//! `google.rpc.ErrorInfo` with the reason, so every adapter (REST, SSE, MCP) recovers the
//! same reason and answers `{"error": "<text>", "code": "<reason>"}` with the same status.

use std::{collections::HashMap, fmt};

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::json::enums::JsonEnum;
pub use crate::v1::ErrorReason;

/// The `ErrorInfo.domain` of every roost error.
pub const ERROR_DOMAIN: &str = "roost";

impl ErrorReason {
    /// Every reason roost sends, for tests and docs that enumerate the table.
    pub const ALL: [ErrorReason; 20] = [
        Self::Unauthenticated,
        Self::NotFound,
        Self::InsufficientCredits,
        Self::DeploySettling,
        Self::WrongState,
        Self::InvalidArgument,
        Self::PayloadTooLarge,
        Self::UnsupportedMediaType,
        Self::QueueFull,
        Self::TurnTimeout,
        Self::RuntimeFailed,
        Self::CrossOrigin,
        Self::MethodNotAllowed,
        Self::Unavailable,
        Self::Internal,
        Self::RateLimited,
        Self::BadHost,
        Self::UnpricedModel,
        Self::Overloaded,
        Self::TurnLimit,
    ];

    /// The stable string clients switch on: the REST `code` and the ErrorInfo reason.
    pub fn code(self) -> &'static str {
        Self::json_name(self as i32).unwrap_or("internal")
    }

    /// The reason a code names, if any.
    pub fn from_code(code: &str) -> Option<Self> {
        Self::from_json_name(code).and_then(|n| Self::try_from(n).ok())
    }

    /// The HTTP status of the table.
    pub fn http_status(self) -> http::StatusCode {
        use http::StatusCode as H;
        match self {
            Self::Unauthenticated => H::UNAUTHORIZED,
            Self::NotFound => H::NOT_FOUND,
            Self::InsufficientCredits => H::PAYMENT_REQUIRED,
            Self::DeploySettling | Self::WrongState => H::CONFLICT,
            Self::InvalidArgument | Self::UnpricedModel => H::BAD_REQUEST,
            Self::PayloadTooLarge => H::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => H::UNSUPPORTED_MEDIA_TYPE,
            Self::QueueFull | Self::RateLimited | Self::Overloaded | Self::TurnLimit => H::TOO_MANY_REQUESTS,
            Self::TurnTimeout => H::GATEWAY_TIMEOUT,
            Self::RuntimeFailed => H::BAD_GATEWAY,
            Self::CrossOrigin | Self::BadHost => H::FORBIDDEN,
            Self::MethodNotAllowed => H::METHOD_NOT_ALLOWED,
            Self::Unavailable => H::SERVICE_UNAVAILABLE,
            Self::Unspecified | Self::Internal => H::INTERNAL_SERVER_ERROR,
        }
    }

    /// The gRPC code of the table.
    pub fn grpc_code(self) -> Code {
        match self {
            Self::Unauthenticated => Code::Unauthenticated,
            Self::NotFound => Code::NotFound,
            Self::InsufficientCredits | Self::WrongState => Code::FailedPrecondition,
            Self::DeploySettling => Code::Aborted,
            Self::InvalidArgument | Self::PayloadTooLarge | Self::UnsupportedMediaType | Self::UnpricedModel => {
                Code::InvalidArgument
            }
            Self::QueueFull | Self::RateLimited | Self::Overloaded | Self::TurnLimit => Code::ResourceExhausted,
            Self::TurnTimeout => Code::DeadlineExceeded,
            Self::RuntimeFailed | Self::Unavailable => Code::Unavailable,
            Self::CrossOrigin | Self::BadHost => Code::PermissionDenied,
            Self::MethodNotAllowed => Code::Unimplemented,
            Self::Unspecified | Self::Internal => Code::Internal,
        }
    }

    /// The best reason for a status that carries no ErrorInfo (one made by tonic itself,
    /// such as a decode failure or a deadline set by the client).
    fn from_grpc_code(code: Code) -> Self {
        match code {
            Code::Unauthenticated => Self::Unauthenticated,
            Code::NotFound => Self::NotFound,
            Code::InvalidArgument | Code::OutOfRange => Self::InvalidArgument,
            Code::FailedPrecondition | Code::Aborted | Code::AlreadyExists => Self::WrongState,
            Code::ResourceExhausted => Self::QueueFull,
            Code::DeadlineExceeded => Self::TurnTimeout,
            Code::PermissionDenied => Self::CrossOrigin,
            Code::Unimplemented => Self::MethodNotAllowed,
            Code::Unavailable | Code::Cancelled => Self::Unavailable,
            Code::Ok | Code::Unknown | Code::Internal | Code::DataLoss => Self::Internal,
        }
    }

    /// True for faults of roost itself (logged), false for the client's (not logged).
    pub fn is_server_fault(self) -> bool {
        self.http_status().is_server_error() && !matches!(self, Self::TurnTimeout | Self::RuntimeFailed)
    }
}

/// A failed call: a reason from the table and a message for humans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    reason: ErrorReason,
    message: String,
}

impl ApiError {
    /// An error with the given reason and message.
    pub fn new(reason: ErrorReason, message: impl Into<String>) -> Self {
        Self { reason, message: message.into() }
    }

    /// 400: bad JSON, a missing or unknown field, a bad value.
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(ErrorReason::InvalidArgument, message)
    }

    /// 404: no such resource, or not the caller's.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorReason::NotFound, message)
    }

    /// 401: missing, bad or revoked credentials.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(ErrorReason::Unauthenticated, message)
    }

    /// 500: a fault inside roost. The message reaches the client, so keep secrets out.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorReason::Internal, message)
    }

    /// The reason.
    pub fn reason(&self) -> ErrorReason {
        self.reason
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The REST body: `{"error": "<message>", "code": "<reason>"}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "error": self.message, "code": self.reason.code() })
    }

    /// Recovers the error from a status: the ErrorInfo reason when roost made it, else the
    /// closest reason for its gRPC code.
    pub fn from_status(status: &Status) -> Self {
        let reason = status
            .get_details_error_info()
            .filter(|info| info.domain == ERROR_DOMAIN)
            .and_then(|info| ErrorReason::from_code(&info.reason))
            .unwrap_or_else(|| ErrorReason::from_grpc_code(status.code()));
        Self::new(reason, status.message())
    }

    /// The error roost put in a status, if roost made it (a status from a proxy or the
    /// transport carries no roost ErrorInfo).
    pub fn from_roost_status(status: &Status) -> Option<Self> {
        let info = status.get_details_error_info().filter(|info| info.domain == ERROR_DOMAIN)?;
        Some(Self::new(ErrorReason::from_code(&info.reason)?, status.message()))
    }

    /// The status that carries this error over gRPC.
    pub fn to_status(&self) -> Status {
        let mut details = ErrorDetails::with_error_info(self.reason.code(), ERROR_DOMAIN, HashMap::new());
        // A bound on work in flight: say when to come back (OTLP exporters retry
        // RESOURCE_EXHAUSTED only with RetryInfo).
        if self.reason == ErrorReason::Overloaded {
            details.set_retry_info(Some(std::time::Duration::from_secs(1)));
        }
        Status::with_error_details(self.reason.grpc_code(), self.message.clone(), details)
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.reason.code())
    }
}

impl std::error::Error for ApiError {}

impl From<ApiError> for Status {
    fn from(err: ApiError) -> Self {
        err.to_status()
    }
}

impl From<Status> for ApiError {
    fn from(status: Status) -> Self {
        Self::from_status(&status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_survives_a_trip_through_a_status() {
        for reason in ErrorReason::ALL {
            let err = ApiError::new(reason, "why");
            let back = ApiError::from_status(&err.to_status());
            assert_eq!(back, err, "{reason:?}");
            assert_eq!(ErrorReason::from_code(reason.code()), Some(reason));
        }
        // ALL lists every reason the proto declares.
        assert_eq!(ErrorReason::JSON_NAMES.len(), ErrorReason::ALL.len());
    }

    #[test]
    fn the_table_matches_design_md() {
        let table = [
            ("unauthenticated", 401, Code::Unauthenticated),
            ("not_found", 404, Code::NotFound),
            ("insufficient_credits", 402, Code::FailedPrecondition),
            ("deploy_settling", 409, Code::Aborted),
            ("wrong_state", 409, Code::FailedPrecondition),
            ("invalid_argument", 400, Code::InvalidArgument),
            ("payload_too_large", 413, Code::InvalidArgument),
            ("unsupported_media_type", 415, Code::InvalidArgument),
            ("queue_full", 429, Code::ResourceExhausted),
            ("turn_timeout", 504, Code::DeadlineExceeded),
            ("runtime_failed", 502, Code::Unavailable),
            ("cross_origin", 403, Code::PermissionDenied),
            ("method_not_allowed", 405, Code::Unimplemented),
            ("unavailable", 503, Code::Unavailable),
            ("internal", 500, Code::Internal),
            ("rate_limited", 429, Code::ResourceExhausted),
            ("bad_host", 403, Code::PermissionDenied),
            ("unpriced_model", 400, Code::InvalidArgument),
            ("overloaded", 429, Code::ResourceExhausted),
            ("turn_limit", 429, Code::ResourceExhausted),
        ];
        assert_eq!(table.len(), ErrorReason::ALL.len());
        for (code, http, grpc) in table {
            let reason = ErrorReason::from_code(code).expect(code);
            assert_eq!(reason.http_status().as_u16(), http, "{code}");
            assert_eq!(reason.grpc_code(), grpc, "{code}");
        }
    }

    #[test]
    fn a_bare_status_maps_by_its_code() {
        let err = ApiError::from_status(&Status::invalid_argument("bad varint"));
        assert_eq!(err.reason(), ErrorReason::InvalidArgument);
        assert_eq!(err.to_json()["code"], "invalid_argument");
    }

    #[test]
    fn the_rest_body_has_error_and_code() {
        let body = ApiError::not_found("no instance abc").to_json();
        assert_eq!(body, serde_json::json!({"error": "no instance abc", "code": "not_found"}));
    }
}
