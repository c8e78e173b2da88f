//! Any byte string as an SCTP packet: the checksum check, the common header and every chunk must
//! parse or fail cleanly, and whatever parses must re-emit to bytes that parse to the same Repr.
#![no_main]

use ddpdk_dataplane::wire::{crc32c, sctp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = crc32c::verify(data);
    let Ok(packet) = sctp::Packet::new_checked(data) else {
        return;
    };
    let _ = sctp::HeaderRepr::parse(&packet);
    for chunk in packet.chunks() {
        let Ok(chunk) = chunk else { break };
        let Ok(repr) = sctp::ChunkRepr::parse(&chunk) else {
            continue;
        };
        let mut buf = vec![0xa5u8; repr.buffer_len()];
        repr.emit(&mut buf);
        let again = sctp::Chunk::new_checked(&buf[..]).expect("an emitted chunk is well formed");
        let again = sctp::ChunkRepr::parse(&again).expect("an emitted chunk parses");
        assert_eq!(again, repr, "emit/parse round trip");
    }
});
