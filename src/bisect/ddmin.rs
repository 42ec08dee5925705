//! Delta debugging: Zeller & Hildebrandt's `ddmin` ("Simplifying and
//! Isolating Failure-Inducing Input", TSE 2002), over change indices.
//!
//! The test of a set of changes answers [`Outcome::Fail`] (the regression
//! shows), [`Outcome::Pass`] or [`Outcome::Unresolved`] (could not tell);
//! only `Fail` narrows the search, as in the paper. The full set is assumed
//! to fail and the empty set to pass. Results are cached per set, so no set
//! is tested twice. The result is 1-minimal: removing any single change from
//! it makes the test not fail (among the tests ddmin made).

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;

/// What one test of a set of changes said.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The regression is present.
    Fail,
    /// The regression is absent.
    Pass,
    /// Neither could be shown (e.g. inconclusive after the most runs allowed).
    Unresolved,
}

/// A caching wrapper over a test function; counts real calls and cache hits.
pub struct Cached<F> {
    test: F,
    cache: BTreeMap<Vec<usize>, Outcome>,
    pub calls: usize,
    pub hits: usize,
}

impl<F: FnMut(&[usize]) -> Result<Outcome>> Cached<F> {
    pub fn new(test: F) -> Self {
        Cached { test, cache: BTreeMap::new(), calls: 0, hits: 0 }
    }

    /// Record an outcome known without testing (e.g. the full set).
    pub fn seed(&mut self, set: &[usize], outcome: Outcome) {
        self.cache.insert(normalized(set), outcome);
    }

    pub fn test(&mut self, set: &[usize]) -> Result<Outcome> {
        let key = normalized(set);
        if let Some(o) = self.cache.get(&key) {
            self.hits += 1;
            return Ok(*o);
        }
        self.calls += 1;
        let o = (self.test)(&key)?;
        self.cache.insert(key, o);
        Ok(o)
    }
}

fn normalized(set: &[usize]) -> Vec<usize> {
    let mut v = set.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

/// Split `c` into `n` nearly equal consecutive parts.
fn partition(c: &[usize], n: usize) -> Vec<Vec<usize>> {
    (0..n).map(|i| c[i * c.len() / n..(i + 1) * c.len() / n].to_vec()).filter(|p| !p.is_empty()).collect()
}

/// A 1-minimal failing subset of `0..n` (all `n` changes assumed to fail).
pub fn ddmin<F: FnMut(&[usize]) -> Result<Outcome>>(n: usize, oracle: &mut Cached<F>) -> Result<Vec<usize>> {
    let mut c: Vec<usize> = (0..n).collect();
    oracle.seed(&c, Outcome::Fail);
    oracle.seed(&[], Outcome::Pass);
    let mut granularity = 2;
    while c.len() >= 2 {
        let parts = partition(&c, granularity.min(c.len()));
        let mut reduced = false;
        // Reduce to a subset.
        for part in &parts {
            if oracle.test(part)? == Outcome::Fail {
                c = part.clone();
                granularity = 2;
                reduced = true;
                break;
            }
        }
        // Reduce to a complement (with two parts the complements are the subsets).
        if !reduced && parts.len() > 2 {
            for part in &parts {
                let complement: Vec<usize> = c.iter().copied().filter(|x| !part.contains(x)).collect();
                if oracle.test(&complement)? == Outcome::Fail {
                    c = complement;
                    granularity = (granularity - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if parts.len() >= c.len() {
                break;
            }
            granularity = (granularity * 2).min(c.len());
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(n: usize, fails: impl Fn(&[usize]) -> bool) -> (Vec<usize>, usize, Vec<Vec<usize>>) {
        let mut seen = Vec::new();
        let mut oracle = Cached::new(|s: &[usize]| {
            seen.push(s.to_vec());
            Ok(if fails(s) { Outcome::Fail } else { Outcome::Pass })
        });
        let result = ddmin(n, &mut oracle).unwrap();
        let calls = oracle.calls;
        eprintln!("ddmin over {n} changes: {result:?} after {calls} oracle calls ({} cache hits)", oracle.hits);
        drop(oracle);
        (result, calls, seen)
    }

    fn one_minimal(result: &[usize], fails: impl Fn(&[usize]) -> bool) -> bool {
        fails(result) && result.iter().all(|x| !fails(&result.iter().copied().filter(|y| y != x).collect::<Vec<_>>()))
    }

    #[test]
    fn single_culprit_among_eight() {
        let fails = |s: &[usize]| s.contains(&2);
        let (result, calls, _) = run(8, fails);
        assert_eq!(result, [2]);
        // Binary search: {0..3} fails, {0,1} passes, {2,3} fails, {2} fails.
        assert_eq!(calls, 4);
    }

    #[test]
    fn interacting_pair_among_eight() {
        let fails = |s: &[usize]| s.contains(&1) && s.contains(&4);
        let (result, calls, seen) = run(8, fails);
        assert_eq!(result, [1, 4]);
        // Interactions cost more: subsets and complements down to single changes.
        assert_eq!(calls, 17);
        // Cached: no set tested twice.
        let mut unique = seen.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), seen.len());
    }

    #[test]
    fn culprit_two_or_pair_one_four_gives_a_one_minimal_set() {
        let fails = |s: &[usize]| s.contains(&2) || (s.contains(&1) && s.contains(&4));
        let (result, calls, _) = run(8, fails);
        assert!(one_minimal(&result, fails), "{result:?}");
        assert_eq!(result, [2], "the first half already holds the single culprit");
        assert_eq!(calls, 4);
    }

    #[test]
    fn everything_needed_and_trivial_sizes() {
        let (result, calls, _) = run(3, |s: &[usize]| s.len() == 3);
        assert_eq!(result, [0, 1, 2]);
        assert_eq!(calls, 6);
        let (result, calls, _) = run(1, |_: &[usize]| true);
        assert_eq!((result, calls), (vec![0], 0));
        let (result, _, _) = run(0, |_: &[usize]| true);
        assert!(result.is_empty());
    }

    #[test]
    fn unresolved_never_narrows() {
        // The culprit is 3, but any set holding 0 cannot be judged.
        let mut oracle = Cached::new(|s: &[usize]| {
            Ok(if s.contains(&0) {
                Outcome::Unresolved
            } else if s.contains(&3) {
                Outcome::Fail
            } else {
                Outcome::Pass
            })
        });
        assert_eq!(ddmin(4, &mut oracle).unwrap(), [3]);
    }

    #[test]
    fn oracle_errors_propagate() {
        let mut oracle = Cached::new(|_: &[usize]| Err(anyhow::anyhow!("boom")));
        assert!(ddmin(4, &mut oracle).is_err());
    }
}
