//! One way to write numbers for people, used by every output (terminal
//! table, Markdown, HTML and its charts, iostat reports): plain decimals
//! with about four significant digits (never `7.81e-3` beside `2.262e6`),
//! binary byte units, rates, durations, signed percentages and p-values.
//!
//! Hand-written (as ripgrep's `cli::human` and hyperfine's `output::format`
//! are) because the point is one rounding rule everywhere; the size crates
//! each pick their own precision and spacing. Machine formats (JSON, CSV)
//! never go through here: they keep full precision.

/// What a value that does not exist (NaN, infinite, absent) is shown as.
pub const NONE: &str = "–";

/// About four significant digits as a plain decimal: `2262144`, `1234`,
/// `12.35`, `0.00781`; trailing zeros dropped, `–` for NaN and infinities.
/// Values below 10⁻⁹ in magnitude show as `0`.
pub fn number(v: f64) -> String {
    if !v.is_finite() {
        return NONE.to_string();
    }
    let a = v.abs();
    if a >= 1000.0 || a == 0.0 {
        return tidy(format!("{v:.0}"));
    }
    let decimals = (3 - a.log10().floor() as i32).clamp(0, 9) as usize;
    tidy(format!("{v:.decimals$}"))
}

/// Drops trailing decimal zeros and a negative sign on zero.
fn tidy(mut s: String) -> String {
    if s.contains('.') {
        let keep = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(keep);
    }
    if s == "-0" {
        s = "0".to_string();
    }
    s
}

/// [`number`] with its sign: `+12.35`, `-3`, `0` (a difference).
pub fn signed(v: f64) -> String {
    let text = number(v);
    if v > 0.0 && text != "0" {
        format!("+{text}")
    } else {
        text
    }
}

/// A number followed by its unit: `12.35 s`, `1234 files/s` (no unit: the number).
pub fn with_unit(v: f64, unit: &str) -> String {
    if unit.is_empty() || !v.is_finite() {
        number(v)
    } else {
        format!("{} {unit}", number(v))
    }
}

/// A signed relative change with two decimals: `+1.23%`, `-10.88%`, `–`.
pub fn change_pct(v: f64) -> String {
    if v.is_finite() {
        format!("{v:+.2}%")
    } else {
        NONE.to_string()
    }
}

/// A confidence interval of a relative change: `[-1.20%, +2.00%]`.
pub fn ci_pct(low: f64, high: f64) -> String {
    format!("[{}, {}]", change_pct(low), change_pct(high))
}

/// An unsigned share with one decimal: `3.4%` (CV, %util).
pub fn percent(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}%")
    } else {
        NONE.to_string()
    }
}

/// A p-value: three decimals, `<0.001` below that (`–` when undefined).
pub fn p_value(p: f64) -> String {
    if !p.is_finite() {
        NONE.to_string()
    } else if p < 0.001 {
        "<0.001".to_string()
    } else {
        format!("{p:.3}")
    }
}

/// `p=0.012` or `p<0.001`, for running text.
pub fn p_equation(p: f64) -> String {
    let text = p_value(p);
    if text.starts_with('<') {
        format!("p{text}")
    } else {
        format!("p={text}")
    }
}

const BINARY_UNITS: [(&str, f64); 5] =
    [("PiB", 1125899906842624.0), ("TiB", 1099511627776.0), ("GiB", 1073741824.0), ("MiB", 1048576.0), ("KiB", 1024.0)];

/// A byte count in binary units: `512 B`, `4 KiB`, `1.5 GiB`.
pub fn bytes(b: f64) -> String {
    if !b.is_finite() {
        return NONE.to_string();
    }
    for (name, size) in BINARY_UNITS {
        if b.abs() >= size {
            return format!("{} {name}", number(b / size));
        }
    }
    format!("{} B", number(b))
}

/// A byte rate: `16 MiB/s`.
pub fn byte_rate(bytes_per_s: f64) -> String {
    if bytes_per_s.is_finite() {
        format!("{}/s", bytes(bytes_per_s))
    } else {
        NONE.to_string()
    }
}

/// SI prefixes by power of 1000, pico to exa (`""` for 1).
const SI_PREFIXES: [&str; 11] = ["p", "n", "µ", "m", "", "k", "M", "G", "T", "P", "E"];

/// The SI prefix to write numbers up to `largest` (in magnitude) with, and
/// its factor: at most three integer digits (`(1e9, "G")` for 2.4e10:
/// `24 G`; `(1e3, "k")` for 512000; `(1e-6, "µ")` for 2.5e-6); none from
/// 10⁻³ to below 10⁴ (and for 0), where plain numbers read better (`0.25`,
/// not `250 m`; `2000`, not `2 k`).
pub fn si_prefix(largest: f64) -> (f64, &'static str) {
    let a = largest.abs();
    if !a.is_finite() || a == 0.0 || (1e-3..1e4).contains(&a) {
        return (1.0, "");
    }
    let mut power = (a.log10() / 3.0).floor() as i32;
    // log10 is not exact at powers of ten (1e6 must be `1 M`, not `1000 k`).
    if a >= 10f64.powi(3 * (power + 1)) {
        power += 1;
    } else if a < 10f64.powi(3 * power) {
        power -= 1;
    }
    let power = power.clamp(-4, 6);
    (10f64.powi(3 * power), SI_PREFIXES[(power + 4) as usize])
}

/// A large count with an SI prefix ([`si_prefix`]): `24.21 G`, `1.235 M`,
/// `980 k`, `5000` (instruction counts); [`number`]'s digits.
pub fn count(v: f64) -> String {
    match si_prefix(v) {
        _ if !v.is_finite() => NONE.to_string(),
        (_, "") => number(v),
        (factor, prefix) => format!("{} {prefix}", number(v / factor)),
    }
}

/// [`count`] with its sign: `+1.5 M`, `-980 k`, `0` (a difference).
pub fn signed_count(v: f64) -> String {
    let text = count(v);
    if v > 0.0 && text != "0" {
        format!("+{text}")
    } else {
        text
    }
}

/// A duration given in seconds: `850 µs`, `12.5 ms`, `3.2 s`, `2 min 05 s`, `1 h 02 min`.
pub fn duration_s(s: f64) -> String {
    if !s.is_finite() {
        return NONE.to_string();
    }
    let a = s.abs();
    if a == 0.0 {
        "0 s".to_string()
    } else if a < 1e-3 {
        format!("{} µs", number(s * 1e6))
    } else if a < 1.0 {
        format!("{} ms", number(s * 1e3))
    } else if a < 60.0 {
        format!("{} s", number(s))
    } else if a < 3600.0 {
        let whole = a.round() as u64;
        format!("{}{} min {:02} s", if s < 0.0 { "-" } else { "" }, whole / 60, whole % 60)
    } else {
        let minutes = (a / 60.0).round() as u64;
        format!("{}{} h {:02} min", if s < 0.0 { "-" } else { "" }, minutes / 60, minutes % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_a_decimal_prefix() {
        assert_eq!(count(24_213_000_000.0), "24.21 G");
        assert_eq!(count(1_234_567.0), "1.235 M");
        assert_eq!(count(-980_000.0), "-980 k");
        assert_eq!(count(512.0), "512");
        assert_eq!(count(f64::NAN), NONE);
        assert_eq!(signed_count(14_940_000.0), "+14.94 M");
        assert_eq!(signed_count(-5.0), "-5");
        assert_eq!(signed_count(0.0), "0");
    }

    #[test]
    fn numbers_have_one_format() {
        for (v, text) in [
            (2262144.0, "2262144"),
            (1234.4, "1234"),
            (999.96, "1000"),
            (123.44, "123.4"),
            (12.345, "12.35"),
            (1.23456, "1.235"),
            (1.2, "1.2"),
            (0.5, "0.5"),
            (0.00781, "0.00781"),
            (-0.0001234, "-0.0001234"),
            (0.0, "0"),
            (-0.0, "0"),
            (-1e-12, "0"),
            (f64::NAN, "–"),
            (f64::INFINITY, "–"),
        ] {
            assert_eq!(number(v), text, "{v}");
        }
        // Never scientific notation, whatever the magnitude.
        for e in -12..=15 {
            let s = number(1.2345 * 10f64.powi(e));
            assert!(!s.contains('e'), "{s}");
        }
    }

    #[test]
    fn differences_carry_their_sign() {
        assert_eq!(signed(12.345), "+12.35");
        assert_eq!(signed(-3.0), "-3");
        assert_eq!(signed(0.0), "0");
        assert_eq!(signed(1e-12), "0");
        assert_eq!(signed(f64::NAN), "–");
    }

    #[test]
    fn percentages_and_p_values() {
        assert_eq!(change_pct(-10.876), "-10.88%");
        assert_eq!(change_pct(0.0), "+0.00%");
        assert_eq!(change_pct(f64::NAN), "–");
        assert_eq!(ci_pct(-1.2, 2.0), "[-1.20%, +2.00%]");
        assert_eq!(percent(3.44), "3.4%");
        assert_eq!(p_value(0.0123), "0.012");
        assert_eq!(p_value(2.1e-5), "<0.001");
        assert_eq!(p_value(0.001), "0.001");
        assert_eq!(p_value(f64::NAN), "–");
        assert_eq!(p_equation(0.5), "p=0.500");
        assert_eq!(p_equation(1e-9), "p<0.001");
    }

    #[test]
    fn units() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(4096.0), "4 KiB");
        assert_eq!(bytes(256.0 * 1048576.0), "256 MiB");
        assert_eq!(bytes(1.5 * 1073741824.0), "1.5 GiB");
        assert_eq!(byte_rate(16777216.0), "16 MiB/s");
        assert_eq!(byte_rate(20.0 * 1048576.0), "20 MiB/s");
        assert_eq!(with_unit(12.345, "s"), "12.35 s");
        assert_eq!(with_unit(3.0, ""), "3");
        assert_eq!(duration_s(0.00085), "850 µs");
        assert_eq!(duration_s(0.0125), "12.5 ms");
        assert_eq!(duration_s(3.21), "3.21 s");
        assert_eq!(duration_s(125.0), "2 min 05 s");
        assert_eq!(duration_s(3720.0), "1 h 02 min");
        assert_eq!(duration_s(0.0), "0 s");
    }

    #[test]
    fn si_prefixes_keep_three_integer_digits() {
        assert_eq!(si_prefix(2.43e10), (1e9, "G"));
        assert_eq!(si_prefix(-512e3), (1e3, "k"));
        assert_eq!(si_prefix(1e6), (1e6, "M"));
        assert_eq!(si_prefix(999_999.0), (1e3, "k"));
        assert_eq!(si_prefix(12_000.0), (1e3, "k"));
        assert_eq!(si_prefix(2.5e-6).1, "µ");
        assert_eq!(si_prefix(5e-4).1, "µ");
        assert_eq!(si_prefix(3e-9).1, "n");
        for plain in [0.0, 0.001, 0.25, 1.0, 999.0, 9999.0, f64::NAN] {
            assert_eq!(si_prefix(plain), (1.0, ""), "{plain}");
        }
    }
}
