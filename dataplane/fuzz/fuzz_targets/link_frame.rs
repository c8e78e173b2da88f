//! Any byte string as an Ethernet frame: the link layer must return, never panic, and a
//! returned SCTP slice must lie within the frame.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|frame: &[u8]| {
    let _ = ddpdk_dataplane::wire::link::ether_type(frame);
    if let Ok(p) = ddpdk_dataplane::wire::link::parse_sctp(frame) {
        let start = p.sctp.as_ptr() as usize - frame.as_ptr() as usize;
        assert!(start + p.sctp.len() <= frame.len());
    }
});
