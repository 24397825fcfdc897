//! Links the cdylib as rdma-core's libmlx5.so.1: its soname and version nodes.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=libmlx5.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/libmlx5.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmlx5.so.1");
}
