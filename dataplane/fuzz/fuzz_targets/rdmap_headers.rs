//! Any byte string as an RDMAP header a peer sent (RFC 5040 §4, RFC 7306 §5.2, §6.2). The first
//! byte picks which (its value mod 5): the ULP Payload of a Terminate, an RDMA Read Request,
//! an Atomic Request, an Atomic Response or Immediate Data; the same byte is also read as an
//! RDMAP Control Field. Parse or fail cleanly; whatever parses round-trips.
#![no_main]

use ddpdk_dataplane::wire::rdmap::{
    immediate_data, AtomicRequest, AtomicResponse, Control, ReadRequest, TerminatePacket,
    TerminateRepr,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, payload)) = data.split_first() else {
        return;
    };
    let control = Control::from_byte(selector);
    assert_eq!(Control::from_byte(control.to_byte()), control);
    match selector % 5 {
        0 => terminate(payload),
        1 => {
            let Ok(request) = ReadRequest::parse(payload) else {
                return;
            };
            assert_eq!(&request.to_bytes()[..], payload);
        }
        2 => {
            let Ok(request) = AtomicRequest::parse(payload) else {
                return;
            };
            // The reserved bits are not kept; everything else is.
            assert_eq!(&request.to_bytes()[4..], &payload[4..]);
            assert_eq!(AtomicRequest::parse(&request.to_bytes()), Ok(request));
            let _ = request.result(u64::from_be_bytes([payload[4], 0, 0, 0, 0, 0, 0, 1]));
        }
        3 => {
            let Ok(response) = AtomicResponse::parse(payload) else {
                return;
            };
            assert_eq!(&response.to_bytes()[..], payload);
        }
        _ => {
            let Ok(data) = immediate_data(payload) else {
                return;
            };
            assert_eq!(&data[..], payload);
        }
    }
});

fn terminate(payload: &[u8]) {
    let Ok(packet) = TerminatePacket::new_checked(payload) else {
        return;
    };
    let _ = (
        packet.error(),
        packet.segment_len(),
        packet.ddp_header(),
        packet.rdma_header(),
        packet.trailing(),
    );
    let Ok(repr) = TerminateRepr::parse(&packet) else {
        return;
    };
    let mut buf = vec![0xa5u8; repr.buffer_len()];
    repr.emit(&mut buf)
        .expect("emit into a buffer of buffer_len");
    let again =
        TerminatePacket::new_checked(&buf[..]).expect("an emitted Terminate is well formed");
    assert_eq!(
        TerminateRepr::parse(&again).expect("an emitted Terminate parses"),
        repr
    );
}
