//! The dashboard's pages: HTML checks without a browser (scraper) for each page group,
//! and the real-browser tests (headless Chromium through chromedriver).

mod browser;
mod features;
mod foundation;
mod live;
mod scores;
mod sessions;
mod trace_sessions;
mod traces;
mod usage;
