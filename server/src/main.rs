//! The `roost` binary: see `roost --help` and the README.

/// mimalloc rather than the system allocator: glibc keeps what a burst freed in per-thread
/// arenas (a 30 MB export decoded on one worker thread, the next on another, and the
/// process holds both), while mimalloc gives freed pages back to the system. Measured in
/// `server/tests/limits.rs`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    roost_server::cli::main()
}
