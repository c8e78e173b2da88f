//! The DDP receive side under attack, on a plain DDP stream (`conn_common`).
#![no_main]

#[path = "conn_common.rs"]
mod conn_common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| conn_common::run(data, false));
