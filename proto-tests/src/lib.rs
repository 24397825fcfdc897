//! Conformance tests over kernel rxe captures live in `tests/`.
