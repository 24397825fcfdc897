//! Registered memory moved in place into a memfd rocexd maps (zero copy), so the daemon
//! reaches it with plain loads and stores instead of a system call per packet.
//!
//! The pages of a registration are copied into a new memfd, which is then mapped
//! (`MAP_SHARED | MAP_FIXED`) over the same addresses: the program's pointers stay valid
//! and see every byte a peer writes. Each memfd is a *group* of pages; a registration
//! inside a group's pages (still mapped from it) shares it, so overlapping MRs see the
//! same bytes. A registration that only partly overlaps a group, or memory that is not
//! private anonymous read-write memory (files, shared mappings, the stack), is left where
//! it is and registered with rocexd's process-memory MRs instead (`mr.rs`).
//!
//! Two things change for the remapped pages, both documented in docs/verbs.md: a write
//! another thread makes to them between the copy and the remap is lost (registering
//! memory that another thread is writing is undefined in rdma-core too), and after `fork`
//! the child would share them with the parent, so a fork handler gives the child private
//! copies, as fork does for ordinary memory.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::{Mutex, Once};

/// A memfd holding the pages `[start, start + len)` of the program.
struct Group {
    start: usize,
    len: usize,
    fd: OwnedFd,
    ino: u64,
    /// Live MRs in the group.
    refs: usize,
}

static GROUPS: Mutex<Vec<Group>> = Mutex::new(Vec::new());

/// Where a registration's bytes now live: `offset` into `fd`, in the group at `group`.
pub struct Placed {
    /// A duplicate of the group's memfd.
    pub fd: OwnedFd,
    /// The registration's first byte in the memfd.
    pub offset: u64,
    /// The group's first address (for [`release`]).
    pub group: usize,
}

fn page() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096)
}

/// One line of `/proc/self/maps`.
struct Map {
    start: usize,
    end: usize,
    perms: String,
    offset: usize,
    ino: u64,
    path: String,
}

fn maps() -> Option<Vec<Map>> {
    let f = File::open("/proc/self/maps").ok()?;
    let mut v = Vec::new();
    for line in BufReader::new(f).lines() {
        let line = line.ok()?;
        let mut w = line.split_whitespace();
        let (range, perms, off, _dev, ino) =
            (w.next()?, w.next()?, w.next()?, w.next()?, w.next()?);
        let (s, e) = range.split_once('-')?;
        v.push(Map {
            start: usize::from_str_radix(s, 16).ok()?,
            end: usize::from_str_radix(e, 16).ok()?,
            perms: perms.to_owned(),
            offset: usize::from_str_radix(off, 16).ok()?,
            ino: ino.parse().ok()?,
            path: w.collect::<Vec<_>>().join(" "),
        });
    }
    Some(v)
}

/// The maps covering `[s, e)` without a gap, or `None`.
fn covering(all: &[Map], s: usize, e: usize) -> Option<Vec<&Map>> {
    let mut at = s;
    let mut out = Vec::new();
    for m in all.iter().filter(|m| m.end > s && m.start < e) {
        if m.start > at {
            return None;
        }
        at = m.end;
        out.push(m);
    }
    (at >= e).then_some(out)
}

/// Moves `[addr, addr + len)` (whole pages) into a memfd, or finds the group that already
/// holds it; `None` leaves the memory where it is.
pub fn place(addr: usize, len: usize) -> Option<Placed> {
    let pg = page();
    let s = addr & !(pg - 1);
    let e = addr.checked_add(len)?.checked_next_multiple_of(pg)?;
    let mut groups = GROUPS.lock().unwrap_or_else(|p| p.into_inner());
    let all = maps()?;
    let cover = covering(&all, s, e)?;
    if let Some(g) = groups
        .iter_mut()
        .find(|g| g.start <= s && e <= g.start + g.len)
    {
        // Still mapped from the group, each page at its own offset?
        let ours = cover
            .iter()
            .all(|m| m.ino == g.ino && m.offset == m.start.wrapping_sub(g.start));
        if !ours {
            return None;
        }
        g.refs += 1;
        return Some(Placed {
            fd: g.fd.try_clone().ok()?,
            offset: (addr - g.start) as u64,
            group: g.start,
        });
    }
    if groups.iter().any(|g| g.start < e && s < g.start + g.len) {
        return None;
    }
    let anonymous = cover
        .iter()
        .all(|m| m.perms == "rw-p" && m.ino == 0 && (m.path.is_empty() || m.path == "[heap]"));
    if !anonymous {
        return None;
    }
    let fd = memfd(s, e - s)?;
    let ino = File::from(fd.try_clone().ok()?).metadata().ok()?.ino();
    groups.push(Group {
        start: s,
        len: e - s,
        fd: fd.try_clone().ok()?,
        ino,
        refs: 1,
    });
    FORK.call_once(|| {
        // SAFETY: registers a plain function as the fork child handler.
        unsafe { libc::pthread_atfork(None, None, Some(child_after_fork)) };
    });
    Some(Placed {
        fd,
        offset: (addr - s) as u64,
        group: s,
    })
}

/// A sealed memfd with the current bytes of `[s, s + n)`, mapped over them.
fn memfd(s: usize, n: usize) -> Option<OwnedFd> {
    // SAFETY: memfd_create with a NUL-terminated name.
    let raw = unsafe {
        libc::memfd_create(
            c"rocex-mr".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if raw < 0 {
        return None;
    }
    // SAFETY: a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let file = File::from(fd.try_clone().ok()?);
    file.set_len(n as u64).ok()?;
    // SAFETY: `[s, s + n)` is readable memory of this process (rw-p in its maps).
    let bytes = unsafe { core::slice::from_raw_parts(s as *const u8, n) };
    file.write_all_at(bytes, 0).ok()?;
    // SAFETY: replaces the pages `[s, s + n)`, which hold exactly the bytes just copied,
    // with a shared mapping of those bytes: every pointer into them stays valid.
    let p = unsafe {
        libc::mmap(
            s as *mut libc::c_void,
            n,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            raw,
            0,
        )
    };
    if p as usize != s {
        return None;
    }
    // SAFETY: fcntl on our memfd.
    unsafe {
        libc::fcntl(
            raw,
            libc::F_ADD_SEALS,
            libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
        )
    };
    Some(fd)
}

/// An MR of the group at `group` was deregistered: the group is forgotten with its last
/// MR (the program keeps the pages; only later registrations start a new group).
pub fn release(group: usize) {
    let mut groups = GROUPS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(i) = groups.iter().position(|g| g.start == group) {
        groups[i].refs -= 1;
        if groups[i].refs == 0 {
            groups.swap_remove(i);
        }
    }
}

static FORK: Once = Once::new();

/// In a forked child: each group's pages become private copies again.
extern "C" fn child_after_fork() {
    // Another thread of the parent may have held the lock at fork: then leave the pages
    // shared rather than wait forever.
    let Ok(groups) = GROUPS.try_lock() else {
        return;
    };
    for g in groups.iter() {
        // SAFETY: a fresh private mapping, filled from the group's pages and moved over
        // them; nothing else runs in the child yet.
        unsafe {
            let tmp = libc::mmap(
                core::ptr::null_mut(),
                g.len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if tmp == libc::MAP_FAILED {
                continue;
            }
            core::ptr::copy_nonoverlapping(g.start as *const u8, tmp.cast::<u8>(), g.len);
            libc::mremap(
                tmp,
                g.len,
                g.len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                g.start as *mut libc::c_void,
            );
        }
    }
}

/// Borrows a placed memfd.
impl AsFd for Placed {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
