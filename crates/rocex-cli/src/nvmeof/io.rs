//! The I/O of `rocex nvmeof`: a verify pass (a pattern written at depth, flushed, read
//! back at depth and compared) and measured runs, both keeping up to `qd` commands in
//! flight on one queue.

use std::time::{Duration, Instant};

use rocex_nvmeof::wire::Sqe;
use rocex_nvmeof::wire::sqe::opcode;
use rocex_nvmeof::{Error, Queue};

use super::Failure;

/// The namespace being worked on.
pub(super) struct Disk {
    pub(super) nsid: u32,
    pub(super) block: u32,
    pub(super) bytes: u64,
}

#[derive(Clone, Copy)]
struct Job {
    write: bool,
    /// Byte offset in the namespace.
    at: u64,
    len: u32,
}

/// 16 bytes from the OS: the host identifier (a version 4 UUID).
pub(super) fn host_id() -> [u8; 16] {
    let s = crate::device::seed();
    let mut id = [0u8; 16];
    id.copy_from_slice(&s[..16]);
    id[6] = id[6] & 0x0f | 0x40;
    id[8] = id[8] & 0x3f | 0x80;
    id
}

/// A UUID's usual text form.
pub(super) fn uuid_text(u: &[u8; 16]) -> String {
    let h: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// The pattern's bytes for `len` bytes at namespace offset `at`: each 8-byte word is a
/// mix of its own offset and the run's `seed`, so that a block read from the wrong
/// place, or left from an earlier run, differs.
fn pattern(seed: u64, at: u64, len: u32) -> Vec<u8> {
    (0..u64::from(len) / 8)
        .flat_map(|w| {
            let a = at + w * 8;
            (a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed)
                .rotate_left(17)
                .to_le_bytes()
        })
        .collect()
}

fn check_size(disk: &Disk, size: u32, q: &Queue) -> Result<(), Failure> {
    if size == 0 || size % disk.block != 0 || size > q.slot_bytes() {
        return Err(format!(
            "I/O size {size}: must be a multiple of the {}-byte block, at most {}",
            disk.block,
            q.slot_bytes()
        )
        .into());
    }
    Ok(())
}

/// Keeps up to `qd` of `jobs` in flight; `done` sees each completed job (with the queue,
/// to read its data slot) and returns false to stop early. Returns the jobs completed
/// and the most that were in flight at once.
fn pipeline(
    q: &mut Queue,
    disk: &Disk,
    qd: u16,
    mut jobs: impl Iterator<Item = Job>,
    fill: bool,
    seed: u64,
    mut done: impl FnMut(&Queue, u16, Job) -> Result<bool, Failure>,
) -> Result<(u64, usize), Failure> {
    let mut by_cid: Vec<Option<Job>> = vec![None; usize::from(q.depth())];
    let (mut n, mut peak, mut more) = (0, 0, true);
    loop {
        while more && q.inflight() < usize::from(qd) {
            let Some(job) = jobs.next() else {
                more = false;
                break;
            };
            let cid = q.take_cid().ok_or("no free command identifier")?;
            if job.write && fill {
                q.put_data(cid, &pattern(seed, job.at, job.len))?;
            }
            let slba = job.at / u64::from(disk.block);
            let blocks = u16::try_from(job.len / disk.block).map_err(|_| "too many blocks")?;
            let op = if job.write {
                opcode::WRITE
            } else {
                opcode::READ
            };
            let sqe = Sqe::rw(op, disk.nsid, slba, blocks, q.sgl(cid, job.len)?);
            if let Err(e) = q.submit(cid, sqe) {
                q.give_back(cid);
                return Err(e.into());
            }
            by_cid[usize::from(cid)] = Some(job);
        }
        peak = peak.max(q.inflight());
        if q.inflight() == 0 {
            return Ok((n, peak));
        }
        let d = q.complete()?;
        let job = by_cid[usize::from(d.cid)]
            .take()
            .ok_or_else(|| Error::BadResponse {
                qid: q.qid(),
                cid: Some(d.cid),
                why: "a response for a command this run did not send".into(),
            })?;
        n += 1;
        if !done(q, d.cid, job)? {
            more = false;
        }
    }
}

/// Writes a fresh pattern over the first `bytes` of the namespace in `size` commands at
/// depth `qd`, flushes, reads it back at the same depth and compares every byte.
pub(super) fn verify(
    q: &mut Queue,
    disk: &Disk,
    size: u32,
    qd: u16,
    bytes: u64,
) -> Result<(), Failure> {
    check_size(disk, size, q)?;
    let bytes = bytes.min(disk.bytes) / u64::from(size) * u64::from(size);
    let seed = u64::from_le_bytes(crate::device::seed()[..8].try_into().expect("8 bytes"));
    let jobs = |write| {
        (0..bytes / u64::from(size)).map(move |i| Job {
            write,
            at: i * u64::from(size),
            len: size,
        })
    };
    let t = Instant::now();
    let (n, peak) = pipeline(q, disk, qd, jobs(true), true, seed, |_, _, _| Ok(true))?;
    let wrote = t.elapsed();
    let cid = q.take_cid().ok_or("no free command identifier")?;
    q.call_with(cid, Sqe::flush(disk.nsid))?;
    let mut buf = vec![0u8; size as usize];
    let t = Instant::now();
    let (m, _) = pipeline(q, disk, qd, jobs(false), false, seed, |q, cid, job| {
        q.get_data(cid, &mut buf)?;
        let want = pattern(seed, job.at, job.len);
        if let Some(i) = buf.iter().zip(&want).position(|(a, b)| a != b) {
            return Err(format!(
                "verify: byte {} of the namespace reads {:#04x}, {:#04x} was written",
                job.at + i as u64,
                buf[i],
                want[i]
            )
            .into());
        }
        Ok(true)
    })?;
    past_the_end(q, disk)?;
    println!(
        "verify: wrote {bytes} bytes in {n} commands of {size} at depth {qd} (peak {peak} in flight) \
         in {:.2} s, flushed, read back {m} commands in {:.2} s: identical",
        wrote.as_secs_f64(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A read of the block after the namespace's last must fail with LBA Out of Range (80h)
/// or Capacity Exceeded (81h, what Linux's file-backed namespaces answer), as a typed
/// error naming the queue and command, and leave the queue working.
fn past_the_end(q: &mut Queue, disk: &Disk) -> Result<(), Failure> {
    let cid = q.take_cid().ok_or("no free command identifier")?;
    let slba = disk.bytes / u64::from(disk.block);
    let sqe = Sqe::rw(opcode::READ, disk.nsid, slba, 1, q.sgl(cid, disk.block)?);
    match q.call_with(cid, sqe) {
        Err(e @ Error::Command { status, .. })
            if status.sct() == 0 && matches!(status.sc(), 0x80 | 0x81) =>
        {
            println!("past the end: {e} (as it must)");
            Ok(())
        }
        Err(e) => Err(format!(
            "a read past the end: {e}, not LBA out of range or capacity exceeded"
        )
        .into()),
        Ok(_) => Err(format!("a read of block {slba}, past the end, succeeded").into()),
    }
}

/// Random `size` writes, then reads, at depth `qd` for `secs` each, over the first
/// 64 MiB of the namespace; prints IOPS and throughput.
pub(super) fn bench(
    q: &mut Queue,
    disk: &Disk,
    size: u32,
    qd: u16,
    secs: Duration,
) -> Result<(), Failure> {
    check_size(disk, size, q)?;
    if qd == 0 || qd > q.depth() {
        return Err(format!("depth {qd}: the I/O queue has {} entries", q.depth()).into());
    }
    let span = disk.bytes.min(64 << 20) / u64::from(size);
    for write in [true, false] {
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let jobs = std::iter::repeat_with(move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            Job {
                write,
                at: x % span * u64::from(size),
                len: size,
            }
        });
        let t = Instant::now();
        let (n, _) = pipeline(
            q,
            disk,
            qd,
            jobs,
            false,
            0,
            |_, _, _| Ok(t.elapsed() < secs),
        )?;
        let s = t.elapsed().as_secs_f64();
        let iops = n as f64 / s;
        println!(
            "bench: {} {size} B qd {qd}: {iops:.0} IOPS, {:.2} MiB/s ({n} commands in {s:.2} s)",
            if write { "write" } else { "read" },
            iops * f64::from(size) / f64::from(1 << 20)
        );
    }
    Ok(())
}
