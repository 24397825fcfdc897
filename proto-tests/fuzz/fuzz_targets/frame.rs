//! The whole-frame parser, ICRC check, re-emission and dump summary on arbitrary bytes:
//! none may panic, and whatever parses must re-emit to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocex_wire::frame::Frame;

fuzz_target!(|data: &[u8]| {
    let _ = rocex_dump::analyze(1, 0.0, data, &rocex_dump::Ports::default());
    let Ok(f) = Frame::parse(data) else { return };
    let _ = f.check_icrc();
    let mut repr = f.repr.clone();
    if let rocex_wire::frame::IcrcCheck::Valid(form) = f.check_icrc() {
        repr.icrc_form = form;
    }
    let mut out = vec![0u8; repr.buffer_len()];
    if let Ok(n) = repr.emit(&mut out) {
        // IPv4 reserved flag and Ethernet trailers aside, parse and emit are inverse.
        if f.check_icrc().is_valid() && out[..n] != *data {
            let again = Frame::parse(&out[..n]).expect("an emitted frame parses");
            assert_eq!(again.repr.packet, f.repr.packet);
        }
    }
});
