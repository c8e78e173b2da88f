//! `perf server --ddp-verify`: what the soak's server checks (issue 12 item 4). The client
//! writes distinct self-checking messages ([`crate::verify`]) into slots of the region offered,
//! each write naming its slot in the RsvdULP byte the delivery carries (RFC 5041 §5.4), and
//! sends untagged messages into receive buffers the server keeps posted. The server checks
//! every message it is told of, block by block, and stops the run at the first wrong byte.
//!
//! Flow control is by credit, as a ULP over DDP must do it (RFC 5041 §5.3: an untagged message
//! with no buffer posted is an error that ends the stream): the server tells the client, in a
//! small untagged message of its own ([`CREDIT_LEN`] bytes, the number of messages it has
//! checked), how far it got, and the client keeps at most [`credit_window`] messages beyond
//! that. The server keeps [`RECV_BUFFERS`] posted and posts each again once it is checked; a
//! slot of the region is written again only after the server has checked the message before.
//! Without credit the client ran ahead of a server checking 64 KiB messages byte by byte, and
//! every run at the default size ended in "no buffer available".

use ddpdk_control::memory::{Memory, RegionId};
use ddpdk_dataplane::mem::PostedBuffer;
use ddpdk_dataplane::mem::{Pd, Stag};
use serde_json::json;

use crate::app::note;
use crate::verify;

/// Receive buffers the server keeps posted on each session, and their length.
pub const RECV_BUFFERS: usize = 256;
pub const RECV_LEN: usize = 16 << 10;
/// The slots of an offered region a client writes round, at most (their number rides in a byte).
pub const MAX_SLOTS: u64 = 256;
/// The client's window under --ddp-verify, at most: well under [`RECV_BUFFERS`], so a server
/// whose ULP lags by a few hundred messages still has a buffer posted for every Send.
pub const MAX_WINDOW: usize = 32;
/// The credit messages the client keeps posted, and their length: the count of messages the
/// server has checked, 8 bytes big-endian.
pub const CREDIT_BUFFERS: usize = 128;
pub const CREDIT_LEN: usize = 8;
/// The server sends a credit once it has checked this many messages since the last, or at
/// once when it has nothing else to do (so a client waiting on fewer is never stuck).
pub const CREDIT_EVERY: u64 = 16;

/// Messages the client may post beyond the server's last credit: within the region's slots
/// (a slot is written again only after its previous message was checked), and well within the
/// receive buffers (one message in [`UNTAGGED_EVERY`] + 1 is untagged).
pub fn credit_window(slots: u64) -> u64 {
    slots.clamp(1, 192)
}

/// Untagged messages are numbered from here, tagged ones from 0.
pub const UNTAGGED: u64 = 1 << 63;
/// How many untagged sends a client makes: one after every this many tagged writes.
pub const UNTAGGED_EVERY: u64 = 3;

/// The client's Initiate Private Data under --ddp-verify: its message size (8 bytes, BE).
pub fn initiate_data(size: usize) -> Vec<u8> {
    (size as u64).to_be_bytes().to_vec()
}

/// The message size a client's Initiate announced, which must fit the region offered and be
/// long enough to check.
pub fn message_size(private_data: &[u8], region_len: usize) -> Result<usize, String> {
    let b: [u8; 8] = private_data.try_into().map_err(|_| {
        "--ddp-verify: the client's Initiate does not carry its message size (give \
         --ddp-verify to both ends)"
            .to_string()
    })?;
    let size = usize::try_from(u64::from_be_bytes(b)).unwrap_or(usize::MAX);
    if !(verify::MIN_LEN..=region_len).contains(&size) {
        return Err(format!(
            "--ddp-verify: the client announced {size}-byte messages; from {} to the region's \
             {region_len}",
            verify::MIN_LEN
        ));
    }
    Ok(size)
}

/// The slots of `size` bytes a region of `region_len` holds for the soak.
pub fn slots(region_len: usize, size: usize) -> u64 {
    (region_len as u64 / size.max(1) as u64).clamp(1, MAX_SLOTS)
}

/// The length of untagged message `u` (counted from 0): sizes of every kind of segment.
pub fn untagged_len(u: u64) -> usize {
    [64, 1400, 8000, RECV_LEN][(u % 4) as usize]
}

/// One session the server checks.
#[derive(Debug)]
pub struct Session {
    stream: u16,
    stag: Stag,
    region: RegionId,
    size: usize,
    slots: u64,
    recv_pd: Pd,
    recv_stag: Stag,
    recv_region: RegionId,
    /// Tagged and untagged messages delivered so far: DDP delivers in the order sent (RFC 5041
    /// §5.4), so these are the numbers of the next ones.
    tagged: u64,
    untagged: u64,
    /// The count of checked messages last sent to the client as credit.
    credited: u64,
}

impl Session {
    /// The credit to send now, if one is due: messages checked (tagged and untagged), when
    /// [`CREDIT_EVERY`] are new or, on a turn with nothing else to do (`idle`), any are.
    pub fn credit_due(&self, idle: bool) -> Option<u64> {
        let checked = self.tagged + self.untagged;
        let new = checked - self.credited;
        (new >= CREDIT_EVERY || (idle && new > 0)).then_some(checked)
    }

    /// `credit` reached the client's way (its send was taken).
    pub fn credited(&mut self, credit: u64) {
        self.credited = credit;
    }

    pub fn stream(&self) -> u16 {
        self.stream
    }
    pub fn new(
        stream: u16,
        (stag, region): (Stag, RegionId),
        region_len: usize,
        size: usize,
        (recv_pd, recv_stag, recv_region): (Pd, Stag, RegionId),
    ) -> Session {
        Session {
            stream,
            stag,
            region,
            size,
            slots: slots(region_len, size),
            recv_pd,
            recv_stag,
            recv_region,
            tagged: 0,
            untagged: 0,
            credited: 0,
        }
    }
}

/// What the server checked.
#[derive(Debug, Default)]
pub struct Soak {
    pub sessions: Vec<Session>,
    tagged: u64,
    untagged: u64,
    /// Blocks found split between the delivered message and a newer one being placed over
    /// its slot (the ULP read the slot late).
    torn: u64,
    buf: Vec<u8>,
}

impl Soak {
    /// The latest session on `stream` (a restarted peer opens a new one).
    fn session(&mut self, stream: u16) -> Result<&mut Session, String> {
        self.sessions
            .iter_mut()
            .rev()
            .find(|s| s.stream == stream)
            .ok_or_else(|| format!("--ddp-verify: a message on stream {stream}, no session"))
    }

    /// Checks the slot a tagged message was delivered to. It is the next message in the
    /// order sent, so its number and slot are known; the bytes there are that message's, or,
    /// where the ULP reads late, partly those of the messages a lap or more after it that
    /// overwrite the slot.
    pub fn tagged(
        &mut self,
        mem: &Memory,
        stream: u16,
        stag: Stag,
        slot: u8,
    ) -> Result<(), String> {
        let s = self.session(stream)?;
        if s.stag != stag {
            return Err(format!(
                "--ddp-verify: a tagged message to STag {stag}, not the offered {}",
                s.stag
            ));
        }
        let (k, size, slots, region) = (s.tagged, s.size, s.slots, s.region);
        s.tagged += 1;
        if u64::from(slot) != k % slots {
            return Err(format!(
                "--ddp-verify: tagged message {k} delivered with slot {slot}, written to slot {} \
                 (delivered out of order?)",
                k % slots
            ));
        }
        let r = mem
            .region(region)
            .ok_or("--ddp-verify: the region is gone")?;
        self.buf.resize(size, 0);
        r.read(u64::from(slot) * size as u64, &mut self.buf)
            .map_err(|e| e.to_string())?;
        let laps: Vec<u64> = (0..verify::MAX_CANDIDATES as u64)
            .map(|j| k + j * slots)
            .collect();
        let torn = verify::check(&self.buf, &laps)
            .map_err(|e| format!("--ddp-verify: tagged message {k}, slot {slot}: {e}"))?;
        self.torn += torn as u64;
        self.tagged += 1;
        Ok(())
    }

    /// Checks the receive buffer an untagged message of `len` bytes filled: the next untagged
    /// message in the order sent, whole.
    pub fn untagged(
        &mut self,
        mem: &Memory,
        stream: u16,
        buffer: u64,
        len: u32,
    ) -> Result<(), String> {
        let s = self.session(stream)?;
        let (u, recv_region) = (s.untagged, s.recv_region);
        s.untagged += 1;
        if untagged_len(u) != len as usize {
            return Err(format!(
                "--ddp-verify: untagged message {u} arrived with {len} bytes, not {}",
                untagged_len(u)
            ));
        }
        let r = mem
            .region(recv_region)
            .ok_or("--ddp-verify: the receive region is gone")?;
        self.buf.resize(len as usize, 0);
        r.read(buffer * RECV_LEN as u64, &mut self.buf)
            .map_err(|e| e.to_string())?;
        verify::check(&self.buf, &[UNTAGGED + u]).map_err(|e| {
            format!("--ddp-verify: untagged message {u} in receive buffer {buffer}: {e}")
        })?;
        self.untagged += 1;
        Ok(())
    }

    /// Receive buffer `buffer` of `stream`'s session, to post again.
    pub fn receive_buffer(
        &mut self,
        mem: &Memory,
        stream: u16,
        buffer: u64,
    ) -> Result<PostedBuffer, String> {
        let s = self.session(stream)?;
        mem.receive_buffer(
            s.recv_pd,
            s.recv_stag,
            buffer * RECV_LEN as u64,
            RECV_LEN as u32,
        )
        .map_err(|e| e.to_string())
    }

    pub fn report(&self, json: bool) {
        if json {
            println!(
                "{}",
                json!({"ddp_verify": {"tagged": self.tagged, "untagged": self.untagged,
                                      "torn_blocks": self.torn}})
            );
        } else {
            note(
                json,
                format_args!(
                    "server: --ddp-verify checked {} tagged and {} untagged messages, every \
                     byte, each against its number in the order sent ({} blocks split with \
                     the next lap's message)",
                    self.tagged, self.untagged, self.torn
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_size_rides_in_the_initiate() {
        assert_eq!(message_size(&initiate_data(65536), 1 << 20), Ok(65536));
        assert!(message_size(b"", 1 << 20).is_err());
        assert!(
            message_size(&initiate_data(2 << 20), 1 << 20).is_err(),
            "over the region"
        );
        assert!(
            message_size(&initiate_data(4), 1 << 20).is_err(),
            "too short to check"
        );
    }

    #[test]
    fn slots_fit_the_region_and_a_byte() {
        assert_eq!(slots(64 << 20, 65536), 256);
        assert_eq!(slots(1 << 20, 65536), 16);
        assert_eq!(slots(1000, 65536), 1);
    }

    #[test]
    fn untagged_messages_fit_a_buffer_and_can_be_checked() {
        for u in 0..8 {
            assert!((verify::MIN_LEN..=RECV_LEN).contains(&untagged_len(u)));
        }
    }
}
