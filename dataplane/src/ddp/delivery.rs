//! Receive side: DDP Message completion and in-order Delivery for one DDP stream and direction
//! (RFC 5041 §5.3, §5.4; RFC 5043 §5.2.1, §10).
//!
//! SCTP hands DDP Segments up unordered (RFC 5043 §10: every DATA chunk has U = 1), and each
//! segment is validated and Placed as soon as it arrives. Delivery is stricter: a DDP Message is
//! Delivered to the ULP "if and only if" its last segment had the L flag set, all of its segments
//! and all preceding messages have been Placed, and each preceding message has been Delivered
//! (RFC 5041 §5.4), so messages reach the ULP "in the order they were sent by the Data Source",
//! "at most once" (§5.3). The order is the DDP-SSN's: consecutive per stream and direction, with
//! no gaps within a DDP Stream Session (RFC 5043 §5.2.1, §6).
//!
//! [`StreamDelivery`] is that bookkeeping, and nothing else: it never sees payload bytes.
//!
//! # How it works
//!
//! Every DDP-SSN is mapped to an *absolute* segment index (`u64`, 0 for the stream's first
//! DDP-SSN), so a message may span any number of 16-bit wraps. The tracker keeps:
//!
//! - `cum`: the absolute index of the first segment not yet Placed; everything before it has
//!   been. The receive window is `[cum, cum + window)` (RFC 5043 §10).
//! - a ring bitmap, one bit per index in the window: "Placed". A bit is cleared as soon as `cum`
//!   passes it, so the bitmap only ever describes the window.
//! - a min-heap of the L segments not yet Delivered, keyed by absolute index, each with its
//!   [`MessageInfo`], and of the session control chunks interleaved with them (which end no
//!   message but bound the next one, [`StreamDelivery::on_control`]). It holds at most
//!   `max_pending_messages`; 256 entries are allocated up front and it grows from there only
//!   while a peer really has that many messages waiting behind one missing chunk.
//! - `base`: the absolute index of the first segment of the next message to Deliver.
//!
//! The next message is ready exactly when the heap's smallest L index is below `cum`: all its
//! segments and all earlier ones are then Placed, no earlier L is pending (it would be smaller),
//! so every earlier message has been Delivered. Per segment: one bit set, amortised O(1)
//! word-at-a-time advance of `cum`, and for an L segment one heap push and one pop,
//! O(log `max_pending_messages`).
//!
//! # Choices where the RFCs leave room
//!
//! - **The window is anchored at the first unplaced segment, not at the first undelivered
//!   message.** RFC 5043 §10 bounds the *Data Chunks* in flight below 32768, not the size of a
//!   DDP Message: a 64 MiB RDMA Write at a MULPDU of 1450 is about 46 000 segments. Anchoring at
//!   the undelivered message would deadlock any message of `window` segments or more; anchored at
//!   `cum`, a message of any length completes, and its segment count is kept as a `u64`.
//! - **A DDP-SSN behind `cum` is a [`DeliveryError::Duplicate`]**, one ahead of the window is
//!   [`DeliveryError::OutOfWindow`]. With a window of at most 32768 the two halves of the 16-bit
//!   circle cannot be confused (RFC 5043 §10: "the DDP-SSN can be used without special logic ...
//!   when the maximum number of in-flight messages is less than 32768").
//! - **Only the L segment's [`MessageInfo`] is kept.** It is the one that knows the untagged ULP
//!   Message Length (RFC 5041 §5.4: "adding the MO and the ULP Payload length in the last DDP
//!   Segment"), and it carries the STag, QN, MSN and RsvdULP of the whole message (RFC 5041 §5.2:
//!   QN and MSN identify the message; one STag per tagged message). Intermediate segments cost
//!   one bit.
//! - **The RsvdULP field is part of [`MessageInfo`]**: RFC 5041 §5.4 "MUST provide the RsvdULP
//!   Field of the DDP Message to the ULP when the DDP Message is delivered" (RDMAP keeps its
//!   opcode there).
//! - **Checking is separate from recording.** [`StreamDelivery::check`] lets the receive path
//!   refuse a segment *before* placing it (RFC 5043 §10: "SHOULD NOT allocate resources on the
//!   assumption that DDP-SSNs are valid without first performing such a validity check");
//!   [`StreamDelivery::on_placed`] checks again and records. An error leaves the tracker as it
//!   was. What to do about it (drop a duplicate; terminate the stream on an invalid DDP-SSN,
//!   which RFC 5043 §10 allows) is the caller's decision.

use core::cmp::Ordering;
use core::fmt;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use crate::wire::ddp::{Header, SegmentRepr};

/// The largest receive window: below half the 16-bit DDP-SSN space, so that serial arithmetic is
/// unambiguous (RFC 5043 §10: fewer than 32768 Data Chunks in flight per stream).
pub const MAX_WINDOW: u16 = 32768;
/// The window a stream gets unless configured otherwise: the largest.
pub const DEFAULT_WINDOW: u16 = MAX_WINDOW;
/// L segments a stream may hold Placed but not yet Delivered unless configured otherwise: as
/// many as the window, so no sender within RFC 5043 §10 can exceed it (one late chunk with a
/// window's worth of small messages placed behind it is legal).
pub const DEFAULT_MAX_PENDING_MESSAGES: usize = MAX_WINDOW as usize;
/// Pending-message entries allocated up front; the table grows (rarely: only while that many
/// messages wait behind one missing chunk) up to its maximum.
pub const PREALLOCATED_PENDING: usize = 256;

const WORD_BITS: usize = u64::BITS as usize;

/// What the ULP is told about a DDP Message when it is Delivered (RFC 5041 §5.4), taken from the
/// message's last segment (the one with L set).
///
/// It also keeps what else that segment's DDP header said (its control octet, its TO or MO,
/// its payload length): an error the ULP finds in the message once delivered is reported with
/// the DDP header and length of that segment (RFC 5041 §7.1, RFC 5040 §4.8), which are gone by
/// then. They fit the padding of the pending entry ([`StreamDelivery::PENDING_ENTRY_BYTES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageInfo {
    /// A Tagged DDP Message (RFC 5041 §4.2, §5.1.1). The STag of a zero-length tagged message is
    /// whatever the segment carried: RFC 5041 §5.2 says not to check it.
    Tagged {
        /// The Tagged Buffer the message was Placed into.
        stag: u32,
        /// RsvdULP, 8 bits, for the ULP (RFC 5041 §4.2, §5.4).
        rsvd_ulp: u8,
        /// The L segment's DDP control octet as received, reserved bits included.
        control: u8,
        /// The L segment's TO.
        to: u64,
        /// The L segment's payload length.
        last_len: u32,
    },
    /// An Untagged DDP Message (RFC 5041 §4.3, §5.1.2).
    Untagged {
        /// Queue Number.
        qn: u32,
        /// Message Sequence Number.
        msn: u32,
        /// ULP Message Length: MO + ULP Payload length of the L segment (RFC 5041 §5.4). Only
        /// the L segment knows it, which is why only the L segment's info is kept.
        message_len: u32,
        /// RsvdULP, 40 bits in wire order, for the ULP (RFC 5041 §4.3, §5.4).
        rsvd_ulp: [u8; 5],
        /// The L segment's DDP control octet as received, reserved bits included.
        control: u8,
        /// The L segment's payload length (its MO is `message_len` less this).
        last_len: u32,
    },
}

impl MessageInfo {
    /// The delivery info of a parsed segment with L set, whose DDP control octet as received is
    /// `control`. `None` if L is not set, or if the untagged MO + payload length does not fit
    /// the 32-bit ULP Message Length (RFC 5041 §5.2: "MUST be less than 2^32"; placement should
    /// have refused such a segment already).
    pub fn of_last_segment(segment: &SegmentRepr<'_>, control: u8) -> Option<MessageInfo> {
        if !segment.last {
            return None;
        }
        let last_len = u32::try_from(segment.payload.len()).ok()?;
        Some(match segment.header {
            Header::Tagged(h) => MessageInfo::Tagged {
                stag: h.stag,
                rsvd_ulp: h.rsvd_ulp,
                control,
                to: h.to,
                last_len,
            },
            Header::Untagged(h) => MessageInfo::Untagged {
                qn: h.qn,
                msn: h.msn,
                message_len: h.mo.checked_add(last_len)?,
                rsvd_ulp: h.rsvd_ulp,
                control,
                last_len,
            },
        })
    }
}

/// A DDP Message ready for the ULP, returned by [`StreamDelivery::poll_delivery`] in DDP-SSN
/// order, each exactly once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Delivered {
    /// DDP-SSN of the message's first segment.
    pub first_ddp_ssn: u16,
    /// DDP-SSN of its last segment, the one with L set.
    pub last_ddp_ssn: u16,
    /// Number of DDP Segments: `last - first + 1` counted without wrapping, so it can exceed
    /// 65536 for a message longer than the DDP-SSN space. 1 for a zero-length message.
    pub segments: u64,
    /// From the L segment.
    pub info: MessageInfo,
}

/// Why a segment was not recorded. The tracker is left as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryError {
    /// The DDP-SSN is ahead of the receive window: no gap of unreceived Data Chunks could account
    /// for it (RFC 5043 §10). The RFC allows terminating the stream.
    OutOfWindow,
    /// The DDP-SSN was already Placed (it is in the window and recorded, or behind it). Placing
    /// again is harmless (RFC 5041 §5.3 "MAY perform Placement ... more than once"); delivering
    /// again is not ("at most once"), hence the refusal.
    Duplicate,
    /// An L segment, but `max_pending_messages` messages already await Delivery. Poll
    /// deliveries, or size the table for the ULP's outstanding messages.
    TooManyPending,
}

impl fmt::Display for DeliveryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeliveryError::OutOfWindow => "DDP-SSN outside the receive window",
            DeliveryError::Duplicate => "DDP-SSN already placed",
            DeliveryError::TooManyPending => "too many DDP Messages awaiting delivery",
        })
    }
}

impl std::error::Error for DeliveryError {}

/// A segment's place in the window, as [`StreamDelivery::checked`] found it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checked(u64);

/// A pending L segment: absolute index and info. Ordered so that [`BinaryHeap`] (a max-heap)
/// yields the smallest index first. Indices are unique in the heap (duplicates are refused).
#[derive(Debug, Clone, Copy)]
struct PendingLast {
    index: u64,
    /// `None` for a session control chunk: a boundary that delivers nothing.
    info: Option<MessageInfo>,
}

impl PartialEq for PendingLast {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index
    }
}

impl Eq for PendingLast {}

impl PartialOrd for PendingLast {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PendingLast {
    fn cmp(&self, other: &Self) -> Ordering {
        other.index.cmp(&self.index)
    }
}

/// Completion and in-order Delivery of the DDP Messages of one DDP stream, one direction
/// (RFC 5041 §5.3, §5.4). See the [module documentation](self) for the design.
///
/// Memory: one bit per DDP-SSN of the window rounded up to a power of two (at least 64), plus
/// [`StreamDelivery::PENDING_ENTRY_BYTES`] per pending message, 256 of them allocated by
/// [`StreamDelivery::new`] and at most `max_pending_messages`; [`StreamDelivery::heap_bytes`]
/// gives the total. With the defaults: 4096 + 256 × 32 = 12288 bytes, growing to at most
/// 4096 + 32768 × 32 (1 MiB) under a peer that keeps a whole window of messages waiting
/// (counted for the owner's receive buffer, [`StreamDelivery::set_charge`], and given back
/// once they are delivered).
#[derive(Debug)]
pub struct StreamDelivery {
    /// DDP-SSN of absolute index 0.
    first_ddp_ssn: u16,
    /// Accepted span ahead of `cum`, 1..=32768.
    window: u16,
    /// Ring of "Placed" bits for absolute indices `[cum, cum + window)`, slot `index & mask`.
    placed: Box<[u64]>,
    /// Ring size in bits minus one (a power of two minus one).
    mask: u64,
    /// First absolute index not yet Placed; everything before it has been.
    cum: u64,
    /// First absolute index of the next message to Deliver.
    base: u64,
    /// The L segment Placed in order (at `cum`) while nothing else was pending: below every
    /// index in `pending` (later placements are at or above the new `cum`), so it is delivered
    /// first, without the heap. A message per segment (small writes, sends) never touches
    /// the heap; the heap's pop was a tenth of the receive path's cycles there.
    front: Option<PendingLast>,
    /// L segments Placed and not yet Delivered, smallest index on top.
    pending: BinaryHeap<PendingLast>,
    max_pending: usize,
    /// Where the entries of `pending` are counted for the owner's receive buffer
    /// ([`StreamDelivery::set_charge`]), and how many are counted there now.
    charge: Option<Arc<AtomicUsize>>,
    charged: usize,
}

impl Clone for StreamDelivery {
    /// A copy counted nowhere: its entries are not the owner's.
    fn clone(&self) -> StreamDelivery {
        StreamDelivery {
            first_ddp_ssn: self.first_ddp_ssn,
            window: self.window,
            placed: self.placed.clone(),
            mask: self.mask,
            cum: self.cum,
            base: self.base,
            front: self.front,
            pending: self.pending.clone(),
            max_pending: self.max_pending,
            charge: None,
            charged: 0,
        }
    }
}

impl Drop for StreamDelivery {
    fn drop(&mut self) {
        if let Some(c) = &self.charge {
            c.fetch_sub(self.charged, AtomicOrdering::Relaxed);
        }
    }
}

impl StreamDelivery {
    /// Bytes of one pending-message entry.
    pub const PENDING_ENTRY_BYTES: usize = core::mem::size_of::<PendingLast>();

    /// A tracker for a stream whose first DDP Segment has DDP-SSN `first_ddp_ssn`.
    ///
    /// The DDP-SSN starts at zero for each DDP Stream Session (RFC 5043 §6.1) and the session's
    /// control messages consume DDP-SSNs too (RFC 5043 §5.2.3: every chunk carries one), so the
    /// first DDP Segment of a stream usually has DDP-SSN 1; the caller says which.
    ///
    /// `window` is how far ahead of the first unplaced DDP-SSN a segment may be (RFC 5043 §10),
    /// and `max_pending_messages` how many messages may have their L segment Placed while not
    /// yet Delivered. A value of `max_pending_messages >= window` can never be exceeded by a
    /// sender that keeps to the window and a ULP that polls after each burst.
    ///
    /// # Panics
    ///
    /// If `window` is 0 or above [`MAX_WINDOW`], or `max_pending_messages` is 0: configuration
    /// errors, not peer input.
    pub fn new(first_ddp_ssn: u16, window: u16, max_pending_messages: usize) -> StreamDelivery {
        assert!(
            (1..=MAX_WINDOW).contains(&window),
            "DDP receive window must be 1..=32768 (RFC 5043 §10), got {window}"
        );
        assert!(max_pending_messages > 0, "max_pending_messages must be > 0");
        let bits = usize::from(window).next_power_of_two().max(WORD_BITS);
        StreamDelivery {
            first_ddp_ssn,
            window,
            placed: vec![0u64; bits / WORD_BITS].into_boxed_slice(),
            mask: (bits - 1) as u64,
            cum: 0,
            base: 0,
            front: None,
            pending: BinaryHeap::with_capacity(max_pending_messages.min(PREALLOCATED_PENDING)),
            max_pending: max_pending_messages,
            charge: None,
            charged: 0,
        }
    }

    /// Entries the heap takes of the owner's receive buffer: those waiting, or the memory it
    /// grew to beyond the entries allocated up front, if more (it keeps its capacity until
    /// it empties: a peer leaving one message waiting after a burst keeps it all).
    fn chargeable(&self) -> usize {
        self.pending
            .len()
            .max(self.pending.capacity().saturating_sub(PREALLOCATED_PENDING))
    }

    /// Brings the owner's count in line with [`StreamDelivery::chargeable`]. The rare path:
    /// only the heap's changes call it.
    fn recharge(&mut self) {
        let Some(c) = &self.charge else {
            return;
        };
        let now = self.chargeable();
        if now > self.charged {
            c.fetch_add(now - self.charged, AtomicOrdering::Relaxed);
        } else {
            c.fetch_sub(self.charged - now, AtomicOrdering::Relaxed);
        }
        self.charged = now;
    }

    /// Counts the messages waiting in the pending heap (each
    /// [`StreamDelivery::PENDING_ENTRY_BYTES`] of memory) in `charge`, from now until the
    /// tracker is dropped: a connection charges them against its receive buffer (RFC 9260
    /// §6.2, the a_rwnd it advertises), so that a peer keeping a window of zero-length
    /// messages waiting behind one missing DDP-SSN (32768 of them, 1 MiB a stream) is told
    /// less room instead. The in-order path never touches it.
    pub fn set_charge(&mut self, charge: Arc<AtomicUsize>) {
        if let Some(old) = self.charge.replace(charge) {
            old.fetch_sub(self.charged, AtomicOrdering::Relaxed);
        }
        self.charged = 0;
        self.recharge();
    }

    /// A tracker with [`DEFAULT_WINDOW`] and [`DEFAULT_MAX_PENDING_MESSAGES`].
    pub fn with_defaults(first_ddp_ssn: u16) -> StreamDelivery {
        StreamDelivery::new(first_ddp_ssn, DEFAULT_WINDOW, DEFAULT_MAX_PENDING_MESSAGES)
    }

    /// Whether a segment with this DDP-SSN and L flag would be accepted by
    /// [`on_placed`](Self::on_placed), without recording anything: the validity check RFC 5043
    /// §10 asks for before resources (here: the ULP buffer) are committed to a segment.
    pub fn check(&self, ddp_ssn: u16, last: bool) -> Result<(), DeliveryError> {
        self.checked(ddp_ssn, last).map(|_| ())
    }

    /// Records that the segment with DDP-SSN `ddp_ssn` has been Placed. `last` is `None` for an
    /// intermediate segment (L = 0) and the message's [`MessageInfo`] for the segment with L set
    /// (RFC 5041 §4.1); see [`MessageInfo::of_last_segment`].
    ///
    /// Errors as [`check`](Self::check), in which case nothing is recorded. Then call
    /// [`poll_delivery`](Self::poll_delivery) until it returns `None`.
    pub fn on_placed(
        &mut self,
        ddp_ssn: u16,
        last: Option<MessageInfo>,
    ) -> Result<(), DeliveryError> {
        let index = self.checked(ddp_ssn, last.is_some())?;
        self.place_checked(index, last);
        Ok(())
    }

    /// [`check`](Self::check), returning the segment's place for
    /// [`place_checked`](Self::place_checked).
    pub(crate) fn checked(&self, ddp_ssn: u16, last: bool) -> Result<Checked, DeliveryError> {
        let index = self.index_of(ddp_ssn)?;
        if last && self.pending_messages() >= self.max_pending {
            return Err(DeliveryError::TooManyPending);
        }
        Ok(Checked(index))
    }

    /// [`on_placed`](Self::on_placed) for a segment [`checked`](Self::checked) with nothing
    /// recorded since (the receive path checks, places, then records: one window lookup, not
    /// two).
    pub(crate) fn place_checked(&mut self, at: Checked, last: Option<MessageInfo>) {
        let index = at.0;
        let (word, bit) = self.slot(index);
        self.placed[word] |= 1 << bit;
        if let Some(info) = last {
            self.push_pending(PendingLast {
                index,
                info: Some(info),
            });
        }
        if index == self.cum {
            self.advance();
        }
    }

    /// Whether every DDP-SSN before the segment `at` has been Placed (or was a session
    /// control chunk that arrived): the segment is not ahead of a gap, so any earlier segment
    /// of its message has been through the receive path already. For an error path.
    pub(crate) fn nothing_missing_before(&self, at: Checked) -> bool {
        at.0 == self.cum
    }

    /// The ULP Message Length (RFC 5041 §5.4) of untagged message `msn` of queue `qn`, if its
    /// L segment is Placed and the message not yet Delivered. A scan of the pending messages:
    /// for an error path only.
    pub(crate) fn placed_untagged_len(&self, qn: u32, msn: u32) -> Option<u32> {
        self.front
            .iter()
            .chain(self.pending.iter())
            .find_map(|p| match p.info {
                Some(MessageInfo::Untagged {
                    qn: q,
                    msn: m,
                    message_len,
                    ..
                }) if q == qn && m == msn => Some(message_len),
                _ => None,
            })
    }

    /// Whether `ddp_ssn` is the next to be Placed while no Placed message waits for Delivery:
    /// the common case of in-order traffic, which [`place_next`](Self::place_next) records
    /// without the window lookup. Such a segment passes [`check`](Self::check) whatever its L
    /// flag (in the window at `cum`, not Placed, no message pending).
    #[inline(always)]
    pub(crate) fn is_next_alone(&self, ddp_ssn: u16) -> bool {
        self.front.is_none() && self.pending.is_empty() && ddp_ssn == self.ssn_of(self.cum)
    }

    /// [`place_checked`](Self::place_checked) and then [`poll_delivery`](Self::poll_delivery)
    /// until `None`, for a segment [`is_next_alone`](Self::is_next_alone) accepted with
    /// nothing recorded since: the message its L segment (`last`) completes, if any. Nothing
    /// else can be delivered, as nothing else was pending.
    #[inline(always)]
    pub(crate) fn place_next(&mut self, last: Option<MessageInfo>) -> Option<Delivered> {
        debug_assert!(self.front.is_none() && self.pending.is_empty());
        let index = self.cum;
        debug_assert!({
            let (word, bit) = self.slot(index);
            self.placed[word] & (1 << bit) == 0
        });
        let (word, bit) = self.slot(index + 1);
        if self.placed[word] & (1 << bit) == 0 {
            // Nothing Placed after it: `cum` moves on by one, and the bit it leaves stays
            // clear for the index `window` on.
            self.cum = index + 1;
        } else {
            // Later segments Placed out of order (none of them an L) follow it: `cum` runs
            // over them as `place_checked` would.
            let (word, bit) = self.slot(index);
            self.placed[word] |= 1 << bit;
            self.advance();
        }
        self.delivered(PendingLast {
            index,
            info: Some(last?),
        })
    }

    /// Records that the chunk with DDP-SSN `ddp_ssn` was a session control message (RFC 5043
    /// §5.2.3: control messages take DDP-SSNs too). It delivers nothing, but no message spans
    /// it, and no later message is delivered before it has arrived: the active side's first
    /// segments wait for the Accept that precedes them in DDP-SSN order (RFC 5043 §6.1,
    /// RFC 5041 §5.4).
    pub fn on_control(&mut self, ddp_ssn: u16) -> Result<(), DeliveryError> {
        self.check(ddp_ssn, true)?;
        let index = self.index_of(ddp_ssn)?;
        let (word, bit) = self.slot(index);
        self.placed[word] |= 1 << bit;
        self.push_pending(PendingLast { index, info: None });
        if index == self.cum {
            self.advance();
        }
        Ok(())
    }

    /// The next DDP Message the ULP may have, in DDP-SSN order (RFC 5041 §5.3, §5.4), or `None`
    /// if the next one is not complete yet. Each message is returned once.
    ///
    /// Called after every segment and nearly always to hear `None` a second time: that test
    /// is inlined, the rest is not.
    #[inline]
    pub fn poll_delivery(&mut self) -> Option<Delivered> {
        match self.front {
            Some(f) if f.index >= self.cum => None,
            // The in-order message just completed (each segment of small writes): taken here,
            // without the heap's out-of-line path and its frame (27 instructions a message).
            Some(f) => {
                self.front = None;
                self.delivered(f).or_else(|| self.take_delivery())
            }
            None if self.pending.peek().is_some_and(|p| p.index < self.cum) => self.take_delivery(),
            None => None,
        }
    }

    /// The message `last` ends (the one after the last delivered), or `None` for a control
    /// chunk, which ends none; either way the next message starts after it.
    #[inline]
    fn delivered(&mut self, last: PendingLast) -> Option<Delivered> {
        let first = self.base;
        self.base = last.index + 1;
        let info = last.info?;
        Some(Delivered {
            first_ddp_ssn: self.ssn_of(first),
            last_ddp_ssn: self.ssn_of(last.index),
            segments: last.index - first + 1,
            info,
        })
    }

    #[inline(never)]
    fn take_delivery(&mut self) -> Option<Delivered> {
        loop {
            let last = match self.front {
                Some(f) if f.index >= self.cum => return None,
                Some(f) => {
                    self.front = None;
                    f
                }
                None => {
                    if self.pending.peek()?.index >= self.cum {
                        return None;
                    }
                    let last = self.pending.pop()?;
                    // A burst that grew the heap gives its memory back as it is delivered:
                    // halved once a quarter full, so that the capacity charged
                    // (`chargeable`) is at most four times what waits (kept while one
                    // message waited, it pinned a lossy path's a_rwnd low for as long as the
                    // loss lasted). Each halving copies at most a quarter of the capacity:
                    // amortised, a constant a message.
                    let cap = self.pending.capacity();
                    if cap > PREALLOCATED_PENDING && self.pending.len() * 4 <= cap {
                        self.pending
                            .shrink_to((self.pending.len() * 2).max(PREALLOCATED_PENDING));
                    }
                    self.recharge();
                    last
                }
            };
            // A control chunk: nothing to deliver, the next message starts after it.
            if let Some(d) = self.delivered(last) {
                return Some(d);
            }
        }
    }

    /// DDP-SSN of the first segment not yet Placed: the left edge of the receive window.
    pub fn next_expected_ddp_ssn(&self) -> u16 {
        self.ssn_of(self.cum)
    }

    /// DDP-SSN of the first segment of the next message to be Delivered.
    pub fn next_delivery_ddp_ssn(&self) -> u16 {
        self.ssn_of(self.base)
    }

    /// Messages whose L segment is Placed but that have not been returned by
    /// [`poll_delivery`](Self::poll_delivery).
    pub fn pending_messages(&self) -> usize {
        self.pending.len() + usize::from(self.front.is_some())
    }

    /// Records a pending L segment (or control chunk) at `entry.index`, not yet Placed past.
    fn push_pending(&mut self, entry: PendingLast) {
        if self.front.is_none() && self.pending.is_empty() && entry.index == self.cum {
            self.front = Some(entry);
        } else {
            self.pending.push(entry);
            self.recharge();
        }
    }

    /// The receive window, in DDP-SSNs.
    pub fn window(&self) -> u16 {
        self.window
    }

    /// Bytes allocated by this tracker outside the struct itself: the bitmap and the
    /// pending-message table.
    pub fn heap_bytes(&self) -> usize {
        core::mem::size_of_val(&*self.placed)
            + self.pending.capacity() * core::mem::size_of::<PendingLast>()
    }

    /// Absolute index of an acceptable DDP-SSN: within `[cum, cum + window)` and not yet Placed.
    /// Serial arithmetic modulo 2^16: offsets in the upper half of the circle are behind `cum`,
    /// so already Placed (RFC 5043 §10).
    fn index_of(&self, ddp_ssn: u16) -> Result<u64, DeliveryError> {
        let offset = ddp_ssn.wrapping_sub(self.ssn_of(self.cum));
        if offset >= MAX_WINDOW {
            return Err(DeliveryError::Duplicate);
        }
        if offset >= self.window {
            return Err(DeliveryError::OutOfWindow);
        }
        let index = self.cum + u64::from(offset);
        let (word, bit) = self.slot(index);
        if self.placed[word] & (1 << bit) != 0 {
            return Err(DeliveryError::Duplicate);
        }
        Ok(index)
    }

    fn ssn_of(&self, index: u64) -> u16 {
        // Truncation is the point: DDP-SSNs are the absolute index modulo 2^16.
        self.first_ddp_ssn.wrapping_add(index as u16)
    }

    fn slot(&self, index: u64) -> (usize, u32) {
        let s = index & self.mask;
        (
            (s / WORD_BITS as u64) as usize,
            (s % WORD_BITS as u64) as u32,
        )
    }

    /// Moves `cum` over the run of Placed bits that starts at it, clearing them, a word at a
    /// time. Terminates: only bits of the window are ever set, and the ring holds the window.
    fn advance(&mut self) {
        loop {
            let (word, bit) = self.slot(self.cum);
            let bits = self.placed[word] >> bit;
            // Trailing ones of the shifted word; the zeros shifted in stop the count at the
            // word's end.
            let run = (!bits).trailing_zeros();
            if run == 0 {
                return;
            }
            let clear = if run == u64::BITS {
                u64::MAX
            } else {
                ((1u64 << run) - 1) << bit
            };
            self.placed[word] &= !clear;
            self.cum += u64::from(run);
            if bit + run < u64::BITS {
                return;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;
    use crate::wire::ddp::{SegmentPacket, UntaggedHeader};
    use proptest::prelude::*;

    use crate::splitmix::SplitMix64;

    /// A message as the Data Source sent it: how many segments, and its info.
    #[derive(Debug, Clone, Copy)]
    struct Msg {
        segments: u64,
        info: MessageInfo,
    }

    fn tagged(stag: u32) -> MessageInfo {
        MessageInfo::Tagged {
            stag,
            rsvd_ulp: 7,
            control: 0xc1,
            to: 0,
            last_len: 0,
        }
    }

    fn untagged(msn: u32, message_len: u32) -> MessageInfo {
        MessageInfo::Untagged {
            qn: 1,
            msn,
            message_len,
            rsvd_ulp: [1, 2, 3, 4, 5],
            control: 0x41,
            last_len: 0,
        }
    }

    /// A mix of tagged, untagged and zero-length (one segment) messages.
    fn random_messages(rng: &mut SplitMix64, count: usize, max_segments: usize) -> Vec<Msg> {
        (0..count)
            .map(|i| {
                let i = i as u32;
                match rng.below(3) {
                    0 => Msg {
                        segments: 1,
                        info: if rng.below(2) == 0 {
                            tagged(i)
                        } else {
                            untagged(i, 0)
                        },
                    },
                    1 => Msg {
                        segments: 1 + rng.below(max_segments) as u64,
                        info: tagged(0x100 + i),
                    },
                    _ => {
                        let segments = 1 + rng.below(max_segments) as u64;
                        Msg {
                            segments,
                            info: untagged(i + 1, segments as u32 * 1482 - 100),
                        }
                    }
                }
            })
            .collect()
    }

    /// One segment per absolute index: (index, Some(info) on the L segment).
    fn segments_of(msgs: &[Msg]) -> Vec<(u64, Option<MessageInfo>)> {
        let mut out = Vec::new();
        let mut index = 0u64;
        for m in msgs {
            for k in 0..m.segments {
                out.push((index, (k + 1 == m.segments).then_some(m.info)));
                index += 1;
            }
        }
        out
    }

    /// Feeds `order` (absolute indices into `segs`) and polls after every segment, checking
    /// RFC 5041 §5.3/§5.4 against a model: after each segment, exactly the longest prefix of
    /// messages whose segments are all Placed has been Delivered, in order, each once, with the
    /// right first/last DDP-SSN, segment count and info.
    fn run(first: u16, window: u16, msgs: &[Msg], order: &[usize]) -> Result<(), TestCaseError> {
        let segs = segments_of(msgs);
        let mut t = StreamDelivery::new(first, window, msgs.len().max(1));
        let mut placed = vec![false; segs.len()];
        let mut delivered = 0usize; // messages delivered so far
        let mut firsts = Vec::with_capacity(msgs.len());
        let mut start = 0u64;
        for m in msgs {
            firsts.push(start);
            start += m.segments;
        }
        let ssn = |i: u64| first.wrapping_add(i as u16);
        let (mut prefix, mut complete) = (0usize, 0usize);
        for &i in order {
            let (index, last) = segs[i];
            t.on_placed(ssn(index), last)
                .map_err(|e| TestCaseError::fail(format!("segment {index}: {e}")))?;
            placed[i] = true;
            // Model: how many messages have all their segments, and all earlier, Placed.
            while placed.get(prefix).copied().unwrap_or(false) {
                prefix += 1;
            }
            while complete < msgs.len()
                && firsts[complete] + msgs[complete].segments <= prefix as u64
            {
                complete += 1;
            }
            while let Some(d) = t.poll_delivery() {
                prop_assert!(delivered < complete, "delivered too early: {:?}", d);
                let m = msgs[delivered];
                let f = firsts[delivered];
                prop_assert_eq!(
                    d,
                    Delivered {
                        first_ddp_ssn: ssn(f),
                        last_ddp_ssn: ssn(f + m.segments - 1),
                        segments: m.segments,
                        info: m.info,
                    }
                );
                delivered += 1;
            }
            prop_assert_eq!(delivered, complete, "a complete message was held back");
        }
        prop_assert_eq!(delivered, msgs.len());
        prop_assert_eq!(t.pending_messages(), 0);
        prop_assert_eq!(t.next_expected_ddp_ssn(), ssn(segs.len() as u64));
        prop_assert_eq!(t.next_delivery_ddp_ssn(), ssn(segs.len() as u64));
        Ok(())
    }

    /// Shuffles within consecutive blocks of `block` segments: arrival stays inside any window of
    /// at least `block` DDP-SSNs (RFC 5043 §10) while reordering heavily.
    fn block_shuffled(rng: &mut SplitMix64, n: usize, block: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..n).collect();
        for chunk in order.chunks_mut(block) {
            rng.shuffle(chunk);
        }
        order
    }

    #[test]
    fn rfc5041_5_4_in_order_arrival_delivers_each_message_at_its_l_segment() {
        let mut rng = SplitMix64(1);
        let msgs = random_messages(&mut rng, 200, 8);
        let n = segments_of(&msgs).len();
        run(1, MAX_WINDOW, &msgs, &(0..n).collect::<Vec<_>>()).unwrap();
    }

    #[test]
    fn rfc5041_5_4_reversed_arrival_delivers_everything_only_with_the_first_segment() {
        let mut rng = SplitMix64(2);
        let msgs = random_messages(&mut rng, 100, 8);
        let n = segments_of(&msgs).len();
        run(1, MAX_WINDOW, &msgs, &(0..n).rev().collect::<Vec<_>>()).unwrap();

        // And explicitly: nothing at all until DDP-SSN 1 (the first) arrives.
        let mut t = StreamDelivery::new(1, 16, 4);
        t.on_placed(4, Some(tagged(2))).unwrap();
        t.on_placed(3, None).unwrap();
        t.on_placed(2, Some(untagged(1, 10))).unwrap();
        assert_eq!(t.poll_delivery(), None);
        assert_eq!(t.pending_messages(), 2);
        t.on_placed(1, None).unwrap();
        assert_eq!(
            t.poll_delivery(),
            Some(Delivered {
                first_ddp_ssn: 1,
                last_ddp_ssn: 2,
                segments: 2,
                info: untagged(1, 10)
            })
        );
        assert_eq!(
            t.poll_delivery(),
            Some(Delivered {
                first_ddp_ssn: 3,
                last_ddp_ssn: 4,
                segments: 2,
                info: tagged(2)
            })
        );
        assert_eq!(t.poll_delivery(), None);
    }

    #[test]
    fn rfc5041_5_3_random_permutations_deliver_once_in_order_and_never_early() {
        for seed in 0..300 {
            let mut rng = SplitMix64(seed);
            let count = 1 + rng.below(60);
            let msgs = random_messages(&mut rng, count, 6);
            let mut order: Vec<usize> = (0..segments_of(&msgs).len()).collect();
            rng.shuffle(&mut order);
            if let Err(e) = run(1, MAX_WINDOW, &msgs, &order) {
                panic!("seed {seed}: {e}");
            }
        }
    }

    #[test]
    fn rfc5041_5_2_zero_length_messages_are_one_l_segment_each() {
        let mut t = StreamDelivery::new(1, 8, 8);
        // Three zero-length messages, arriving 3, 1, 2.
        t.on_placed(3, Some(tagged(3))).unwrap();
        assert_eq!(t.poll_delivery(), None);
        t.on_placed(1, Some(untagged(1, 0))).unwrap();
        let d = t.poll_delivery().unwrap();
        assert_eq!((d.first_ddp_ssn, d.last_ddp_ssn, d.segments), (1, 1, 1));
        assert_eq!(d.info, untagged(1, 0));
        assert_eq!(t.poll_delivery(), None);
        t.on_placed(2, Some(tagged(2))).unwrap();
        let d = t.poll_delivery().unwrap();
        assert_eq!((d.first_ddp_ssn, d.segments, d.info), (2, 1, tagged(2)));
        let d = t.poll_delivery().unwrap();
        assert_eq!((d.first_ddp_ssn, d.segments, d.info), (3, 1, tagged(3)));
        assert_eq!(t.poll_delivery(), None);
    }

    #[test]
    fn rfc5043_5_2_1_ddp_ssn_wraps_from_65535_to_0() {
        let mut t = StreamDelivery::new(65533, 16, 4);
        // One message of 6 segments: 65533, 65534, 65535, 0, 1, 2 (L), arriving out of order.
        for ssn in [2u16, 0, 65535, 1, 65534] {
            if ssn == 2 {
                t.on_placed(ssn, Some(tagged(9))).unwrap();
            } else {
                t.on_placed(ssn, None).unwrap();
            }
            assert_eq!(t.poll_delivery(), None);
        }
        assert_eq!(t.next_expected_ddp_ssn(), 65533);
        t.on_placed(65533, None).unwrap();
        assert_eq!(
            t.poll_delivery(),
            Some(Delivered {
                first_ddp_ssn: 65533,
                last_ddp_ssn: 2,
                segments: 6,
                info: tagged(9)
            })
        );
        assert_eq!(t.next_expected_ddp_ssn(), 3);

        // Random layouts across the wrap, many seeds.
        for seed in 0..100 {
            let mut rng = SplitMix64(1000 + seed);
            let msgs = random_messages(&mut rng, 40, 5);
            let mut order: Vec<usize> = (0..segments_of(&msgs).len()).collect();
            rng.shuffle(&mut order);
            let first = 65535 - rng.below(order.len()) as u16;
            if let Err(e) = run(first, MAX_WINDOW, &msgs, &order) {
                panic!("seed {seed}: {e}");
            }
        }
    }

    #[test]
    fn rfc5043_10_many_wraps_with_reordering_inside_a_small_window() {
        // ~300 000 segments: more than four trips around the 16-bit DDP-SSN, window 100.
        for seed in 0..3 {
            let mut rng = SplitMix64(77 + seed);
            let msgs = random_messages(&mut rng, 60_000, 9);
            let n = segments_of(&msgs).len();
            let order = block_shuffled(&mut rng, n, 100);
            if let Err(e) = run(1, 100, &msgs, &order) {
                panic!("seed {seed}: {e}");
            }
        }
    }

    #[test]
    fn rfc5043_10_message_longer_than_the_window_and_the_ddp_ssn_space_completes() {
        // A 200 000-segment tagged message (an RDMA Write of ~290 MB at MULPDU 1450) through a
        // 64-DDP-SSN window: the window follows the first unplaced segment, not the message.
        let mut rng = SplitMix64(5);
        let msgs = [
            Msg {
                segments: 200_000,
                info: tagged(0xabcd),
            },
            Msg {
                segments: 1,
                info: untagged(1, 0),
            },
        ];
        let order = block_shuffled(&mut rng, 200_001, 64);
        run(1, 64, &msgs, &order).unwrap();
    }

    #[test]
    fn rfc5043_10_ddp_ssn_ahead_of_the_window_is_refused_and_nothing_recorded() {
        let mut t = StreamDelivery::new(1, 8, 4);
        // Window [1, 9).
        assert_eq!(t.check(9, false), Err(DeliveryError::OutOfWindow));
        assert_eq!(
            t.on_placed(9, Some(tagged(1))),
            Err(DeliveryError::OutOfWindow)
        );
        assert_eq!(t.on_placed(1000, None), Err(DeliveryError::OutOfWindow));
        assert_eq!(t.pending_messages(), 0);
        t.on_placed(8, None).unwrap();
        // The window slides with the first unplaced DDP-SSN.
        t.on_placed(1, Some(tagged(1))).unwrap();
        assert_eq!(t.next_expected_ddp_ssn(), 2);
        assert_eq!(t.check(9, false), Ok(()));
        assert_eq!(t.check(10, false), Err(DeliveryError::OutOfWindow));
        // Exactly half the circle ahead is never "ahead": with the largest window it is in.
        let t = StreamDelivery::new(0, MAX_WINDOW, 1);
        assert_eq!(t.check(32767, true), Ok(()));
        assert_eq!(t.check(32768, true), Err(DeliveryError::Duplicate));
    }

    #[test]
    fn rfc5041_5_3_duplicate_ddp_ssn_is_refused_so_delivery_is_at_most_once() {
        let mut t = StreamDelivery::new(1, 8, 4);
        t.on_placed(3, Some(tagged(3))).unwrap();
        // Duplicate of a recorded segment inside the window.
        assert_eq!(t.check(3, true), Err(DeliveryError::Duplicate));
        assert_eq!(
            t.on_placed(3, Some(tagged(3))),
            Err(DeliveryError::Duplicate)
        );
        assert_eq!(t.pending_messages(), 1);
        t.on_placed(1, None).unwrap();
        t.on_placed(2, None).unwrap();
        assert_eq!(t.poll_delivery().map(|d| d.segments), Some(3));
        // Duplicates of delivered segments: behind the window.
        for ssn in [1u16, 2, 3, 0, 65535, 32772] {
            assert_eq!(
                t.on_placed(ssn, Some(tagged(3))),
                Err(DeliveryError::Duplicate),
                "{ssn}"
            );
        }
        assert_eq!(t.poll_delivery(), None);
        assert_eq!(t.pending_messages(), 0);
        assert_eq!(t.next_expected_ddp_ssn(), 4);
    }

    #[test]
    fn too_many_pending_messages_is_refused_and_nothing_recorded() {
        let mut t = StreamDelivery::new(1, 64, 2);
        t.on_placed(3, Some(tagged(3))).unwrap();
        t.on_placed(5, Some(tagged(5))).unwrap();
        assert_eq!(t.check(7, true), Err(DeliveryError::TooManyPending));
        assert_eq!(
            t.on_placed(7, Some(tagged(7))),
            Err(DeliveryError::TooManyPending)
        );
        // Intermediate segments cost no entry.
        t.on_placed(6, None).unwrap();
        t.on_placed(1, None).unwrap();
        t.on_placed(2, None).unwrap();
        t.on_placed(4, None).unwrap();
        assert_eq!(t.poll_delivery().map(|d| d.last_ddp_ssn), Some(3));
        // Room again; 7 was not recorded, so it is not a duplicate.
        t.on_placed(7, Some(tagged(7))).unwrap();
        assert_eq!(t.poll_delivery().map(|d| d.last_ddp_ssn), Some(5));
        assert_eq!(
            t.poll_delivery().map(|d| (d.first_ddp_ssn, d.segments)),
            Some((6, 2))
        );
        assert_eq!(t.poll_delivery(), None);
    }

    #[test]
    fn rfc5041_5_4_untagged_message_length_is_mo_plus_payload_of_the_l_segment() {
        // RFC 5041 §5.2's example: 2048 octets, the L segment has MO = 1482 and 566 octets.
        let header = Header::Untagged(UntaggedHeader {
            rsvd_ulp: [9, 8, 7, 6, 5],
            qn: 0,
            msn: 42,
            mo: 1482,
        });
        let payload = [0x5au8; 566];
        let mut buf = [0xa5u8; 20 + 566];
        for (last, ssn) in [(true, 2u16), (false, 1)] {
            let repr = SegmentRepr {
                ddp_ssn: ssn,
                last,
                header,
                payload: &payload,
            };
            repr.emit(&mut SegmentPacket::new_unchecked(&mut buf[..]))
                .unwrap();
            let parsed =
                SegmentRepr::parse(&SegmentPacket::new_checked(&buf[..]).unwrap()).unwrap();
            let info = MessageInfo::of_last_segment(&parsed, buf[2]);
            if !last {
                assert_eq!(info, None, "only the L segment knows the length");
                continue;
            }
            assert_eq!(
                info,
                Some(MessageInfo::Untagged {
                    qn: 0,
                    msn: 42,
                    message_len: 2048,
                    rsvd_ulp: [9, 8, 7, 6, 5],
                    control: 0x41,
                    last_len: 566,
                })
            );
        }
        // The L segment arrives first; the length is reported when the message completes.
        let mut t = StreamDelivery::with_defaults(1);
        let info = MessageInfo::Untagged {
            qn: 0,
            msn: 42,
            message_len: 2048,
            rsvd_ulp: [9, 8, 7, 6, 5],
            control: 0x41,
            last_len: 566,
        };
        t.on_placed(2, Some(info)).unwrap();
        assert_eq!(t.poll_delivery(), None);
        t.on_placed(1, None).unwrap();
        assert_eq!(t.poll_delivery().map(|d| d.info), Some(info));

        // A length that would not fit 32 bits is not a message length.
        let repr = SegmentRepr {
            ddp_ssn: 1,
            last: true,
            header: Header::Untagged(UntaggedHeader {
                rsvd_ulp: [0; 5],
                qn: 0,
                msn: 1,
                mo: u32::MAX - 10,
            }),
            payload: &payload[..11],
        };
        assert_eq!(MessageInfo::of_last_segment(&repr, 0x41), None);
    }

    #[test]
    fn rfc5043_6_1_first_ddp_ssn_is_the_callers() {
        // Active side: the Initiate consumed DDP-SSN 0, the first DDP Segment is 1.
        let mut t = StreamDelivery::new(1, 8, 1);
        assert_eq!(t.check(0, false), Err(DeliveryError::Duplicate));
        t.on_placed(1, Some(tagged(0))).unwrap();
        assert_eq!(t.poll_delivery().map(|d| d.first_ddp_ssn), Some(1));
        // Starting at 0 is as good.
        let mut t = StreamDelivery::new(0, 8, 1);
        t.on_placed(0, Some(tagged(0))).unwrap();
        assert_eq!(t.poll_delivery().map(|d| d.first_ddp_ssn), Some(0));
    }

    #[test]
    fn memory_is_fixed_at_construction() {
        let t = StreamDelivery::with_defaults(1);
        assert_eq!(StreamDelivery::PENDING_ENTRY_BYTES, 32);
        assert_eq!(t.heap_bytes(), 4096 + 256 * 32);
        // Small windows still get one whole word; odd windows round up to a power of two.
        assert_eq!(StreamDelivery::new(0, 1, 1).heap_bytes(), 8 + 32);
        assert_eq!(StreamDelivery::new(0, 100, 1).heap_bytes(), 16 + 32);
        // Full use of a pending table within the preallocation allocates nothing more.
        let mut t = StreamDelivery::new(0, 128, 128);
        let before = t.heap_bytes();
        for ssn in (0..128u16).rev() {
            t.on_placed(ssn, Some(tagged(ssn.into()))).unwrap();
        }
        assert_eq!(t.heap_bytes(), before);
        assert_eq!(std::iter::from_fn(|| t.poll_delivery()).count(), 128);
    }

    /// RFC 5043 §6.1 / RFC 5041 §5.4: a message after a control chunk waits for it, and no
    /// message spans it.
    #[test]
    fn a_control_chunk_bounds_and_gates_delivery() {
        let mut t = StreamDelivery::with_defaults(0);
        // The passive side's first segment (DDP-SSN 1) before its Accept (0).
        t.on_placed(1, Some(tagged(1))).unwrap();
        assert_eq!(t.poll_delivery(), None, "waits for the Accept");
        t.on_control(0).unwrap();
        let d = t.poll_delivery().unwrap();
        assert_eq!((d.first_ddp_ssn, d.segments), (1, 1));
        assert_eq!(t.on_control(0), Err(DeliveryError::Duplicate));
        assert_eq!(t.poll_delivery(), None);
    }

    /// RFC 5043 §10: a sender may have 32767 chunks outstanding, so a whole window of messages
    /// may wait behind one missing chunk; the table grows to hold them.
    #[test]
    fn a_window_of_messages_behind_one_gap_is_legal() {
        let mut t = StreamDelivery::with_defaults(0);
        let before = t.heap_bytes();
        for ssn in 1..32768u16 {
            t.on_placed(ssn, Some(tagged(ssn.into()))).unwrap();
        }
        assert!(t.heap_bytes() > before, "grew past the preallocation");
        t.on_placed(0, Some(tagged(0))).unwrap();
        assert_eq!(std::iter::from_fn(|| t.poll_delivery()).count(), 32768);
    }

    #[test]
    #[should_panic(expected = "1..=32768")]
    fn window_above_32768_is_a_configuration_error() {
        let _ = StreamDelivery::new(0, 32769, 1);
    }

    proptest! {
        #[test]
        fn rfc5041_5_4_any_layout_any_arrival_order(
            sizes in proptest::collection::vec((1u64..6, any::<bool>()), 1..40),
            first in any::<u16>(),
            seed in any::<u64>(),
        ) {
            let msgs: Vec<Msg> = sizes
                .iter()
                .enumerate()
                .map(|(i, &(segments, is_tagged))| Msg {
                    segments,
                    info: if is_tagged { tagged(i as u32) } else { untagged(i as u32, 3) },
                })
                .collect();
            let mut order: Vec<usize> = (0..segments_of(&msgs).len()).collect();
            SplitMix64(seed).shuffle(&mut order);
            run(first, MAX_WINDOW, &msgs, &order)?;
        }
    }
}
