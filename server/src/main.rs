//! The `roost` binary: see `roost --help` and the README.

fn main() -> std::process::ExitCode {
    roost_server::cli::main()
}
