#!/usr/bin/env python3
"""Reference change points from Apache Otava for crates/stats/src/changepoint.rs.

Not a test dependency: run by hand in a private virtualenv,
    python3 -m venv /var/tmp/otava && /var/tmp/otava/bin/pip install apache-otava==0.8.0
    /var/tmp/otava/bin/python tests/reference/otava_changepoints.py [--fixed-merge]
and paste the numbers into the Rust tests.

The series are integers from splitmix64 (Irwin-Hall: the sum of 12 uniform
draws from 0..999, centred, sd ~1000) divided by 100, so Python and Rust build
bit-identical inputs. `--fixed-merge` replaces Otava's merge step by one that
recomputes both neighbours of a removed point (fslab's deliberate
difference; see changepoint.rs).
"""
import sys

import otava.analysis as oa

MASK = (1 << 64) - 1


def series(seed, segments):
    state = seed & MASK
    out = []
    for length, level in segments:
        for _ in range(length):
            total = 0
            for _ in range(12):
                state = (state + 0x9E3779B97F4A7C15) & MASK
                z = state
                z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
                z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
                z = z ^ (z >> 31)
                total += z % 1000
            out.append(level + (total - 5994) / 100.0)
    return out


CASES = [
    ("one_step", 1, [(60, 1000), (60, 1030)], {}),
    ("stationary", 2, [(200, 1000)], {}),
    ("four_levels", 3, [(40, 1000), (30, 1050), (50, 1020), (40, 1080)], {}),
    ("four_levels_min_magnitude", 3, [(40, 1000), (30, 1050), (50, 1020), (40, 1080)], {"min_magnitude": 0.03}),
    ("small_step", 4, [(50, 1000), (50, 1020)], {}),
    ("long", 5, [(80, 1000), (70, 1040), (60, 990), (90, 1060)], {}),
    ("long_window_30", 5, [(80, 1000), (70, 1040), (60, 990), (90, 1060)], {"window_len": 30}),
    ("spike", 6, [(30, 1000), (1, 1200), (30, 1000)], {}),
    ("step_at_end", 7, [(60, 1000), (4, 1050)], {}),
    ("double_spike", 9, [(20, 1000), (2, 1100), (20, 1000)], {}),
    ("noisy_steps_p01", 8, [(25, 1000), (25, 1012), (25, 1000), (25, 1012)], {"max_pvalue": 0.01}),
]


def fixed_merge(change_points, series, max_pvalue, min_magnitude):
    tester = oa.TTestSignificanceTester(max_pvalue)
    while change_points:
        weakest_cp = max(change_points, key=lambda c: c.stats.pvalue)
        if weakest_cp.stats.pvalue < max_pvalue:
            weakest_cp = min(change_points, key=lambda c: c.stats.change_magnitude())
            if weakest_cp.stats.change_magnitude() > min_magnitude:
                return change_points
        k = change_points.index(weakest_cp)
        del change_points[k]
        intervals = tester.get_intervals(change_points)
        for i in (k - 1, k):
            if 0 <= i < len(change_points):
                change_points[i] = tester.change_point(change_points[i].to_candidate(), series, intervals)
    return change_points


def main():
    for name, seed, segments, opts in CASES:
        xs = series(seed, segments)
        # compute_change_points() without its in-place merge of the weak list
        # (0.8.0 returns the merged list as "weak"; upstream later copies it).
        window_len = opts.get("window_len", 50)
        max_pvalue = opts.get("max_pvalue", 0.001)
        first_pass = max_pvalue * 10 if max_pvalue < 0.05 else (max_pvalue * 2 if max_pvalue < 0.5 else max_pvalue)
        weak = oa.split(xs, window_len, first_pass)
        cps = oa.merge(list(weak), xs, max_pvalue, opts.get("min_magnitude", 0.0))
        print(f"{name}: n={len(xs)} opts={opts}")
        print(f"  weak = {[int(c.index) for c in weak]} p = {[float(c.stats.pvalue) for c in weak]}")
        for c in cps:
            s = c.stats
            print(f"  cp {int(c.index)}: p={float(s.pvalue)!r} mean_before={float(s.mean_1)!r}"
                  f" mean_after={float(s.mean_2)!r} std_before={float(s.std_1)!r} std_after={float(s.std_2)!r}"
                  f" qhat={float(c.qhat)!r}")


def random_cases():
    """`--random`: 60 series with 1-4 segments of random lengths and steps of
    1.5-5 sd, printed as Rust literals `(seed, &[(len, level)], weak, cps)`."""
    import random
    rng = random.Random(20261201)
    for seed in range(100, 160):
        segments = []
        level = 1000.0
        for _ in range(rng.randint(1, 4)):
            segments.append((rng.randint(8, 80), level))
            level = level + rng.choice([-1, 1]) * rng.choice([15.0, 20.0, 30.0, 50.0])
        xs = series(seed, segments)
        weak = oa.split(xs, 50, 0.01)
        cps = oa.merge(list(weak), xs, 0.001, 0.0)
        segs = ", ".join(f"({n}, {lv:.1f})" for n, lv in segments)
        print(f"({seed}, &[{segs}], &{[int(c.index) for c in weak]}, &{[int(c.index) for c in cps]}),")


if __name__ == "__main__":
    if "--fixed-merge" in sys.argv:
        oa.merge = fixed_merge
    random_cases() if "--random" in sys.argv else main()
