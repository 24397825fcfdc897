//! Struct layouts against a C header: a test lists `(name, C expression, Rust value)` rows
//! with [`layout_rows!`](crate::layout_rows), builds the program [`c_source`] writes
//! against the system's header, and compares what it prints ([`parse`]) with the Rust
//! values ([`differences`]). The drop-in libraries' layout tests use it.

use std::collections::BTreeMap;

/// One checked value: a size or an offset as Rust computes it and as C spells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The row's name: `struct` for a size, `struct.field` for an offset.
    pub name: String,
    /// The C expression giving the value (`sizeof(...)`, `offsetof(...)`).
    pub c: String,
    /// The value in Rust.
    pub rust: usize,
}

impl Row {
    /// A row named `name`, `c` in C and `rust` in Rust.
    pub fn new(name: impl Into<String>, c: impl Into<String>, rust: usize) -> Self {
        Self {
            name: name.into(),
            c: c.into(),
            rust,
        }
    }
}

/// Rows for structs in scope: each struct's size under its own name (unless it is only a
/// head of the C struct, written `name .. head`), then each listed field's offset as
/// `struct.field`. A field whose C member designator differs names it:
/// `src => "src_addr"`, `post_send => "ops.post_send"`.
#[macro_export]
macro_rules! layout_rows {
    ($($t:ident $(.. $head:tt)? { $($f:ident $(=> $c:literal)?),* $(,)? })*) => {{
        let mut v: ::std::vec::Vec<$crate::layout::Row> = ::std::vec::Vec::new();
        $(
            $crate::layout_rows!(@size v $t $($head)?);
            $(
                let c = $crate::layout_rows!(@c $f $($c)?);
                v.push($crate::layout::Row::new(
                    format!("{}.{}", stringify!($t), c),
                    format!("offsetof(struct {}, {})", stringify!($t), c),
                    ::std::mem::offset_of!($t, $f),
                ));
            )*
        )*
        v
    }};
    (@size $v:ident $t:ident) => {
        $v.push($crate::layout::Row::new(
            stringify!($t),
            format!("sizeof(struct {})", stringify!($t)),
            ::std::mem::size_of::<$t>(),
        ));
    };
    (@size $v:ident $t:ident $head:tt) => {};
    (@c $f:ident) => { stringify!($f) };
    (@c $f:ident $c:literal) => { $c };
}

/// A C program that includes `header` and prints every row as `name=value`.
pub fn c_source(header: &str, rows: &[Row]) -> String {
    let mut src = format!(
        "#include <stddef.h>\n#include <stdio.h>\n#include <{header}>\nint main(void) {{\n"
    );
    for r in rows {
        src.push_str(&format!(
            "  printf(\"%s=%zu\\n\", \"{}\", (size_t)({}));\n",
            r.name, r.c
        ));
    }
    src.push_str("  return 0;\n}\n");
    src
}

/// The values the program of [`c_source`] printed, by row name.
///
/// # Panics
///
/// On a line that is not `name=value`: the program is not [`c_source`]'s.
pub fn parse(stdout: &[u8]) -> BTreeMap<String, usize> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once('=').expect("name=value");
            (k.to_owned(), v.parse().expect("a number"))
        })
        .collect()
}

/// Every row whose C value is not its Rust value (or that C did not print), described.
pub fn differences(rows: &[Row], c: &BTreeMap<String, usize>) -> Vec<String> {
    rows.iter()
        .filter(|r| c.get(&r.name) != Some(&r.rust))
        .map(|r| format!("{}: C {:?}, Rust {}", r.name, c.get(&r.name), r.rust))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    #[allow(dead_code)]
    struct pair {
        a: u8,
        b: u32,
    }

    #[test]
    fn rows_name_sizes_and_offsets_and_mismatches_are_reported() {
        let rows = crate::layout_rows! {
            pair { a, b => "second" }
        };
        assert_eq!(
            rows,
            [
                Row::new("pair", "sizeof(struct pair)", 8),
                Row::new("pair.a", "offsetof(struct pair, a)", 0),
                Row::new("pair.second", "offsetof(struct pair, second)", 4),
            ]
        );
        let src = c_source("x.h", &rows);
        assert!(src.contains("#include <x.h>"), "{src}");
        assert!(
            src.contains("(size_t)(offsetof(struct pair, second))"),
            "{src}"
        );
        let c = parse(b"pair=8\npair.a=0\npair.second=2\n");
        assert_eq!(differences(&rows, &c), ["pair.second: C Some(2), Rust 4"]);
        assert_eq!(differences(&rows, &parse(b"pair=8\npair.a=0\n")).len(), 1);
    }
}
