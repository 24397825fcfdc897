//! The wire layouts against byte images written out field by field from the NVMe Base
//! and NVMe over Fabrics specifications' tables (and Linux's include/linux/nvme.h and
//! nvme-rdma.h, which follow them): each test states the offsets it checks, so a layout
//! that drifts from the tables fails here, not against a target.

use rocex_nvmeof::wire::cm::{CmRej, CmRep, CmReq, rej_status_name};
use rocex_nvmeof::wire::connect::{CNTLID_DYNAMIC, ConnectData, prop};
use rocex_nvmeof::wire::identify::{Controller, IDENTIFY_LEN, Namespace};
use rocex_nvmeof::wire::sqe::{KeyedSgl, Sqe, cns, opcode};
use rocex_nvmeof::wire::{Cqe, Status};
use zerocopy::{FromBytes, IntoBytes};

fn sgl() -> KeyedSgl {
    KeyedSgl::new(0x0000_0001_2345_6780, 0x00_0400, 0xdead_beef).unwrap()
}

/// Bytes 24-39 of an SQE carrying [`sgl`]: address LE, 3-byte length LE, key LE, 0x40.
const SGL_BYTES: [u8; 16] = [
    0x80, 0x67, 0x45, 0x23, 0x01, 0x00, 0x00, 0x00, // address
    0x00, 0x04, 0x00, // length 1024
    0xef, 0xbe, 0xad, 0xde, // key
    0x40, // type 4 (keyed data block) << 4 | subtype 0 (address)
];

fn sqe_bytes(s: &Sqe) -> [u8; 64] {
    s.as_bytes().try_into().unwrap()
}

#[test]
fn keyed_sgl_descriptor() {
    assert_eq!(sgl().as_bytes(), &SGL_BYTES);
    assert_eq!(sgl().length(), 1024);
    let max = KeyedSgl::new(0, 0xff_ffff, 1).unwrap();
    assert_eq!(&max.as_bytes()[8..11], &[0xff, 0xff, 0xff]);
    assert_eq!(KeyedSgl::new(0, 1 << 24, 1), None, "the length is 24 bits");
    // No data: all zero but the identifier byte, as Linux's host sends it.
    let mut none = [0u8; 16];
    none[15] = 0x40;
    assert_eq!(KeyedSgl::none().as_bytes(), &none);
}

#[test]
fn connect_command() {
    let mut s = Sqe::connect(1, 15, 120_000, sgl());
    s.cid = 0x1234.into();
    let b = sqe_bytes(&s);
    let mut want = [0u8; 64];
    want[0] = 0x7f; // fabrics opcode
    want[1] = 0x40; // PSDT 01b: SGL
    want[2..4].copy_from_slice(&[0x34, 0x12]); // CID
    want[4] = 0x01; // FCTYPE connect
    want[24..40].copy_from_slice(&SGL_BYTES);
    // RECFMT 0 at 40-41, QID at 42-43, SQSIZE at 44-45, CATTR 46, KATO at 48-51.
    want[42..44].copy_from_slice(&[0x01, 0x00]);
    want[44..46].copy_from_slice(&[0x0f, 0x00]);
    want[48..52].copy_from_slice(&120_000u32.to_le_bytes());
    assert_eq!(b, want);
    assert_eq!(s.fctype(), 0x01);
}

#[test]
fn property_get_and_set() {
    let b = sqe_bytes(&Sqe::property_get(prop::CAP, true));
    assert_eq!((b[0], b[4]), (0x7f, 0x04));
    assert_eq!(b[40], 1, "ATTRIB bit 0: an 8-byte property");
    assert_eq!(&b[44..48], &[0, 0, 0, 0], "OFFSET 0: CAP");
    let b = sqe_bytes(&Sqe::property_get(prop::CSTS, false));
    assert_eq!((b[40], &b[44..48]), (0, &[0x1c, 0, 0, 0][..]));

    let cc = prop::CC_EN | prop::CC_IOSQES | prop::CC_IOCQES;
    assert_eq!(
        cc, 0x0046_0001,
        "IOCQES 4 at bits 23:20, IOSQES 6 at 19:16, EN"
    );
    let b = sqe_bytes(&Sqe::property_set(prop::CC, cc));
    assert_eq!((b[0], b[4], b[40]), (0x7f, 0x00, 0));
    assert_eq!(&b[44..48], &[0x14, 0, 0, 0], "OFFSET 14h: CC");
    assert_eq!(&b[48..56], &[0x01, 0x00, 0x46, 0x00, 0, 0, 0, 0], "VALUE");
    assert_eq!(b[24..40], KeyedSgl::none().as_bytes()[..]);
}

#[test]
fn identify_commands() {
    let b = sqe_bytes(&Sqe::identify(cns::CONTROLLER, 0, sgl()));
    assert_eq!((b[0], b[1]), (0x06, 0x40));
    assert_eq!(&b[4..8], &[0, 0, 0, 0]);
    assert_eq!(&b[24..40], &SGL_BYTES);
    assert_eq!(b[40], 0x01, "CNS 01h");
    let b = sqe_bytes(&Sqe::identify(cns::NAMESPACE, 1, sgl()));
    assert_eq!((&b[4..8], b[40]), (&[1, 0, 0, 0][..], 0x00));
}

#[test]
fn read_write_flush() {
    let b = sqe_bytes(&Sqe::rw(opcode::READ, 1, 0x0102_0304_0506, 32, sgl()));
    assert_eq!(b[0], 0x02);
    assert_eq!(&b[4..8], &[1, 0, 0, 0], "NSID");
    assert_eq!(
        &b[40..48],
        &[0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0, 0],
        "SLBA"
    );
    assert_eq!(&b[48..50], &[31, 0], "NLB is 0's based");
    assert_eq!(&b[50..64], &[0u8; 14]);
    let b = sqe_bytes(&Sqe::rw(opcode::WRITE, 7, 9, 1, sgl()));
    assert_eq!((b[0], b[4], b[40], b[48]), (0x01, 7, 9, 0));
    let b = sqe_bytes(&Sqe::flush(1));
    assert_eq!((b[0], b[4]), (0x00, 1));
    assert_eq!(&b[40..64], &[0u8; 24]);
}

#[test]
fn completion_entry() {
    // Result 0x0001 (a Connect's controller ID), SQ head 3, SQ ID 1, CID 0x0a0b, status
    // word 8101h: DNR (bit 15), SCT 0 (11:9), SC 80h (8:1), phase 1.
    let raw = [
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x01, 0x00, 0x0b, 0x0a, 0x01,
        0x81,
    ];
    let c = Cqe::read_from_bytes(&raw[..]).unwrap();
    assert_eq!(c.result.get(), 1);
    assert_eq!(
        (c.sq_head.get(), c.sq_id.get(), c.cid.get()),
        (3, 1, 0x0a0b)
    );
    let s = c.status();
    assert_eq!((s.sct(), s.sc(), s.dnr()), (0, 0x80, true));
    assert!(!s.is_success());
    assert_eq!(s.name(), "LBA out of range");
    // SCT 1 (command specific), SC 82h: Connect's invalid parameters.
    let s = Status((1 << 8) | 0x82);
    assert_eq!(
        s.to_string(),
        "connect: invalid parameters (SCT 0x1, SC 0x82)"
    );
    assert!(Status(0).is_success());
    assert_eq!(c.as_bytes(), &raw);
}

#[test]
fn rdma_cm_private_data() {
    // Request for I/O queue 1, 16 deep: RECFMT 0, QID 1, HRQSIZE 16, HSQSIZE 15 (0's based).
    let mut want = [0u8; 32];
    want[2..8].copy_from_slice(&[0x01, 0x00, 0x10, 0x00, 0x0f, 0x00]);
    assert_eq!(CmReq::new(1, 16).as_bytes(), &want);
    // The admin queue: QID 0, 32 deep.
    assert_eq!(
        &CmReq::new(0, 32).as_bytes()[..8],
        &[0, 0, 0, 0, 32, 0, 31, 0]
    );

    let mut rep = [0u8; 32];
    rep[2] = 0x20;
    let r = CmRep::read_from_bytes(&rep[..]).unwrap();
    assert_eq!((r.recfmt.get(), r.crqsize.get()), (0, 32));

    let r = CmRej::read_from_bytes(&[0x00, 0x00, 0x04, 0x00][..]).unwrap();
    assert_eq!(r.sts.get(), 4);
    assert_eq!(rej_status_name(r.sts.get()), "invalid host SQ size");
}

#[test]
fn connect_data() {
    let id = *b"0123456789abcdef";
    let d = ConnectData::new(id, CNTLID_DYNAMIC, "nqn.sub", "nqn.host").unwrap();
    let b = d.as_bytes();
    assert_eq!(b.len(), 1024);
    assert_eq!(&b[..16], &id);
    assert_eq!(&b[16..18], &[0xff, 0xff]);
    assert!(b[18..256].iter().all(|&x| x == 0));
    assert_eq!(&b[256..263], b"nqn.sub");
    assert!(b[263..512].iter().all(|&x| x == 0));
    assert_eq!(&b[512..520], b"nqn.host");
    assert!(b[520..].iter().all(|&x| x == 0));
    assert!(
        ConnectData::new(id, 1, &"n".repeat(224), "h").is_none(),
        "NQNs are at most 223 bytes"
    );
    assert!(ConnectData::new(id, 1, "", "h").is_none());
    assert!(ConnectData::new(id, 1, "a\0b", "h").is_none());
}

#[test]
fn identify_controller_fields() {
    let mut b = vec![0u8; IDENTIFY_LEN];
    b[0..2].copy_from_slice(&0x1b36u16.to_le_bytes());
    b[4..24].copy_from_slice(b"SN42                ");
    b[24..64].copy_from_slice(format!("{:<40}", "Model X").as_bytes());
    b[64..72].copy_from_slice(b"6.12.0  ");
    b[77] = 8;
    b[78..80].copy_from_slice(&3u16.to_le_bytes());
    b[80..84].copy_from_slice(&0x0001_0300u32.to_le_bytes());
    b[514..516].copy_from_slice(&128u16.to_le_bytes());
    b[516..520].copy_from_slice(&1024u32.to_le_bytes());
    b[768..775].copy_from_slice(b"nqn.sub");
    b[1792..1796].copy_from_slice(&260u32.to_le_bytes());
    b[1796..1800].copy_from_slice(&1u32.to_le_bytes());
    b[1803] = 1;
    let c = Controller::parse(&b).unwrap();
    assert_eq!(
        (
            c.vid,
            c.serial.as_str(),
            c.model.as_str(),
            c.firmware.as_str()
        ),
        (0x1b36, "SN42", "Model X", "6.12.0")
    );
    assert_eq!(
        (c.mdts, c.cntlid, c.version, c.maxcmd, c.nn),
        (8, 3, 0x10300, 128, 1024)
    );
    assert_eq!(
        (c.subnqn.as_str(), c.ioccsz, c.iorcsz, c.msdbd),
        ("nqn.sub", 260, 1, 1)
    );
    assert_eq!(c.max_transfer(4096), Some(1 << 20));
    assert!(Controller::parse(&b[..4095]).is_err());
}

#[test]
fn identify_namespace_fields() {
    let mut b = vec![0u8; IDENTIFY_LEN];
    b[0..8].copy_from_slice(&16384u64.to_le_bytes());
    b[8..16].copy_from_slice(&16384u64.to_le_bytes());
    b[25] = 1; // NLBAF: two formats
    b[26] = 1; // FLBAS: format 1 in use
    b[128 + 2] = 9; // format 0: 512 B
    b[132 + 2] = 12; // format 1: 4 KiB
    let n = Namespace::parse(&b).unwrap();
    assert_eq!(
        (n.nsze, n.ncap, n.flbas, n.block_size),
        (16384, 16384, 1, 4096)
    );
    assert_eq!(n.bytes(), 64 << 20);

    let mut meta = b.clone();
    meta[132..134].copy_from_slice(&8u16.to_le_bytes());
    assert!(Namespace::parse(&meta).unwrap_err().0.contains("metadata"));
    let mut beyond = b.clone();
    beyond[26] = 2;
    assert!(Namespace::parse(&beyond).is_err(), "FLBAS past NLBAF");
    let mut tiny = b.clone();
    tiny[132 + 2] = 8;
    assert!(Namespace::parse(&tiny).is_err(), "256-byte blocks");
    assert!(Namespace::parse(&b[..100]).is_err());
}
