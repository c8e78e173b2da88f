//! Any byte string as an INIT or INIT ACK chunk: the parameter walk (RFC 9260 §3.2.1, padding
//! and unknown-parameter actions included) must parse or fail cleanly, and each parameter that
//! parses must round-trip through emit.
#![no_main]

use ddpdk_dataplane::wire::sctp::{self, ChunkType, ParamRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The seeds are whole SCTP packets: start at the first chunk when there is one.
    let bytes = data
        .get(sctp::HEADER_LEN..)
        .filter(|_| data.len() > 16)
        .unwrap_or(data);
    let Ok(chunk) = sctp::Chunk::new_checked(bytes) else {
        return;
    };
    let params = match chunk.chunk_type() {
        ChunkType::Init => sctp::InitRepr::parse(&chunk).map(|r| r.params),
        ChunkType::InitAck => sctp::InitAckRepr::parse(&chunk).map(|r| r.0.params),
        _ => return,
    };
    let Ok(params) = params else { return };
    for p in params.iter() {
        let mut buf = vec![0xa5u8; p.buffer_len()];
        p.emit(&mut buf);
        let again =
            sctp::Param::new_checked(&buf[..]).expect("an emitted parameter is well formed");
        assert_eq!(
            ParamRepr::parse(&again).expect("an emitted parameter parses"),
            p
        );
    }
});
