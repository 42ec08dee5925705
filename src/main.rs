//! The `fslab` command line: argument parsing and wiring only; the work is
//! done by the `fslab` library.

mod cli;

use std::process::ExitCode;

use clap::Parser;
use fslab::{exit, output};

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    cli::note_renamed_flags(&std::env::args_os().skip(1).map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>());
    match cli::dispatch(args) {
        Ok(code) => code,
        // The reader of our output went away (`fslab … | head`): not a failure.
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let status = exit::classify(&e);
            let hint = if fslab::exit::is_no_space(&e) {
                " (a filesystem fslab writes to is full: free space, or use --workdir on a larger filesystem)"
            } else {
                ""
            };
            output::diagnostic(&format!("fslab: error: {e:#}{hint}"));
            status.into()
        }
    }
}
