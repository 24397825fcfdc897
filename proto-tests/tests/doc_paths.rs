//! Every repository path README.md and docs/*.md cite in code (`crates/...`,
//! `proto-tests/...`, `docs/...`, `pcaps/...`, `packaging/...`, in backticks or in a fenced
//! block) exists, so that a file moved or removed cannot leave the docs pointing at nothing.

use std::path::{Path, PathBuf};

/// The prefixes of the paths checked: the repository's top-level folders.
const PREFIXES: &[&str] = &["crates/", "proto-tests/", "docs/", "pcaps/", "packaging/"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The code of a Markdown text: each line of a fenced block, and each inline code span
/// (which may run over a line break), with the line it starts on.
fn code_spans(text: &str) -> Vec<(usize, String)> {
    let mut spans = Vec::new();
    let mut fenced = false;
    let mut open: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            open = None;
            continue;
        }
        if fenced {
            spans.push((n, line.to_owned()));
            continue;
        }
        for (k, part) in line.split('`').enumerate() {
            if k > 0 {
                // A backtick: it closes the open span or opens one.
                match open.take() {
                    Some(span) => spans.push(span),
                    None => open = Some((n, String::new())),
                }
            }
            if let Some((_, s)) = open.as_mut() {
                s.push_str(part);
            }
        }
        if let Some((_, s)) = open.as_mut() {
            s.push(' ');
        }
    }
    spans
}

/// The repository paths in one piece of code: words that start with a top-level folder
/// (or `$PWD/` and one), without the punctuation that ends a sentence (a comma inside
/// braces is a path's own).
fn paths_in(code: &str) -> Vec<String> {
    code.split(|c: char| c.is_whitespace() || "\"'();=<>|".contains(c))
        .map(|w| w.strip_prefix("$PWD/").unwrap_or(w))
        .filter(|w| PREFIXES.iter().any(|p| w.starts_with(p)))
        .map(|w| w.trim_end_matches(['.', ',', ':', ';', ')']).to_owned())
        .collect()
}

/// `a/{b,c}.sh` as `a/b.sh` and `a/c.sh`.
fn expand_braces(path: &str) -> Vec<String> {
    match (path.find('{'), path.find('}')) {
        (Some(a), Some(b)) if a < b => path[a + 1..b]
            .split(',')
            .flat_map(|alt| expand_braces(&format!("{}{alt}{}", &path[..a], &path[b + 1..])))
            .collect(),
        _ => vec![path.to_owned()],
    }
}

/// A word in capitals (`NAME`, `X`) stands for any name.
fn is_placeholder(component: &str) -> bool {
    let stem = component.split('.').next().unwrap_or(component);
    !stem.is_empty() && stem.chars().all(|c| c.is_ascii_uppercase() || c == '_')
}

/// Whether `path` (relative to `root`) names something: a file or folder, or for a last
/// component with `*`, at least one entry of its folder that matches.
fn exists(root: &Path, path: &str) -> bool {
    let (dir, last) = path.rsplit_once('/').unwrap_or(("", path));
    match last.split_once('*') {
        Some((head, tail)) => std::fs::read_dir(root.join(dir)).is_ok_and(|entries| {
            entries.filter_map(Result::ok).any(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.len() >= head.len() + tail.len()
                    && name.starts_with(head)
                    && name.ends_with(tail)
            })
        }),
        None => root.join(path).exists(),
    }
}

/// The cited paths of `text` that name nothing under `root`, as `line: path`, and how
/// many paths were checked.
fn missing(root: &Path, text: &str) -> (Vec<String>, usize) {
    let mut bad = Vec::new();
    let mut checked = 0;
    for (line, code) in code_spans(text) {
        for cited in paths_in(&code) {
            for path in expand_braces(&cited) {
                checked += 1;
                if !exists(root, &path) && !path.split('/').any(is_placeholder) {
                    bad.push(format!("{line}: {path}"));
                }
            }
        }
    }
    (bad, checked)
}

#[test]
fn every_path_the_docs_cite_exists() {
    let root = root();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    docs.insert(0, root.join("README.md"));
    let (mut bad, mut checked) = (Vec::new(), 0);
    for doc in &docs {
        let text = std::fs::read_to_string(doc).expect("read a doc");
        let (missing, n) = missing(&root, &text);
        checked += n;
        let name = doc.strip_prefix(&root).unwrap_or(doc).display().to_string();
        bad.extend(missing.into_iter().map(|m| format!("{name}:{m}")));
    }
    assert!(
        checked > 100,
        "only {checked} cited paths found: the extraction is broken"
    );
    assert!(
        bad.is_empty(),
        "the docs cite paths that do not exist:\n{}",
        bad.join("\n")
    );
}

#[test]
fn a_missing_path_is_reported_and_placeholders_and_patterns_are_not() {
    let text = "See `crates/rocex-wire/src/lib.rs`, `crates/rocex-wire/src/gone.rs`.\n\
                A span over a line break: `cargo test\n-p x crates/rocex-nope/`.\n\
                `proto-tests/rxe-lab/scenarios/NAME.sh`, `pcaps/rxe61-*.pcap`,\n\
                `proto-tests/rxe-lab/{build,gone}.sh` and `pcaps/nothing-*.pcap`.\n\
                ```sh\nbash proto-tests/gone.sh\n```\n";
    let (bad, checked) = missing(&root(), text);
    assert_eq!(
        bad,
        [
            "1: crates/rocex-wire/src/gone.rs",
            "2: crates/rocex-nope/",
            "5: proto-tests/rxe-lab/gone.sh",
            "5: pcaps/nothing-*.pcap",
            "7: proto-tests/gone.sh",
        ]
    );
    assert_eq!(checked, 9);
}
