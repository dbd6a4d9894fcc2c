//! Imports run one way: every `crate::` path in `src/` names a module on its own floor or below,
//! and the floors here are the ones ARCHITECTURE.md's "Layers" table lists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The floors, bottom to top, and the top-level modules of `src/` on each. A module may import
/// from its own floor and the floors below it. ARCHITECTURE.md's "Layers" table says why.
const FLOORS: &[(&str, &[&str])] = &[
    (
        "ground",
        &["error", "fnv", "fsio", "host_memory", "median", "plot_font"],
    ),
    ("device", &["gpu"]),
    ("tensor", &["autograd", "checkpoint", "tensor"]),
    ("ops", &["ops"]),
    ("layers", &["nn", "optim"]),
    ("models", &["data", "models"]),
    ("diffusion", &["diffusion", "run_state"]),
    (
        "inference",
        &["classifier", "eval", "features", "metrics", "pipeline"],
    ),
    ("workflows", &["compress", "distributed", "train"]),
    ("lab", &["bench", "experiment", "profile", "roofline", "soak"]),
    ("shells", &["app", "commands", "main"]),
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|(_, modules)| modules.contains(&module))
}

/// Every `.rs` file under `dir`.
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

/// The top-level module a file of `src/` belongs to (`src/ops/conv/mod.rs` -> `ops`).
fn module_of(file: &Path) -> String {
    let rel = file.strip_prefix(src_dir()).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The text without `//` comments (doc comments name paths that are not imports).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first segment after every `crate::` (and `$crate::`) in `text`: `crate::a::b` gives
/// `a`, `crate::{a::b, c}` gives `a` and `c`.
fn crate_paths(text: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("crate::") {
        let start = from + at;
        from = start + "crate::".len();
        let before = start.checked_sub(1).map(|i| bytes[i] as char);
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &text[from..];
        if !rest.starts_with('{') {
            out.push(ident(rest));
            continue;
        }
        let (mut depth, mut item_start) = (0, 1);
        for (i, c) in rest.char_indices() {
            match c {
                '{' => depth += 1,
                '}' | ',' if depth == 1 => {
                    out.push(ident(&rest[item_start..i]));
                    item_start = i + 1;
                    if c == '}' {
                        break;
                    }
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
    }
    out.retain(|name| !name.is_empty());
    out
}

/// Names `src/lib.rs` re-exports at the crate root, with the module each comes from.
fn root_reexports() -> BTreeMap<String, String> {
    let lib = without_comments(&std::fs::read_to_string(src_dir().join("lib.rs")).unwrap());
    let mut names = BTreeMap::new();
    for statement in lib.split(';') {
        let Some(path) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let (module, items) = path.split_once("::").unwrap();
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let name = item.split_whitespace().last().unwrap_or("");
            let name = name.rsplit("::").next().unwrap();
            if !name.is_empty() {
                names.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    names
}

/// Macros exported at the crate root, with the module that defines each.
fn root_macros(files: &[PathBuf]) -> BTreeMap<String, String> {
    let mut macros = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        for (at, _) in text.match_indices("#[macro_export]") {
            let after = &text[at..];
            if let Some(name) = after.split("macro_rules!").nth(1).map(|s| {
                s.trim_start()
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .next()
                    .unwrap()
            }) {
                macros.insert(name.to_string(), module_of(file));
            }
        }
    }
    macros
}

#[test]
fn every_import_names_a_module_on_its_own_floor_or_below() {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    files.sort();
    let reexports = root_reexports();
    let macros = root_macros(&files);
    let mut problems = Vec::new();
    for file in &files {
        let module = module_of(file);
        if module == "lib" {
            continue;
        }
        let Some(floor) = floor_of(&module) else {
            problems.push(format!(
                "{}: module `{module}` has no floor in FLOORS",
                file.display()
            ));
            continue;
        };
        if FLOORS[floor].0 == "shells" {
            // the shells may use anything (and in the binary `crate::` is the binary's own)
            continue;
        }
        let text = without_comments(&std::fs::read_to_string(file).unwrap());
        for name in crate_paths(&text) {
            let target = if floor_of(&name).is_some() {
                name.clone()
            } else if let Some(module) = reexports.get(&name).or_else(|| macros.get(&name)) {
                module.clone()
            } else {
                problems.push(format!(
                    "{}: `crate::{name}` names no module in FLOORS",
                    file.display()
                ));
                continue;
            };
            let target_floor = floor_of(&target).unwrap();
            if target_floor > floor {
                problems.push(format!(
                    "{}: `{module}` ({}) imports `{target}` ({}), a floor above it",
                    file.strip_prefix(src_dir()).unwrap().display(),
                    FLOORS[floor].0,
                    FLOORS[target_floor].0
                ));
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(
        problems.is_empty(),
        "imports against the layer table:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_layer_table_in_architecture_md_is_the_one_the_test_checks() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md")).unwrap();
    let section = doc
        .split("\n## Layers")
        .nth(1)
        .expect("ARCHITECTURE.md has a `## Layers` section");
    let section = section.split("\n## ").next().unwrap();
    // rows `| floor | modules | why |`, listed bottom to top
    let rows: Vec<(String, Vec<String>)> = section
        .lines()
        .filter(|line| line.starts_with('|'))
        .map(|line| line.split('|').map(str::trim).collect::<Vec<_>>())
        .filter(|cells| cells.len() > 3 && !cells[1].starts_with('-') && cells[1] != "floor")
        .map(|cells| {
            let mut modules: Vec<String> = cells[2]
                .split('`')
                .skip(1)
                .step_by(2)
                .map(|m| m.trim_end_matches('/').to_string())
                .collect();
            modules.sort();
            (cells[1].to_string(), modules)
        })
        .collect();
    let expected: Vec<(String, Vec<String>)> = FLOORS
        .iter()
        .map(|(floor, modules)| (floor.to_string(), modules.iter().map(|m| m.to_string()).collect()))
        .collect();
    assert_eq!(
        rows, expected,
        "ARCHITECTURE.md's Layers table and FLOORS disagree"
    );
}

#[test]
fn paths_are_read_from_use_lines_and_inline_paths() {
    let text = "use crate::{gpu::Gpu, ops::{a, b}, Tensor};\nlet x = crate::data::load();\nwgdiff::train::x; $crate::gpu::y";
    assert_eq!(crate_paths(text), ["gpu", "ops", "Tensor", "data", "gpu"]);
    assert_eq!(without_comments("a // crate::train\nb"), "a \nb");
}
