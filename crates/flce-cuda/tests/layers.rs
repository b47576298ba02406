//! The crate's modules in layers: each top-level module of src/ may name (`crate::x`) only the
//! modules listed before it, so the layering docs/architecture.md draws holds and no import
//! points upward or closes a circle. A new module goes into `LAYERS` where its imports put it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Lowest first: raw FFI and errors, the tuning knobs, geometry and the generated ABI, compiling
/// and caching kernels, the families and modes plans choose between, plans, device types, the
/// kernel registry and cuBLAS, a launch's context, the families' launchers, the backend, its
/// planning calls, the pass drivers, and what builds on the whole backend.
const LAYERS: &[&str] = &[
    "error",
    "tuning",
    "library",
    "context",
    "geometry",
    "abi",
    "abi_tests",
    "cache",
    "compile",
    "modes",
    "plan",
    "device",
    "runtime",
    "blas",
    "nccl",
    "launch",
    "family",
    "loss",
    "planning",
    "pass",
    "host",
    "bench",
    "vocab_parallel",
    "lib",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `crate::name` references of a source file, comments left out.
fn crate_references(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in source.lines() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let code = code.split(" //").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let tail = &rest[i + "crate::".len()..];
            let name: String = tail.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            let word_start = i == 0 || !rest[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
            if word_start && !name.is_empty() {
                names.push(name);
            }
            rest = tail;
        }
    }
    names
}

#[test]
fn no_module_names_a_module_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut upward = BTreeMap::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let module = rel.iter().next().unwrap().to_str().unwrap().trim_end_matches(".rs").to_string();
        let own =
            rank(&module).unwrap_or_else(|| panic!("src/{} is in no layer: add `{module}` to LAYERS", rel.display()));
        for name in crate_references(&std::fs::read_to_string(file).unwrap()) {
            if name == module {
                continue;
            }
            match rank(&name) {
                Some(r) if r < own => {}
                _ => {
                    upward.entry(format!("src/{}", rel.display())).or_insert_with(Vec::new).push(name);
                }
            }
        }
    }
    assert!(upward.is_empty(), "modules naming a module above them (or in no layer): {upward:#?}");
}

#[test]
fn the_scan_sees_references_and_skips_comments() {
    let found =
        crate_references("use crate::plan::{A, B};\n// crate::loss\nlet x = crate::tuning::X; // crate::pass\n");
    assert_eq!(found, ["plan", "tuning"]);
}
