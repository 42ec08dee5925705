//! Kernel code addresses to function names: the kernel's `System.map`
//! (beside its image in the cache), or the running guest's `/proc/kallsyms`
//! (the same `address type name` lines, module symbols with a `[module]`
//! column), plus `/proc/modules` for where each module's code lies.
//!
//! Why both: Debian's `linux-image-*` packages ship a one-line placeholder
//! `System.map` ("The real System.map is in the linux-image-<version>-dbg
//! package"), so for them the guest's own table is the only source short of
//! a debug package of a gigabyte; a kernel fslab built has the real one.
//! Module symbols exist only in the running kernel.
//!
//! A symbol covers the code from its address to the next symbol's, inside
//! the ranges the table describes: the image's text (`_text`…`_etext`) and
//! init text (`_sinittext`…`_einittext`), and each loaded module's core.
//! An address outside every range (entry trampolines in the CPU entry
//! area, BPF programs, ftrace trampolines) resolves to [`Resolved::Unmapped`],
//! never to the nearest symbol below it.
//!
//! [`ObjectMap`] says which object of a built kernel defines a function
//! (`nm -A` over its thin archive), for grouping a profile by source
//! directory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::KernelArtifacts;

/// The text marker of the placeholder Debian ships instead of a System.map.
const DEBIAN_PLACEHOLDER: &str = "The real System.map is in";

/// One code symbol.
#[derive(Clone, Debug, PartialEq)]
struct Symbol {
    address: u64,
    name: String,
}

/// A module's code: `[start, end)` and its symbols by address.
#[derive(Clone, Debug, PartialEq)]
struct Module {
    name: String,
    start: u64,
    end: u64,
}

/// What an address is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolved<'a> {
    /// Inside the function `name` (of `module`, or the image when None).
    Function { name: &'a str, module: Option<&'a str> },
    /// Inside module `module`'s code, before its first symbol.
    Module(&'a str),
    /// Not in any code the table describes.
    Unmapped,
}

/// A kernel's code symbols and the ranges they cover.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SymbolMap {
    /// The image's code symbols, ascending by address.
    image: Vec<Symbol>,
    /// The image's code ranges, `[start, end)`.
    ranges: Vec<(u64, u64)>,
    /// Module symbols, ascending, with the index of their module.
    module_symbols: Vec<(Symbol, usize)>,
    modules: Vec<Module>,
    /// Where the symbols came from, for the profile's notes.
    pub source: String,
}

/// `address type name [module]`, the line of both System.map and kallsyms.
struct Line<'a> {
    address: u64,
    kind: char,
    name: &'a str,
    module: Option<&'a str>,
}

fn parse_line(line: &str) -> Option<Line<'_>> {
    let mut fields = line.split_whitespace();
    let address = u64::from_str_radix(fields.next()?, 16).ok()?;
    let kind = fields.next()?;
    let kind = kind.chars().next().filter(|_| kind.len() == 1)?;
    let name = fields.next()?;
    let module = match fields.next() {
        Some(m) => Some(m.strip_prefix('[')?.strip_suffix(']')?),
        None => None,
    };
    fields.next().is_none().then_some(Line { address, kind, name, module })
}

/// Symbol types that name code (text, weak).
fn is_code(kind: char) -> bool {
    matches!(kind, 'T' | 't' | 'W' | 'w')
}

impl SymbolMap {
    /// The kernel's System.map, when it is beside the image and real (not
    /// Debian's placeholder); an unreadable or malformed one is an error.
    pub fn for_kernel(kernel: &KernelArtifacts) -> Result<Option<SymbolMap>> {
        match kernel.system_map() {
            Some(path) => Self::read(&path),
            None => Ok(None),
        }
    }

    /// The System.map at `path`, unless it is Debian's placeholder.
    pub fn read(path: &Path) -> Result<Option<SymbolMap>> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        if text.len() < 4096 && text.contains(DEBIAN_PLACEHOLDER) {
            return Ok(None);
        }
        Self::parse_image(&text, &path.display().to_string()).map(Some)
    }

    /// The image's symbols from System.map or kallsyms text (module lines
    /// are left out: see [`set_modules`](Self::set_modules)). `origin`
    /// names the text in errors, which give its line.
    pub fn parse_image(text: &str, origin: &str) -> Result<SymbolMap> {
        let mut image = Vec::new();
        let mut marks: HashMap<&str, u64> = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let Some(l) = parse_line(line) else {
                bail!("{origin}:{}: not an `address type name` symbol line: {line:?}", i + 1)
            };
            if l.module.is_some() {
                continue;
            }
            // The range markers share their address with a function, and are none.
            if matches!(l.name, "_text" | "_stext" | "_etext" | "_sinittext" | "_einittext") {
                marks.insert(l.name, l.address);
            } else if is_code(l.kind) {
                image.push(Symbol { address: l.address, name: l.name.to_string() });
            }
        }
        let start = marks.get("_text").or(marks.get("_stext"));
        let (Some(&start), Some(&end)) = (start, marks.get("_etext")) else {
            bail!("{origin}: no `_text`/`_stext` and `_etext` symbols: not a kernel's symbol table")
        };
        if start == 0 {
            bail!("{origin}: every address is 0: the kernel hides its addresses (kptr_restrict) from this reader");
        }
        let mut ranges = vec![(start, end)];
        if let (Some(&s), Some(&e)) = (marks.get("_sinittext"), marks.get("_einittext")) {
            ranges.push((s, e));
        }
        ranges.sort_unstable();
        image.sort_by_key(|s| s.address);
        Ok(SymbolMap { image, ranges, source: origin.to_string(), ..SymbolMap::default() })
    }

    /// Replaces the module symbols with the guest's: the `[module]` lines
    /// of its `/proc/kallsyms` and its `/proc/modules`
    /// (`name size refs deps state address …`), which gives each module's
    /// code range. A module without an address in `/proc/modules` is
    /// unknown and its symbols left out.
    pub fn set_modules(&mut self, kallsyms: &str, proc_modules: &str) -> Result<()> {
        let mut modules: Vec<Module> = Vec::new();
        for (i, line) in proc_modules.lines().enumerate() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.is_empty() {
                continue;
            }
            let parsed = (|| {
                let size: u64 = fields.get(1)?.parse().ok()?;
                let start = u64::from_str_radix(fields.get(5)?.strip_prefix("0x")?, 16).ok()?;
                Some((size, start))
            })();
            let Some((size, start)) = parsed else {
                bail!("/proc/modules:{}: not a `name size refs deps state address` line: {line:?}", i + 1)
            };
            if start != 0 {
                modules.push(Module { name: fields[0].to_string(), start, end: start + size });
            }
        }
        let index: HashMap<&str, usize> = modules.iter().enumerate().map(|(i, m)| (m.name.as_str(), i)).collect();
        let mut symbols = Vec::new();
        for (i, line) in kallsyms.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let Some(l) = parse_line(line) else {
                bail!("kallsyms:{}: not an `address type name [module]` line: {line:?}", i + 1)
            };
            let (Some(module), true) = (l.module, is_code(l.kind)) else { continue };
            if let Some(&m) = index.get(module) {
                symbols.push((Symbol { address: l.address, name: l.name.to_string() }, m));
            }
        }
        symbols.sort_by_key(|(s, _)| s.address);
        self.modules = modules;
        self.module_symbols = symbols;
        Ok(())
    }

    /// How many code symbols the map holds (image and modules).
    pub fn len(&self) -> usize {
        self.image.len() + self.module_symbols.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the code at `address` is.
    pub fn resolve(&self, address: u64) -> Resolved<'_> {
        if self.ranges.iter().any(|&(s, e)| (s..e).contains(&address)) {
            let below = self.image.partition_point(|s| s.address <= address);
            return match below.checked_sub(1).map(|i| &self.image[i]) {
                Some(s) => Resolved::Function { name: &s.name, module: None },
                None => Resolved::Unmapped,
            };
        }
        let Some(module) = self.modules.iter().find(|m| (m.start..m.end).contains(&address)) else {
            return Resolved::Unmapped;
        };
        let below = self.module_symbols.partition_point(|(s, _)| s.address <= address);
        match below.checked_sub(1).map(|i| &self.module_symbols[i]) {
            Some((s, m)) if self.modules[*m].name == module.name && s.address >= module.start => {
                Resolved::Function { name: &s.name, module: Some(&module.name) }
            }
            _ => Resolved::Module(&module.name),
        }
    }

    /// The image's start (`_text`, else `_stext`) in this map.
    pub fn image_start(&self) -> u64 {
        self.ranges.first().map_or(0, |r| r.0)
    }

    /// The image's symbols moved by `offset` (wrapping): a System.map
    /// applied to a kernel that KASLR placed elsewhere.
    pub fn relocated(&self, offset: u64) -> SymbolMap {
        let mut map = self.clone();
        for s in &mut map.image {
            s.address = s.address.wrapping_add(offset);
        }
        for r in &mut map.ranges {
            *r = (r.0.wrapping_add(offset), r.1.wrapping_add(offset));
        }
        map
    }

    /// The address of the image's function `name` (the first, if several).
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.image.iter().find(|s| s.name == name).map(|s| s.address)
    }
}

/// Which object of a built kernel defines each function: `nm -A` over the
/// object directory's thin archives of the objects linked into the image
/// (Kbuild's `vmlinux.a` from 6.1 on; before, each top-level directory's
/// `built-in.a` and `arch/<arch>/built-in.a`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObjectMap {
    /// Function name → the object's path relative to the object directory.
    objects: HashMap<String, String>,
}

impl ObjectMap {
    /// Reads the archives of the object directory `objdir`.
    pub fn read(objdir: &Path) -> Result<ObjectMap> {
        let archives = Self::archives(objdir)?;
        if archives.is_empty() {
            bail!("{} has no vmlinux.a or built-in.a: not a built kernel's object directory", objdir.display());
        }
        let mut args = vec!["-A", "--defined-only"];
        args.extend(archives.iter().map(String::as_str));
        // Run in the object directory, so members are named relative to it.
        let out = crate::sys::exec::run_in("nm", &args, Some(objdir), crate::sys::exec::TOOL_TIMEOUT)
            .map_err(|e| anyhow::anyhow!("running nm in {}: {e}", objdir.display()))?;
        if !out.success {
            bail!("nm in {} failed: {}", objdir.display(), out.stderr.lines().next().unwrap_or_default());
        }
        Ok(Self::parse(&out.stdout, objdir))
    }

    /// The archives to read, relative to `objdir`.
    fn archives(objdir: &Path) -> Result<Vec<String>> {
        if objdir.join("vmlinux.a").is_file() {
            return Ok(vec!["vmlinux.a".to_string()]);
        }
        let children = |dir: &Path| -> Result<Vec<PathBuf>> {
            let entries =
                std::fs::read_dir(objdir.join(dir)).with_context(|| format!("reading {}", objdir.display()))?;
            Ok(entries.flatten().map(|e| dir.join(e.file_name())).collect())
        };
        let mut dirs = children(Path::new(""))?;
        if objdir.join("arch").is_dir() {
            dirs.extend(children(Path::new("arch"))?);
        }
        let mut found: Vec<String> = dirs
            .iter()
            .map(|d| d.join("built-in.a"))
            .filter(|a| objdir.join(a).is_file())
            .filter_map(|a| a.to_str().map(str::to_string))
            .collect();
        found.sort();
        Ok(found)
    }

    /// `nm -A` lines: `ARCHIVE:MEMBER:ADDRESS TYPE NAME` (GNU nm names a
    /// thin archive's members by their paths). A name defined in several
    /// objects of one directory (static functions) keeps the first; one
    /// defined in several directories (a header's inline function emitted
    /// out of line, `compound_head`, `trylock_page`) names none: a profile
    /// resolves addresses to names, so which copy ran is not known.
    pub fn parse(nm: &str, objdir: &Path) -> ObjectMap {
        let mut objects: HashMap<String, String> = HashMap::new();
        let mut ambiguous = std::collections::HashSet::new();
        let prefix = format!("{}/", objdir.display());
        for line in nm.lines() {
            let Some((place, symbol)) = line.rsplit_once(':') else { continue };
            let Some((_, member)) = place.split_once(':') else { continue };
            let mut fields = symbol.split_whitespace();
            let (Some(_), Some(kind), Some(name)) = (fields.next(), fields.next(), fields.next()) else { continue };
            if kind.len() != 1 || !kind.chars().all(is_code) {
                continue;
            }
            let member = member.strip_prefix(&prefix).unwrap_or(member);
            match objects.get(name) {
                None => {
                    objects.insert(name.to_string(), member.to_string());
                }
                Some(first) if Path::new(first).parent() != Path::new(member).parent() => {
                    ambiguous.insert(name.to_string());
                }
                Some(_) => {}
            }
        }
        objects.retain(|name, _| !ambiguous.contains(name));
        ObjectMap { objects }
    }

    /// The object that defines `function` (`fs/squashfs/file.o`).
    pub fn object(&self, function: &str) -> Option<&str> {
        self.objects.get(function).map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = "\
ffffffff81000000 T _text
ffffffff81000000 T startup_64
ffffffff81000100 t secondary_startup_64
ffffffff81001000 T do_idle
ffffffff81001400 W arch_cpu_idle
ffffffff81001500 D some_data
ffffffff81002000 T _etext
ffffffff82000000 D _sdata
ffffffff83000000 T _sinittext
ffffffff83000000 T start_kernel
ffffffff83001000 T _einittext
";

    #[test]
    fn addresses_resolve_to_the_function_below_them_inside_the_code() {
        let map = SymbolMap::parse_image(MAP, "System.map").unwrap();
        let f = |a| map.resolve(a);
        assert_eq!(f(0xffffffff81001000), Resolved::Function { name: "do_idle", module: None });
        assert_eq!(f(0xffffffff810013ff), Resolved::Function { name: "do_idle", module: None });
        // A weak function is code; a data symbol inside the text does not split a function.
        assert_eq!(f(0xffffffff81001600), Resolved::Function { name: "arch_cpu_idle", module: None });
        assert_eq!(f(0xffffffff83000010), Resolved::Function { name: "start_kernel", module: None });
        assert_eq!(f(0xffffffff81000000), Resolved::Function { name: "startup_64", module: None }, "not `_text`");
        // Past _etext and outside the init text: no function, however near.
        assert_eq!(f(0xffffffff81002000), Resolved::Unmapped);
        assert_eq!(f(0xfffffe0000001000), Resolved::Unmapped);
        assert_eq!(map.address_of("do_idle"), Some(0xffffffff81001000));
        // KASLR moved the kernel by 0x3400000: the map follows.
        let moved = map.relocated(0x3400000);
        assert_eq!(moved.image_start(), 0xffffffff84400000);
        assert_eq!(moved.resolve(0xffffffff84401010), Resolved::Function { name: "do_idle", module: None });
        assert_eq!(moved.resolve(0xffffffff81001010), Resolved::Unmapped);
    }

    #[test]
    fn module_code_resolves_by_the_guests_tables() {
        let mut map = SymbolMap::parse_image(MAP, "System.map").unwrap();
        let modules = "squashfs 69632 1 - Live 0xffffffffc0a00000\nxfs 2000000 0 - Live 0xffffffffc0b00000 (E)\n";
        let kallsyms = "ffffffffc0a00100 t squashfs_xz_uncompress\t[squashfs]\n\
                        ffffffffc0a00800 T squashfs_read_data\t[squashfs]\n\
                        ffffffffc0a01000 d squashfs_data\t[squashfs]\n\
                        ffffffffc0b00000 t xfs_inactive\t[xfs]\n";
        map.set_modules(kallsyms, modules).unwrap();
        assert_eq!(
            map.resolve(0xffffffffc0a00810),
            Resolved::Function { name: "squashfs_read_data", module: Some("squashfs") }
        );
        assert_eq!(map.resolve(0xffffffffc0a00010), Resolved::Module("squashfs"));
        assert_eq!(map.resolve(0xffffffffc0b00004), Resolved::Function { name: "xfs_inactive", module: Some("xfs") });
        assert_eq!(map.resolve(0xffffffffc0e00000), Resolved::Unmapped);
        assert_eq!(map.len(), 8, "5 functions of the image, 3 of the modules");
        // A new module list replaces the old one.
        map.set_modules("", "").unwrap();
        assert_eq!(map.resolve(0xffffffffc0a00810), Resolved::Unmapped);
    }

    #[test]
    fn malformed_tables_are_errors_naming_the_line() {
        let err = SymbolMap::parse_image("ffffffff81000000 T _text\nzzz T x\n", "/k/System.map").unwrap_err();
        assert!(err.to_string().starts_with("/k/System.map:2: "), "{err}");
        let err = SymbolMap::parse_image("ffffffff81000000 T startup_64\n", "m").unwrap_err();
        assert!(err.to_string().contains("no `_text`"), "{err}");
        let hidden = "0000000000000000 T _text\n0000000000000000 T _etext\n";
        assert!(SymbolMap::parse_image(hidden, "kallsyms").unwrap_err().to_string().contains("kptr_restrict"));
        let mut map = SymbolMap::default();
        let err = map.set_modules("", "squashfs sixty 1 - Live 0x0\n").unwrap_err();
        assert!(err.to_string().starts_with("/proc/modules:1: "), "{err}");
    }

    #[test]
    fn debians_placeholder_is_no_map() {
        let dir = tempfile::tempdir().unwrap();
        let boot = dir.path().join("boot");
        std::fs::create_dir(&boot).unwrap();
        let kernel = KernelArtifacts {
            image: boot.join("vmlinuz-6.1.0-57-cloud-amd64"),
            modules_dir: None,
            config: None,
            release: "6.1.0-57-cloud-amd64".into(),
            source: String::new(),
            sha256: String::new(),
            guest_dirs: vec![],
            package: None,
            build: None,
        };
        assert_eq!(SymbolMap::for_kernel(&kernel).unwrap(), None, "no file");
        let path = boot.join("System.map-6.1.0-57-cloud-amd64");
        std::fs::write(&path, "ffffffffffffffff B The real System.map is in the linux-image-<version>-dbg package\n")
            .unwrap();
        assert_eq!(kernel.system_map(), Some(path.clone()));
        assert_eq!(SymbolMap::for_kernel(&kernel).unwrap(), None, "the placeholder");
        std::fs::write(&path, MAP).unwrap();
        let map = SymbolMap::for_kernel(&kernel).unwrap().unwrap();
        assert_eq!(map.source, path.display().to_string());
    }

    #[test]
    fn objects_come_from_nm_of_the_thin_archive() {
        let nm = "/o/vmlinux.a:fs/squashfs/file.o:0000000000000000 T squashfs_readahead\n\
                  /o/vmlinux.a:fs/squashfs/file.o:0000000000000010 d squashfs_ops\n\
                  /o/vmlinux.a:lib/xz/xz_dec_lzma2.o:0000000000000040 t lzma_main\n\
                  /o/vmlinux.a:kernel/sched/idle.o:0000000000000000 T do_idle\n\
                  /o/vmlinux.a:fs/btrfs/inode.o:0000000000000100 t trylock_page\n\
                  /o/vmlinux.a:mm/filemap.o:0000000000000200 t trylock_page\n\
                  /o/vmlinux.a:fs/squashfs/block.o:0000000000000300 t copy_bio\n\
                  /o/vmlinux.a:fs/squashfs/file.o:0000000000000300 t copy_bio\n";
        let map = ObjectMap::parse(nm, Path::new("/o"));
        assert_eq!(map.object("squashfs_readahead"), Some("fs/squashfs/file.o"));
        assert_eq!(map.object("lzma_main"), Some("lib/xz/xz_dec_lzma2.o"));
        assert_eq!(map.object("squashfs_ops"), None, "data is not code");
        assert_eq!(map.object("trylock_page"), None, "defined in two directories: which one ran is unknown");
        assert_eq!(map.object("copy_bio"), Some("fs/squashfs/block.o"), "two objects of one directory: the first");
    }

    /// Kbuild's archives are thin (`ar cDPrST`): `nm -A` names members by
    /// their paths, which is what [`ObjectMap::parse`] reads.
    #[test]
    fn a_thin_archive_as_kbuild_makes_it_maps_functions_to_objects() {
        if !crate::sys::exec::have_program("cc") || !crate::sys::exec::have_program("nm") {
            crate::testsupport::skip("no cc or nm");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("fs/demo");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join("a.c"), "int demo_read(int x) { return x + 1; }\nint demo_data = 3;\n").unwrap();
        let obj = sub.join("a.o");
        crate::sys::exec::run_tool("cc", &["-c", "-o", obj.to_str().unwrap(), sub.join("a.c").to_str().unwrap()])
            .unwrap();
        // As Kbuild runs it: in the object directory, with relative paths.
        let ar = |archive: &str, member: &str| {
            let out = crate::sys::exec::run_in(
                "ar",
                &["cDPrST", archive, member],
                Some(dir.path()),
                std::time::Duration::from_secs(30),
            )
            .unwrap();
            assert!(out.success, "{}", out.stderr);
        };
        let archive = dir.path().join("vmlinux.a");
        ar("vmlinux.a", "fs/demo/a.o");
        let map = ObjectMap::read(dir.path()).unwrap();
        assert_eq!(map.object("demo_read"), Some("fs/demo/a.o"), "{map:?}");
        assert_eq!(map.object("demo_data"), None);
        // Before 6.1 there is no vmlinux.a: each top-level directory's built-in.a, and arch's.
        std::fs::remove_file(&archive).unwrap();
        let x86 = dir.path().join("arch/x86/entry");
        std::fs::create_dir_all(&x86).unwrap();
        std::fs::write(x86.join("b.c"), "void demo_entry(void) {}\n").unwrap();
        let cc = |src: &Path, obj: &Path| {
            crate::sys::exec::run_tool("cc", &["-c", "-o", obj.to_str().unwrap(), src.to_str().unwrap()]).unwrap();
        };
        cc(&x86.join("b.c"), &x86.join("b.o"));
        ar("fs/built-in.a", "fs/demo/a.o");
        ar("arch/x86/built-in.a", "arch/x86/entry/b.o");
        let map = ObjectMap::read(dir.path()).unwrap();
        assert_eq!(map.object("demo_read"), Some("fs/demo/a.o"), "{map:?}");
        assert_eq!(map.object("demo_entry"), Some("arch/x86/entry/b.o"), "{map:?}");
        assert!(ObjectMap::read(&dir.path().join("fs/demo")).is_err(), "no archives: not an object directory");
    }
}
