//! Helpers shared by unit and integration tests. Not part of fslab's API.

/// True under `CI=true`, where every test must really run.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A test cannot run here because of `why`. Outside CI that is a loud skip;
/// under `CI=true` it is a failure, so a test never passes without running.
pub fn skip(why: &str) {
    if in_ci() {
        panic!("{why}, and CI=true: CI must provide it (./scripts/test installs the tools; run as root)");
    }
    // eprintln!, not output::diagnostic: the test harness captures only the macros.
    eprintln!("SKIPPED: {why}");
}

/// True when running as root; otherwise [`skip`] (a failure under CI).
pub fn root_or_skip(what: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    skip(&format!("{what} needs root"));
    false
}
