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

use ddpdk_control::conn::{AtomicOperation, Payload, RdmaOp, RdmaRequest};
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
            outln!(
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

/// The stream of the client's RDMAP read-back session (the checked writes use stream 1).
pub const READ_BACK_STREAM: u16 = 2;
/// The slots the read-back writes round: a few, so that the region's pages it touches are all
/// touched early (the soak checks that resident memory stays flat).
const READ_BACK_SLOTS: u64 = 4;
/// The read-back's messages are numbered from here (the tagged ones from 0, the untagged
/// from [`UNTAGGED`]).
const READ_BACK: u64 = 1 << 62;

/// What the read-back has in flight: one work request at a time, so each is checked against
/// exactly what came before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Idle,
    Write { k: u64 },
    Read { k: u64 },
    Add,
}

/// The client's RDMAP read-back under --ddp-verify, beside the checked DDP traffic: on its
/// own stream, an RDMAP session whose region (offered by the server, as on the first stream)
/// grants remote write, read and atomic access. Round and round: an RDMA Write of a
/// self-checking message into a slot (RFC 5040 §5.1); once it completes (acknowledged, so
/// placed), an RDMA Read of the slot into a local sink (§5.2), whose bytes must be that
/// message's; then a Fetch-and-Add of 1 to a word after the slots (RFC 7306 §5.1.1), whose
/// original value must be the count of adds before it. Under the soak's faults this runs Read
/// Requests, Read Responses and Atomics through loss, corruption and reordering.
#[derive(Debug)]
pub struct ReadBack {
    /// The server's offer: STag, base Tagged Offset, length.
    stag: Stag,
    to: u64,
    size: usize,
    slots: u64,
    /// The word the adds go to, as an offset from `to` (64-bit aligned, RFC 7306 §8.2).
    word: u64,
    sink: Stag,
    sink_region: RegionId,
    probe: Probe,
    next_wr: u64,
    pub writes: u64,
    pub reads: u64,
    pub adds: u64,
    buf: Vec<u8>,
    want: Vec<u8>,
}

impl ReadBack {
    /// The sink a client registers (local write): a message and the adds' 8-byte result.
    pub fn sink_len(size: usize) -> usize {
        Self::sink_word(size) + 8
    }

    /// Where in the sink the adds' result lands: after the message, 64-bit aligned.
    fn sink_word(size: usize) -> usize {
        size.next_multiple_of(8)
    }

    /// The sink's bytes from `at` into `out`.
    fn read_sink(&self, mem: &Memory, at: usize, out: &mut [u8]) -> Result<(), String> {
        mem.region(self.sink_region)
            .ok_or("--ddp-verify: the read-back sink is gone")?
            .read(at as u64, out)
            .map_err(|e| e.to_string())
    }

    /// A read-back of `size`-byte messages into the server's region `stag` / `to` / `len`,
    /// through the client's sink registration `sink` (of [`ReadBack::sink_len`] bytes).
    pub fn new(
        (stag, to, len): (Stag, u64, u64),
        size: usize,
        (sink, sink_region): (Stag, RegionId),
    ) -> Result<ReadBack, String> {
        let size64 = size as u64;
        // The slots, then the word, 64-bit aligned, within the region.
        let word = |slots: u64| (slots * size64).next_multiple_of(8);
        let slots = (0..=READ_BACK_SLOTS)
            .rev()
            .find(|&n| word(n) + 8 <= len)
            .unwrap_or(0);
        if slots == 0 || to % 8 != 0 {
            return Err(format!(
                "--ddp-verify: the server's read-back region ({len} bytes at TO {to}) holds no \
                 {size}-byte message and an 8-byte word"
            ));
        }
        Ok(ReadBack {
            stag,
            to,
            size,
            slots,
            word: word(slots),
            sink,
            sink_region,
            probe: Probe::Idle,
            next_wr: 0,
            writes: 0,
            reads: 0,
            adds: 0,
            buf: Vec::new(),
            want: Vec::new(),
        })
    }

    /// Something still in flight.
    pub fn busy(&self) -> bool {
        self.probe != Probe::Idle
    }

    fn slot_to(&self, k: u64) -> u64 {
        self.to + (k % self.slots) * self.size as u64
    }

    /// The next work request, if nothing is in flight and `more` (the run goes on).
    pub fn next(&mut self, more: bool) -> Option<RdmaRequest> {
        if self.busy() || !more {
            return None;
        }
        let k = self.writes;
        let mut m = vec![0; self.size];
        verify::fill(READ_BACK + k, &mut m);
        self.probe = Probe::Write { k };
        Some(self.request(
            RdmaOp::Write {
                stag: self.stag,
                to: self.slot_to(k),
            },
            Payload::Bytes(m),
        ))
    }

    fn request(&mut self, op: RdmaOp, data: Payload) -> RdmaRequest {
        self.next_wr += 1;
        RdmaRequest {
            wr_id: self.next_wr,
            stream: READ_BACK_STREAM,
            op,
            data,
            signaled: true,
        }
    }

    /// The work request in flight completed (successfully: a failure ends the run before):
    /// checks what it brought, and returns the one that follows it, if any.
    pub fn completed(&mut self, mem: &Memory) -> Result<Option<RdmaRequest>, String> {
        match self.probe {
            Probe::Idle => {
                Err("--ddp-verify: a read-back completion with nothing in flight".into())
            }
            Probe::Write { k } => {
                self.writes += 1;
                self.probe = Probe::Read { k };
                let op = RdmaOp::Read {
                    source: self.stag,
                    source_to: self.slot_to(k),
                    sink: self.sink,
                    sink_to: 0,
                    len: u32::try_from(self.size).map_err(|e| e.to_string())?,
                };
                Ok(Some(self.request(op, Payload::Bytes(Vec::new()))))
            }
            Probe::Read { k } => {
                let mut buf = std::mem::take(&mut self.buf);
                buf.resize(self.size, 0);
                self.read_sink(mem, 0, &mut buf)?;
                self.buf = buf;
                self.want.resize(self.size, 0);
                verify::fill(READ_BACK + k, &mut self.want);
                if let Some(at) = self.buf.iter().zip(&self.want).position(|(a, b)| a != b) {
                    return Err(format!(
                        "--ddp-verify: RDMA Read {k} of slot {} brought byte {at} as {:#04x}, \
                         written as {:#04x} (RFC 5040 §5.2)",
                        k % self.slots,
                        self.buf[at],
                        self.want[at]
                    ));
                }
                self.reads += 1;
                self.probe = Probe::Add;
                let op = RdmaOp::Atomic {
                    op: AtomicOperation::FetchAdd { add: 1, mask: 0 },
                    stag: self.stag,
                    to: self.to + self.word,
                    sink: self.sink,
                    sink_to: Self::sink_word(self.size) as u64,
                };
                Ok(Some(self.request(op, Payload::Bytes(Vec::new()))))
            }
            Probe::Add => {
                let mut word = [0u8; 8];
                self.read_sink(mem, Self::sink_word(self.size), &mut word)?;
                // RFC 7306 §5.1.1: the Atomic Response carries the word's value before the add.
                let original = u64::from_ne_bytes(word);
                if original != self.adds {
                    return Err(format!(
                        "--ddp-verify: Fetch-and-Add {} found {original}, not the {} adds \
                         before it (RFC 7306 §5.1.1)",
                        self.adds, self.adds
                    ));
                }
                self.adds += 1;
                self.probe = Probe::Idle;
                Ok(None)
            }
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
    fn the_read_backs_slots_and_aligned_word_fit_the_region_7306_8_2() {
        let sink = (Stag(1), RegionId(0));
        for (size, len) in [
            (65536, 64 << 20),
            (1001, 4012),
            (1001, 4100),
            (16, 24),
            (13, 32),
        ] {
            let rb = ReadBack::new((Stag(2), 0, len), size, sink).expect("fits");
            assert!(rb.slots >= 1 && rb.slots <= READ_BACK_SLOTS, "{size} {len}");
            assert_eq!(rb.word % 8, 0, "RFC 7306 §8.2: an aligned word");
            assert!(
                rb.slots * size as u64 <= rb.word,
                "the word after the slots"
            );
            assert!(rb.word + 8 <= len, "{size} in {len}: word at {}", rb.word);
        }
        // 1001 bytes and an aligned word after it need 1016.
        assert!(ReadBack::new((Stag(2), 0, 1015), 1001, sink).is_err());
        assert!(ReadBack::new((Stag(2), 0, 1016), 1001, sink).is_ok());
        assert!(
            ReadBack::new((Stag(2), 4, 1 << 20), 64, sink).is_err(),
            "TO not aligned"
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
