//! A `Payload::Region` send cut short while part of it is in SCTP's send queue (here by a
//! graceful shutdown, which makes `check_send` fail) used to complete `Flushed` at once, yet
//! the queued segments still referenced the region and still left (SHUTDOWN-PENDING sends what
//! is queued), so what the ULP wrote into its buffer after the completion (verbs: the buffer is
//! the ULP's again) reached the peer with a valid CRC32c. Found by an independent review; the
//! Flushed completion now waits until those segments settle.

#![allow(clippy::unwrap_used)]

mod world;

use std::sync::Arc;
use std::time::Duration;

use ddpdk_control::conn::{Payload, SendKind, SendRequest, Status};
use ddpdk_dataplane::mem::Access;
use world::{open, read, region, World};

const S: u16 = 1;
const LEN: usize = 1 << 20;

#[test]
fn flushed_region_send_still_reads_the_region_afterwards() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = open(&mut w, S);
    let _ = cpd;
    let (sink, reg) = region(&mut w.server, spd, LEN, Access::REMOTE_WRITE, None);
    // The client's source: pattern A.
    let src = w.client.memory.alloc_region(LEN).unwrap();
    let a: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8 | 1).collect();
    w.client.memory.region(src).unwrap().place(0, &a).unwrap();
    let table = Arc::clone(w.client.memory.region_table());
    w.client.conn().use_regions(table);

    w.client
        .conn()
        .post_send(SendRequest {
            wr_id: 7,
            stream: S,
            kind: SendKind::Tagged {
                stag: reg.stag,
                to: 0x7000_0000_0000,
                rsvd_ulp: 0,
            },
            data: Payload::Region {
                region: src,
                offset: 0,
                len: LEN as u32,
            },
            signaled: true,
        })
        .unwrap();
    let now = w.now;
    w.client.conn().shutdown(now);
    // Run until the ULP has the write's completion (the first SACK makes room in SCTP's
    // queue, the pump tries the next segment and finds the association shutting down).
    world::wait(&mut w, "the completion", |w| {
        !w.client.completions.is_empty()
    });
    let c = w.client.completions[0];
    assert_eq!((c.wr_id, c.status), (7, Status::Flushed));

    // The ULP owns its buffer again: it reuses it (0xEE; pattern A has only odd bytes).
    w.client
        .memory
        .region(src)
        .unwrap()
        .place(0, &vec![0xEEu8; LEN])
        .unwrap();
    w.run_for(Duration::from_secs(30));

    let placed = read(&w.server, sink, 0, LEN);
    let from_a = placed.iter().filter(|&&b| b & 1 == 1).count();
    let new_bytes = placed.iter().filter(|&&b| b == 0xEE).count();
    assert_eq!(
        new_bytes, 0,
        "the server placed {new_bytes} bytes the ULP wrote into its buffer AFTER the write \
         completed (Flushed); {from_a} bytes of the original contents"
    );
}
