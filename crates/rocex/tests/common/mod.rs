//! Two `rocexd` on 127.0.7.1 and 127.0.7.2 for the high-level API's tests
//! (`rocex_testkit::rocexd`: the daemon is built on first use, or `$ROCEXD`).

#![allow(dead_code, unreachable_pub)]

use std::sync::MutexGuard;
use std::time::Duration;

pub use rocex_testkit::rocexd::Daemon;
/// The tests take the addresses in turn.
pub use rocex_testkit::serial;

/// `rocexd` on `addr` at path MTU 1024, once its socket answers.
pub fn daemon(addr: &str) -> Daemon {
    rocex_testkit::rocexd::Rocexd::new(addr)
        .args(["--mtu", "1024"])
        .start()
}

/// The pair every test uses: A on 127.0.7.1 (the listening side), B on 127.0.7.2.
pub struct Pair {
    pub a: Daemon,
    pub b: Daemon,
    _serial: MutexGuard<'static, ()>,
}

pub fn pair() -> Pair {
    let serial = serial();
    Pair {
        a: daemon("127.0.7.1"),
        b: daemon("127.0.7.2"),
        _serial: serial,
    }
}

/// Fails the whole test process if a test hangs: every wait in the library must end.
pub fn watchdog(name: &'static str) -> std::sync::mpsc::Sender<()> {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            rx.recv_timeout(Duration::from_secs(120))
        {
            eprintln!("{name}: hung for 120 s");
            std::process::exit(101);
        }
    });
    tx
}

pub fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| {
            (i as u8)
                .wrapping_mul(31)
                .wrapping_add(seed)
                .wrapping_add((i >> 8) as u8)
        })
        .collect()
}
