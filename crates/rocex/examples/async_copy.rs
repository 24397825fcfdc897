//! Copies a peer's buffer with many RDMA READs in flight at once, from tokio tasks.
//!
//! The server fills 16 MiB, shares it read-only and waits; the client READs it in 256 KiB
//! chunks, 16 at a time, and sends back a checksum that the server checks.
//!
//! ```sh
//! cargo build -p rocex-daemon --bin rocexd -p rocex --example async_copy
//! target/debug/rocexd --addr 127.0.7.1 --socket /tmp/rocex-a.sock &
//! target/debug/rocexd --addr 127.0.7.2 --socket /tmp/rocex-b.sock &
//! ROCEX_SOCKET=/tmp/rocex-a.sock target/debug/examples/async_copy server 127.0.7.1:7472 &
//! ROCEX_SOCKET=/tmp/rocex-b.sock target/debug/examples/async_copy client 127.0.7.1:7472
//! ```

use std::rc::Rc;
use std::time::Instant;

use rocex::{Connection, Device, Listener, RemoteBuffer, Rights};

const SIZE: usize = 16 << 20;
const CHUNK: usize = 256 << 10;
const IN_FLIGHT: usize = 16;

/// FNV-1a over `data`, folded per chunk in order.
fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> rocex::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (role, addr) = match args.as_slice() {
        [_, role, addr] => (role.clone(), addr.clone()),
        _ => {
            eprintln!("usage: async_copy server|client TCP_ADDR (device from $ROCEX_SOCKET)");
            std::process::exit(2);
        }
    };
    let dev = Device::open().unwrap_or_else(|e| {
        // The error names the socket tried, or the directory searched and what was there.
        eprintln!("async_copy: {e}");
        std::process::exit(1);
    });
    // The device is not Send: its tasks run on this thread.
    let local = tokio::task::LocalSet::new();
    match role.as_str() {
        "server" => local.run_until(server(dev, addr)).await,
        "client" => local.run_until(client(dev, addr)).await,
        _ => {
            eprintln!("the role is server or client");
            std::process::exit(2);
        }
    }
}

async fn server(dev: Device, addr: String) -> rocex::Result<()> {
    let listener = Listener::bind(&dev, addr.as_str())?;
    println!("server: waiting on {addr}");
    let conn = listener.accept_async().await?;
    println!("server: RDMA peer {}", conn.peer_device_addr());
    let mut data = dev.alloc(SIZE)?;
    for (i, b) in data.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(7) ^ (i >> 12) as u8;
    }
    let token = data.share(Rights::READ)?;
    let mut msg = dev.alloc(RemoteBuffer::LEN)?;
    msg.copy_from_slice(&token.to_bytes());
    conn.send_async(&msg, ..).await?;

    let mut answer = [0u8; 8];
    conn.recv_async(&mut answer).await?;
    let theirs = u64::from_be_bytes(answer);
    let ours = checksum(&data);
    println!(
        "server: client checksum {theirs:016x}, ours {ours:016x}: {}",
        if theirs == ours {
            "verified"
        } else {
            "MISMATCH"
        }
    );
    Ok(())
}

async fn client(dev: Device, addr: String) -> rocex::Result<()> {
    let conn = Rc::new(Connection::connect_async(&dev, addr.as_str()).await?);
    let mut t = [0u8; RemoteBuffer::LEN];
    conn.recv_async(&mut t).await?;
    let remote = RemoteBuffer::from_bytes(&t)?;
    println!(
        "client: copying {} bytes from {remote}, RDMA peer {}",
        remote.len(),
        conn.peer_device_addr()
    );

    let start = Instant::now();
    let mut copy = vec![0u8; remote.len() as usize];
    let chunks: Vec<usize> = (0..copy.len()).step_by(CHUNK).collect();
    for group in chunks.chunks(IN_FLIGHT) {
        let tasks: Vec<_> = group
            .iter()
            .map(|&at| {
                let (conn, dev) = (conn.clone(), dev.clone());
                tokio::task::spawn_local(async move {
                    let mut buf = dev.alloc(CHUNK)?;
                    conn.read_async(&mut buf, .., &remote, at as u64).await?;
                    Ok::<_, rocex::Error>((at, buf))
                })
            })
            .collect();
        for t in tasks {
            let (at, buf) = t.await.expect("copy task")?;
            copy[at..at + CHUNK].copy_from_slice(&buf);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "client: copied in {secs:.3} s ({:.1} MB/s)",
        copy.len() as f64 / secs / 1e6
    );
    let mut msg = dev.alloc(8)?;
    msg.copy_from_slice(&checksum(&copy).to_be_bytes());
    conn.send_async(&msg, ..).await?;
    Ok(())
}
