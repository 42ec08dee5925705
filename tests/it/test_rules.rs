//! Rules the tests themselves follow, checked on their sources.
//!
//! A test whose assertion rests on wall time runs in the serial `timing_`
//! pass (`scripts/test` runs the rest two at a time on a loaded 2-core
//! machine, where a 1.2 s step measured 1.4 s and failed a 10% tolerance).
//! The check below parses every Rust file of the workspace with `syn` and
//! flags a `#[test]` function not named `timing_…` that asserts on, or
//! branches to a failure on, a measured duration: a value read from a
//! clock (`Instant`, `SystemTime`, `.elapsed()`, `duration_since`) or a
//! binding or function named for a measured time (`took`, `elapsed`,
//! `wall…`, `…runtime…`), directly or through `let` bindings made from one.
//! A "did not hang" bound goes through `fslab::testsupport::did_not_hang`, whose bound
//! is many times the step's time; it is not a measurement and is allowed.

use quote::ToTokens;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// Methods whose value is a measured duration.
const CLOCK_READS: &[&str] = &["elapsed", "duration_since"];

/// An identifier named, by this project's convention, for a measured time.
fn names_a_measured_time(ident: &str) -> bool {
    let ident = ident.to_ascii_lowercase();
    ident == "took" || ident.contains("elapsed") || ident.starts_with("wall_") || ident.contains("runtime")
}

/// One test function's flow of measured times into its checks.
#[derive(Default)]
struct Test {
    /// Local bindings holding a measured time.
    measured: BTreeSet<String>,
    findings: Vec<String>,
}

impl Test {
    /// Whether the value of `expr` is a measured time, read syntactically:
    /// a clock read, a call or binding named for one, or arithmetic,
    /// conversions and methods on one. A field is stored data (`run.wall_s`
    /// read back from a store), not a measurement made by the test. Arguments of other calls are not the
    /// call's value (`wait_until(Instant::now() + bound)` measures nothing).
    fn is_measured(&self, expr: &syn::Expr) -> bool {
        use syn::Expr::*;
        match expr {
            MethodCall(m) => {
                let method = m.method.to_string();
                CLOCK_READS.contains(&method.as_str())
                    || names_a_measured_time(&method)
                    || self.is_measured(&m.receiver)
            }
            Call(c) => match &*c.func {
                Path(p) => p.path.segments.last().is_some_and(|s| names_a_measured_time(&s.ident.to_string())),
                _ => false,
            },
            Path(p) => p.path.get_ident().is_some_and(|i| {
                let i = i.to_string();
                self.measured.contains(&i) || names_a_measured_time(&i)
            }),
            Binary(b) => self.is_measured(&b.left) || self.is_measured(&b.right),
            Unary(u) => self.is_measured(&u.expr),
            Paren(p) => self.is_measured(&p.expr),
            Reference(r) => self.is_measured(&r.expr),
            Cast(c) => self.is_measured(&c.expr),
            Try(t) => self.is_measured(&t.expr),
            _ => false,
        }
    }

    /// Whether a checked condition uses a measured time anywhere in it.
    fn uses_measured(&self, expr: &syn::Expr) -> bool {
        struct Finder<'a> {
            test: &'a Test,
            found: bool,
        }
        impl<'ast> Visit<'ast> for Finder<'_> {
            fn visit_expr(&mut self, e: &'ast syn::Expr) {
                self.found |= self.test.is_measured(e);
                syn::visit::visit_expr(self, e);
            }
        }
        let mut finder = Finder { test: self, found: false };
        finder.visit_expr(expr);
        finder.found
    }
}

impl<'ast> Visit<'ast> for Test {
    fn visit_local(&mut self, local: &'ast syn::Local) {
        if let (Some(init), syn::Pat::Ident(name)) = (&local.init, &local.pat) {
            if self.is_measured(&init.expr) {
                self.measured.insert(name.ident.to_string());
            }
        }
        syn::visit::visit_local(self, local);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let name = mac.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        // The checked arguments only: what an assertion prints is not what it decides.
        let checked = match name.as_str() {
            "assert" | "debug_assert" | "prop_assert" => 1,
            "assert_eq" | "assert_ne" | "debug_assert_eq" | "debug_assert_ne" | "prop_assert_eq" => 2,
            _ => 0,
        };
        let parser = syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        let Ok(arguments) = mac.parse_body_with(parser) else { return };
        for argument in arguments.iter().take(checked) {
            if self.uses_measured(argument) {
                self.findings.push(format!("{name}!({})", argument.to_token_stream()));
            }
        }
    }

    fn visit_expr_if(&mut self, expr: &'ast syn::ExprIf) {
        // `if took > limit { failures.push(…) }`: a check spelled as a branch.
        let body = expr.then_branch.to_token_stream().to_string();
        let fails = ["push", "panic", "bail"].iter().any(|f| body.contains(f));
        if fails && self.uses_measured(&expr.cond) {
            self.findings.push(format!("if {} {{ … }}", expr.cond.to_token_stream()));
        }
        syn::visit::visit_expr_if(self, expr);
    }
}

/// Every `#[test]` function of a file: `(name, findings)`.
#[derive(Default)]
struct Tests(Vec<(String, Vec<String>)>);

impl Tests {
    fn check(&mut self, attrs: &[syn::Attribute], name: &syn::Ident, block: &syn::Block) {
        if !attrs.iter().any(|a| a.path().segments.last().is_some_and(|s| s.ident == "test")) {
            return;
        }
        let mut test = Test::default();
        test.visit_block(block);
        self.0.push((name.to_string(), test.findings));
    }
}

impl<'ast> Visit<'ast> for Tests {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.check(&f.attrs, &f.sig.ident, &f.block);
        syn::visit::visit_item_fn(self, f);
    }
}

/// The wall-time checks of tests not named `timing_…`, as `name: check` lines.
fn misplaced_timing_checks(source: &str) -> Vec<String> {
    let file = syn::parse_file(source).expect("the workspace's sources parse");
    let mut tests = Tests::default();
    tests.visit_file(&file);
    tests
        .0
        .into_iter()
        .filter(|(name, _)| !name.starts_with("timing_"))
        .flat_map(|(name, findings)| findings.into_iter().map(move |f| format!("{name}: {f}")))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn tests_that_assert_on_wall_time_are_timing_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "tests", "crates", "plugins"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 100, "found only {} Rust files under {}", files.len(), root.display());
    let mut misplaced = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        for finding in misplaced_timing_checks(&source) {
            misplaced.push(format!("{}: {finding}", file.strip_prefix(root).unwrap().display()));
        }
    }
    assert!(
        misplaced.is_empty(),
        "these tests assert on wall time but run in the parallel pass; name them `timing_…` \
         (or, for a did-not-hang bound, use fslab::testsupport::did_not_hang):\n{}",
        misplaced.join("\n")
    );
}

#[test]
fn the_wall_time_rule_sees_direct_derived_and_branching_checks() {
    let source = r#"
        #[test]
        fn direct() { let t = Instant::now(); work(); assert!(t.elapsed() < Duration::from_secs(1)); }
        #[test]
        fn derived() { let s = fio_runtime_s(); let ratio = s / model; assert!((ratio - 1.0).abs() < 0.1); }
        #[test]
        fn branching() { let took = run(); if took > 2.0 { failures.push(1) } assert!(failures.is_empty()); }
        #[test]
        fn message_only() { let t = Instant::now(); assert!(ok(), "took {:?}", t.elapsed()); }
        #[test]
        fn liveness() { let t = Instant::now(); stop(); fslab::testsupport::did_not_hang(t, Duration::from_secs(30), "stop"); }
        #[test]
        fn timing_direct() { let t = Instant::now(); assert!(t.elapsed() < Duration::from_secs(1)); }
    "#;
    let found = misplaced_timing_checks(source);
    let names: BTreeSet<&str> = found.iter().map(|f| f.split(':').next().unwrap()).collect();
    assert_eq!(names, BTreeSet::from(["direct", "derived", "branching"]), "{found:#?}");
}

#[test]
fn the_serial_pass_runs_unit_and_integration_timing_tests() {
    // A `timing_` unit test in src/ is skipped by the parallel pass; the
    // serial pass must run it, not only the integration binary's.
    let script = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test")).unwrap();
    let serial = script
        .lines()
        .find(|l| l.starts_with("cargo test") && l.contains("-- ::timing_"))
        .expect("scripts/test has a serial `::timing_` pass");
    assert!(serial.contains("--test-threads=1"), "{serial}");
    assert!(
        serial.contains("--tests") && !serial.contains("--test it"),
        "the serial pass must run src/'s timing tests too: {serial}"
    );
}
