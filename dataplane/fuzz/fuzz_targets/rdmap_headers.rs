//! Any byte string as an RDMAP header a peer sent (RFC 5040 §4). The first byte picks which:
//! even, the ULP Payload of a Terminate; odd, that of an RDMA Read Request; the same byte is
//! also read as an RDMAP Control Field. Parse or fail cleanly; whatever parses round-trips.
#![no_main]

use ddpdk_dataplane::wire::rdmap::{Control, ReadRequest, TerminatePacket, TerminateRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, payload)) = data.split_first() else { return };
    let control = Control::from_byte(selector);
    assert_eq!(Control::from_byte(control.to_byte()), control);
    if selector % 2 == 0 {
        let Ok(packet) = TerminatePacket::new_checked(payload) else { return };
        let _ = (packet.error(), packet.segment_len(), packet.ddp_header(), packet.rdma_header(), packet.trailing());
        let Ok(repr) = TerminateRepr::parse(&packet) else { return };
        let mut buf = vec![0xa5u8; repr.buffer_len()];
        repr.emit(&mut buf).expect("emit into a buffer of buffer_len");
        let again = TerminatePacket::new_checked(&buf[..]).expect("an emitted Terminate is well formed");
        assert_eq!(TerminateRepr::parse(&again).expect("an emitted Terminate parses"), repr);
    } else {
        let Ok(request) = ReadRequest::parse(payload) else { return };
        assert_eq!(&request.to_bytes()[..], payload);
    }
});
