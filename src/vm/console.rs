//! The guest console log: kernel messages (loglevel 4: errors and worse,
//! which includes panics and the OOM killer), virtme-ng's own messages and
//! the agent's output. Its tail goes into every VM error.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Lines of console kept in an error.
pub const TAIL_LINES: usize = 40;
/// Bytes read from the end of the log to find them.
const TAIL_BYTES: u64 = 64 * 1024;

/// The last [`TAIL_LINES`] lines of the log at `path` (empty if unreadable),
/// with carriage returns and other control characters removed.
pub fn tail(path: &Path) -> String {
    let Ok(mut file) = File::open(path) else { return String::new() };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let clean = strip_controls(&text);
    let lines: Vec<&str> = clean.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
}

/// Drop ANSI escape sequences (`ESC [ … final`) and control characters but newlines and tabs.
fn strip_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // Parameters and intermediates, then one final byte in @..~.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
        } else if c == '\n' || c == '\t' || !c.is_control() {
            out.push(c);
        }
    }
    out
}

/// What the console says happened, when it says something recognisable:
/// a kernel panic or the OOM killer, with the line that shows it.
pub fn diagnosis(tail: &str) -> Option<String> {
    let find = |needle: &str| tail.lines().find(|l| l.contains(needle)).map(|l| strip_timestamp(l).to_string());
    if let Some(line) = find("Kernel panic - not syncing") {
        return Some(format!("the guest kernel panicked ({line})"));
    }
    if let Some(line) = find("Out of memory").or_else(|| find("invoked oom-killer")) {
        return Some(format!("the guest ran out of memory ({line})"));
    }
    None
}

/// `[   12.345678] text` → `text`.
fn strip_timestamp(line: &str) -> &str {
    let trimmed = line.trim();
    match trimmed.strip_prefix('[').and_then(|rest| rest.split_once(']')) {
        Some((stamp, rest)) if stamp.trim().parse::<f64>().is_ok() => rest.trim(),
        _ => trimmed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_and_oom_are_recognised() {
        let panic = "[    3.1] VFS: Cannot open root device\n[    3.2] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n";
        let d = diagnosis(panic).unwrap();
        assert!(d.starts_with("the guest kernel panicked (Kernel panic - not syncing: VFS"), "{d}");
        let oom = "[   50.0] Out of memory: Killed process 123 (fslab) total-vm:1kB\n";
        assert!(diagnosis(oom).unwrap().contains("ran out of memory (Out of memory: Killed process 123"));
        assert_eq!(diagnosis("all fine\n"), None);
    }

    #[test]
    fn the_tail_is_the_last_lines_without_control_characters() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("console.log");
        let text: String = (0..100).map(|i| format!("line {i}\r\n\x1b[0m")).collect();
        std::fs::write(&log, text).unwrap();
        let tail = tail(&log);
        assert_eq!(tail.lines().count(), TAIL_LINES);
        assert!(tail.ends_with("line 99"), "{tail:?}");
        assert!(!tail.contains('\r') && !tail.contains('\x1b'));
        assert_eq!(super::tail(&dir.path().join("missing")), "");
    }
}
