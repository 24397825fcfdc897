//! Control-channel bytes from a hostile peer: the input is a byte stream cut into frames as
//! rocexd and rocex-verbs cut it (header, then the body it declares), each body decoded as
//! a request and as a response of its kind. Nothing may panic, and whatever decodes must
//! encode to the same bytes (the decoders accept exactly one encoding of each message).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocex_shm::control::{HEADER_LEN, Request, Response, decode_header, encode_frame, kind};

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while rest.len() >= HEADER_LEN {
        let Ok(h) = decode_header(rest) else { return };
        let Some(body) = rest.get(HEADER_LEN..HEADER_LEN + h.body_len) else { return };
        rest = &rest[HEADER_LEN + h.body_len..];
        if let Ok(r) = Request::decode(h.kind, body) {
            assert_eq!(r.kind(), h.kind);
            assert_eq!(r.encode(), body, "{r:?}");
            let f = encode_frame(h.kind, h.seq, body).expect("a decoded frame re-encodes");
            assert_eq!(decode_header(&f), Ok(h));
        }
        let as_response = if h.kind == kind::ERROR { h.kind } else { h.kind | kind::RESPONSE };
        if let Ok(r) = Response::decode(as_response, body) {
            assert_eq!(r.kind(), as_response);
            assert_eq!(r.encode(), body, "{r:?}");
        }
    }
});
