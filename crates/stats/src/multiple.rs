//! Multiple-comparison correction.

/// Benjamini–Hochberg adjusted p-values (false discovery rate), in input order.
///
/// `adj[(i)] = min over j >= i of (m / j) * p[(j)]` on the ascending-sorted
/// p-values, capped at 1 — the same values as
/// `scipy.stats.false_discovery_control(p, method='bh')`.
///
/// Out-of-range inputs are tolerated rather than rejected: NaN counts as 1
/// (no evidence; it still counts towards m, which is conservative), values
/// outside [0, 1] are clamped.
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    if m == 0 {
        return Vec::new();
    }
    let clean: Vec<f64> = p.iter().map(|&x| if x.is_nan() { 1.0 } else { x.clamp(0.0, 1.0) }).collect();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| clean[a].total_cmp(&clean[b]));
    let mut adj = vec![1.0; m];
    let mut running = 1.0_f64;
    // Walk from the largest p down so each value takes the minimum over all
    // larger ranks (keeps the adjusted values monotone).
    for (rank0, &idx) in order.iter().enumerate().rev() {
        let v = clean[idx] * (m as f64 / (rank0 + 1) as f64);
        running = running.min(v);
        adj[idx] = running.min(1.0);
    }
    adj
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference, scipy 1.17.1:
    //   scipy.stats.false_discovery_control([0.01,0.04,0.03,0.2,0.005,0.5], method='bh')
    //   -> [0.03, 0.06, 0.06, 0.24, 0.03, 0.5]
    //   scipy.stats.false_discovery_control([0.02,0.02,0.9,0.04], method='bh')
    //   -> [0.04, 0.04, 0.9, 0.05333333333333333]
    #[test]
    fn matches_scipy_false_discovery_control() {
        let got = benjamini_hochberg(&[0.01, 0.04, 0.03, 0.2, 0.005, 0.5]);
        let want = [0.03, 0.06, 0.06, 0.24, 0.03, 0.5];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?}");
        }
        let got = benjamini_hochberg(&[0.02, 0.02, 0.9, 0.04]);
        let want = [0.04, 0.04, 0.9, 0.05333333333333333];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?}");
        }
    }

    #[test]
    fn edge_cases() {
        assert!(benjamini_hochberg(&[]).is_empty());
        assert_eq!(benjamini_hochberg(&[0.037]), vec![0.037]);
        // NaN counts as 1 (and towards m); out-of-range values are clamped.
        assert_eq!(benjamini_hochberg(&[f64::NAN, 0.01]), vec![1.0, 0.02]);
        assert_eq!(benjamini_hochberg(&[-0.5, 7.0]), vec![0.0, 1.0]);
        // Capped at 1.
        assert_eq!(benjamini_hochberg(&[0.9, 0.95, 0.99]), vec![0.99, 0.99, 0.99]);
    }
}
