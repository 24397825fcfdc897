//! Two `rocexd --selective-repeat` in two network namespaces (`srx0`, `srx1`,
//! 198.18.212.1 and .2), both injecting loss, duplication and reordering into everything
//! they send. `rocex perf` WRITE, READ, SEND and atomic bandwidth runs between them must
//! verify every byte, and the capture of one daemon must show selective repeat on the wire:
//! rocex's SR data opcodes and SACKs, and no RC SEND or WRITE (docs/wire.md, "Selective
//! repeat").
//!
//! Needs root and `ip` (`common::netns`).

mod common;

use common::Daemon;
use common::netns::{Layout, Net};
use common::perf::perf;
use rocex_wire::Opcode;
use rocex_wire::frame::Frame;
use rocex_wire::opcode::Operation;

const LAYOUT: Layout = Layout {
    ns: ["srx0", "srx1"],
    veth: ["srxv0", "srxv1"],
    addr: ["198.18.212.1", "198.18.212.2"],
};
const FAULTS: &str = "loss=0.1,dup=0.02,reorder=0.05";
const ARGS: [&str; 4] = ["-s", "16384", "-Q", "10"];

fn daemon(net: &Net, i: usize, pcap: Option<&std::path::Path>) -> Daemon {
    let mut args = vec!["--selective-repeat", "--inject", FAULTS];
    if let Some(p) = pcap {
        args.extend(["--pcap", p.to_str().expect("a UTF-8 path")]);
    }
    net.rocexd(i).args(args).start()
}

#[test]
fn selective_repeat_verifies_every_op_through_faults() {
    let test = "selective_repeat_verifies_every_op_through_faults";
    let Some(net) = Net::up(test, &LAYOUT) else {
        return;
    };
    let cap = std::env::temp_dir().join(format!("rocex-sr-{}.pcap", std::process::id()));
    let mut d = [daemon(&net, 0, Some(&cap)), daemon(&net, 1, None)];
    perf(&d, "write", "bw", &ARGS, 1000);
    perf(&d, "read", "bw", &ARGS, 300);
    perf(&d, "send", "bw", &ARGS, 1000);
    perf(&d, "atomic", "bw", &ARGS, 500);
    assert!(
        d.iter_mut().all(Daemon::stop),
        "a daemon did not stop cleanly"
    );
    let frames = rocex_dump::capture::read(&cap).expect("readable capture");
    let _ = std::fs::remove_file(&cap);
    // `rocex dump --check`'s rules: every frame parses, its ICRC checks, it re-emits.
    let ports = rocex_dump::Ports::default();
    let mut tally = rocex_dump::Tally::default();
    for (i, f) in frames.iter().enumerate() {
        tally.add(&rocex_dump::analyze(i as u64, 0.0, &f.data, &ports).verdict);
    }
    assert!(tally.roce > 0 && tally.bad == 0, "{tally}");
    let ops: Vec<Opcode> = frames
        .iter()
        .filter_map(|f| Frame::parse(&f.data).ok().map(|f| f.repr.packet.bth.opcode))
        .collect();
    let count = |f: &dyn Fn(Opcode) -> bool| ops.iter().filter(|o| f(**o)).count();
    let sr_data = count(&|o| o.is_selective() && o != Opcode::SR_ACKNOWLEDGE);
    let sacks = count(&|o| o == Opcode::SR_ACKNOWLEDGE);
    let rc_data = count(&|o| {
        !o.is_selective()
            && o.info()
                .is_some_and(|i| matches!(i.operation, Operation::Send | Operation::Write))
    });
    eprintln!(
        "capture: {tally}; {sr_data} SR data packets, {sacks} SACKs, {rc_data} RC SEND/WRITE"
    );
    assert!(sr_data > 1000, "{sr_data} SR data packets");
    assert!(sacks > 10, "{sacks} SACKs");
    assert_eq!(
        rc_data, 0,
        "RC SEND or WRITE packets under selective repeat"
    );
}
