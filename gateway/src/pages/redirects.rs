//! Where a sign-in form may send its visitor afterwards: the `next` parameter, kept only
//! when it is a path on this site.
//!
//! `next` arrives percent-decoded. A browser that follows `Location` drops tabs and
//! newlines and reads `\` as `/`, so `/\t/evil.example` or `/\evil.example` would become the
//! scheme-relative `//evil.example`: another site. A kept `next` starts with one `/`, has no
//! control character and no backslash anywhere, and is not one of the sign-in pages
//! themselves (which would loop).

/// `next` if it is a path on this site and not under one of `loops`, else `fallback`.
pub(super) fn local_next<'a>(next: &'a str, loops: &[&str], fallback: &'a str) -> &'a str {
    let path_only = next.starts_with('/') && !next.starts_with("//");
    let clean = !next.chars().any(|c| c.is_control() || c == '\\');
    let loops = loops.iter().any(|p| next.starts_with(p));
    if path_only && clean && !loops { next } else { fallback }
}

#[cfg(test)]
mod tests {
    use super::local_next;

    #[test]
    fn only_paths_on_this_site_are_kept() {
        let next = |n| local_next(n, &["/login"], "/");
        assert_eq!(next("/instances/ins_1?x=1"), "/instances/ins_1?x=1");
        assert_eq!(next("/dashboard/traces?q=%2F%2Fx"), "/dashboard/traces?q=%2F%2Fx");
        for bad in [
            "https://evil.example/",
            "//evil.example",
            "/\\evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/\r/evil.example",
            "/x\\y",
            "/\u{7f}/evil.example",
            "/\u{85}/evil.example",
            "",
            "evil.example",
            "/login?next=/x",
        ] {
            assert_eq!(next(bad), "/", "{bad:?}");
        }
    }
}
