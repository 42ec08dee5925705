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

/// A "did not hang" check: the step begun at `started` ended within `bound`,
/// which must be many times (10x or more) what the step takes on an idle
/// machine, so that a loaded machine cannot fail it. A duration compared
/// with an expectation is a measurement instead and belongs in a `timing_…`
/// test (tests/it/test_rules.rs checks that).
pub fn did_not_hang(started: std::time::Instant, bound: std::time::Duration, what: &str) {
    let took = started.elapsed();
    assert!(took < bound, "{what} took {took:.1?}, more than the {bound:?} it may take without hanging");
}
