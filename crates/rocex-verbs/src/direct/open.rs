//! Opening a direct context: the engine's configuration and the device it presents.

use std::cell::Cell;
use std::net::IpAddr;
use std::rc::Rc;

use rocex_io::{Backend, Driver, UdpPort};
use rocex_proto::Config;
use rocex_shm::Board;
use rocex_shm::control::DeviceAttr;

use super::Host;
use super::objects::{MAX_INLINE, MAX_SGE, MAX_WR};
use crate::{Channel, Context, Dev, Result};

impl Context {
    /// A direct context with no rocexd: the engine `config` describes, in this process, on
    /// `port`. What [`Context::open`] makes when the daemon grants a slot, for programs
    /// and tests that own their address outright; nothing else may use the port.
    pub fn in_process(port: UdpPort, config: Config) -> Result<Self> {
        Self::direct(port, config, None, None)
    }

    /// The engine on `port`, its progress thread started, and the daemon connection that
    /// granted it and the QP board it gave, if one did.
    pub(crate) fn direct(
        port: UdpPort,
        mut config: Config,
        ctl: Option<Channel>,
        board: Option<Board>,
    ) -> Result<Self> {
        config.udp_source_port = port.fixed_source_port();
        let attr = device_attr(&config);
        let driver = Driver::new(rocex_proto::Engine::new(config), port);
        Ok(Self {
            dev: Dev::Direct(Rc::new(Host::start(driver, ctl, board)?)),
            attr,
            next_iova: Rc::new(Cell::new(1 << 40)),
        })
    }
}

/// The device a direct context presents: rocexd's, for the same engine configuration.
fn device_attr(config: &Config) -> DeviceAttr {
    let gid = match config.local {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    };
    DeviceAttr {
        max_qp: config.max_qp as u32,
        max_qp_wr: MAX_WR,
        max_sge: MAX_SGE,
        max_cq: 1 << 16,
        max_cqe: config.max_cqe as u32,
        max_mr: 1 << 20,
        max_pd: 1 << 16,
        max_qp_rd_atom: 16,
        max_inline: MAX_INLINE,
        gid,
        mtu: config.port_mtu as u8,
        // IBV_PORT_ACTIVE
        port_state: 4,
    }
}
