#!/usr/bin/env python3
"""Reference values for the unit tests of crates/stats (not a test dependency).

Note: gs-bounds solves each boundary on SciPy's multivariate normal CDF and takes
about 8 minutes on one core.

Run with NumPy and SciPy installed, e.g. in a private venv:
    python3 -m venv /tmp/v && /tmp/v/bin/pip install numpy scipy
    /tmp/v/bin/python scripts/stats-reference.py gs-bounds
Each sub-command prints the numbers a test pins, with the call that made them.
"""
import sys
import numpy as np
import scipy
from scipy import stats, optimize


def canon_cov(t):
    t = np.asarray(t, float)
    return np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))


def cont_prob(c, t):
    """P(Z_1 < c_1, ..., Z_k < c_k) under the canonical joint distribution."""
    k = len(c)
    if k == 1:
        return stats.norm.cdf(c[0])
    mvn = stats.multivariate_normal(mean=np.zeros(k), cov=canon_cov(t[:k]), abseps=1e-10, releps=1e-10, maxpts=2_000_000)
    return mvn.cdf(np.asarray(c))


def bounds(t, spend):
    c, prev, spent = [], 1.0, 0.0
    for k in range(len(t)):
        inc = spend(t[k]) - spent
        if k == 0:
            ck = stats.norm.isf(inc)
        else:
            f = lambda x: prev - cont_prob(c + [x], t) - inc
            ck = optimize.brentq(f, 0.5, 8.0, xtol=1e-7)
        c.append(ck)
        prev = cont_prob(c, t)
        spent += inc
    return c


def obf(a):
    return lambda t: 2 - 2 * stats.norm.cdf(stats.norm.isf(a / 2) / np.sqrt(t))


def pocock(a):
    return lambda t: a * np.log(1 + (np.e - 1) * t)


def gs_bounds():
    print("scipy", scipy.__version__, "numpy", np.__version__)
    t5 = [0.2, 0.4, 0.6, 0.8, 1.0]
    print("OBF 5 looks a=0.025:", np.round(bounds(t5, obf(0.025)), 4))
    t4 = [0.25, 0.5, 0.75, 1.0]
    print("Pocock 4 looks a=0.025:", np.round(bounds(t4, pocock(0.025)), 4))
    t = [n / 8 for n in (3, 4, 5, 6, 7, 8)]
    print("OBF looks n=3..8 of 8, a=0.025:", np.round(bounds(t, obf(0.025)), 4))
    print("linear t^1 looks n=3..8 of 8, a=0.025:", np.round(bounds(t, lambda x: 0.025 * x), 4))



def moses():
    """Exact U null distribution (SciPy's own) and Moses/HL reference values."""
    from scipy.stats._mannwhitneyu import _MWU
    print("scipy", scipy.__version__, "numpy", np.__version__)
    for (n1, n2, ks) in [(5, 5, [2, 3]), (10, 10, [23, 24]), (4, 4, [0]), (7, 6, [7, 8])]:
        d = _MWU(n1, n2)
        print(f"_MWU({n1},{n2}).cdf:", {k: repr(float(d.cdf(np.array(k)))) for k in ks})
    def rank(n1, n2, level):
        d = _MWU(n1, n2)
        c = np.cumsum(d.build_u_freqs_array(n1 * n2 // 2))
        return int(np.sum(c <= level))
    print("moses rank (60,60,0.025) exact:", rank(60, 60, 0.025))
    x = np.log([10.2, 10.5, 9.9, 10.1, 10.4, 10.3, 10.0])
    y = np.log([12.1, 12.6, 11.8, 12.3, 12.0, 30.0])
    D = np.sort(np.subtract.outer(y, x).ravel())
    k = rank(7, 6, 0.025)
    print("HL =", repr(float(np.median(D))), "k =", k, "interval =", (repr(float(D[k - 1])), repr(float(D[len(D) - k]))))


def esd_critical(n, alpha, r):
    out = []
    for i in range(1, r + 1):
        rest = n - i
        p = 1 - alpha / (2 * (rest + 1))
        t = stats.t.ppf(p, rest - 1)
        out.append(rest * t / np.sqrt((rest - 1 + t * t) * (rest + 1)))
    return out


def esd_flags(x, alpha=0.0125):
    x = np.asarray(x, float)
    n = len(x)
    r = min(max(n // 5, 1), n - 2)
    lam = esd_critical(n, alpha, r)
    idx = list(range(n))
    removed, found = [], 0
    for i in range(r):
        v = x[idx]
        R = np.abs(v - v.mean()) / v.std(ddof=1)
        j = int(np.argmax(R))
        removed.append(idx.pop(j))
        if R[j] > lam[i]:
            found = i + 1
    return sorted(removed[:found])


def esd():
    """Rosner's generalized ESD written out with scipy.stats.t.ppf."""
    print("scipy", scipy.__version__, "numpy", np.__version__)
    print("critical values n=10, alpha=0.0125:", [repr(float(v)) for v in esd_critical(10, 0.0125, 2)])
    print("critical values n=20, alpha=0.0125:", [repr(float(v)) for v in esd_critical(20, 0.0125, 4)])
    x = [10.0, 10.2, 9.9, 10.1, 15.0, 10.05, 9.95, 14.8, 10.15, 10.0]
    print("ESD on np.log(", x, ") ->", esd_flags(np.log(x)))
    print("ESD on np.log([5,5,5,5,5,9]) ->", esd_flags(np.log([5.0, 5, 5, 5, 5, 9])))
    print("ESD on [0,-1,1,0.5,80] ->", esd_flags([0.0, -1, 1, 0.5, 80]))


def drift():
    """Mann-Kendall (Kendall's tau against run order) and Theil-Sen slope."""
    print("scipy", scipy.__version__, "numpy", np.__version__)
    x = [10.0, 10.1, 9.95, 10.2, 10.3, 10.25, 10.4, 10.5, 10.45, 10.6, 10.7, 10.65]
    r = stats.kendalltau(np.arange(len(x)), np.log(x), method="exact")
    print("kendalltau exact:", repr(float(r.statistic)), repr(float(r.pvalue)))
    print("theilslopes slope:", repr(float(stats.theilslopes(np.log(x)).slope)))
    x2 = [5, 6, 5, 7, 6, 8, 7, 8, 9, 8]
    r = stats.kendalltau(np.arange(len(x2)), np.log(x2))
    print("kendalltau (ties, asymptotic):", repr(float(r.statistic)), repr(float(r.pvalue)))


def samplesize():
    print("scipy", scipy.__version__, "numpy", np.__version__)
    norm = stats.norm
    z = norm.ppf(.975) + norm.ppf(.8); m = np.log1p(.02); eff = 3 / np.pi
    print("runs_to_detect CV3 +5%:", np.ceil(2 * (z * 0.03 / (np.log(1.05) - m)) ** 2 / eff))
    print("runs_to_detect CV10 +5%:", np.ceil(2 * (z * 0.1 / (np.log(1.05) - m)) ** 2 / eff))
    zq = norm.ppf(.975) + norm.ppf(.9)
    print("runs_to_show_no_change CV10:", np.ceil(2 * (zq * 0.1 / m) ** 2 / eff))


def compare():
    """Reference values of crates/stats/src/compare.rs tests."""
    from scipy.stats._mannwhitneyu import _MWU
    print("scipy", scipy.__version__, "numpy", np.__version__)
    B = [10.2, 10.5, 9.9, 10.1, 10.4]; V = [12.1, 12.6, 11.8, 12.3, 12.0]
    D = np.sort(np.subtract.outer(np.log(V), np.log(B)).ravel())
    print("HL ratio =", repr(float(np.exp(np.median(D)))), " 95% Moses (k=3):",
          repr(float(np.exp(D[2]))), repr(float(np.exp(D[-3]))))
    print("mannwhitneyu exact p =", repr(float(stats.mannwhitneyu(V, B, method="exact").pvalue)))
    print("welch p =", repr(float(stats.ttest_ind(np.log(V), np.log(B), equal_var=False).pvalue)))
    b = [10.0, 10.6, 9.5, 10.3]; v = [11.2, 12.4, 10.9, 11.8]
    n1 = [5.0, 5.1, 4.9, 5.05]; n2 = [5.02, 4.95, 5.08, 4.97]
    p1 = stats.mannwhitneyu(v, b, method="exact").pvalue
    p2 = stats.mannwhitneyu(n2, n1, method="exact").pvalue
    print("family: p1 =", repr(float(p1)), "p2 =", repr(float(p2)),
          "bh =", [repr(float(x)) for x in stats.false_discovery_control([p1, p2, p2, p2, p2], method="bh")])


COMMANDS = {"compare": compare, "samplesize": samplesize, "drift": drift, "gs-bounds": gs_bounds, "moses": moses, "esd": esd}


if __name__ == "__main__":
    COMMANDS[sys.argv[1]]()
