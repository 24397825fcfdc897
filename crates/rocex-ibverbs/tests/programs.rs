//! Debian's own RDMA programs, unmodified, under `rocex run` on two rocexd (loopback
//! addresses 127.0.N.1 and .2): the quick set `just test` runs. `tests/perftest.rs` has the
//! whole matrix.

mod common;

use common::{Daemon, client_server, finish, pair, pingpong, ready, text, under_rocex};

/// Every field of `ibv_devinfo -v` that rxe shows for a netdev, as rocex shows it.
#[test]
fn ibv_devinfo_shows_the_device_as_rxe_does() {
    if !ready(&["ibv_devinfo", "ibv_devices"]) {
        return;
    }
    let d = Daemon::start("127.0.20.1");
    let o = finish(
        under_rocex(&d.sock, "ibv_devinfo", &["-v"])
            .spawn()
            .unwrap(),
        "ibv_devinfo",
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for want in [
        "hca_id:\trocex0",
        "transport:\t\t\tInfiniBand (0)",
        "vendor_id:\t\t\t0xffffff",
        "phys_port_cnt:\t\t\t1",
        "atomic_cap:\t\t\tATOMIC_HCA (1)",
        "state:\t\t\tPORT_ACTIVE (4)",
        "max_mtu:\t\t4096 (5)",
        "active_mtu:\t\t4096 (5)",
        "link_layer:\t\tEthernet",
        "gid_tbl_len:\t\t1024",
        "GID[  1]:\t\t::ffff:127.0.20.1, RoCE v2",
    ] {
        assert!(t.contains(want), "ibv_devinfo -v lacks {want:?}:\n{t}");
    }
    // GID 0 is the link-local GID of the node GUID (the EUI-64 of the MAC).
    let guid = t
        .lines()
        .find_map(|l| l.trim().strip_prefix("node_guid:"))
        .expect("node_guid line")
        .trim()
        .replace(':', "");
    let gid0 = t
        .lines()
        .find_map(|l| l.trim().strip_prefix("GID[  0]:"))
        .expect("GID 0")
        .trim()
        .trim_end_matches(", RoCE v2")
        .to_owned();
    let ll: std::net::Ipv6Addr = gid0.parse().unwrap();
    let iid: String = ll.octets()[8..]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(iid, guid, "GID 0 {gid0} is not fe80::<node GUID {guid}>");
    assert_eq!(&ll.octets()[..8], &[0xfe, 0x80, 0, 0, 0, 0, 0, 0]);

    let o = finish(
        under_rocex(&d.sock, "ibv_devices", &[]).spawn().unwrap(),
        "ibv_devices",
    );
    let t = text(&o);
    assert!(o.status.success() && t.contains("rocex0"), "{t}");
    assert!(
        t.contains(&guid),
        "ibv_devices shows another GUID than ibv_devinfo: {t}"
    );
}

/// No daemon: the program sees zero devices, and `rocex run` says which socket it
/// looked for and how to start rocexd.
#[test]
fn without_a_daemon_there_is_no_device() {
    if !ready(&["ibv_devices"]) {
        return;
    }
    let sock = std::env::temp_dir().join(format!("rocex-none-{}.sock", std::process::id()));
    let o = finish(
        under_rocex(&sock, "ibv_devinfo", &[]).spawn().unwrap(),
        "ibv_devinfo",
    );
    let t = text(&o);
    assert!(
        t.contains(&format!("no rocexd answers at {}", sock.display()))
            && t.contains("rocexd --addr"),
        "{t}"
    );
    assert!(t.contains("No IB devices found"), "{t}");
}

#[test]
fn ibv_rc_pingpong_both_ends() {
    if !ready(&["ibv_rc_pingpong"]) {
        return;
    }
    let d = pair(21);
    for extra in [
        &["-s", "4096", "-m", "1024"][..],
        &["-e", "-s", "10000"][..],
    ] {
        let (c, s) = pingpong(&d, 21, "ibv_rc_pingpong", "200", extra);
        for t in [&c, &s] {
            assert!(t.contains("GID ::ffff:127.0.21."), "{t}");
        }
    }
}

#[test]
fn ib_write_bw_and_ib_read_lat_both_ends() {
    if !ready(&["ib_write_bw", "ib_read_lat"]) {
        return;
    }
    let d = pair(22);
    let args = ["-n", "500", "-p", "19522"];
    let (c, _) = client_server(&d, 22, "ib_write_bw", &args, &args);
    let row = c
        .lines()
        .find(|l| l.trim_start().starts_with("65536"))
        .unwrap_or_else(|| panic!("no result row: {c}"));
    assert_eq!(row.split_whitespace().nth(1), Some("500"), "{row}");
    let (c, _) = client_server(&d, 22, "ib_read_lat", &args, &args);
    assert!(
        c.lines()
            .any(|l| l.split_whitespace().take(2).eq(["2", "500"])),
        "{c}"
    );
}

/// Mixed: `ibv_rc_pingpong` under `rocex run` (through rocexd on 127.0.23.1) against
/// `rocex pingpong`, whose own engine runs on 127.0.23.2.
#[test]
fn ibv_rc_pingpong_against_rocex_pingpong() {
    if !ready(&["ibv_rc_pingpong"]) {
        return;
    }
    let d = Daemon::start("127.0.23.1");
    let args = ["-n", "100", "-s", "4096", "-m", "1024", "-p", "19523"];
    let mut server = std::process::Command::new(&common::bins().0);
    server
        .arg("pingpong")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut cargs = vec!["-g", "1"];
    cargs.extend_from_slice(&args);
    cargs.push("127.0.23.2");
    let client = under_rocex(&d.sock, "ibv_rc_pingpong", &cargs);
    let (_, ct) =
        common::serve_then_connect("ibv_rc_pingpong against rocex pingpong", server, client);
    assert!(ct.contains("100 iters in"), "{ct}");
    assert!(ct.contains("GID ::ffff:127.0.23.2"), "{ct}");
}
