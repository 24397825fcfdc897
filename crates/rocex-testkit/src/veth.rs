//! Two network namespaces joined by a veth pair, as two hosts on one link: each end has its
//! address (/24, in 198.18.0.0/15) and the MTU asked for, and dropping the pair deletes
//! both namespaces (which deletes the veth ends in them). Needs root and `ip`; without them
//! [`VethPair::up`] records why ([`cannot_run`](crate::cannot_run)).

use std::process::{Command, Output, Stdio};

/// The names and addresses of one pair.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The namespaces.
    pub ns: [&'static str; 2],
    /// The veth end in each.
    pub veth: [&'static str; 2],
    /// Each end's address.
    pub addr: [&'static str; 2],
}

/// A pair that is up; removed on drop.
#[derive(Debug)]
pub struct VethPair {
    layout: Layout,
}

/// `ip ARGS`, failing the test with ip's own words when it fails.
#[track_caller]
pub fn ip(args: &[&str]) -> Output {
    let o = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        o.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

impl VethPair {
    /// Makes the namespaces (their loopback up) and the link at `mtu`, after removing what
    /// a killed run left; `None` after recording why `test` cannot run.
    pub fn up(test: &str, layout: Layout, mtu: u32) -> Option<Self> {
        crate::require_root(test)?;
        crate::require_tool(test, "ip")?;
        let pair = Self { layout };
        pair.remove();
        let ([n0, n1], [v0, v1]) = (layout.ns, layout.veth);
        for ns in layout.ns {
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        ip(&[
            "link", "add", v0, "netns", n0, "type", "veth", "peer", "name", v1, "netns", n1,
        ]);
        let mtu = mtu.to_string();
        for i in 0..2 {
            let (ns, dev) = (layout.ns[i], layout.veth[i]);
            let cidr = format!("{}/24", layout.addr[i]);
            ip(&["-n", ns, "addr", "add", &cidr, "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "mtu", &mtu, "up"]);
        }
        Some(pair)
    }

    /// Its names and addresses.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// `ip netns exec NS PROGRAM` on host `i`, output piped, not yet started.
    pub fn cmd(&self, i: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.layout.ns[i]])
            .arg(program)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn remove(&self) {
        for ns in self.layout.ns {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        self.remove();
    }
}
