//! The `fslab` command line: argument parsing and wiring only; the work is
//! done by the `fslab` library.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::dispatch(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fslab: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
