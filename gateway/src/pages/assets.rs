//! Static assets (stylesheet, scripts, favicon, vendored uPlot), embedded in the binary.
//!
//! Each file is served at a content-hashed URL (`/static/roost.3f2a9c1b.css`) with a
//! one-year immutable cache, an ETag, and a gzip body for clients that accept it, so a
//! browser fetches an asset once per release. The unhashed name (`/static/roost.css`) also
//! answers, with a short cache, for hand-typed URLs; `/favicon.ico` answers with the icon.
//! The index (hashes, gzip bodies) is built once, on first use.

use std::{borrow::Cow, collections::HashMap, io::Write, sync::OnceLock};

use axum::{
    body::Body,
    extract::Path,
    response::{IntoResponse, Response},
};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use rust_embed::RustEmbed;
use sha2::{Digest, Sha256};

#[derive(RustEmbed)]
#[folder = "web/static/"]
struct Files;

/// One embedded file, ready to serve.
struct Asset {
    /// Its path under `web/static/` (`vendor/uplot/uPlot.iife.min.js`).
    name: String,
    /// The first 8 bytes of its SHA-256, in hex: part of its URL and its ETag.
    hash: String,
    mime: &'static str,
    body: Cow<'static, [u8]>,
    /// The gzipped body, when that is smaller.
    gzip: Option<Vec<u8>>,
}

struct Index {
    assets: Vec<Asset>,
    /// Hashed file name (`roost.3f2a9c1b.css`) and plain name to the asset's position.
    by_url: HashMap<String, usize>,
}

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut assets = Vec::new();
        let mut by_url = HashMap::new();
        for name in Files::iter() {
            let Some(file) = Files::get(&name) else { continue };
            let hash = hex::encode(&Sha256::digest(&file.data)[..8]);
            let mime = mime_of(&name);
            let gzip = compressible(mime).then(|| gzip(&file.data)).filter(|z| z.len() < file.data.len());
            by_url.insert(hashed_name(&name, &hash), assets.len());
            by_url.insert(name.to_string(), assets.len());
            assets.push(Asset { name: name.to_string(), hash, mime, body: file.data, gzip });
        }
        Index { assets, by_url }
    })
}

/// `dir/name.ext` → `dir/name.<hash>.ext`.
fn hashed_name(name: &str, hash: &str) -> String {
    match name.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}.{hash}.{ext}"),
        None => format!("{name}.{hash}"),
    }
}

fn mime_of(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        _ => "text/plain; charset=utf-8",
    }
}

fn compressible(mime: &str) -> bool {
    mime.starts_with("text/") || mime == "image/svg+xml"
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(data);
    encoder.finish().unwrap_or_default()
}

/// The URL of an embedded file, hashed by its content. Panics in tests (via
/// `every_referenced_asset_exists`) rather than at run time: templates name assets by
/// constants checked there.
pub fn url(name: &str) -> String {
    let index = index();
    match index.by_url.get(name).map(|&i| &index.assets[i]) {
        Some(asset) => format!("/static/{}", hashed_name(&asset.name, &asset.hash)),
        None => format!("/static/{name}"),
    }
}

/// `GET /static/{*path}`.
pub(crate) async fn serve(Path(path): Path<String>, headers: HeaderMap) -> Response {
    respond(&path, &headers)
}

/// `GET /favicon.ico`: browsers ask for it whatever the page links.
pub(crate) async fn favicon(headers: HeaderMap) -> Response {
    respond("favicon.svg", &headers)
}

fn respond(path: &str, headers: &HeaderMap) -> Response {
    let index = index();
    let Some(asset) = index.by_url.get(path).map(|&i| &index.assets[i]) else {
        return (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "no such file")
            .into_response();
    };
    let immutable = path != asset.name;
    let etag = format!("\"{}\"", asset.hash);
    let cache = if immutable { "public, max-age=31536000, immutable" } else { "public, max-age=300" };
    let mut response = if headers.get(header::IF_NONE_MATCH).is_some_and(|v| v.as_bytes() == etag.as_bytes()) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let gzip = asset.gzip.as_ref().filter(|_| accepts_gzip(headers));
        let mut response = match gzip {
            Some(body) => {
                let mut r = Body::from(body.clone()).into_response();
                r.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                r
            }
            None => Body::from(asset.body.clone().into_owned()).into_response(),
        };
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.mime));
        response
    };
    let out = response.headers_mut();
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    out.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        out.insert(header::ETAG, etag);
    }
    response
}

fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(
        |coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or_default().trim();
            let refused = parts.any(|p| matches!(p.trim(), "q=0" | "q=0.0" | "q=0.00" | "q=0.000"));
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_referenced_asset_exists() {
        for name in super::super::layout::ASSETS {
            assert!(index().by_url.contains_key(*name), "{name} is not under web/static");
            assert!(url(name).contains(&index().assets[index().by_url[*name]].hash));
        }
    }

    #[test]
    fn hashed_urls_are_immutable_and_revalidate_by_etag() {
        let url = url("roost.css");
        let path = url.trim_start_matches("/static/");
        let first = respond(path, &HeaderMap::new());
        assert_eq!(first.status(), StatusCode::OK);
        assert!(first.headers()[header::CACHE_CONTROL].to_str().unwrap().contains("immutable"));
        let etag = first.headers()[header::ETAG].clone();
        let mut again = HeaderMap::new();
        again.insert(header::IF_NONE_MATCH, etag);
        assert_eq!(respond(path, &again).status(), StatusCode::NOT_MODIFIED);
        let mut gz = HeaderMap::new();
        gz.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("br, gzip;q=0.8"));
        assert_eq!(respond(path, &gz).headers()[header::CONTENT_ENCODING], "gzip");
        gz.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip;q=0"));
        assert!(respond(path, &gz).headers().get(header::CONTENT_ENCODING).is_none());
        assert_eq!(respond("nope.css", &HeaderMap::new()).status(), StatusCode::NOT_FOUND);
    }
}
