//! Imports run one way: every `crate::` path in `src/` names a module on its own floor or below,
//! no folder's files import each other in a circle, the files of the folders ordered here import
//! only from their own floor or below, and these are the tables ARCHITECTURE.md's "Layers" lists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The floors, bottom to top, and the top-level modules of `src/` on each. A module may import
/// from its own floor and the floors below it. ARCHITECTURE.md's "Layers" table says why.
const FLOORS: &[Floor] = &[
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

/// A floor's name and what is on it.
type Floor = (&'static str, &'static [&'static str]);

/// Folders whose files have floors too, each folder's bottom to top: a file may import its
/// siblings (`super::x`, `crate::folder::x`) on its own floor and below; `mod.rs`, the folder's
/// face, may import any. ARCHITECTURE.md's "Inside a folder" table says why.
const FOLDER_FLOORS: &[(&str, &[Floor])] = &[
    (
        "app",
        &[
            ("platform", &["platform"]),
            ("jobs", &["frame_clock", "jobs"]),
            ("widgets", &["export", "grid_texture", "plots"]),
            ("runs", &["sampling"]),
            ("view parts", &["branches"]),
            (
                "views",
                &[
                    "compare",
                    "denoise",
                    "device",
                    "experiments",
                    "profile",
                    "skip",
                    "train",
                ],
            ),
        ],
    ),
    (
        "gpu",
        &[
            (
                "parts",
                &[
                    "cost",
                    "devices",
                    "pipelines",
                    "pool",
                    "report",
                    "select",
                    "texels",
                ],
            ),
            ("pacing", &["pacing"]),
            ("host", &["host", "host_web"]),
            ("measuring", &["autotune", "profiler"]),
            ("batching", &["batch"]),
        ],
    ),
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
    let mut firsts: Vec<String> = paths_after(text, "crate")
        .into_iter()
        .filter_map(|path| path.into_iter().next())
        .collect();
    firsts.dedup();
    firsts
}

/// Every path that starts with `root::` in `text` (`crate`, `super`), without the root and
/// with each `{...}` group spread: `crate::{a::b, c::{d, e}}` gives `a::b`, `c::d` and `c::e`.
fn paths_after(text: &str, root: &str) -> Vec<Vec<String>> {
    let start = format!("{root}::");
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(&start) {
        let begin = from + at;
        from = begin + start.len();
        // (not a segment of a longer path: the second `super` of `super::super::`)
        let before = begin.checked_sub(1).map(|i| bytes[i] as char);
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        use_tree(&text[from..], Vec::new(), &mut out);
    }
    out.retain(|path| !path.is_empty());
    out
}

/// The paths of the use tree at the start of `text` (`a::b`, `a::{b, c::d}`), each after
/// `prefix`; returns how many bytes the tree took.
fn use_tree(text: &str, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut at = 0;
    loop {
        at += text[at..].len() - text[at..].trim_start().len();
        if text[at..].starts_with('{') {
            at += 1;
            loop {
                at += use_tree(&text[at..], prefix.clone(), out);
                at += text[at..].len() - text[at..].trim_start().len();
                match text[at..].chars().next() {
                    Some(',') => at += 1,
                    Some('}') => return at + 1,
                    _ => return at,
                }
                if text[at..].trim_start().starts_with('}') {
                    at += text[at..].find('}').unwrap() + 1;
                    return at;
                }
            }
        }
        let ident: String = text[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        at += ident.len();
        if !ident.is_empty() && ident != "self" {
            prefix.push(ident);
        }
        if text[at..].starts_with("::") {
            at += 2;
        } else {
            out.push(prefix);
            return at;
        }
    }
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

/// The module path of a file of `src/` (`src/ops/conv/mod.rs` -> `ops::conv`).
fn module_path(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src_dir()).unwrap().with_extension("");
    let mut path: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if path.last().is_some_and(|last| last == "mod") {
        path.pop();
    }
    path
}

/// Every module path a file names (`crate::` paths as they are, `super::` ones resolved
/// against the file's own module).
fn named_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    let mut named = paths_after(text, "crate");
    for path in paths_after(text, "super") {
        let mut base = module[..module.len().saturating_sub(1)].to_vec();
        let mut rest = path.as_slice();
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        named.push(base);
    }
    named
}

/// For every folder of `src/`, which of its entries (files and subfolders) import which others:
/// a file deeper down counts as the subfolder it is in.
fn folder_imports() -> BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    files.sort();
    let mut imports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for file in &files {
        let module = module_path(file);
        if module == ["lib"] || module == ["main"] {
            continue;
        }
        let text = without_comments(&std::fs::read_to_string(file).unwrap());
        for named in named_paths(&module, &text) {
            for depth in 1..module.len() {
                let folder = &module[..depth];
                if named.len() > depth && named[..depth] == *folder && named[depth] != module[depth] {
                    let into = imports.entry(folder.to_vec()).or_default();
                    let targets = into.entry(module[depth].clone()).or_default();
                    if !targets.contains(&named[depth]) {
                        targets.push(named[depth].clone());
                    }
                }
            }
        }
    }
    imports
}

/// The entries (files without `.rs`, subfolders) of the folder `folder` of `src/`, `mod` aside.
fn entries_of(folder: &str) -> Vec<String> {
    let mut entries: Vec<String> = std::fs::read_dir(src_dir().join(folder))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|name| match name.strip_suffix(".rs") {
            Some(stem) => (stem != "mod").then(|| stem.to_string()),
            None => src_dir().join(folder).join(&name).is_dir().then_some(name),
        })
        .collect();
    entries.sort();
    entries
}

/// A circle in `imports` (an entry that reaches itself), as the entries along it.
fn a_circle(imports: &BTreeMap<String, Vec<String>>) -> Option<Vec<String>> {
    fn walk(
        at: &str,
        imports: &BTreeMap<String, Vec<String>>,
        path: &mut Vec<String>,
        done: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(from) = path.iter().position(|p| p == at) {
            let mut circle = path[from..].to_vec();
            circle.push(at.to_string());
            return Some(circle);
        }
        if done.iter().any(|d| d == at) {
            return None;
        }
        path.push(at.to_string());
        for next in imports.get(at).into_iter().flatten() {
            if let Some(circle) = walk(next, imports, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.push(at.to_string());
        None
    }
    let mut done = Vec::new();
    imports
        .keys()
        .find_map(|start| walk(start, imports, &mut Vec::new(), &mut done))
}

#[test]
fn no_folder_imports_itself_in_a_circle() {
    let circles: Vec<String> = folder_imports()
        .iter()
        .filter_map(|(folder, imports)| {
            a_circle(imports).map(|c| format!("src/{}: {}", folder.join("/"), c.join(" -> ")))
        })
        .collect();
    assert!(circles.is_empty(), "imports in a circle:\n{}", circles.join("\n"));
}

#[test]
fn files_of_an_ordered_folder_import_only_their_floor_or_below() {
    let imports = folder_imports();
    let mut problems = Vec::new();
    for (folder, floors) in FOLDER_FLOORS {
        let floor_of = |entry: &str| floors.iter().position(|(_, files)| files.contains(&entry));
        let entries = entries_of(folder);
        for entry in &entries {
            if floor_of(entry).is_none() {
                problems.push(format!("src/{folder}/{entry}: no floor in FOLDER_FLOORS"));
            }
        }
        let Some(within) = imports.get(&vec![folder.to_string()]) else {
            continue;
        };
        for (entry, targets) in within {
            let Some(floor) = floor_of(entry) else {
                continue;
            };
            for target in targets.iter().filter(|t| entries.contains(t)) {
                let target_floor = floor_of(target).unwrap_or(usize::MAX);
                if target_floor > floor {
                    problems.push(format!(
                        "src/{folder}/{entry} ({}) imports {target}, a floor above it",
                        floors[floor].0
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "imports against the folders' floors:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_circle_is_found_and_named() {
    let imports: BTreeMap<String, Vec<String>> = [
        ("skip", vec!["denoise"]),
        ("denoise", vec!["branches", "jobs"]),
        ("branches", vec!["denoise"]),
        ("jobs", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(a_circle(&imports).unwrap(), ["branches", "denoise", "branches"]);
    let mut acyclic = imports.clone();
    acyclic.insert("branches".into(), vec!["jobs".into()]);
    assert_eq!(a_circle(&acyclic), None);
    let module: Vec<String> = ["app", "denoise"].map(String::from).to_vec();
    assert_eq!(
        named_paths(
            &module,
            "use super::{branches::Branches, jobs::{Job, Event}};\nsuper::super::gpu::x"
        ),
        [
            vec!["app", "branches", "Branches"],
            vec!["app", "jobs", "Job"],
            vec!["app", "jobs", "Event"],
            vec!["gpu", "x"]
        ]
    );
}

/// The rows of the table under `heading` in ARCHITECTURE.md (up to the next heading), each
/// row's cells trimmed, without the separator and the header row (first cell `first`).
fn architecture_table(heading: &str, first: &str) -> Vec<Vec<String>> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md")).unwrap();
    let section = doc
        .split(&format!("\n{heading}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has a `{heading}` section"));
    let section = section.split("\n#").next().unwrap();
    section
        .lines()
        .filter(|line| line.starts_with('|'))
        .map(|line| {
            line.split('|')
                .map(|cell| cell.trim().to_string())
                .collect::<Vec<_>>()
        })
        .map(|cells| cells[1..cells.len() - 1].to_vec())
        .filter(|cells| !cells[0].starts_with('-') && cells[0] != first)
        .collect()
}

/// The `code` spans of a table cell (a trailing `/` dropped), sorted.
fn code_spans(cell: &str) -> Vec<String> {
    let mut spans: Vec<String> = cell
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|m| m.trim_end_matches('/').to_string())
        .collect();
    spans.sort();
    spans
}

#[test]
fn the_layer_table_in_architecture_md_is_the_one_the_test_checks() {
    // rows `| floor | modules | why |`, listed bottom to top
    let rows: Vec<(String, Vec<String>)> = architecture_table("## Layers", "floor")
        .iter()
        .map(|cells| (cells[0].clone(), code_spans(&cells[1])))
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

#[test]
fn the_folder_table_in_architecture_md_is_the_one_the_test_checks() {
    // rows `| folder | floor | files | why |`, each folder's listed bottom to top
    let rows: Vec<(String, String, Vec<String>)> = architecture_table("### Inside a folder", "folder")
        .iter()
        .map(|cells| (cells[0].clone(), cells[1].clone(), code_spans(&cells[2])))
        .collect();
    let expected: Vec<(String, String, Vec<String>)> = FOLDER_FLOORS
        .iter()
        .flat_map(|(folder, floors)| {
            floors.iter().map(move |(floor, files)| {
                (
                    folder.to_string(),
                    floor.to_string(),
                    files.iter().map(|f| f.to_string()).collect(),
                )
            })
        })
        .collect();
    assert_eq!(
        rows, expected,
        "ARCHITECTURE.md's Inside a folder table and FOLDER_FLOORS disagree"
    );
}
