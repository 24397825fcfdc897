//! Two network namespaces joined by a veth pair, made by a test and removed when it ends,
//! and the means to run code inside one of them; connecting the RC QPs of the engines in
//! them (`rc`).

pub(crate) mod rc;

use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;

use rocex_testkit::capture::{self, Capture};

/// Whether the test can make namespaces: root and `ip` (`rocex_testkit::cannot_run` when
/// it cannot).
pub(crate) fn have_root() -> bool {
    let test = rocex_testkit::this_test();
    rocex_testkit::require_root(&test).is_some()
        && rocex_testkit::require_tool(&test, "ip").is_some()
}

fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Namespaces `h2-TAG-a` and `h2-TAG-b`, joined by veth `h2TAGa` / `h2TAGb`, holding
/// 198.18.202.`host`/24 and 198.18.202.`host+1`/24.
#[derive(Debug)]
pub(crate) struct VethPair {
    tag: String,
    host: u8,
}

impl VethPair {
    /// Makes the pair with the given interface MTU (replacing leftovers of an earlier run).
    pub(crate) fn new(tag: &str, host: u8, mtu: u32) -> io::Result<Self> {
        let pair = Self {
            tag: tag.to_owned(),
            host,
        };
        for side in 0..2 {
            let _ = ip(&["netns", "del", &pair.ns(side)]);
        }
        for side in 0..2 {
            ip(&["netns", "add", &pair.ns(side)])?;
        }
        ip(&[
            "link",
            "add",
            &pair.dev(0),
            "netns",
            &pair.ns(0),
            "type",
            "veth",
            "peer",
            "name",
            &pair.dev(1),
            "netns",
            &pair.ns(1),
        ])?;
        let mtu = mtu.to_string();
        for side in 0..2 {
            let (ns, dev) = (pair.ns(side), pair.dev(side));
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", pair.addr(side)),
                "dev",
                &dev,
            ])?;
            ip(&["-n", &ns, "link", "set", &dev, "mtu", &mtu, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(pair)
    }

    /// The namespace of side 0 or 1.
    pub(crate) fn ns(&self, side: usize) -> String {
        format!("h2-{}-{}", self.tag, ["a", "b"][side])
    }

    /// The veth end of side 0 or 1.
    pub(crate) fn dev(&self, side: usize) -> String {
        format!("h2{}{}", self.tag, ["a", "b"][side])
    }

    /// The address of side 0 or 1.
    pub(crate) fn addr(&self, side: usize) -> IpAddr {
        IpAddr::from([198, 18, 202, self.host + side as u8])
    }

    /// Runs `f` on a new thread inside the namespace of `side`.
    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        side: usize,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<io::Result<T>> {
        let ns = self.ns(side);
        std::thread::spawn(move || {
            enter(&ns)?;
            Ok(f())
        })
    }

    /// Starts tcpdump on side `side`'s veth, writing `file`; returns once it listens.
    pub(crate) fn capture(&self, side: usize, file: &Path) -> io::Result<Capture> {
        capture::start(&self.ns(side), &self.dev(side), file, &["-B", "131072"])
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        for side in 0..2 {
            let _ = ip(&["netns", "del", &self.ns(side)]);
        }
    }
}

/// Moves the calling thread into network namespace `ns`.
pub(crate) fn enter(ns: &str) -> io::Result<()> {
    let f = std::fs::File::open(format!("/run/netns/{ns}"))?;
    // SAFETY: setns with an open namespace file; affects only the calling thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
