//! The HTTP surface as data: every route's method, path, body, answer and error codes.
//!
//! Routes are registered only through [`Routes::at`], which takes an [`Endpoint`], and the
//! skill file (`/skill.md`) and the skills page render the same endpoints. So a route
//! cannot be served without being documented, and the document cannot name a route that is
//! not served. Bodies and answers name `roost.v1` messages, whose fields the renderer reads
//! from the descriptor set ([`roost_proto::describe`]): the reference is what serde does.

use axum::{
    Router,
    handler::Handler,
    routing::{MethodFilter, any, on},
};
use roost_proto::ErrorReason;

use crate::{
    Core,
    access::{Guard, guard},
};

/// An HTTP method roost routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// GET.
    Get,
    /// POST.
    Post,
    /// DELETE.
    Delete,
}

impl Verb {
    /// The method's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Delete => "DELETE",
        }
    }

    fn filter(self) -> MethodFilter {
        match self {
            Self::Get => MethodFilter::GET,
            Self::Post => MethodFilter::POST,
            Self::Delete => MethodFilter::DELETE,
        }
    }

    /// Whether the method changes something (and so is origin-checked on the dashboard).
    pub fn mutates(self) -> bool {
        self != Self::Get
    }
}

/// What a request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// Nothing (query parameters, if any, are listed separately).
    None,
    /// A JSON object: the named `roost.v1` message (an empty body is `{}`).
    Json(&'static str),
    /// A JSON object described in words (its members are messages named there).
    JsonText(&'static str),
    /// An OTLP export request: protobuf or JSON, optionally gzipped.
    Otlp,
    /// The named message as protobuf (`application/x-protobuf`) or JSON, optionally gzipped.
    ProtobufOrJson(&'static str),
}

/// What a successful call answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The status with the named message as a JSON object.
    Json(u16, &'static str),
    /// A JSON array of the named message.
    JsonArray(&'static str),
    /// The status with a JSON object described in words.
    JsonText(u16, &'static str),
    /// A `text/event-stream` whose events carry the named message as JSON.
    Sse(&'static str),
    /// The OTLP export response, in the request's encoding.
    Otlp,
    /// The MCP Streamable HTTP transport.
    Mcp,
    /// A document of the given media type (or of one of several, separated by commas).
    Document(&'static str),
}

/// One documented route.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint {
    /// Its method.
    pub verb: Verb,
    /// Its path as axum routes it: `{name}` for a path parameter, `{*name}` for one that
    /// takes the rest of the path, slashes included (documents show it as `{name}`, see
    /// [`Endpoint::shown_path`]).
    pub path: &'static str,
    /// What it does, for the reader of the skill file (and for an LLM reading it).
    pub summary: &'static str,
    /// Query parameters: name and meaning.
    pub params: &'static [(&'static str, &'static str)],
    /// The request body.
    pub body: Body,
    /// The success answer.
    pub answer: Answer,
    /// The error codes particular to this route. Those that follow from its guard and body
    /// (401, 403 cross_origin, 400/413/415 for a JSON body) are added by [`Endpoint::errors`].
    pub errors: &'static [ErrorReason],
}

impl Endpoint {
    /// A route with no body and no particular errors; its answer is set with
    /// [`Endpoint::answers`] or [`Endpoint::answer_of`] (a unit test checks every route names
    /// a real message).
    pub const fn new(verb: Verb, path: &'static str, summary: &'static str) -> Self {
        Self { verb, path, summary, params: &[], body: Body::None, answer: Answer::Json(200, ""), errors: &[] }
    }

    /// The path as documents show it: `{*name}` is `{name}` (OpenAPI has no other form; its
    /// value may hold slashes, escaped or not).
    pub fn shown_path(&self) -> String {
        self.path.replace("{*", "{")
    }

    /// `GET path`.
    pub const fn get(path: &'static str, summary: &'static str) -> Self {
        Self::new(Verb::Get, path, summary)
    }

    /// `POST path`.
    pub const fn post(path: &'static str, summary: &'static str) -> Self {
        Self::new(Verb::Post, path, summary)
    }

    /// `DELETE path`.
    pub const fn delete(path: &'static str, summary: &'static str) -> Self {
        Self::new(Verb::Delete, path, summary)
    }

    /// With a JSON body of `message`.
    pub const fn body(mut self, message: &'static str) -> Self {
        self.body = Body::Json(message);
        self
    }

    /// With another kind of body.
    pub const fn body_of(mut self, body: Body) -> Self {
        self.body = body;
        self
    }

    /// Answering 200 with `message`.
    pub const fn answers(self, message: &'static str) -> Self {
        self.answers_with(200, message)
    }

    /// Answering `status` with `message`.
    pub const fn answers_with(mut self, status: u16, message: &'static str) -> Self {
        self.answer = Answer::Json(status, message);
        self
    }

    /// With another kind of answer.
    pub const fn answer_of(mut self, answer: Answer) -> Self {
        self.answer = answer;
        self
    }

    /// With query parameters.
    pub const fn params(mut self, params: &'static [(&'static str, &'static str)]) -> Self {
        self.params = params;
        self
    }

    /// With the errors particular to this route.
    pub const fn errors(mut self, errors: &'static [ErrorReason]) -> Self {
        self.errors = errors;
        self
    }

    /// How the route is guarded (from the access policy itself).
    pub fn guard(&self) -> Guard {
        guard(self.path)
    }

    /// Every error code a client can get from this route, in status order: the route's own
    /// plus those its guard and body imply. (503/500 apply everywhere and are left out.)
    pub fn all_errors(&self) -> Vec<ErrorReason> {
        let mut errors: Vec<ErrorReason> = self.errors.to_vec();
        match self.body {
            // Telemetry bodies are decoded within the ingest budget (`crate::budget`).
            Body::Otlp | Body::ProtobufOrJson(_) => errors.extend([
                ErrorReason::InvalidArgument,
                ErrorReason::PayloadTooLarge,
                ErrorReason::UnsupportedMediaType,
                ErrorReason::Overloaded,
            ]),
            Body::Json(_) | Body::JsonText(_) => errors.extend([
                ErrorReason::InvalidArgument,
                ErrorReason::PayloadTooLarge,
                ErrorReason::UnsupportedMediaType,
            ]),
            Body::None if !self.params.is_empty() || self.path.contains('{') => {
                errors.push(ErrorReason::InvalidArgument)
            }
            Body::None => {}
        }
        // Every route but /healthz checks `Host` while loopback callers are trusted
        // (`crate::hosts`).
        if self.path != "/healthz" {
            errors.push(ErrorReason::BadHost);
        }
        match self.guard() {
            Guard::Open => {}
            Guard::OwnKeys => errors.push(ErrorReason::Unauthenticated),
            Guard::App => errors.push(ErrorReason::CrossOrigin),
            Guard::Dashboard | Guard::Page => {
                errors.push(ErrorReason::Unauthenticated);
                if self.verb.mutates() {
                    errors.push(ErrorReason::CrossOrigin);
                }
            }
        }
        errors.sort_by_key(|r| (r.http_status().as_u16(), r.code()));
        errors.dedup();
        errors
    }
}

/// A group of routes, as the router serves them and the skill file documents them.
pub struct Routes {
    /// The section's heading in the skill file.
    pub title: &'static str,
    /// What the section is for.
    pub intro: &'static str,
    /// The routes, in the order they are documented.
    pub endpoints: Vec<&'static Endpoint>,
    router: Router<Core>,
}

impl Routes {
    /// An empty section.
    pub(crate) fn new(title: &'static str, intro: &'static str) -> Self {
        Self { title, intro, endpoints: Vec::new(), router: Router::new() }
    }

    /// Serves `endpoint` with `handler`.
    pub(crate) fn at<H, T>(mut self, endpoint: &'static Endpoint, handler: H) -> Self
    where
        H: Handler<T, Core>,
        T: 'static,
    {
        self.router = self.router.route(endpoint.path, on(endpoint.verb.filter(), handler));
        self.endpoints.push(endpoint);
        self
    }

    /// Serves every method of `endpoint`'s path with `handler` (a protocol with its own
    /// methods, such as MCP's transport).
    pub(crate) fn at_any<H, T>(mut self, endpoint: &'static Endpoint, handler: H) -> Self
    where
        H: Handler<T, Core>,
        T: 'static,
    {
        self.router = self.router.route(endpoint.path, any(handler));
        self.endpoints.push(endpoint);
        self
    }

    pub(crate) fn into_router(self) -> Router<Core> {
        self.router
    }
}

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routes").field("title", &self.title).field("endpoints", &self.endpoints).finish()
    }
}
