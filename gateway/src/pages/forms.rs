//! What every page form shares: the CSRF check ([`Posted`]), the error answer, the redirect
//! back with a notice (post/redirect/get, so a reload never posts twice), and
//! [`submit`], which makes the core call a form stands for and answers with one or the
//! other.

use std::future::Future;

use axum::{
    Form,
    extract::{FromRequest, FromRequestParts, Request},
    response::{IntoResponse, Redirect, Response},
};
use http::StatusCode;
use roost_proto::ApiError;
use serde::de::DeserializeOwned;

use super::{
    Message,
    layout::{PageCall, percent_encode},
};

/// A posted form whose hidden `csrf` field carries the visitor's form key.
pub trait CsrfField {
    /// The posted `csrf` field.
    fn csrf(&self) -> &str;
}

/// A page form's post, extracted only when its `csrf` field matches the visitor's CSRF
/// cookie; otherwise the handler never runs and the answer is [`expired`].
///
/// An extractor rather than a check at the top of each handler: a handler that takes its
/// form as `Posted` cannot forget the check, and the check stays where the form is
/// named. The order is that of the separate extractors it replaces: `PageCall`, then the
/// body (`Form`'s own rejections first), then the CSRF comparison; nothing reaches the
/// core before it.
pub struct Posted<T>(pub PageCall, pub T);

impl<T> FromRequest<crate::Core> for Posted<T>
where
    T: CsrfField + DeserializeOwned,
{
    type Rejection = Response;

    async fn from_request(request: Request, state: &crate::Core) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = request.into_parts();
        let page = match PageCall::from_request_parts(&mut parts, state).await {
            Ok(page) => page,
            Err(never) => match never {},
        };
        let Form(form) = Form::<T>::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(IntoResponse::into_response)?;
        if !page.csrf_matches(form.csrf()) {
            return Err(expired(&page));
        }
        Ok(Self(page, form))
    }
}

/// Implements [`CsrfField`] for form structs with a `csrf: String` field.
macro_rules! csrf_field {
    ($($form:ty),+ $(,)?) => {
        $(impl $crate::pages::forms::CsrfField for $form {
            fn csrf(&self) -> &str {
                &self.csrf
            }
        })+
    };
}
pub(crate) use csrf_field;

/// A post whose `csrf` field does not match the visitor's cookie: 403, nothing changed.
pub fn expired(page: &PageCall) -> Response {
    let message = Message {
        chrome: page.chrome("Form expired", ""),
        heading: "Nothing was changed".into(),
        detail: "The form was sent without this browser's form key (it expired, or another site sent it). Go back, \
                 reload the page and send it again."
            .into(),
        back: page.came_from().map(|from| (from.to_owned(), "Go back".to_owned())),
    };
    page.render_with(StatusCode::FORBIDDEN, &message)
}

/// A post the core refused: the error table's status and message, nothing changed.
///
/// A web-app user reads the message in the app's chrome, without the error table's code
/// (the operator's dashboard keeps it, for looking it up); both get a link back to the
/// page the form was on (the same-site `Referer`), else to their home page.
pub fn failed(page: &PageCall, err: &ApiError) -> Response {
    let app = page.is_app();
    let home = if app { ("/", "Back to your agents") } else { ("/dashboard", "Back to the overview") };
    let back = match page.came_from() {
        Some(from) => (from.to_owned(), "Go back".to_owned()),
        None => (home.0.to_owned(), home.1.to_owned()),
    };
    let detail = if app {
        format!("{} Go back to correct it and send it again.", sentence(err.message()))
    } else {
        format!("{} ({}). Go back to correct it and send it again.", err.message(), err.reason().code())
    };
    let message = Message {
        chrome: page.chrome("Not done", ""),
        heading: "Nothing was changed".into(),
        detail,
        back: Some(back),
    };
    page.render_with(err.reason().http_status(), &message)
}

/// `text` as a sentence: a capital first letter and a full stop.
fn sentence(text: &str) -> String {
    let mut chars = text.trim().chars();
    let mut out: String = chars.next().map(|c| c.to_uppercase().collect()).unwrap_or_default();
    out.push_str(chars.as_str());
    if !out.ends_with(['.', '!', '?']) {
        out.push('.');
    }
    out
}

/// 303 to `path` with a one-line notice shown above its content. A `#fragment` of `path` stays at the end.
pub fn done(path: &str, notice: &str) -> Response {
    let (path, fragment) = path.split_once('#').map_or((path, String::new()), |(p, f)| (p, format!("#{f}")));
    let joiner = if path.contains('?') { '&' } else { '?' };
    Redirect::to(&format!("{path}{joiner}done={}{fragment}", percent_encode(notice))).into_response()
}

/// Makes a form's core call (`api` is how it reads over REST, for the footer): when it is
/// done, 303 to `back` with `notice(answer)`; when the core refuses, [`failed`].
pub async fn submit<T>(
    page: &PageCall,
    api: impl Into<String>,
    call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    back: &str,
    notice: impl FnOnce(T) -> String,
) -> Response {
    submit_to(page, api, call, |answer| (back.to_owned(), notice(answer))).await
}

/// [`submit`] where the page to go back to depends on the answer too (a new thing's own
/// page): `then(answer)` is `(path, notice)`.
pub async fn submit_to<T>(
    page: &PageCall,
    api: impl Into<String>,
    call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    then: impl FnOnce(T) -> (String, String),
) -> Response {
    match page.load(api, call).await {
        Ok(answer) => {
            let (path, notice) = then(answer);
            done(&path, &notice)
        }
        Err(err) => failed(page, &err),
    }
}
