//! The RDMAP receive side under attack (issue 12 item 3's whole-path target for RDMAP), on an
//! RDMAP stream (RFC 5040 over RFC 5043, the Initiate carrying RDMAP's Private Data) with memory
//! open to remote write, read and atomics: RDMA Writes, Read Requests (served from the
//! registered memory, the responses going back), Sends, atomics, Terminates, any bytes
//! (`conn_common`).
#![no_main]

#[path = "conn_common.rs"]
mod conn_common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| conn_common::run(data, true));
