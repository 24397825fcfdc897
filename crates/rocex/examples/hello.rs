//! Hello over RDMA: the server shares a buffer, the client writes into it, counts with
//! fetch-and-add and says hello with SEND.
//!
//! Two `rocexd` on loopback addresses (no root needed), then the two ends:
//!
//! ```sh
//! cargo build -p rocex-daemon --bin rocexd -p rocex --example hello
//! target/debug/rocexd --addr 127.0.7.1 --socket /tmp/rocex-a.sock &
//! target/debug/rocexd --addr 127.0.7.2 --socket /tmp/rocex-b.sock &
//! ROCEX_SOCKET=/tmp/rocex-a.sock target/debug/examples/hello server 127.0.7.1:7471 &
//! ROCEX_SOCKET=/tmp/rocex-b.sock target/debug/examples/hello client 127.0.7.1:7471
//! ```

use rocex::{Connection, Device, Listener, RemoteBuffer, Rights};

fn main() -> rocex::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (role, addr) = match args.as_slice() {
        [_, role, addr] => (role.as_str(), addr.as_str()),
        _ => {
            eprintln!("usage: hello server|client TCP_ADDR (device from $ROCEX_SOCKET)");
            std::process::exit(2);
        }
    };
    let dev = Device::open().unwrap_or_else(|e| {
        // The error names the socket tried, or the directory searched and what was there.
        eprintln!("hello: {e}");
        std::process::exit(1);
    });
    match role {
        "server" => server(&dev, addr),
        "client" => client(&dev, addr),
        _ => {
            eprintln!("the role is server or client");
            std::process::exit(2);
        }
    }
}

fn server(dev: &Device, addr: &str) -> rocex::Result<()> {
    let listener = Listener::bind(dev, addr)?;
    println!("server: device {}, waiting on {addr}", dev.addr());
    let conn = listener.accept()?;
    println!(
        "server: connected to {}, RDMA peer {}",
        conn.peer_addr()?,
        conn.peer_device_addr()
    );

    // A buffer the client may write and count in, announced in the token's string form.
    let mut shared = dev.alloc(4096)?;
    let token = shared.share(Rights::WRITE | Rights::ATOMIC)?;
    let mut msg = dev.alloc(256)?;
    let text = token.to_string();
    msg[..text.len()].copy_from_slice(text.as_bytes());
    conn.send(&msg, ..text.len())?;

    let mut inbox = [0u8; 256];
    let n = conn.recv(&mut inbox)?;
    println!(
        "server: received {:?}",
        String::from_utf8_lossy(&inbox[..n])
    );
    let n = conn.recv(&mut inbox)?; // "done": the client's writes are all there
    assert_eq!(&inbox[..n], b"done");
    shared.refresh()?;
    let counter = u64::from_ne_bytes(shared[..8].try_into().expect("8 bytes"));
    let end = shared[64..].iter().position(|&b| b == 0).unwrap_or(0);
    println!(
        "server: the client wrote {:?} and counted to {counter}",
        String::from_utf8_lossy(&shared[64..64 + end])
    );
    msg[..3].copy_from_slice(b"bye");
    conn.send(&msg, ..3)?;
    // Stay until the client hangs up, so the last message is not cut short.
    let _ = conn.recv(&mut inbox);
    Ok(())
}

fn client(dev: &Device, addr: &str) -> rocex::Result<()> {
    let conn = Connection::connect(dev, addr)?;
    println!(
        "client: device {}, connected to {addr}, RDMA peer {}",
        dev.addr(),
        conn.peer_device_addr()
    );
    let mut inbox = [0u8; 256];
    let n = conn.recv(&mut inbox)?;
    let token: RemoteBuffer = String::from_utf8_lossy(&inbox[..n]).parse()?;
    println!("client: got {token}");

    let mut buf = dev.alloc(256)?;
    let hello = format!("hello from {}", dev.addr());
    buf[..hello.len()].copy_from_slice(hello.as_bytes());
    conn.send(&buf, ..hello.len())?;

    let text = b"written by the client";
    buf[..text.len()].copy_from_slice(text);
    conn.write(&buf, ..text.len(), &token, 64)?;
    for _ in 0..3 {
        let old = conn.fetch_add(&token, 0, 1)?;
        println!("client: fetch_add saw {old}");
    }
    buf[..4].copy_from_slice(b"done");
    conn.send(&buf, ..4)?;
    let n = conn.recv(&mut inbox)?;
    println!(
        "client: server says {:?}",
        String::from_utf8_lossy(&inbox[..n])
    );
    Ok(())
}
