//! A shared object's or program's versioned dynamic symbols as `objdump -T` lists them,
//! for the drop-in libraries' symbol tests: what Debian's programs import must be what
//! rocex's libraries export, under the same version node.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// `(version node, symbol)` pairs of `file`'s dynamic symbol table from nodes whose names
/// start with one of `nodes`: the defined symbols, or with `undefined` the imports.
///
/// # Panics
///
/// When `objdump` cannot run or fails on `file` (tests check for it first).
pub fn dynamic(file: &Path, undefined: bool, nodes: &[&str]) -> BTreeSet<(String, String)> {
    let o = Command::new("objdump")
        .arg("-T")
        .arg(file)
        .output()
        .expect("run objdump");
    assert!(o.status.success(), "objdump -T {}", file.display());
    parse(&String::from_utf8_lossy(&o.stdout), undefined, nodes)
}

/// [`dynamic`] on `objdump -T`'s output.
pub fn parse(objdump: &str, undefined: bool, nodes: &[&str]) -> BTreeSet<(String, String)> {
    objdump
        .lines()
        .filter(|l| l.contains("*UND*") == undefined)
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let (ver, name) = (w.get(w.len().checked_sub(2)?)?, w.last()?);
            let ver = ver.trim_matches(|c| c == '(' || c == ')');
            nodes
                .iter()
                .any(|n| ver.starts_with(n))
                .then(|| (ver.to_owned(), (*name).to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as binutils 2.40 prints them: an import, a definition, a hidden old version.
    const OUT: &str = "\
0000000000000000      DF *UND*\t0000000000000000 (RDMACM_1.0) rdma_connect
0000000000012340 g    DF .text\t0000000000000024  RDMACM_1.0  rdma_listen
0000000000012380 g    DF .text\t0000000000000024 (IBVERBS_1.0) ibv_create_qp
0000000000000000      DF *UND*\t0000000000000000 (GLIBC_2.2.5) free
";

    #[test]
    fn imports_and_definitions_are_told_apart_by_node() {
        let s = |v: &str, n: &str| (v.to_owned(), n.to_owned());
        assert_eq!(
            parse(OUT, true, &["RDMACM_"]),
            BTreeSet::from([s("RDMACM_1.0", "rdma_connect")])
        );
        assert_eq!(
            parse(OUT, false, &["RDMACM_", "IBVERBS_"]),
            BTreeSet::from([
                s("RDMACM_1.0", "rdma_listen"),
                s("IBVERBS_1.0", "ibv_create_qp")
            ])
        );
    }
}
