//! `PostError::BadRegion` edges of a `Payload::Region` send (written by an independent review;
//! they passed as written): overflow of offset + len, spans past the region's end, unknown and
//! `u32::MAX` region ids, and a send posted before the connection was given its regions.
#![allow(clippy::unwrap_used)]

mod world;

use std::sync::Arc;

use ddpdk_control::conn::{Payload, PostError, SendKind, SendRequest};
use ddpdk_control::memory::RegionId;
use ddpdk_dataplane::mem::Access;
use world::{open, region, World};

const S: u16 = 1;

fn req(wr_id: u64, stag: ddpdk_dataplane::mem::Stag, data: Payload) -> SendRequest {
    SendRequest {
        wr_id,
        stream: S,
        kind: SendKind::Tagged {
            stag,
            to: 0x7000_0000_0000,
            rsvd_ulp: 0,
        },
        data,
        signaled: true,
    }
}

#[test]
fn bad_region_edges() {
    let mut w = World::perfect(1500);
    w.establish();
    let (_cpd, spd) = open(&mut w, S);
    let (_sink, reg) = region(&mut w.server, spd, 4096, Access::REMOTE_WRITE, None);
    let src = w.client.memory.alloc_region(4096).unwrap();
    // No regions attached yet: refused.
    let r = w.client.conn().post_send(req(
        1,
        reg.stag,
        Payload::Region {
            region: src,
            offset: 0,
            len: 16,
        },
    ));
    assert_eq!(r, Err(PostError::BadRegion));
    let table = Arc::clone(w.client.memory.region_table());
    w.client.conn().use_regions(table);
    for (id, off, len) in [
        (src.0, u64::MAX, 1u32),
        (src.0, u64::MAX - 3, 8),
        (src.0, 4096, 1),
        (src.0, 1, 4096),
        (u32::MAX, 0, 1),
        (src.0 + 1, 0, 1),
    ] {
        let r = w.client.conn().post_send(req(
            2,
            reg.stag,
            Payload::Region {
                region: RegionId(id),
                offset: off,
                len,
            },
        ));
        assert_eq!(r, Err(PostError::BadRegion), "{id} {off} {len}");
    }
    let r = w.client.conn().post_send(req(
        3,
        reg.stag,
        Payload::Region {
            region: src,
            offset: 4095,
            len: 1,
        },
    ));
    assert_eq!(r, Ok(()));
    let r = w.client.conn().post_send(req(
        4,
        reg.stag,
        Payload::Region {
            region: src,
            offset: 4096,
            len: 0,
        },
    ));
    assert!(r.is_ok() || r == Err(PostError::BadRegion));
}
