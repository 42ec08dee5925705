//! Which commits a bisection step measures: one (bisection) or `k` at once
//! (multisection: `k` machines or VMs each measure one commit of the step,
//! so `n` candidates take about `log_(k+1) n` steps instead of `log_2 n`).
//!
//! A candidate's *reach* is how many of the `n` candidates are its
//! ancestors (itself included), counted within the candidates: marking it
//! bad leaves `reach` candidates, good leaves `n − reach`. git bisect
//! measures the commit whose reach is nearest `n/2`; with `k` commits a
//! step takes, for each of the targets `i·n/(k+1)`, `i = 1..k`, the
//! candidate whose reach is nearest it (each commit once), which on a
//! linear history splits the candidates into `k + 1` near-equal parts
//! whatever the answers are. On a history with merges reaches do not spread
//! evenly and a step can cut less, as git bisect's own does.
//!
//! The caller gives the reaches (git counts them: `bisect-commits`) and
//! applies the answers; the same rule drives the bisection simulation
//! ([`crate::simulation::bisection_rates`]).

/// The `k` reaches that split `n` candidates into `k + 1` near-equal parts
/// (fewer when `n` is small: each target at least 1 and below `n`).
pub fn targets(n: usize, k: usize) -> Vec<usize> {
    let mut out: Vec<usize> =
        (1..=k).map(|i| ((i * n) as f64 / (k + 1) as f64).round() as usize).filter(|&t| t >= 1 && t < n).collect();
    out.dedup();
    out
}

/// For each target of `targets(n, k)`, the candidate (id, reach) whose
/// reach is nearest it, each candidate at most once, in target order. A
/// tie goes to the candidate listed first.
pub fn pick<T: Clone + PartialEq>(candidates: &[(T, usize)], n: usize, k: usize) -> Vec<T> {
    let mut chosen: Vec<T> = Vec::new();
    for t in targets(n, k) {
        let best = candidates.iter().filter(|(id, _)| !chosen.contains(id)).min_by_key(|(_, reach)| reach.abs_diff(t));
        if let Some((id, _)) = best {
            chosen.push(id.clone());
        }
    }
    chosen
}

/// On a linear history of `n` candidates (positions 1..=n, the last the
/// known bad one), what one step's answers leave: marking positions
/// `bad_at` bad and `good_at` good keeps the candidates after the last good
/// mark up to the first bad one. `(low, high)`: the first bad commit is in
/// `low..=high`.
pub fn narrow_linear(low: usize, high: usize, good_at: &[usize], bad_at: &[usize]) -> (usize, usize) {
    let high = bad_at.iter().copied().filter(|&b| b >= low && b <= high).min().unwrap_or(high);
    let low = good_at.iter().copied().filter(|&g| g >= low && g < high).map(|g| g + 1).max().unwrap_or(low);
    (low, high)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_commit_a_step_is_the_middle_and_k_split_evenly() {
        assert_eq!(targets(16, 1), [8]);
        assert_eq!(targets(16, 2), [5, 11]);
        assert_eq!(targets(16, 3), [4, 8, 12]);
        // Small n: no target at 0 or at n (the known bad commit).
        assert_eq!(targets(2, 3), [1]);
        assert!(targets(1, 2).is_empty());
        let linear: Vec<(usize, usize)> = (1..=15).map(|p| (p, p)).collect();
        assert_eq!(pick(&linear, 16, 3), [4, 8, 12]);
        // Each candidate once, the nearest left when the best is taken.
        let few = [(10, 3), (20, 3), (30, 9)];
        assert_eq!(pick(&few, 12, 3), [10, 20, 30]);
    }

    #[test]
    fn answers_narrow_the_range_like_git_bisect() {
        // 1..=16, first bad somewhere: 4 bad, 8 bad, 12 bad → 1..=4
        assert_eq!(narrow_linear(1, 16, &[], &[4, 8, 12]), (1, 4));
        // 4 good, 8 bad → 5..=8
        assert_eq!(narrow_linear(1, 16, &[4], &[8, 12]), (5, 8));
        // all good → 13..=16
        assert_eq!(narrow_linear(1, 16, &[4, 8, 12], &[]), (13, 16));
    }
}
