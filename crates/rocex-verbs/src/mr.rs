//! Memory regions: [`Mr`] in a sealed memfd the daemon maps, [`ProcessMr`] over the
//! process's own memory. Both dereference to their [`Registration`] (keys, address,
//! length), which makes the SGEs and remote tokens that name them.

use std::io;
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rocex_shm::SharedRegion;
use rocex_shm::control::Request;
use rocex_verbs_types::{Remote, Sge};

use crate::{Context, Dev, Error, Result, proto};

impl Context {
    /// Deregisters the MR `lkey`: once this returns, the device no longer reaches its
    /// memory.
    fn dereg_mr(&self, lkey: u32) -> Result<()> {
        match &self.dev {
            Dev::Daemon(ch) => ch.done(&Request::DeregMr { lkey }),
            Dev::Direct(h) => h.dereg_mr(lkey),
        }
    }
}

/// What registering memory gave: the keys, and the address and length that work requests
/// and peers name the memory by. [`Mr`] and [`ProcessMr`] dereference to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    addr: u64,
    len: usize,
    lkey: u32,
    rkey: u32,
}

impl Registration {
    pub(crate) fn new(addr: u64, len: usize, lkey: u32, rkey: u32) -> Self {
        Self {
            addr,
            len,
            lkey,
            rkey,
        }
    }
    /// Local key.
    pub fn lkey(&self) -> u32 {
        self.lkey
    }
    /// Remote key (give it to the peer).
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
    /// The address of the first byte, as SGEs and peers name it (for a [`ProcessMr`], its
    /// address in this process).
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// Bytes registered.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for a zero-length region.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// An SGE over `[offset, offset + len)`.
    pub fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: self.addr + offset,
            length: len,
            lkey: self.lkey,
        }
    }
    /// A remote token for the peer: address and rkey of `offset`.
    pub fn remote(&self, offset: u64) -> Remote {
        Remote {
            addr: self.addr + offset,
            rkey: self.rkey,
        }
    }
}

/// A registered memory region in shared memory.
#[derive(Debug)]
pub struct Mr {
    ctx: Context,
    /// Shared with a direct context's engine, which reaches the bytes through it.
    map: Arc<SharedRegion>,
    reg: Registration,
}

impl Deref for Mr {
    type Target = Registration;

    fn deref(&self) -> &Registration {
        &self.reg
    }
}

impl Mr {
    pub(crate) fn new(ctx: Context, map: Arc<SharedRegion>, reg: Registration) -> Self {
        Self { ctx, map, reg }
    }

    fn check(&self, offset: usize, n: usize) -> Result<()> {
        if offset.checked_add(n).is_none_or(|e| e > self.reg.len) {
            return Err(Error::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                "access outside the memory region",
            )));
        }
        Ok(())
    }

    /// Copies `data` into the region at `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        let v = self.map.view();
        let (head, body, _) = word_split(offset, data.len());
        for (i, &b) in data[..head].iter().enumerate() {
            self.write_byte(offset + i, b)?;
        }
        if body > 0 {
            v.write(offset + head, &data[head..head + body])
                .map_err(|e| proto(e.to_string()))?;
        }
        for (i, &b) in data[head + body..].iter().enumerate() {
            self.write_byte(offset + head + body + i, b)?;
        }
        std::sync::atomic::fence(Ordering::Release);
        Ok(())
    }

    /// Stores one byte of a shared word without disturbing its neighbours.
    fn write_byte(&self, at: usize, b: u8) -> Result<()> {
        let w = self
            .map
            .view()
            .word(at & !3)
            .map_err(|e| proto(e.to_string()))?;
        let _ = w.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
            let mut x = old.to_ne_bytes();
            x[at % 4] = b;
            Some(u32::from_ne_bytes(x))
        });
        Ok(())
    }

    /// Copies `out.len()` bytes at `offset` out of the region.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len())?;
        std::sync::atomic::fence(Ordering::Acquire);
        let v = self.map.view();
        let (head, body, _) = word_split(offset, out.len());
        let byte = |at: usize| -> Result<u8> {
            let w = v.word(at & !3).map_err(|e| proto(e.to_string()))?;
            Ok(w.load(Ordering::Relaxed).to_ne_bytes()[at % 4])
        };
        for (i, b) in out[..head].iter_mut().enumerate() {
            *b = byte(offset + i)?;
        }
        if body > 0 {
            v.read(offset + head, &mut out[head..head + body])
                .map_err(|e| proto(e.to_string()))?;
        }
        for (i, b) in out[head + body..].iter_mut().enumerate() {
            *b = byte(offset + head + body + i)?;
        }
        Ok(())
    }

    /// The region's bytes, copied.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.reg.len];
        let _ = self.read(0, &mut v);
        v
    }

    /// The 8 bytes at `offset` in host order (atomics' operands and results).
    pub fn read_u64(&self, offset: usize) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }

    /// Stores 8 bytes at `offset` in host order.
    pub fn write_u64(&self, offset: usize, v: u64) -> Result<()> {
        self.write(offset, &v.to_ne_bytes())
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        let _ = self.ctx.dereg_mr(self.reg.lkey);
    }
}

/// A memory region over the process's own memory
/// ([`Pd::reg_mr_process`](crate::Pd::reg_mr_process)), which the daemon reaches by system
/// calls; addresses are the memory's own virtual addresses.
#[derive(Debug)]
pub struct ProcessMr<'a> {
    ctx: Context,
    reg: Registration,
    _buf: PhantomData<&'a mut [u8]>,
}

impl ProcessMr<'_> {
    pub(crate) fn new(ctx: Context, reg: Registration) -> Self {
        Self {
            ctx,
            reg,
            _buf: PhantomData,
        }
    }
}

impl Deref for ProcessMr<'_> {
    type Target = Registration;

    fn deref(&self) -> &Registration {
        &self.reg
    }
}

impl Drop for ProcessMr<'_> {
    fn drop(&mut self) {
        // Answered only once the daemon has deregistered it: no access follows, and the
        // borrow of the memory can end.
        let _ = self.ctx.dereg_mr(self.reg.lkey);
    }
}

/// A memory region over a memfd the caller maps itself
/// ([`Pd::reg_mr_memfd`](crate::Pd::reg_mr_memfd)); deregistered on drop.
#[derive(Debug)]
pub struct FdMr {
    ctx: Context,
    reg: Registration,
}

impl FdMr {
    pub(crate) fn new(ctx: Context, reg: Registration) -> Self {
        Self { ctx, reg }
    }
}

impl Deref for FdMr {
    type Target = Registration;

    fn deref(&self) -> &Registration {
        &self.reg
    }
}

impl Drop for FdMr {
    fn drop(&mut self) {
        let _ = self.ctx.dereg_mr(self.reg.lkey);
    }
}

/// Splits `len` bytes at `offset` into a head up to the first 4-byte boundary, a body of
/// whole shared words and a tail: only the head and tail need byte-wise access. The body
/// starts on a boundary only when it is not empty.
fn word_split(offset: usize, len: usize) -> (usize, usize, usize) {
    let head = ((4 - offset % 4) % 4).min(len);
    let body = (len - head) & !3;
    (head, body, len - head - body)
}

#[cfg(test)]
mod word_split_tests {
    use super::word_split;

    #[test]
    fn splits_at_word_boundaries() {
        assert_eq!(word_split(0, 10), (0, 8, 2));
        assert_eq!(word_split(1, 10), (3, 4, 3));
        assert_eq!(word_split(3, 1), (1, 0, 0));
        assert_eq!(word_split(2, 1), (1, 0, 0));
        assert_eq!(word_split(5, 0), (0, 0, 0));
        for off in 0..8 {
            for len in 0..20 {
                let (h, b, t) = word_split(off, len);
                assert_eq!(h + b + t, len);
                assert_eq!(b % 4, 0);
                assert!(b == 0 || (off + h) % 4 == 0);
                assert!(t < 4 && h < 4);
            }
        }
    }
}
