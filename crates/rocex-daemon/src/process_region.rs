//! A memory region in a client's own address space, reached with `process_vm_readv(2)` and
//! `process_vm_writev(2)` (`RegMrProcess`, `docs/abi.md` §6.2).
//!
//! The client registers ordinary memory (a `Vec<u8>`, a stack buffer) without a memfd, so
//! the daemon cannot map it: every access is one system call on the client's pid, which
//! the daemon took from the control socket's peer credentials when it accepted the
//! connection. The kernel allows it only when the daemon may ptrace the client (same uid
//! with `kernel.yama.ptrace_scope` 0, or `CAP_SYS_PTRACE`).
//!
//! The client can unmap the memory, or exit, at any moment: a failed transfer is an
//! [`AccessFault`], which the engine answers as a remote access error (or a local
//! protection error for its own SGEs), never a panic. `rocex-mem` has checked every offset
//! against the region before a call gets here.
//!
//! The 8-byte atomics are a read and a write through the two system calls, serialized by
//! the daemon (a lock per region), so they are atomic with respect to every other RDMA
//! atomic on this device but not at all with respect to the client's own CPU accesses to
//! those bytes, which can land between the read and the write.

use std::io;
use std::sync::Mutex;

use rocex_mem::{AccessFault, Region};

/// `len` bytes at `addr` in the address space of process `pid`.
#[derive(Debug)]
pub(crate) struct ProcessRegion {
    pid: libc::pid_t,
    addr: u64,
    len: u64,
    /// Held across an atomic's read and write.
    atomics: Mutex<()>,
}

impl ProcessRegion {
    /// The range `[addr, addr + len)` of `pid`, after reading its first and last byte: a
    /// range that is not mapped fails with `EFAULT`, a process the daemon may not ptrace
    /// with `EPERM` (or `ESRCH` once it is gone).
    pub(crate) fn attach(pid: libc::pid_t, addr: u64, len: u64) -> io::Result<Self> {
        if addr.checked_add(len).is_none() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let region = Self {
            pid,
            addr,
            len,
            atomics: Mutex::new(()),
        };
        if let Some(last) = len.checked_sub(1) {
            let mut byte = [0u8; 1];
            region.transfer(0, Dir::Read(&mut byte))?;
            region.transfer(last, Dir::Read(&mut byte))?;
        }
        Ok(region)
    }

    /// Moves the whole of `dir`'s buffer to or from `offset`, resuming after partial
    /// transfers (a range crossing into an unmapped page stops short).
    fn transfer(&self, offset: u64, mut dir: Dir<'_>) -> io::Result<()> {
        let total = dir.len();
        let mut done = 0usize;
        while done < total {
            let remote = libc::iovec {
                iov_base: (self.addr + offset + done as u64) as usize as *mut libc::c_void,
                iov_len: total - done,
            };
            let n = match &mut dir {
                Dir::Read(buf) => {
                    let local = libc::iovec {
                        iov_base: buf[done..].as_mut_ptr().cast(),
                        iov_len: total - done,
                    };
                    // SAFETY: `local` describes the live, exclusively borrowed `buf[done..]`;
                    // the kernel writes at most `iov_len` bytes there. `remote` names memory
                    // of another process, which the kernel checks.
                    unsafe { libc::process_vm_readv(self.pid, &local, 1, &remote, 1, 0) }
                }
                Dir::Write(data) => {
                    let local = libc::iovec {
                        iov_base: data[done..].as_ptr().cast_mut().cast(),
                        iov_len: total - done,
                    };
                    // SAFETY: `local` describes the live `data[done..]`, which the kernel
                    // only reads; `remote` names memory of another process, which the
                    // kernel checks.
                    unsafe { libc::process_vm_writev(self.pid, &local, 1, &remote, 1, 0) }
                }
            };
            match n {
                n if n > 0 => done += n as usize,
                0 => return Err(io::Error::from_raw_os_error(libc::EFAULT)),
                _ => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    /// [`transfer`](Self::transfer), failures as the engine's typed error.
    fn access(&self, offset: u64, dir: Dir<'_>) -> Result<(), AccessFault> {
        let len = dir.len() as u64;
        self.transfer(offset, dir).map_err(|e| {
            tracing::debug!(
                pid = self.pid,
                offset,
                len,
                "process memory unreachable: {e}"
            );
            AccessFault {
                offset,
                len,
                kind: e.kind(),
            }
        })
    }

    /// A read-modify-write of the 8 bytes at `offset`, serialized with the region's other
    /// atomics (not with the client's CPU: see the module docs).
    fn update(&self, offset: u64, f: impl FnOnce(u64) -> u64) -> Result<u64, AccessFault> {
        // The lock guards no data, so a poisoned one is still good.
        let _held = self.atomics.lock().unwrap_or_else(|p| p.into_inner());
        let mut word = [0u8; 8];
        self.access(offset, Dir::Read(&mut word))?;
        let old = u64::from_ne_bytes(word);
        self.access(offset, Dir::Write(&f(old).to_ne_bytes()))?;
        Ok(old)
    }
}

/// The control-channel answer (errno, detail) for a range [`ProcessRegion::attach`]
/// refused.
pub(crate) fn refusal(e: &io::Error, pid: libc::pid_t, addr: u64, len: u64) -> (i32, String) {
    match e.raw_os_error() {
        Some(libc::EFAULT) => (
            libc::EFAULT,
            format!("{len} bytes at {addr:#x} are not mapped in process {pid}"),
        ),
        Some(libc::EPERM | libc::EACCES) => (
            libc::EPERM,
            format!(
                "rocexd may not access the memory of process {pid}: it needs ptrace permission \
                 over the client (same uid with kernel.yama.ptrace_scope 0, or CAP_SYS_PTRACE)"
            ),
        ),
        Some(libc::ESRCH) => (libc::ESRCH, format!("process {pid} is gone")),
        Some(libc::EINVAL) => (libc::EINVAL, "addr + len overflows".to_owned()),
        errno => (
            errno.unwrap_or(libc::EIO),
            format!("process {pid} memory at {addr:#x}: {e}"),
        ),
    }
}

/// Which way a transfer goes, with the daemon's side of it.
enum Dir<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

impl Dir<'_> {
    fn len(&self) -> usize {
        match self {
            Self::Read(b) => b.len(),
            Self::Write(d) => d.len(),
        }
    }
}

impl Region for ProcessRegion {
    fn len(&self) -> u64 {
        self.len
    }

    fn read(&self, offset: u64, buf: &mut [u8]) {
        if self.try_read(offset, buf).is_err() {
            buf.fill(0);
        }
    }

    fn write(&self, offset: u64, data: &[u8]) {
        let _ = self.try_write(offset, data);
    }

    fn compare_swap(&self, offset: u64, compare: u64, swap: u64) -> u64 {
        self.try_compare_swap(offset, compare, swap).unwrap_or(0)
    }

    fn fetch_add(&self, offset: u64, add: u64) -> u64 {
        self.try_fetch_add(offset, add).unwrap_or(0)
    }

    fn atomic_write(&self, offset: u64, value: u64) {
        let _ = self.try_atomic_write(offset, value);
    }

    fn try_read(&self, offset: u64, buf: &mut [u8]) -> Result<(), AccessFault> {
        self.access(offset, Dir::Read(buf))
    }

    fn try_write(&self, offset: u64, data: &[u8]) -> Result<(), AccessFault> {
        self.access(offset, Dir::Write(data))
    }

    fn try_compare_swap(&self, offset: u64, compare: u64, swap: u64) -> Result<u64, AccessFault> {
        self.update(offset, |old| if old == compare { swap } else { old })
    }

    fn try_fetch_add(&self, offset: u64, add: u64) -> Result<u64, AccessFault> {
        self.update(offset, |old| old.wrapping_add(add))
    }

    fn try_atomic_write(&self, offset: u64, value: u64) -> Result<(), AccessFault> {
        // Under the lock, so it cannot split another atomic's read and write.
        let _held = self.atomics.lock().unwrap_or_else(|p| p.into_inner());
        self.access(offset, Dir::Write(&value.to_ne_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocex_mem::FlushError;

    fn own_pid() -> libc::pid_t {
        std::process::id() as libc::pid_t
    }

    #[test]
    fn reads_writes_and_atomics_reach_this_process_memory() {
        let mut buf = vec![0u8; 64];
        let r = ProcessRegion::attach(own_pid(), buf.as_mut_ptr() as u64, 64).unwrap();
        r.try_write(3, &[1, 2, 3, 4, 5]).unwrap();
        let mut back = [0u8; 5];
        r.try_read(3, &mut back).unwrap();
        assert_eq!(back, [1, 2, 3, 4, 5]);
        r.try_atomic_write(8, 5).unwrap();
        assert_eq!(r.try_fetch_add(8, 3), Ok(5));
        assert_eq!(r.try_compare_swap(8, 8, 100), Ok(8));
        assert_eq!(r.try_compare_swap(8, 8, 1), Ok(100));
        assert_eq!(r.flush(0, 64, true), Err(FlushError::NotPersistent));
        assert_eq!(r.flush(0, 64, false), Ok(()));
        // The process's own view of the same bytes.
        assert_eq!(&buf[3..8], &[1, 2, 3, 4, 5]);
        assert_eq!(u64::from_ne_bytes(buf[8..16].try_into().unwrap()), 100);
    }

    /// Not a check: prints what placing a 64 KiB WRITE (16 packets of 4096 bytes) costs
    /// in a process region and in a mapped memfd region, the best of 20 rounds
    /// (`cargo test --release -p rocex-daemon --bin rocexd placement -- --ignored
    /// --nocapture`).
    #[test]
    #[ignore = "a measurement, run by hand"]
    fn placement_cost_process_vs_memfd() {
        use crate::shared_region::MappedRegion;
        use std::sync::Arc;
        use std::time::Instant;

        fn best(region: &dyn Region) -> f64 {
            let packet = vec![0x5a_u8; 4096];
            let mut best = f64::MAX;
            for _ in 0..20 {
                let start = Instant::now();
                for _ in 0..100 {
                    for i in 0..16u64 {
                        region.try_write(i * 4096, &packet).unwrap();
                    }
                }
                best = best.min(start.elapsed().as_secs_f64() * 1e6 / 100.0);
            }
            best
        }
        let mut buf = vec![0u8; 64 << 10];
        let process = ProcessRegion::attach(own_pid(), buf.as_mut_ptr() as u64, 64 << 10);
        let map = Arc::new(rocex_shm::SharedRegion::create("t", 64 << 10).unwrap());
        let mapped = MappedRegion::new(map, 0, 64 << 10).unwrap();
        let (p, m) = (best(&process.unwrap()), best(&mapped));
        println!("64 KiB placed: process region {p:.1} us, memfd region {m:.1} us");
    }

    #[test]
    fn unmapped_memory_is_refused_at_attach_and_faults_afterwards() {
        let e = ProcessRegion::attach(own_pid(), 8, 16).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFAULT));
        assert_eq!(
            ProcessRegion::attach(own_pid(), u64::MAX, 2)
                .unwrap_err()
                .raw_os_error(),
            Some(libc::EINVAL)
        );
        // A region whose memory is gone (here: never there) faults with a typed error.
        let gone = ProcessRegion {
            pid: own_pid(),
            addr: 8,
            len: 16,
            atomics: Mutex::new(()),
        };
        let f = gone.try_write(0, &[1; 4]).unwrap_err();
        assert_eq!((f.offset, f.len), (0, 4));
        assert!(gone.try_fetch_add(8, 1).is_err());
        let mut buf = [7u8; 4];
        gone.read(0, &mut buf);
        assert_eq!(buf, [0; 4]);
    }
}
