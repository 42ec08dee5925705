//! The x86 boot protocol's setup header: enough of it to tell a kernel
//! image from any other file and to read the kernel release it carries.
//!
//! Layout (Documentation/arch/x86/boot.rst): `boot_flag` 0xAA55 at 0x1FE,
//! `header` "HdrS" at 0x202, `version` at 0x206, and `kernel_version` at
//! 0x20E: a pointer, minus 0x200, to a NUL-terminated string whose first
//! word is the release (`6.1.0-50-cloud-amd64 (debian-kernel@…) #1 SMP …`).
//! Parsed by hand because it is three fixed offsets; `file` would work too
//! but is one more process and one more tool to find.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};

const BOOT_FLAG_AT: usize = 0x1FE;
const MAGIC_AT: usize = 0x202;
const VERSION_AT: usize = 0x206;
const KERNEL_VERSION_AT: usize = 0x20E;
/// Setup code is at most 64 sectors (32 KiB); the version string lives there.
const SETUP_MAX: usize = 64 * 512 + 512;

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

/// The kernel release of the bzImage at `path` (e.g. `6.1.0-50-cloud-amd64`).
/// Anything that is not an x86 bzImage is an error naming the file.
pub fn read_release(path: &Path) -> Result<String> {
    let mut file = File::open(path).with_context(|| format!("opening kernel image {}", path.display()))?;
    let mut head = Vec::with_capacity(SETUP_MAX);
    file.by_ref()
        .take(SETUP_MAX as u64)
        .read_to_end(&mut head)
        .with_context(|| format!("reading kernel image {}", path.display()))?;
    release_from_header(&head).with_context(|| format!("{} is not a usable x86 kernel image (bzImage)", path.display()))
}

/// [`read_release`] on bytes already read (the first [`SETUP_MAX`] bytes suffice).
pub fn release_from_header(head: &[u8]) -> Result<String> {
    if head.len() < KERNEL_VERSION_AT + 2 {
        bail!("too short for a boot sector and setup header ({} bytes)", head.len());
    }
    if &head[MAGIC_AT..MAGIC_AT + 4] != b"HdrS" || u16_at(head, BOOT_FLAG_AT) != 0xAA55 {
        bail!("no setup header (magic \"HdrS\" at 0x202 and boot flag 0xAA55 at 0x1FE are missing)");
    }
    // kernel_version exists from boot protocol 2.00 on; every bzImage has it.
    let protocol = u16_at(head, VERSION_AT);
    if protocol < 0x0200 {
        bail!("boot protocol {:#06x} is older than 2.00 (not a bzImage)", protocol);
    }
    let pointer = u16_at(head, KERNEL_VERSION_AT) as usize;
    if pointer == 0 {
        bail!("the setup header carries no kernel version string");
    }
    let start = pointer + 0x200;
    let Some(rest) = head.get(start..) else { bail!("kernel version pointer {pointer:#x} points past the setup code") };
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    let text = std::str::from_utf8(&rest[..end]).context("kernel version string is not text")?;
    let release = text.split_whitespace().next().unwrap_or_default();
    if !is_release(release) {
        bail!(
            "kernel version string {:?} does not start with a kernel release",
            text.chars().take(80).collect::<String>()
        );
    }
    Ok(release.to_string())
}

/// A plausible `uname -r`: starts with a digit, only characters that are
/// safe in a path component.
pub fn is_release(s: &str) -> bool {
    s.len() <= 128
        && s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "._+-~".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal setup header carrying `version` at 0x3000.
    fn header(version: &str) -> Vec<u8> {
        let mut head = vec![0u8; 0x3000 + version.len() + 1];
        head[BOOT_FLAG_AT..BOOT_FLAG_AT + 2].copy_from_slice(&0xAA55u16.to_le_bytes());
        head[MAGIC_AT..MAGIC_AT + 4].copy_from_slice(b"HdrS");
        head[VERSION_AT..VERSION_AT + 2].copy_from_slice(&0x020Fu16.to_le_bytes());
        head[KERNEL_VERSION_AT..KERNEL_VERSION_AT + 2].copy_from_slice(&(0x3000u16 - 0x200).to_le_bytes());
        head[0x3000..0x3000 + version.len()].copy_from_slice(version.as_bytes());
        head
    }

    #[test]
    fn the_release_is_the_first_word_of_the_version_string() {
        let head = header("6.12.111+deb12-cloud-amd64 (debian-kernel@lists.debian.org) #1 SMP");
        assert_eq!(release_from_header(&head).unwrap(), "6.12.111+deb12-cloud-amd64");
    }

    #[test]
    fn garbage_is_rejected_with_the_reason() {
        let err = release_from_header(&[0u8; 4096]).unwrap_err().to_string();
        assert!(err.contains("HdrS"), "{err}");
        assert!(release_from_header(b"short").unwrap_err().to_string().contains("too short"));
        let mut head = header("not-a-release x");
        assert!(release_from_header(&head).unwrap_err().to_string().contains("kernel release"));
        head[KERNEL_VERSION_AT..KERNEL_VERSION_AT + 2].copy_from_slice(&0u16.to_le_bytes());
        assert!(release_from_header(&head).unwrap_err().to_string().contains("no kernel version"));
        let mut head = header("6.1.0 x");
        head[KERNEL_VERSION_AT..KERNEL_VERSION_AT + 2].copy_from_slice(&0xFFF0u16.to_le_bytes());
        assert!(release_from_header(&head).unwrap_err().to_string().contains("past the setup code"));
    }

    #[test]
    fn releases_are_path_safe() {
        assert!(is_release("6.1.0-50-cloud-amd64"));
        assert!(is_release("6.12.0-rc1~x+y"));
        assert!(!is_release("../../etc"));
        assert!(!is_release("6.1/x"));
        assert!(!is_release(""));
    }
}
