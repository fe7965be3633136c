//! Facts about this build, fixed at compile time by `build.rs`.

/// The running build.
#[derive(Debug, Clone, Copy)]
pub struct BuildInfo {
    /// Package version (semver).
    pub version: &'static str,
    /// Short git commit, or "unknown" outside a checkout.
    pub git_commit: &'static str,
    /// Build time in Unix seconds.
    pub built_unix: i64,
    /// Target triple.
    pub target: &'static str,
}

/// This binary's build.
pub const BUILD: BuildInfo = BuildInfo {
    version: env!("CARGO_PKG_VERSION"),
    git_commit: env!("ROOST_GIT_COMMIT"),
    built_unix: parse_i64(env!("ROOST_BUILD_UNIX")),
    target: env!("ROOST_TARGET"),
};

/// The versioned contracts this build speaks, by surface. Only ever extended.
pub const CONTRACTS: &[(&str, &str)] = &[("grpc", "roost.v1"), ("query", "q/1"), ("rest", "v1")];

const fn parse_i64(text: &str) -> i64 {
    let bytes = text.as_bytes();
    let mut value = 0i64;
    let mut i = 0;
    while i < bytes.len() {
        value = value * 10 + (bytes[i] - b'0') as i64;
        i += 1;
    }
    value
}
