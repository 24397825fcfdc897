//! RDMA without the verbs: connect to a peer by address, share buffers with explicit
//! rights, and write, read, send and run atomics on them, blocking or async, over a
//! `rocexd` device.
//!
//! * [`Device`]: an open `rocexd` ([`Device::open`] finds it through `$ROCEX_SOCKET`).
//! * [`Listener`] and [`Connection::connect`]: a reliable connection (an RC queue pair at
//!   RTS) to the peer at a TCP address, set up by a small exchange ("The exchange" below).
//! * [`CmListener`] and [`Connection::connect_cm`]: the same connection set up through
//!   rdma_cm instead: the daemons' CMs exchange REQ, REP and RTU (the REQ's private data
//!   carries this end's exchange parameters) and bring the QPs to RTS.
//! * [`Buffer`]: a registered buffer from [`Device::alloc`] that derefs to `[u8]`;
//!   [`Buffer::share`] grants the peer [`Rights`] and returns a [`RemoteBuffer`], a plain
//!   token (address, rkey, length) to send the peer however the application likes.
//! * Operations on a [`Connection`]: [`write`](Connection::write),
//!   [`read`](Connection::read), [`send`](Connection::send) / [`recv`](Connection::recv)
//!   (the library keeps a pool of receive buffers posted), [`fetch_add`](Connection::fetch_add),
//!   [`compare_swap`](Connection::compare_swap), and the immediate-data variants, each
//!   also as `*_async` (feature `tokio`, on by default). Any number of async operations
//!   may be in flight on one connection at once.
//! * Every failure is an [`Error`]: completion statuses (the peer refused access, stopped
//!   answering, the connection broke) and device and connection errors, each as its own
//!   variant.
//!
//! A device and everything made from it belong to one thread. With tokio, run them on a
//! current-thread runtime; share a [`Connection`] between tasks with `Rc` and
//! `tokio::task::spawn_local`.
//!
//! # Example: blocking
//!
//! ```no_run
//! use rocex::{Connection, Device, Listener, RemoteBuffer, Rights};
//!
//! // The server shares a buffer and tells the client where it is.
//! fn server() -> rocex::Result<()> {
//!     let dev = Device::open_at("/tmp/rocex-a.sock")?;
//!     let conn = Listener::bind(&dev, "127.0.0.1:7471")?.accept()?;
//!     let mut buf = dev.alloc(4096)?;
//!     let token = buf.share(Rights::WRITE)?;
//!     let mut msg = dev.alloc(RemoteBuffer::LEN)?;
//!     msg.copy_from_slice(&token.to_bytes());
//!     conn.send(&msg, ..)?;
//!     let mut done = [0u8; 4];
//!     conn.recv(&mut done)?; // the client says it wrote
//!     buf.refresh()?;
//!     assert_eq!(&buf[..5], b"hello");
//!     Ok(())
//! }
//!
//! // The client writes into it.
//! fn client() -> rocex::Result<()> {
//!     let dev = Device::open_at("/tmp/rocex-b.sock")?;
//!     let conn = Connection::connect(&dev, "127.0.0.1:7471")?;
//!     let mut token = [0u8; RemoteBuffer::LEN];
//!     conn.recv(&mut token)?;
//!     let remote = RemoteBuffer::from_bytes(&token)?;
//!     let mut buf = dev.alloc(64)?;
//!     buf[..5].copy_from_slice(b"hello");
//!     conn.write(&buf, 0..5, &remote, 0)?;
//!     conn.send(&buf, 0..4)?;
//!     Ok(())
//! }
//! # let _ = (server, client);
//! ```
//!
//! # Example: async
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! # async fn run(remote: rocex::RemoteBuffer) -> rocex::Result<()> {
//! use std::rc::Rc;
//! use rocex::{Connection, Device};
//!
//! let dev = Device::open()?;
//! let conn = Rc::new(Connection::connect_async(&dev, "198.18.0.1:7471").await?);
//! // Eight READs of 64 KiB in flight at once, each from its own task.
//! let tasks: Vec<_> = (0..8u64)
//!     .map(|i| {
//!         let (conn, dev) = (conn.clone(), dev.clone());
//!         tokio::task::spawn_local(async move {
//!             let mut buf = dev.alloc(65536)?;
//!             conn.read_async(&mut buf, .., &remote, i * 65536).await?;
//!             Ok::<_, rocex::Error>(buf)
//!         })
//!     })
//!     .collect();
//! for t in tasks {
//!     let chunk = t.await.expect("task")?;
//!     println!("{} bytes", chunk.len());
//! }
//! # Ok(())
//! # }
//! ```
//!
//! `examples/hello.rs` and `examples/async_copy.rs` run between two `rocexd`; their
//! headers say how to start them.
//!
//! # The exchange
//!
//! [`Connection::connect`] opens a TCP connection to the [`Listener`]; over it the two
//! ends swap three messages, in the order of the InfiniBand CM's REQ, REP and RTU:
//!
//! 1. client → server: its `Params`;
//! 2. server → client: its `Params`, sent once the server's QP is at RTS (and so ready to
//!    receive);
//! 3. client → server: `Ready`, once the client's QP is at RTS; only then does the server
//!    return from `accept` and may send.
//!
//! Each message is an 8-byte header and a body; integers are big-endian.
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | magic `RCXQ` |
//! | 4 | 1 | version: 1 |
//! | 5 | 1 | kind: 1 `Params`, 2 `Ready` |
//! | 6 | 2 | body length: 32 for `Params`, 0 for `Ready` |
//!
//! The `Params` body:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | QP number (24 bits) |
//! | 4 | 4 | first PSN this end sends (24 bits, random) |
//! | 8 | 16 | GID: the device's IP address, IPv4-mapped (`::ffff:a.b.c.d`) for IPv4 |
//! | 24 | 1 | the device's MTU (`enum ibv_mtu`: 1 = 256 … 5 = 4096) |
//! | 25 | 1 | READs and atomics this end accepts at once as responder |
//! | 26 | 2 | reserved, 0 |
//! | 28 | 4 | bytes of each receive buffer: the longest message this end accepts |
//!
//! A message with another magic, version, kind or length, a QPN or PSN over 24 bits, an
//! MTU code outside 1..=5 or nonzero reserved bytes fails the exchange with
//! [`HandshakeError`]; so does a step that takes longer than
//! [`Config::handshake_timeout`]. A later version that changes the layout bumps the
//! version byte.
//!
//! Both QPs then run with the path MTU the smaller of the two, an ACK timeout of 134 ms
//! (exponent 15) with 6 retries (7 would retry forever), unlimited RNR retries (a busy
//! receiver is not a dead one), and as many outstanding READs and atomics as the peer
//! accepts, at most 4 (a few: each READ response is a burst of packets).
//!
//! The TCP connection stays open while the connection lives, as the peer's sign of life:
//! once it closes (or its keepalive fails), a [`Connection::recv`] with nothing queued
//! and every new operation fail with [`Error::Disconnected`], while operations in flight
//! still complete (their acknowledgements may trail the hang-up) or fail when the retries
//! run out. A peer whose device is gone is noticed by the retries running out
//! ([`Error::RetryExceeded`]); this end's own device dying is an [`Error::Device`].
//!
//! # Copies
//!
//! The daemon maps each buffer's registered memory and may write it at any moment, so
//! this crate gives no `&[u8]` over it. A [`Buffer`] is the application's bytes plus the
//! registered copy: an operation copies its local source in when it starts, and its local
//! destination out when it completes. What the peer does to a shared buffer with its own
//! one-sided operations reaches only the registered copy: [`Buffer::refresh`] copies it
//! into the application's bytes, [`Buffer::flush`] the other way.

#![deny(unsafe_code)]

mod buffer;
mod cm;
mod connect;
mod connection;
mod device;
mod error;
mod exchange;
#[cfg(feature = "tokio")]
mod nonblocking;
mod state;
mod token;

pub use buffer::{Buffer, Rights};
pub use cm::CmListener;
pub use connect::{Config, Listener};
pub use connection::Connection;
pub use device::Device;
pub use error::{Error, Op, Result, Side};
pub use exchange::HandshakeError;
pub use token::RemoteBuffer;
