//! Message kinds (§6.2); a response carries `kind | RESPONSE`.

/// Version handshake.
pub const HELLO: u16 = 1;
/// Device attributes.
pub const QUERY_DEVICE: u16 = 2;
/// Allocate a PD.
pub const ALLOC_PD: u16 = 3;
/// Free a PD.
pub const DEALLOC_PD: u16 = 4;
/// Register a memfd-backed MR.
pub const REG_MR_SHARED: u16 = 5;
/// Register process memory (process_vm_readv/writev).
pub const REG_MR_PROCESS: u16 = 6;
/// Deregister an MR.
pub const DEREG_MR: u16 = 7;
/// Create a completion channel.
pub const CREATE_COMP_CHANNEL: u16 = 8;
/// Create a CQ.
pub const CREATE_CQ: u16 = 9;
/// Destroy a CQ.
pub const DESTROY_CQ: u16 = 10;
/// Create a QP.
pub const CREATE_QP: u16 = 11;
/// Modify a QP.
pub const MODIFY_QP: u16 = 12;
/// Query a QP.
pub const QUERY_QP: u16 = 13;
/// Destroy a QP.
pub const DESTROY_QP: u16 = 14;
/// Device and QP counters (added in ABI 1 without a version change, §6.4).
pub const STAT: u16 = 15;
/// Listen on an rdma_cm port (added in ABI 1 without a version change, §6.5).
pub const CM_LISTEN: u16 = 16;
/// Connect a QP through the CM to an address and rdma_cm port.
pub const CM_CONNECT: u16 = 17;
/// Accept a connection request with a QP.
pub const CM_ACCEPT: u16 = 18;
/// Reject a connection request.
pub const CM_REJECT: u16 = 19;
/// Disconnect a CM connection.
pub const CM_DISCONNECT: u16 = 20;
/// Take the next CM event.
pub const CM_POLL: u16 = 21;
/// Stop taking the connection requests for an rdma_cm port.
pub const CM_UNLISTEN: u16 = 22;
/// Give a CQ a new ring of another size (added in ABI 3 without a version change).
pub const RESIZE_CQ: u16 = 23;
/// Allocate a memory window (added in ABI 4 without a version change).
pub const ALLOC_MW: u16 = 24;
/// Free a memory window.
pub const DEALLOC_MW: u16 = 25;
/// Bind a memory window through a QP.
pub const BIND_MW: u16 = 26;
/// Invalidate a memory window through a QP (LOCAL_INV).
pub const LOCAL_INV: u16 = 27;
/// Ask for a QPN slot and its steered socket, to run the engine in the client (added in
/// ABI 4 without a version change, §6.6).
pub const OPEN_DIRECT: u16 = 28;
/// A direct client's QP is in RTS: send the connection's RTU (ABI 6).
pub const CM_ESTABLISH: u16 = 29;
/// Set on responses.
pub const RESPONSE: u16 = 0x8000;
/// An error response.
pub const ERROR: u16 = 0xFFFF;
