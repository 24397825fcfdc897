//! `rocex devinfo`: the device a `rocexd` serves, as `ibv_devinfo -v` shows one.

use std::path::PathBuf;
use std::process::ExitCode;

use rocex_proto::verbs::Mtu;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The daemon's control socket [default: $ROCEX_SOCKET, else the only rocexd running].
    #[arg(long)]
    socket: Option<PathBuf>,
}

fn mtu_name(v: u8) -> String {
    Mtu::from_ibv(v).map_or_else(
        || format!("unknown ({v})"),
        |m| format!("{} ({v})", m.bytes()),
    )
}

pub(crate) fn run(a: &Args) -> ExitCode {
    let opened = crate::choose::daemon(a.socket.as_deref())
        .and_then(|s| rocex_verbs::Context::open_daemon_path(&s).map(|c| (s, c)));
    let (socket, ctx) = match opened {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rocex devinfo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (dev, port) = match (ctx.query_device(), ctx.query_port(1)) {
        (Ok(d), Ok(p)) => (d, p),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("rocex devinfo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let state = if port.state == 4 {
        "PORT_ACTIVE (4)".to_string()
    } else {
        format!("{}", port.state)
    };
    println!("hca_id:\trocex ({})", socket.display());
    println!("\ttransport:\t\t\tInfiniBand (0)");
    println!("\tnode_guid:\t\t\t0000:0000:0000:0000");
    println!("\tvendor_id:\t\t\t0x0000");
    println!("\tmax_qp:\t\t\t\t{}", dev.max_qp);
    println!("\tmax_qp_wr:\t\t\t{}", dev.max_qp_wr);
    println!("\tmax_sge:\t\t\t{}", dev.max_sge);
    println!("\tmax_cq:\t\t\t\t{}", dev.max_cq);
    println!("\tmax_cqe:\t\t\t{}", dev.max_cqe);
    println!("\tmax_mr:\t\t\t\t{}", dev.max_mr);
    println!("\tmax_pd:\t\t\t\t{}", dev.max_pd);
    println!("\tmax_qp_rd_atom:\t\t\t{}", dev.max_qp_rd_atom);
    println!("\tmax_inline_data:\t\t{}", dev.max_inline);
    println!("\tphys_port_cnt:\t\t\t1");
    println!("\t\tport:\t1");
    println!("\t\t\tstate:\t\t\t{state}");
    println!("\t\t\tmax_mtu:\t\t4096 (5)");
    println!("\t\t\tactive_mtu:\t\t{}", mtu_name(port.active_mtu));
    println!("\t\t\tgid_tbl_len:\t\t{}", port.gid_tbl_len);
    println!("\t\t\tlink_layer:\t\tEthernet");
    println!("\t\t\tGID[  0]:\t\t{}, RoCE v2", ctx.gid_addr());
    ExitCode::SUCCESS
}
