//! The repository stands on its own: no file links to, or names, a path outside it, and
//! every path a file names inside it exists.
//!
//! Checked over every file git tracks or would track (`git ls-files --cached --others
//! --exclude-standard`), as text:
//! - a relative markdown link (`[text](path)`) resolves to a file or folder inside the
//!   repository;
//! - a path from the repository's root in any file (`docs/….md`, `server/src/….rs`,
//!   `tests/….py`, …) names a file or folder that exists, so a renamed or deleted file
//!   leaves no stale pointer behind;
//! - nothing refers to the documents the project was started from, which are not in it
//!   (`../shared`, `DESIGN.md`, `STACK.md`, `STYLE.md`, `seeds/…`): the decisions the code
//!   relies on are in docs/architecture.md.
//!
//! Vendored third-party crates (`vendor/`) are not checked. Migrations are the one
//! exception to the last rule: sqlx checksums each migration's
//! whole text and refuses a store whose applied migrations changed, so an old comment in
//! one stays as it was written.

use std::{
    collections::BTreeSet,
    path::{Component, Path, PathBuf},
    process::Command,
};

/// The names of documents outside the repository.
const OUTSIDE: [&str; 6] = ["../shared", "DESIGN.md", "STACK.md", "STYLE.md", "seeds/hosted", "seeds/local"];
/// Top-level folders whose paths files name, checked to exist.
const ROOTS: [&str; 8] = ["docs/", "server/", "gateway/", "proto/", "tests/", "scripts/", "examples/", ".ci/"];

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Every file git tracks or would track, relative to the repository's root.
fn files(root: &Path) -> Vec<PathBuf> {
    let out = Command::new("git")
        .args(["ls-files", "--cached", "--others", "--exclude-standard", "-z"])
        .current_dir(root)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git ls-files: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
        .filter(|p| root.join(p).is_file())
        .collect()
}

/// `path` joined to `base` with `.` and `..` folded, or `None` when it climbs above the
/// repository's root.
fn inside(base: &Path, path: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in base.join(path).components() {
        match part {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// The targets of the markdown links in `text` (`[…](target)`), without their anchors.
fn markdown_links(text: &str) -> Vec<&str> {
    let mut links = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        let target = target.split('#').next().unwrap_or("");
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            links.push(target);
        }
        rest = &rest[end..];
    }
    links
}

/// The paths from the repository's root that `text` names: a word starting with one of
/// [`ROOTS`] and made of path characters, ending in a file name with an extension or a
/// `/`. Patterns (`*`, `{a,b}`, `<id>`) end the word and are not checked.
fn named_paths(text: &str) -> BTreeSet<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/');
    let mut found = BTreeSet::new();
    for root in ROOTS {
        let mut from = 0;
        while let Some(at) = text[from..].find(root) {
            let start = from + at;
            from = start + root.len();
            // The start of a word: not part of a longer path (`target/docs/…`) or a URL.
            if text[..start].chars().next_back().is_some_and(|c| is_path_char(c) || c == ':') {
                continue;
            }
            let word: String = text[start..].chars().take_while(|&c| is_path_char(c)).collect();
            let word = word.trim_end_matches('.');
            let next = text[start + word.len()..].chars().next();
            if next.is_some_and(|c| matches!(c, '*' | '{' | '<' | '$')) {
                continue;
            }
            let last = word.rsplit('/').next().unwrap_or("");
            if word.len() > root.len() && (last.contains('.') || word.ends_with('/')) {
                found.insert(word.to_owned());
            }
        }
    }
    found
}

fn is_migration(path: &Path) -> bool {
    path.starts_with("server/migrations")
}

/// Third-party crates kept in the repository as they were published: their paths are their
/// own repository's.
fn is_vendored(path: &Path) -> bool {
    path.starts_with("vendor")
}

#[test]
fn no_file_points_outside_the_repository_or_at_a_missing_path() {
    let root = repository();
    let mut problems = Vec::new();
    let files = files(&root);
    assert!(files.len() > 100, "the repository's files were listed: {}", files.len());
    for file in &files {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else { continue };
        // This file names what it looks for.
        if file.ends_with("tests/suite/repository.rs") || is_vendored(file) {
            continue;
        }
        if !is_migration(file) {
            for name in OUTSIDE {
                if text.contains(name) {
                    problems.push(format!("{}: names {name}, which is not in the repository", file.display()));
                }
            }
        }
        let base = file.parent().unwrap_or(Path::new(""));
        if file.extension().is_some_and(|e| e == "md") {
            for link in markdown_links(&text) {
                match inside(base, link) {
                    None => problems.push(format!("{}: links to {link}, outside the repository", file.display())),
                    Some(target) if !root.join(&target).exists() => {
                        problems.push(format!("{}: links to {link}, which does not exist", file.display()));
                    }
                    Some(_) => {}
                }
            }
        }
        for path in named_paths(&text) {
            if !root.join(&path).exists() && !is_generated(&path) {
                problems.push(format!("{}: names {path}, which does not exist", file.display()));
            }
        }
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}

/// Paths that exist only once something is built or run (`target/`, caches), which a file
/// may name without their being in the repository.
fn is_generated(path: &str) -> bool {
    path.contains("/target/") || path.contains("node_modules") || path.contains("/.venv")
}

#[test]
fn the_checks_see_what_they_look_for() {
    assert_eq!(markdown_links("see [a](docs/x.md#y) and [b](https://e.com) [c](../up.md)"), ["docs/x.md", "../up.md"]);
    assert_eq!(inside(Path::new("docs"), "../README.md"), Some(PathBuf::from("README.md")));
    assert_eq!(inside(Path::new("docs"), "../../shared/DESIGN.md"), None);
    let named = named_paths("in docs/hosting.md#x, server/src/llm/ and `tests/a.py`; target/docs/no.md, docs/*.md");
    assert_eq!(named.into_iter().collect::<Vec<_>>(), ["docs/hosting.md", "server/src/llm/", "tests/a.py"]);
}
