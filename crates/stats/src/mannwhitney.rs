//! Exact Mann–Whitney U (Wilcoxon rank-sum) test.
//!
//! A rank-based cross-check of the Welch test: it makes no normality
//! assumption, so when the two disagree the data deserve a closer look
//! (bimodal runs, a single outlier, a long tail).

use statrs::distribution::{ContinuousCDF, Normal};

use super::summary::finite;

/// Above this much DP work (items × subset size × rank-sum range) the exact
/// count gets slow in debug builds; the normal approximation is then already
/// accurate to a few decimals, so it is used instead.
const EXACT_WORK_LIMIT: f64 = 3.0e7;

/// Two-sided Mann–Whitney U p-value of `a` vs `b`, from the exact null
/// distribution (counted by dynamic programming, not approximated).
///
/// Ties: tied values get their average rank (midrank), and the null
/// distribution is that of the rank sum over all `C(n, n_a)` ways of choosing
/// which pooled values belong to `a`, *with those same midranks* — i.e. the
/// exact permutation test conditional on the observed ties. (SciPy's
/// `method='exact'` instead uses the no-ties distribution even when there
/// are ties; without ties both are identical.) Ranks are doubled so midranks
/// stay integers and the observed statistic is matched exactly.
///
/// Two-sided p = `min(1, 2 * min(P(W <= w), P(W >= w)))`, W the rank sum of
/// the smaller sample.
///
/// Non-finite values are ignored; an empty side gives `p = 1`. For very large
/// samples (beyond ~`n_a + n_b = 80`) it switches to the tie-corrected normal
/// approximation with continuity correction (SciPy's `method='asymptotic'`).
pub fn mann_whitney_exact(a: &[f64], b: &[f64]) -> f64 {
    let a = finite(a);
    let b = finite(b);
    if a.is_empty() || b.is_empty() {
        return 1.0;
    }
    // The test is symmetric; count subsets of the smaller sample (less work).
    let (small, large) = if a.len() <= b.len() { (&a, &b) } else { (&b, &a) };
    let k = small.len();
    let n = k + large.len();

    // Pool, sort, assign doubled midranks. `true` marks the small sample.
    let mut pooled: Vec<(f64, bool)> =
        small.iter().map(|&x| (x, true)).chain(large.iter().map(|&x| (x, false))).collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut ranks2 = vec![0u64; n];
    let mut tie_sizes = Vec::new();
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && pooled[j].0 == pooled[i].0 {
            j += 1;
        }
        // Ranks i+1..=j share the midrank (i+1+j)/2; doubled: i+1+j.
        for r in ranks2.iter_mut().take(j).skip(i) {
            *r = (i + 1 + j) as u64;
        }
        tie_sizes.push(j - i);
        i = j;
    }
    let observed: u64 = (0..n).filter(|&i| pooled[i].1).map(|i| ranks2[i]).sum();

    let mut sorted_ranks = ranks2.clone();
    sorted_ranks.sort_unstable();
    let max_sum: u64 = sorted_ranks.iter().rev().take(k).sum();
    let work = n as f64 * k as f64 * max_sum as f64;
    if work > EXACT_WORK_LIMIT {
        return asymptotic(observed, k, n - k, &tie_sizes);
    }

    // counts[c][s]: number of c-subsets of the items seen so far with doubled
    // rank sum s. f64 because C(80, 40) overflows u64; relative precision is
    // all a p-value needs.
    let w = max_sum as usize + 1;
    let mut counts = vec![0.0f64; (k + 1) * w];
    counts[0] = 1.0;
    for (seen, &r) in ranks2.iter().enumerate() {
        let r = r as usize;
        for c in (1..=k.min(seen + 1)).rev() {
            let (lo, hi) = counts.split_at_mut(c * w);
            let prev = &lo[(c - 1) * w..];
            let cur = &mut hi[..w];
            for s in (r..w).rev() {
                cur[s] += prev[s - r];
            }
        }
    }
    let dist = &counts[k * w..];
    let total: f64 = dist.iter().sum();
    let obs = observed as usize;
    let le: f64 = dist[..=obs.min(w - 1)].iter().sum();
    let ge: f64 = if obs < w { dist[obs..].iter().sum() } else { 0.0 };
    (2.0 * (le / total).min(ge / total)).clamp(0.0, 1.0)
}

/// Tie-corrected normal approximation with continuity correction, as SciPy's
/// `mannwhitneyu(..., method='asymptotic')`.
fn asymptotic(rank_sum2: u64, n1: usize, n2: usize, tie_sizes: &[usize]) -> f64 {
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let n = n1f + n2f;
    let u1 = rank_sum2 as f64 / 2.0 - n1f * (n1f + 1.0) / 2.0;
    let u = u1.max(n1f * n2f - u1);
    let mu = n1f * n2f / 2.0;
    let tie_term: f64 = tie_sizes.iter().map(|&t| (t as f64).powi(3) - t as f64).sum();
    let var = n1f * n2f / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if var.is_nan() || var <= 0.0 {
        return 1.0; // all values tied: no evidence either way
    }
    let z = (u - mu - 0.5) / var.sqrt();
    (2.0 * Normal::standard().sf(z)).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    // Reference, scipy 1.17.1, no ties (SciPy's exact method is exact here):
    //   scipy.stats.mannwhitneyu([1.1,2.3,3.5,4.2,5.0], [2.8,4.9,6.1,7.3,8.8,9.0], method='exact').pvalue
    //     = 0.05194805194805195
    //   scipy.stats.mannwhitneyu([1,2,3,4], [5,6,7,8], method='exact').pvalue = 0.02857142857142857
    //   x, y below (rng = np.random.default_rng(7); np.round(rng.normal(10,1,10),3),
    //   np.round(rng.normal(11,1,12),3)):
    //   scipy.stats.mannwhitneyu(x, y, method='exact').pvalue = 0.08042112686075535
    #[test]
    fn exact_without_ties_matches_scipy() {
        let a = [1.1, 2.3, 3.5, 4.2, 5.0];
        let b = [2.8, 4.9, 6.1, 7.3, 8.8, 9.0];
        assert!(close(mann_whitney_exact(&a, &b), 0.05194805194805195, 1e-12));
        assert!(close(mann_whitney_exact(&b, &a), 0.05194805194805195, 1e-12));
        assert!(close(mann_whitney_exact(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]), 0.02857142857142857, 1e-12));
        let x = [10.001, 10.299, 9.726, 9.109, 9.545, 9.008, 10.06, 11.34, 9.508, 9.38];
        let y = [11.49, 11.357, 11.105, 10.07, 10.971, 11.695, 9.656, 10.542, 9.099, 9.71, 9.158, 10.765];
        assert!(close(mann_whitney_exact(&x, &y), 0.08042112686075535, 1e-12), "{}", mann_whitney_exact(&x, &y));
    }

    // Ties: reference is SciPy's exhaustive permutation test of the midrank sum
    // (the distribution conditional on the ties), scipy 1.17.1:
    //   def Rs(x, y, axis):
    //       z = np.concatenate([x, y], axis=axis); rk = scipy.stats.rankdata(z, axis=axis)
    //       return rk[..., :x.shape[axis]].sum(axis=axis)
    //   scipy.stats.permutation_test((a, b), Rs, permutation_type='independent',
    //       alternative='two-sided', n_resamples=np.inf, vectorized=True).pvalue
    //   a=[1,2,2,3,5], b=[2,3,3,4,6,6]          -> 0.17316017316017315
    //     (mannwhitneyu(a, b, method='exact') ignores the ties: 0.17748917748917747)
    //   a=[5,5,5,6], b=[5,6,6,7,7]              -> 0.20634920634920634
    #[test]
    fn exact_with_ties_matches_permutation_test() {
        let p = mann_whitney_exact(&[1.0, 2.0, 2.0, 3.0, 5.0], &[2.0, 3.0, 3.0, 4.0, 6.0, 6.0]);
        assert!(close(p, 0.17316017316017315, 1e-12), "{p}");
        assert!((p - 0.17748917748917747).abs() > 1e-3, "must not ignore ties");
        let p = mann_whitney_exact(&[5.0, 5.0, 5.0, 6.0], &[5.0, 6.0, 6.0, 7.0, 7.0]);
        assert!(close(p, 0.20634920634920634, 1e-12), "{p}");
    }

    // Beyond the exact-work limit (60 + 70 values) the normal approximation is
    // used. Reference, scipy 1.17.1:
    //   rng = np.random.default_rng(11); x = rng.integers(0,20,60).astype(float)
    //   y = rng.integers(3,23,70).astype(float)
    //   scipy.stats.mannwhitneyu(x, y, method='asymptotic').pvalue = 0.6466432503804196
    #[test]
    fn large_samples_match_scipy_asymptotic() {
        let x = [
            2, 2, 15, 9, 11, 12, 14, 0, 9, 2, 8, 18, 10, 1, 10, 2, 15, 18, 19, 12, 17, 7, 2, 10, 8, 13, 19, 5, 17, 2,
            6, 15, 4, 13, 9, 10, 18, 16, 16, 10, 19, 19, 2, 4, 6, 11, 16, 9, 19, 7, 18, 11, 14, 4, 11, 16, 17, 17, 19,
            2,
        ];
        let y = [
            18, 12, 16, 8, 3, 4, 22, 20, 9, 11, 7, 5, 20, 16, 4, 7, 14, 21, 22, 7, 15, 3, 6, 7, 11, 9, 17, 12, 9, 21,
            15, 16, 17, 9, 20, 3, 9, 6, 3, 22, 4, 12, 19, 16, 20, 4, 12, 3, 6, 19, 4, 14, 3, 9, 21, 9, 9, 4, 18, 6, 12,
            3, 3, 19, 3, 12, 11, 5, 15, 17,
        ];
        let x: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let y: Vec<f64> = y.iter().map(|&v| v as f64).collect();
        let p = mann_whitney_exact(&x, &y);
        assert!(close(p, 0.6466432503804196, 1e-9), "{p}");
    }

    #[test]
    fn degenerate_inputs() {
        assert_eq!(mann_whitney_exact(&[], &[1.0, 2.0]), 1.0);
        assert_eq!(mann_whitney_exact(&[f64::NAN], &[1.0]), 1.0);
        assert_eq!(mann_whitney_exact(&[3.0; 5], &[3.0; 5]), 1.0);
        // One value each, different: the two orderings are equally likely.
        assert_eq!(mann_whitney_exact(&[1.0], &[2.0]), 1.0);
        // Big all-tied samples take the asymptotic path; still no NaN.
        assert_eq!(mann_whitney_exact(&[1.0; 100], &[1.0; 100]), 1.0);
    }
}
