//! The send buffer: a ring of fixed-size message slots, allocated once per association.
//!
//! Every message is one whole DATA chunk (RFC 5043 §9), so a slot holds exactly one message,
//! TSNs are given out in ring order on first transmission, and the cumulative ack frees slots
//! from the front. The ring has three parts: `[head, sent)` have TSNs and await acknowledgement,
//! `[sent, tail)` wait for their first transmission.

use super::time::Instant;

/// Book-keeping for one message.
#[derive(Debug, Clone, Copy, Default)]
pub struct Slot {
    pub stream: u16,
    pub ppid: u32,
    pub len: usize,
    /// Valid once sent.
    pub tsn: u32,
    /// Last transmission.
    pub sent_at: Instant,
    /// Transmissions so far (Karn's rule: only `tx_count == 1` chunks are timed).
    pub tx_count: u32,
    /// Covered by a gap ack block of the latest SACK.
    pub gap_acked: bool,
    /// Covered by a gap ack block of some SACK so far, even if a later one reneged: such a
    /// chunk is never "newly acknowledged" again (RFC 9260 §7.2.4: "one not previously
    /// acknowledged in a SACK"), so it raises neither the HTNA threshold nor `bytes_acked`.
    pub acked_before: bool,
    /// Counted in the flight size.
    pub in_flight: bool,
    /// Marked for retransmission (T3-rtx or fast retransmit). Written only through
    /// [`SendQueue::set_rtx`], which keeps the count of marked messages.
    pub rtx: bool,
    /// Fast-retransmitted once already (RFC 9260 §7.2.4: only once per TSN).
    pub fast_rtx_done: bool,
    /// Marked by Fast Retransmit and not sent since. While one marked on entering Fast
    /// Recovery waits, the next packet of retransmissions may ignore cwnd (§7.2.4 step 3);
    /// its send counts as a fast retransmission.
    pub fast_rtx_due: bool,
    /// Miss indications (§7.2.4).
    pub misses: u32,
    /// Sent as a zero window probe (RFC 9260 §6.1 A): new, larger than the peer's window with
    /// nothing else outstanding; or sent again (by T3-rtx, or the recovery of a probe) larger
    /// than the peer's last window. A window update that holds it and leaves it
    /// unacknowledged sends it again. A fast retransmission clears it.
    pub window_probe: bool,
    /// Reneged on by the SACK being handled (RFC 9260 §6.2.1 D iii), for its miss indication
    /// once the HTNA walk is done; set and cleared within one SACK.
    pub reneged: bool,
    /// The message's tail, outside the ring (zero-copy transmit): `len` counts it, the ring
    /// holds only the `len - ext.len` bytes before it.
    pub ext: Option<ExtRef>,
}

/// Message bytes an association does not copy: a span of memory the caller names (a region of
/// registered memory, say) and keeps unchanged until the message is acknowledged. The
/// association never reads it; a built packet leaves a [`Hole`] where it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtRef {
    /// The caller's name for the memory (a region id).
    pub key: u32,
    pub offset: u64,
    pub len: u32,
}

/// Where a built packet is missing an [`ExtRef`]'s bytes: `ext.len` bytes at `at` (counted from
/// the start of the SCTP packet). Nothing was written there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hole {
    pub at: usize,
    pub ext: ExtRef,
}

/// The head of a zero-copy message (a DDP header and its DDP-SSN: 16 or 20 bytes) is kept in
/// a small entry of its own when it fits, not at its slot's offset in `data`.
const HEAD_INLINE: usize = 32;

#[derive(Debug)]
pub struct SendQueue {
    data: Box<[u8]>,
    /// The heads of zero-copy messages, one entry a slot: a bulk sender's every message is a
    /// 16-byte header and a region span, and writing that header at its slot's place in
    /// `data` (one slot of a path MTU each, 1.4 MiB and more) touched a line no cache held
    /// any more; this array of 32 KiB is walked in order and stays cached.
    heads: Box<[[u8; HEAD_INLINE]]>,
    slots: Box<[Slot]>,
    /// `slots.len() - 1` when that is a power of two (the defaults, 256 and 1024), else 0: a
    /// message's slot is then a mask of its number rather than a 64-bit division, which the
    /// send path asks for about six times a segment (callgrind: 91 instructions a segment,
    /// and a `div` of 10-20 cycles' latency each time).
    mask: u64,
    slot_size: usize,
    head: u64,
    sent: u64,
    tail: u64,
    /// Outstanding messages marked for retransmission: the transmit path asks "anything to
    /// retransmit?" on every packet, and the answer is almost always no.
    rtx_marked: usize,
    dropped_from: u64,
    /// A bit (`key % 64`) for each memory an [`ExtRef`] of a message named since the queue
    /// was last empty: what lets [`SendQueue::materialize`] skip a queue that names no such
    /// memory without a walk (a revocation, which asks every queue of a core, may come with
    /// every I/O where the peer invalidates what it used). Kept per push and per emptying,
    /// not per acknowledged message: a count would cost the SACK path a read a message.
    ext_keys: u64,
}

impl SendQueue {
    pub fn new(slots: usize, slot_size: usize) -> Self {
        SendQueue {
            data: vec![0; slots * slot_size].into_boxed_slice(),
            heads: vec![[0; HEAD_INLINE]; slots].into_boxed_slice(),
            slots: vec![Slot::default(); slots].into_boxed_slice(),
            mask: if slots.is_power_of_two() {
                slots as u64 - 1
            } else {
                0
            },
            slot_size,
            head: 0,
            sent: 0,
            tail: 0,
            rtx_marked: 0,
            dropped_from: 0,
            ext_keys: 0,
        }
    }

    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    fn idx(&self, seq: u64) -> usize {
        // A ring of one slot has mask 0 and every number in slot 0 either way.
        if self.mask != 0 {
            (seq & self.mask) as usize
        } else {
            (seq % self.slots.len() as u64) as usize
        }
    }

    pub fn is_full(&self) -> bool {
        self.tail - self.head == self.slots.len() as u64
    }

    /// Nothing queued or awaiting acknowledgement.
    pub fn is_empty(&self) -> bool {
        self.tail == self.head
    }

    /// Messages with TSNs not yet cumulatively acknowledged.
    pub fn outstanding(&self) -> u64 {
        self.sent - self.head
    }

    pub fn queued(&self) -> u64 {
        self.tail - self.head
    }

    /// Messages that can still be pushed.
    pub fn room(&self) -> usize {
        self.slots.len() - (self.tail - self.head) as usize
    }

    /// Sequence number of the oldest message still held (acknowledged or dropped below it).
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Copies a message in; the caller has checked it fits a slot and the ring is not full.
    /// Returns its sequence number.
    /// `head` is held here, the bytes `ext` names (if any) follow it outside the ring.
    pub fn push_ext(&mut self, stream: u16, ppid: u32, head: &[u8], ext: Option<ExtRef>) -> u64 {
        let i = self.idx(self.tail);
        if inline(ext.is_some(), head.len()) {
            self.heads[i][..head.len()].copy_from_slice(head);
        } else {
            let off = i * self.slot_size;
            self.data[off..off + head.len()].copy_from_slice(head);
        }
        self.slots[i] = Slot {
            stream,
            ppid,
            len: head.len() + ext.map_or(0, |e| e.len as usize),
            ext,
            ..Slot::default()
        };
        if let Some(e) = ext {
            self.ext_keys |= key_bit(e.key);
        }
        self.tail += 1;
        self.tail - 1
    }

    /// Sequence numbers of the messages awaiting acknowledgement, oldest first.
    pub fn outstanding_seqs(&self) -> core::ops::Range<u64> {
        self.head..self.sent
    }

    pub fn next_unsent(&self) -> Option<u64> {
        (self.sent < self.tail).then_some(self.sent)
    }

    /// Whether message `seq` is the last one queued (nothing behind it to send).
    pub fn is_last(&self, seq: u64) -> bool {
        seq + 1 == self.tail
    }

    /// Moves the first unsent message into the outstanding part.
    pub fn mark_sent(&mut self) {
        debug_assert!(self.sent < self.tail);
        self.sent += 1;
    }

    pub fn front(&self) -> Option<&Slot> {
        (self.head < self.sent).then(|| &self.slots[self.idx(self.head)])
    }

    /// Frees the oldest outstanding message.
    pub fn pop_front(&mut self) {
        debug_assert!(self.head < self.sent);
        self.set_rtx(self.head, false);
        self.head += 1;
        if self.head == self.tail {
            self.ext_keys = 0;
        }
    }

    /// Marks or unmarks an outstanding message for retransmission.
    pub fn set_rtx(&mut self, seq: u64, on: bool) {
        let i = self.idx(seq);
        let slot = &mut self.slots[i];
        if slot.rtx != on {
            slot.rtx = on;
            if on {
                self.rtx_marked += 1;
            } else {
                self.rtx_marked -= 1;
            }
        }
    }

    /// Whether any outstanding message is marked for retransmission.
    #[inline]
    pub fn has_rtx(&self) -> bool {
        self.rtx_marked > 0
    }

    /// The oldest outstanding message marked for retransmission; O(1) when none is.
    pub fn first_rtx(&self) -> Option<u64> {
        if self.rtx_marked == 0 {
            return None;
        }
        self.outstanding_seqs().find(|&q| self.slot(q).rtx)
    }

    pub fn slot(&self, seq: u64) -> &Slot {
        &self.slots[self.idx(seq)]
    }

    pub fn slot_mut(&mut self, seq: u64) -> &mut Slot {
        let i = self.idx(seq);
        &mut self.slots[i]
    }

    /// The bytes of message `seq` held in the ring: all of it, or the part before its
    /// [`ExtRef`].
    pub fn payload(&self, seq: u64) -> &[u8] {
        let i = self.idx(seq);
        let slot = &self.slots[i];
        let held = slot.len - slot.ext.map_or(0, |e| e.len as usize);
        if inline(slot.ext.is_some(), held) {
            return &self.heads[i][..held];
        }
        let off = i * self.slot_size;
        &self.data[off..off + held]
    }

    /// Copies into the ring the bytes of every held message whose [`ExtRef`] names memory
    /// `key` (sent and awaiting acknowledgement, or not sent yet), read by `read` into the
    /// slice given (false: it could not, and the bytes go as zeros, as a transmit would send
    /// them); from then on the message is its own and no longer names the memory. For memory
    /// about to be taken away: whatever is sent or retransmitted later is what it held now.
    /// Every message fits its slot (`push_ext`'s caller checked the whole length). Returns
    /// how many messages were copied.
    pub fn materialize(
        &mut self,
        key: u32,
        mut read: impl FnMut(&ExtRef, &mut [u8]) -> bool,
    ) -> usize {
        if self.ext_keys & key_bit(key) == 0 {
            return 0;
        }
        let mut copied = 0;
        for seq in self.head..self.tail {
            let i = self.idx(seq);
            let Some(ext) = self.slots[i].ext.filter(|e| e.key == key) else {
                continue;
            };
            let len = self.slots[i].len;
            if len > self.slot_size {
                // Cannot be (`Association::check_send` bounds a message by the slot), and
                // copying would run into the next slot: left naming the memory.
                debug_assert!(
                    false,
                    "a message of {len} bytes in a slot of {}",
                    self.slot_size
                );
                continue;
            }
            let held = len - ext.len as usize;
            let off = i * self.slot_size;
            if inline(true, held) {
                let head = self.heads[i];
                self.data[off..off + held].copy_from_slice(&head[..held]);
            }
            let tail = &mut self.data[off + held..off + len];
            if !read(&ext, tail) {
                tail.fill(0);
            }
            self.slots[i].ext = None;
            copied += 1;
        }
        copied
    }

    /// Sequence number of the first message the last [`SendQueue::clear`] dropped: those
    /// below it that were freed before were acknowledged.
    pub fn dropped_from(&self) -> u64 {
        self.dropped_from
    }

    /// Drops every message (restart or close); returns how many were dropped unacknowledged.
    pub fn clear(&mut self) -> u64 {
        self.dropped_from = self.head;
        let n = self.tail - self.head;
        for seq in self.head..self.sent {
            let i = self.idx(seq);
            self.slots[i].rtx = false;
        }
        self.rtx_marked = 0;
        self.ext_keys = 0;
        self.head = self.tail;
        self.sent = self.tail;
        n
    }

    pub fn heap_bytes(&self) -> usize {
        self.data.len()
            + self.heads.len() * HEAD_INLINE
            + self.slots.len() * core::mem::size_of::<Slot>()
    }
}

/// Memory `key`'s bit in [`SendQueue`]'s summary of the memory its messages name.
fn key_bit(key: u32) -> u64 {
    1 << (key % 64)
}

/// Whether a message's `held` bytes live in `heads` (a zero-copy message's short head) rather
/// than in `data`.
fn inline(zero_copy: bool, held: usize) -> bool {
    zero_copy && held <= HEAD_INLINE
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each message's held bytes come back as pushed, whichever store holds them (a short
    /// zero-copy head, a long zero-copy head, a copied message), around the ring twice.
    #[test]
    fn payload_returns_each_message_as_pushed() {
        let mut q = SendQueue::new(4, 64);
        let ext = |len| {
            Some(ExtRef {
                key: 1,
                offset: 0,
                len,
            })
        };
        for round in 0u8..3 {
            let short: Vec<u8> = (0..16).map(|b| b ^ round).collect();
            let long: Vec<u8> = (0..40).map(|b| b ^ round ^ 0x55).collect();
            let copied: Vec<u8> = (0..60).map(|b| b ^ round ^ 0xaa).collect();
            let a = q.push_ext(1, 18, &short, ext(1400));
            let b = q.push_ext(1, 18, &long, ext(1000));
            let c = q.push_ext(2, 18, &copied, None);
            assert_eq!(q.payload(a), &short[..]);
            assert_eq!(q.payload(b), &long[..]);
            assert_eq!(q.payload(c), &copied[..]);
            assert_eq!(q.slot(a).len, 16 + 1400);
            for _ in 0..3 {
                q.mark_sent();
                q.pop_front();
            }
        }
    }

    /// Memory about to be taken away: every held message that names it, sent or not, has its
    /// bytes copied into its slot and names it no more, whatever store held its head; a message
    /// of other memory, and a copied one, stay as they were. What a later read of the
    /// memory would have said does not matter any more.
    #[test]
    fn messages_naming_memory_taken_away_are_copied_in() {
        let mut q = SendQueue::new(8, 2048);
        let ext = |key, len| {
            Some(ExtRef {
                key,
                offset: 100,
                len,
            })
        };
        let short = [7u8; 16];
        let long = [8u8; 40];
        let a = q.push_ext(1, 18, &short, ext(3, 1400));
        let b = q.push_ext(1, 18, &long, ext(3, 1000));
        let other = q.push_ext(1, 18, &short, ext(4, 500));
        let copied = q.push_ext(1, 18, &[9u8; 60], None);
        q.mark_sent(); // `a` awaits acknowledgement, the others their first transmission
        let memory: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
        let n = q.materialize(3, |e, out| {
            out.copy_from_slice(&memory[e.offset as usize..][..out.len()]);
            true
        });
        assert_eq!(n, 2);
        for (seq, head, len) in [(a, &short[..], 1400), (b, &long[..], 1000)] {
            assert_eq!(q.slot(seq).ext, None);
            assert_eq!(q.slot(seq).len, head.len() + len);
            let p = q.payload(seq);
            assert_eq!(&p[..head.len()], head);
            assert_eq!(&p[head.len()..], &memory[100..100 + len]);
        }
        assert_eq!(q.slot(other).ext, ext(4, 500));
        assert_eq!(q.payload(other), &short[..]);
        assert_eq!(q.payload(copied), &[9u8; 60][..]);
        // Memory that could not be read goes as zeros; nothing names key 4 afterwards.
        assert_eq!(q.materialize(4, |_, _| false), 1);
        assert_eq!(&q.payload(other)[16..], &[0u8; 500][..]);
        assert_eq!(q.materialize(4, |_, _| panic!("read twice")), 0);
        // The summary that lets a queue be skipped never skips a message still held: not
        // after others left, nor for memory sharing a bit with another (5 and 69).
        q.push_ext(1, 18, &short, ext(5, 700));
        q.push_ext(1, 18, &short, ext(69, 700));
        q.push_ext(1, 18, &short, ext(6, 700));
        while q.next_unsent().is_some() {
            q.mark_sent();
        }
        for _ in 0..5 {
            q.pop_front(); // a, b, other, copied, and the message of 5
        }
        let read = |_: &ExtRef, out: &mut [u8]| {
            out.fill(1);
            true
        };
        assert_eq!(q.materialize(5, read), 0, "none of 5 is held");
        assert_eq!(q.materialize(69, read), 1);
        assert_eq!(q.materialize(6, read), 1);
        assert_eq!(q.materialize(6, |_, _| panic!("nothing names 6")), 0);
    }

    /// A ring whose size is not a power of two (`send_slots` is any number up to 32767) takes
    /// the division path; the masked one must agree with it. Messages numbered past several
    /// laps land where their number modulo the ring says, whichever path computed it.
    #[test]
    fn slot_indices_wrap_for_any_ring_size() {
        for slots in [1usize, 3, 4, 5, 8, 1000, 1024] {
            let mut q = SendQueue::new(slots, 8);
            for n in 0..(3 * slots as u64 + 2) {
                let seq = q.push_ext(0, 0, &n.to_be_bytes(), None);
                assert_eq!(seq, n);
                assert_eq!(
                    q.idx(seq),
                    (n % slots as u64) as usize,
                    "{slots} slots, {n}"
                );
                assert_eq!(q.payload(seq), &n.to_be_bytes()[..], "{slots} slots, {n}");
                q.mark_sent();
                q.pop_front();
            }
        }
    }
}
