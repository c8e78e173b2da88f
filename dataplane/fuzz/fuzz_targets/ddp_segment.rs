//! Any byte string as a DDP-over-SCTP user message. The first byte picks the PPID the message
//! arrived with (even: 16, DDP segment; odd: 17, stream session control), the rest is the SCTP
//! user data. Parse or fail cleanly; whatever parses round-trips through emit.
#![no_main]

use ddpdk_dataplane::wire::ddp::{
    SegmentPacket, SegmentRepr, SessionControlPacket, SessionControlRepr,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, payload)) = data.split_first() else {
        return;
    };
    if selector % 2 == 0 {
        let Ok(packet) = SegmentPacket::new_checked(payload) else {
            return;
        };
        let _ = (
            packet.version(),
            packet.stag(),
            packet.to(),
            packet.qn(),
            packet.msn(),
            packet.mo(),
        );
        let Ok(repr) = SegmentRepr::parse(&packet) else {
            return;
        };
        let mut buf = vec![0xa5u8; repr.buffer_len()];
        repr.emit(&mut SegmentPacket::new_unchecked(&mut buf[..]))
            .expect("emit into a buffer of buffer_len");
        let again =
            SegmentPacket::new_checked(&buf[..]).expect("an emitted segment is well formed");
        assert_eq!(
            SegmentRepr::parse(&again).expect("an emitted segment parses"),
            repr
        );
    } else {
        let Ok(packet) = SessionControlPacket::new_checked(payload) else {
            return;
        };
        let Ok(repr) = SessionControlRepr::parse(&packet) else {
            return;
        };
        let mut buf = vec![0xa5u8; repr.buffer_len()];
        repr.emit(&mut SessionControlPacket::new_unchecked(&mut buf[..]))
            .expect("emit into a buffer of buffer_len");
        let again =
            SessionControlPacket::new_checked(&buf[..]).expect("an emitted message is well formed");
        assert_eq!(
            SessionControlRepr::parse(&again).expect("an emitted message parses"),
            repr
        );
    }
});
