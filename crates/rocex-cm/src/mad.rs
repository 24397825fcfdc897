//! The MAD common header (IBTA Vol. 1 §13.4): 24 bytes in front of every
//! management datagram, here always the CM's class.

use core::fmt;

use crate::bits::{fields, view};
use crate::{Error, ErrorKind, Part};

/// Bytes of a MAD: header and data, as QP1 carries them (IBTA §13.4).
pub const MAD_LEN: usize = 256;
/// Bytes of the common header.
pub const HEADER_LEN: usize = 24;
/// Base version of every MAD (IBTA §13.4).
pub const BASE_VERSION: u8 = 1;
/// Management class of the communication manager (IBTA §13.4).
pub const CLASS_CM: u8 = 0x07;
/// The CM class version these messages belong to (IBTA §12.6).
pub const CLASS_VERSION_CM: u8 = 2;
/// Method Send: every CM message is unsolicited (IBTA §12.6).
pub const METHOD_SEND: u8 = 0x03;

view!(
    /// A zero-copy view of a MAD common header.
    Header,
    Part::Mad,
    HEADER_LEN
);

fields!(Header {
    /// Base version (1).
    base_version / set_base_version: u8 = (0, 0, 8);
    /// Management class.
    mgmt_class / set_mgmt_class: u8 = (1, 0, 8);
    /// Class version.
    class_version / set_class_version: u8 = (2, 0, 8);
    /// The response bit.
    response / set_response: u8 = (3, 0, 1);
    /// Method.
    method / set_method: u8 = (3, 1, 7);
    /// Status.
    status / set_status: u16 = (4, 0, 16);
    /// Class-specific field.
    class_specific / set_class_specific: u16 = (6, 0, 16);
    /// Transaction ID.
    tid / set_tid: u64 = (8, 0, 64);
    /// Attribute ID: which CM message follows.
    attr_id / set_attr_id: u16 = (16, 0, 16);
    /// Attribute modifier.
    attr_mod / set_attr_mod: u32 = (20, 0, 32);
});

/// A CM MAD header's fields; base version, class, class version and method are fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Status (zero in every CM message rxe's CM sends).
    pub status: u16,
    /// Transaction ID: the sender's, kept by the whole exchange of one connection.
    pub tid: u64,
    /// Attribute ID.
    pub attr_id: u16,
    /// Attribute modifier.
    pub attr_mod: u32,
}

impl Repr {
    /// Reads a header, refusing anything that is not a CM Send.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> crate::Result<Self> {
        h.check_len()?;
        let bad = |offset, what| Err(Error::new(Part::Mad, offset, ErrorKind::Unsupported(what)));
        if h.base_version() != BASE_VERSION {
            return bad(0, "a base version other than 1");
        }
        if h.mgmt_class() != CLASS_CM {
            return bad(1, "a management class other than the CM's (0x07)");
        }
        if h.class_version() != CLASS_VERSION_CM {
            return bad(2, "a CM class version other than 2");
        }
        if h.response() != 0 || h.method() != METHOD_SEND {
            return bad(3, "a method other than Send (0x03)");
        }
        Ok(Self {
            status: h.status(),
            tid: h.tid(),
            attr_id: h.attr_id(),
            attr_mod: h.attr_mod(),
        })
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) -> crate::Result<()> {
        h.check_len()?;
        h.set_base_version(BASE_VERSION);
        h.set_mgmt_class(CLASS_CM);
        h.set_class_version(CLASS_VERSION_CM);
        h.set_response(0);
        h.set_method(METHOD_SEND);
        h.set_status(self.status);
        h.set_class_specific(0);
        h.set_tid(self.tid);
        h.set_attr_id(self.attr_id);
        h.buffer.as_mut()[18..20].fill(0);
        h.set_attr_mod(self.attr_mod);
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CM attr={:#06x} tid={:#018x}", self.attr_id, self.tid)
    }
}
