//! The receive path of one DDP stream: check, then place, then deliver (RFC 5041 §7.1, §5.4).
//!
//! A DDP Segment Chunk (PPID 16) goes through, in order: the DDP-SSN window (RFC 5043 §10), the
//! DDP version, the §7.1 checks of its buffer model ([`crate::mem`]), and only then one copy of
//! its payload into region memory ([`crate::port::region`]); the delivery tracker
//! ([`super::delivery`]) then hands complete messages to the ULP in DDP-SSN order.
//!
//! The first error on a stream places nothing, is reported once with the DDP header and the
//! segment length, and latches: every later segment on the stream is dropped silently and
//! counted (§7.1: "DDP MUST silently drop any subsequent incoming DDP Segments"). Sending one
//! more message before tearing the stream down (§7.1, RFC 5043 §6.2.2) is the send side's.

use core::fmt;

use super::delivery::{Delivered, DeliveryError, MessageInfo, StreamDelivery};
use crate::mem::{
    Access, Pd, PostedBuffer, QueueFull, RegionSlice, Stag, StagTable, StreamId, TagFault,
    UntaggedQueues,
};
use crate::port::region::Region;
use crate::wire::ddp::segment::field;
use crate::wire::ddp::{DdpError, Header, SegmentPacket, SegmentRepr, DDP_VERSION};
use crate::wire::rdmap::RdmapError;

/// Regions by number, as registrations name them.
pub trait Regions {
    /// What a lookup holds while it uses the region: a plain reference where regions never go
    /// away, a guard that keeps the region alive where they may be freed meanwhile.
    type Ref<'a>: core::ops::Deref<Target = Region>
    where
        Self: 'a;
    fn region(&self, id: u32) -> Option<Self::Ref<'_>>;
}

impl Regions for [Region] {
    type Ref<'a> = &'a Region;
    fn region(&self, id: u32) -> Option<&Region> {
        self.get(id as usize)
    }
}

impl Regions for Vec<Region> {
    type Ref<'a> = &'a Region;
    fn region(&self, id: u32) -> Option<&Region> {
        self.get(id as usize)
    }
}

/// Why a stream stopped accepting segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RxError {
    /// A §7.2 error, with its number.
    Ddp(DdpError),
    /// The DDP-SSN was a duplicate or outside the window (RFC 5043 §10: "An invalid DDP-SSN
    /// MAY result in termination of the DDP stream").
    Sequence(DeliveryError),
    /// Shorter than its own header: no DDP header to report.
    Truncated,
    /// The SCTP adaptation rejected the segment: `len` octets (DDP-SSN excluded) over the
    /// MULPDU `max` it announced (RFC 5043 §9: it "MUST reject DDP Segments that are larger
    /// than the maximum size specified"). An LLP error, so no §7.2 number (type 0x3 is the
    /// LLP's own).
    Oversize { len: u32, max: u32 },
    /// The ULP above DDP refused the segment or the message: RDMAP's own checks (RFC 5040
    /// §7), numbered as its Terminate reports them (§4.8).
    Rdmap(RdmapError),
    /// The peer's RDMAP Terminate ended the stream: nothing the peer sends after it is placed
    /// or delivered ([`StreamRx::stop`]). Never reported back: a Terminate answers no
    /// Terminate.
    PeerTerminated,
    /// RFC 5041 §7.1 untagged check 2 failed on our side: queue `qn` has the segment's buffer
    /// (at `position`, 0 being the oldest not completed), but the registration under it was
    /// revoked since it was posted (deregistered or invalidated, RFC 5041 §8.3.1 item 6), so it
    /// no longer allows Placement. Nothing is placed. The Data Sink's fault, not the peer's:
    /// it is reported as DDP's Local Catastrophic error (0x0/0x00, §7.2), as an RNIC does for
    /// a posted receive whose lkey is no longer valid, not as "no buffer available".
    BufferRevoked { qn: u32, position: u32 },
    /// RFC 5041 §7.1 untagged check 4 failed: the segment's message is too long for the
    /// buffer queue `qn` has for it (at `position`, 0 being the oldest not completed), §7.2's
    /// "DDP Message too long for available buffer". The same error as
    /// `Ddp(DdpError::TooLong)` (0x2/0x05, the peer's fault), with the buffer it names: the
    /// ULP that posted it can fail that one receive (a verbs receive completes
    /// `IBV_WC_LOC_LEN_ERR`) rather than only end the stream.
    MessageTooLong { qn: u32, position: u32 },
    /// A tagged segment the ULP let into a buffer of its own (its check asked for local
    /// write, not remote: RDMAP's Read Response inside an outstanding Read's Data Sink, RFC
    /// 5040 §5.2) whose STag `stag` no longer allows Placement at `to`: the ULP deregistered or
    /// invalidated the sink while the Read was outstanding (RFC 5041 §8.3.1 item 6). Nothing
    /// is placed. The Data Sink's fault, not the peer's, whose segment is where the Read asked
    /// for it: not DDP's Invalid STag (0x2/0x00 would blame the peer) but a local error (RFC
    /// 5040 §4.8: RDMAP's Local Catastrophic error, 0x0/0x00).
    SinkRevoked { stag: u32, to: u64 },
}

impl fmt::Display for RxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RxError::Ddp(e) => e.fmt(f),
            RxError::Sequence(e) => write!(f, "invalid DDP-SSN: {e}"),
            RxError::Truncated => f.write_str("DDP segment shorter than its header"),
            RxError::PeerTerminated => f.write_str("the peer terminated the stream"),
            RxError::Oversize { len, max } => write!(
                f,
                "DDP segment of {len} octets over the MULPDU of {max} (RFC 5043 §9)"
            ),
            RxError::Rdmap(e) => e.fmt(f),
            RxError::BufferRevoked { qn, position } => write!(
                f,
                "the memory of posted buffer {position} of queue {qn} was revoked (local \
                 protection error)"
            ),
            RxError::MessageTooLong { qn, position } => write!(
                f,
                "{} (posted buffer {position} of queue {qn})",
                DdpError::TooLong
            ),
            RxError::SinkRevoked { stag, to } => write!(
                f,
                "the Data Sink STag {stag:#x} (TO {to:#x}) of an outstanding Read was revoked \
                 (local error)"
            ),
        }
    }
}

impl std::error::Error for RxError {}

/// The DDP-SSN and DDP header of a refused segment, as received (RFC 5041 §7.1: the error
/// report "SHOULD include ... the DDP Header").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderCopy {
    bytes: [u8; 20],
    len: u8,
}

impl HeaderCopy {
    fn of(chunk: &[u8]) -> HeaderCopy {
        let tagged = chunk.get(2).is_some_and(|c| c & 0x80 != 0);
        let n = chunk.len().min(if tagged { 16 } else { 20 });
        let mut bytes = [0u8; 20];
        bytes[..n].copy_from_slice(&chunk[..n]);
        HeaderCopy {
            bytes,
            len: n as u8,
        }
    }

    /// A copy of `header` (DDP-SSN and DDP header, at most 20 bytes: the rest is cut), for an
    /// error the ULP finds in a message after delivery.
    pub fn from_bytes(header: &[u8]) -> HeaderCopy {
        HeaderCopy::of(header)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl Delivered {
    /// The DDP-SSN and DDP header of the message's last segment, as it arrived: what an error
    /// found once the message is delivered reports (RFC 5041 §7.1; RFC 5040 §4.8's Terminated
    /// DDP Header). The L segment is the one that ends the message and whose header the
    /// delivery was told (RFC 5041 §5.4), whichever segment's arrival completed it.
    pub fn last_header(&self) -> HeaderCopy {
        let mut bytes = [0u8; 20];
        bytes[field::DDP_SSN].copy_from_slice(&self.last_ddp_ssn.to_be_bytes());
        let len = match self.info {
            MessageInfo::Tagged {
                stag,
                rsvd_ulp,
                control,
                to,
                ..
            } => {
                bytes[field::CONTROL] = control;
                bytes[field::TAGGED_RSVD_ULP.start] = rsvd_ulp;
                bytes[field::STAG].copy_from_slice(&stag.to_be_bytes());
                bytes[field::TO].copy_from_slice(&to.to_be_bytes());
                field::TAGGED_PAYLOAD
            }
            MessageInfo::Untagged {
                qn,
                msn,
                message_len,
                rsvd_ulp,
                control,
                last_len,
            } => {
                bytes[field::CONTROL] = control;
                bytes[field::UNTAGGED_RSVD_ULP].copy_from_slice(&rsvd_ulp);
                bytes[field::QN].copy_from_slice(&qn.to_be_bytes());
                bytes[field::MSN].copy_from_slice(&msn.to_be_bytes());
                // `message_len` is MO + `last_len`, as placement checked.
                let mo = message_len.saturating_sub(last_len);
                bytes[field::MO].copy_from_slice(&mo.to_be_bytes());
                field::UNTAGGED_PAYLOAD
            }
        };
        HeaderCopy {
            bytes,
            len: len as u8,
        }
    }

    /// The DDP Segment Length of the message's last segment: its DDP header and payload
    /// (RFC 5040 §4.8), as [`Indication::Error`] counts a refused segment's.
    pub fn last_segment_len(&self) -> usize {
        let (tagged, last_len) = match self.info {
            MessageInfo::Tagged { last_len, .. } => (true, last_len),
            MessageInfo::Untagged { last_len, .. } => (false, last_len),
        };
        crate::wire::ddp::header_len(tagged) + last_len as usize
    }
}

/// The ULP above a stream's receive path: it hears what the path indicates, and may judge each
/// segment first. Its check runs after DDP's version and sequence checks and before DDP's
/// buffer checks (RFC 5041 §7.1) and any placement: what RsvdULP carries is the ULP's, so DDP
/// asks it whether the segment is one its protocol allows there (RDMAP: the opcode fits the
/// buffer model and queue, RFC 5040 §4.2; a Read Response goes only into an outstanding
/// Read's Data Sink, §5.2), and which right a tagged segment's STag must grant.
///
/// Any `FnMut(Indication)` is a ULP that asks nothing more than plain DDP (RFC 4296's ULP API):
/// tagged segments need remote write.
pub trait Ulp {
    /// `Ok` with the access a tagged segment needs (ignored for untagged ones), or the error
    /// that stops the stream; nothing of the segment is placed then.
    fn check(&mut self, _segment: &SegmentRepr<'_>) -> Result<Access, RxError> {
        Ok(Access::REMOTE_WRITE)
    }

    /// Whether [`Ulp::check`] is the plain one above, whatever the segment: then the receive
    /// path may take an in-order tagged segment without building the parsed segment the check
    /// would read ([`StreamRx::on_segment`]). A ULP that overrides `check` leaves this `false`.
    fn checks_nothing(&self) -> bool {
        false
    }

    /// STags the peer invalidated earlier in the packet being received, not yet out of the
    /// table (RFC 5040 §5.3: a Send with Invalidate takes effect before the stream's next
    /// message): a posted buffer whose memory one of them names allows no placement.
    fn revoked(&self) -> &[Stag] {
        &[]
    }

    /// An indication of the receive path, in order.
    fn indicate(&mut self, indication: Indication);
}

impl<F: FnMut(Indication)> Ulp for F {
    fn indicate(&mut self, indication: Indication) {
        self(indication)
    }

    fn checks_nothing(&self) -> bool {
        true
    }
}

/// Bytes of one inline receive buffer ([`StreamRx::set_inline_queue`]): room for an RDMA Read
/// Request (28) and the largest Terminate (4 + 2 + 18 + 28 = 52, RFC 5040 §4.8).
pub const INLINE_SLOT: usize = 64;

/// The region number that stands for a stream's own inline buffers.
const INLINE_REGION: u32 = u32::MAX;

/// A whole message of an inline queue, copied out for the ULP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineMessage {
    bytes: [u8; INLINE_SLOT],
    len: u8,
}

impl InlineMessage {
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// What the ULP learns from the receive path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indication {
    /// A complete message, in DDP-SSN order; for an untagged message, the buffer it filled.
    Delivered {
        message: Delivered,
        buffer: Option<PostedBuffer>,
        /// The message itself, if its queue is one of the stream's inline ones.
        inline: Option<InlineMessage>,
    },
    /// The stream's first error: nothing of this segment was placed.
    Error {
        error: RxError,
        header: HeaderCopy,
        segment_len: usize,
    },
}

/// Counters of one stream's receive path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxStats {
    pub segments: u64,
    /// Payload bytes placed into the regions (tagged buffers, posted receive buffers); not
    /// those of the stream's own inline queues ([`StreamRx::set_inline_queue`]: RDMAP's Read
    /// Requests and Terminates), which are the protocol's, not the ULP's memory.
    pub placed_bytes: u64,
    pub messages: u64,
    pub errors: u64,
    /// Segments dropped silently after the stream's first error.
    pub dropped_after_error: u64,
    /// Of `segments`, those taken by the in-order tagged path ([`StreamRx::on_segment`], and
    /// the connection's fused receive path, which takes an RDMAP stream's RDMA Writes through
    /// it too: on such a stream the general path's Writes, checked by RDMAP first, are not
    /// counted here).
    pub in_order_tagged: u64,
}

/// One DDP stream's receive side.
#[derive(Debug)]
pub struct StreamRx {
    stream: StreamId,
    pd: Pd,
    delivery: StreamDelivery,
    queues: UntaggedQueues,
    error: Option<RxError>,
    stats: RxStats,
    /// Memory of the inline queues, and which queues they are (QN, first slot, depth).
    inline: Option<Region>,
    inline_queues: Vec<(u32, usize, usize)>,
    /// Region and offset just past the last placement: where a sequential writer's next one
    /// begins.
    placed_end: (u32, u64),
    /// The length of the last placement that did not end its message: the peer's segment
    /// size, as far as this stream has seen.
    stride: usize,
}

impl StreamRx {
    /// Counts the stream's messages waiting for Delivery behind a missing DDP-SSN in `charge`
    /// ([`StreamDelivery::set_charge`]).
    pub fn set_pending_charge(&mut self, charge: std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        self.delivery.set_charge(charge);
    }

    /// Whether the chunk whose DDP-SSN is `ddp_ssn` is the one Placed messages wait for
    /// (the first not yet Placed, with messages waiting behind it): its arrival releases
    /// them.
    pub fn releases_pending(&self, ddp_ssn: u16) -> bool {
        self.delivery.pending_messages() > 0 && ddp_ssn == self.delivery.next_expected_ddp_ssn()
    }

    /// The protection domain the stream's session was opened for (RFC 5043 §6: one PD per
    /// session).
    pub fn pd(&self) -> Pd {
        self.pd
    }

    /// `first_ddp_ssn` is the first DDP-SSN of a segment (after the session's control
    /// messages); `queues` untagged queues of `depth` buffers each.
    pub fn new(
        stream: StreamId,
        pd: Pd,
        first_ddp_ssn: u16,
        queues: usize,
        depth: usize,
    ) -> StreamRx {
        StreamRx {
            stream,
            pd,
            delivery: StreamDelivery::with_defaults(first_ddp_ssn),
            queues: UntaggedQueues::new(queues, depth),
            error: None,
            stats: RxStats::default(),
            inline: None,
            inline_queues: Vec::new(),
            placed_end: (u32::MAX, 0),
            stride: 0,
        }
    }

    /// Makes queue `qn` one the stream fills from memory of its own: `depth` buffers of
    /// [`INLINE_SLOT`] bytes, posted now and posted again as each message is delivered
    /// (with a copy of it, [`Indication::Delivered`]`::inline`). For the queues a protocol
    /// above keeps for itself (RDMAP's Read Requests and Terminates, RFC 5040 §4.2): the
    /// §7.1 untagged checks apply to them as to any other, so a peer that sends more than
    /// `depth` ahead, or a message longer than a slot, fails the stream with the DDP error
    /// for it. Call once per queue, before any segment arrives; the queue must be empty.
    pub fn set_inline_queue(&mut self, qn: u32, depth: usize) -> Result<(), QueueFull> {
        self.set_inline_queues(&[(qn, depth)])
    }

    /// Whether the stream has untagged queue `qn` (RFC 5041 §5.1.2: QN 0 to its count - 1).
    pub fn has_queue(&self, qn: u32) -> bool {
        (qn as usize) < self.queues.count()
    }

    /// [`StreamRx::set_inline_queue`] for several queues (queue number, depth) at once, in one
    /// region sized for all of them: a stream opening pays one mapping of 4 KiB pages, not
    /// one a queue (each on a 2 MiB huge page, two unmapped again: a peer whose sessions are
    /// accepted pinned a huge page a stream, and every unmapping interrupted every data
    /// core; an independent review). Nothing is set unless every queue exists, is empty and
    /// is named once.
    pub fn set_inline_queues(&mut self, queues: &[(u32, usize)]) -> Result<(), QueueFull> {
        for (k, &(qn, depth)) in queues.iter().enumerate() {
            let taken = self.inline_queues.iter().any(|q| q.0 == qn)
                || queues[..k].iter().any(|q| q.0 == qn);
            if depth == 0 || taken || self.queues.queue(qn).is_none_or(|q| q.posted() > 0) {
                return Err(QueueFull);
            }
        }
        let mut first = self.inline_queues.iter().map(|&(_, _, d)| d).sum::<usize>();
        let total = first + queues.iter().map(|&(_, d)| d).sum::<usize>();
        // One region for all of the stream's inline queues, grown by copying what the
        // earlier ones hold (nothing, before the first segment).
        let region = Region::small(total * INLINE_SLOT).map_err(|_| QueueFull)?;
        if let Some(old) = self.inline.as_ref() {
            let mut bytes = vec![0u8; old.len()];
            if old.read(0, &mut bytes).is_ok() {
                let _ = region.place(0, &bytes);
            }
        }
        self.inline = Some(region);
        for &(qn, depth) in queues {
            self.inline_queues.push((qn, first, depth));
            let queue = self.queues.queue(qn).ok_or(QueueFull)?;
            for i in 0..depth {
                queue.post(PostedBuffer {
                    memory: RegionSlice {
                        region: INLINE_REGION,
                        offset: ((first + i) * INLINE_SLOT) as u64,
                    },
                    len: INLINE_SLOT as u32,
                    stag: None,
                })?;
            }
            first += depth;
        }
        Ok(())
    }

    /// The stream ends without an error of its own (the peer's RDMAP Terminate, RFC 5040
    /// §5.4: its last message): nothing more is placed or delivered, and nothing is indicated
    /// (the ULP hears of the Terminate itself).
    pub fn stop(&mut self, why: RxError) {
        self.error.get_or_insert(why);
    }

    /// Stops the stream for an error the ULP found in a message DDP delivered (RFC 5041
    /// §7.1: the stream's later segments are dropped). `header` is the DDP-SSN and DDP
    /// header of the message's last segment ([`Delivered::last_header`]) and `segment_len`
    /// its length, for the report.
    pub fn fail_delivered(
        &mut self,
        error: RxError,
        header: &[u8],
        segment_len: usize,
        ulp: &mut impl FnMut(Indication),
    ) {
        if self.error.is_some() {
            return;
        }
        self.error = Some(error);
        self.stats.errors += 1;
        ulp(Indication::Error {
            error,
            header: HeaderCopy::of(header),
            segment_len,
        });
    }

    /// As [`StreamRx::fail_delivered`], for the ULP's error in a message this delivery
    /// handed up before DDP stopped it at a later message's error (an MSN out of order),
    /// which the ULP did not report: the first error is the stream's (RFC 5040 §7), so it
    /// takes that one's place.
    pub fn fail_delivered_first(
        &mut self,
        error: RxError,
        header: &[u8],
        segment_len: usize,
        ulp: &mut impl FnMut(Indication),
    ) {
        if self.error.is_none() {
            self.stats.errors += 1;
        }
        self.error = Some(error);
        ulp(Indication::Error {
            error,
            header: HeaderCopy::of(header),
            segment_len,
        });
    }

    /// Posts an untagged receive buffer to queue `qn` (RFC 4296 §2.1.2 "post a receive
    /// buffer").
    pub fn post(&mut self, qn: u32, buf: PostedBuffer) -> Result<(), QueueFull> {
        self.queues.queue(qn).ok_or(QueueFull)?.post(buf)
    }

    pub fn stats(&self) -> &RxStats {
        &self.stats
    }

    /// The error that stopped the stream, if any.
    pub fn failed(&self) -> Option<RxError> {
        self.error
    }

    /// The peer's session control message with DDP-SSN `ddp_ssn` arrived (RFC 5043 §5.2.3):
    /// messages after it in DDP-SSN order, placed already, may now be delivered. `Err` if the
    /// DDP-SSN does not fit the stream's window (the session judges that first).
    pub fn on_control(
        &mut self,
        ddp_ssn: u16,
        ulp: &mut impl FnMut(Indication),
    ) -> Result<(), RxError> {
        if self.error.is_some() {
            return Ok(());
        }
        self.delivery
            .on_control(ddp_ssn)
            .map_err(RxError::Sequence)?;
        self.deliver(ulp);
        Ok(())
    }

    /// One DDP Segment Chunk payload (DDP-SSN onwards). Indications go to `ulp`: at most one
    /// error, and any messages this segment completed. Returns the bytes placed.
    pub fn on_segment<R: Regions + ?Sized, U: Ulp + ?Sized>(
        &mut self,
        chunk: &[u8],
        stags: &StagTable,
        regions: &R,
        ulp: &mut U,
    ) -> usize {
        if self.error.is_some() {
            self.stats.dropped_after_error += 1;
            return 0;
        }
        if ulp.checks_nothing() {
            if let Some((placed, delivered)) = self.tagged_next(chunk, stags, regions) {
                if let Some(message) = delivered {
                    ulp.indicate(Indication::Delivered {
                        message,
                        buffer: None,
                        inline: None,
                    });
                }
                return placed;
            }
        }
        self.stats.segments += 1;
        match self.check_and_place(chunk, stags, regions, ulp) {
            Ok(placed) => {
                self.deliver(&mut |i| ulp.indicate(i));
                placed
            }
            Err(error) => {
                self.fail(chunk, error, &mut |i| ulp.indicate(i));
                0
            }
        }
    }

    /// [`StreamRx::on_segment`] for a segment its in-order tagged path takes (see
    /// `tagged_next`), under a ULP that checks nothing ([`Ulp::checks_nothing`]): the bytes
    /// placed and the message the segment completed, which the caller indicates
    /// ([`Indication::Delivered`], no buffer). `None` with nothing changed for any other
    /// segment (then `on_segment` decides). For a fused receive path that must know the
    /// segment is placed before it commits the layers below.
    #[inline(always)]
    pub fn on_tagged_next<R: Regions + ?Sized>(
        &mut self,
        chunk: &[u8],
        stags: &StagTable,
        regions: &R,
    ) -> Option<(usize, Option<Delivered>)> {
        if self.error.is_some() {
            return None;
        }
        self.tagged_next(chunk, stags, regions)
    }

    /// A segment the layer below refused before DDP could check it ([`RxError::Oversize`]):
    /// nothing of it is placed, and it stops the stream as a §7.1 error does (RFC 5041 §6.2.2:
    /// a fatal error the LLP reports is indicated to the ULP).
    pub fn refuse(&mut self, chunk: &[u8], error: RxError, ulp: &mut impl FnMut(Indication)) {
        if self.error.is_some() {
            self.stats.dropped_after_error += 1;
            return;
        }
        self.stats.segments += 1;
        self.fail(chunk, error, ulp);
    }

    fn fail(&mut self, chunk: &[u8], error: RxError, ulp: &mut impl FnMut(Indication)) {
        self.error = Some(error);
        self.stats.errors += 1;
        ulp(Indication::Error {
            error,
            header: HeaderCopy::of(chunk),
            segment_len: chunk.len().saturating_sub(2),
        });
    }

    /// The segment of a bulk tagged transfer, taken without parsing it into a
    /// [`SegmentRepr`]: tagged, DV 1 (RFC 5041 §7.2), the next DDP-SSN with no message
    /// waiting for Delivery (RFC 5043 §10, [`StreamDelivery::is_next_alone`]), the §7.1
    /// tagged checks passed (`check_access`) and a payload its region holds; for a ULP with no
    /// checks of its own (the caller's to know). Its effect is the general path's
    /// (`check_and_place`, then `deliver`), less the indication of the message it completed,
    /// which it returns with the bytes placed; anything else, `None` with nothing changed, and
    /// the general path decides, places or reports. An empty payload goes there too (RFC 5041
    /// §5.2: its STag is not checked).
    #[inline(always)]
    fn tagged_next<R: Regions + ?Sized>(
        &mut self,
        chunk: &[u8],
        stags: &StagTable,
        regions: &R,
    ) -> Option<(usize, Option<Delivered>)> {
        use crate::wire::ddp::segment::ctrl;
        use crate::wire::ddp::{read_u16, read_u32, read_u64};
        let (head, payload) = chunk.split_at_checked(field::TAGGED_PAYLOAD)?;
        let control = head[field::CONTROL];
        if control & (ctrl::T | ctrl::DV) != ctrl::T | DDP_VERSION
            || payload.is_empty()
            || !self.delivery.is_next_alone(read_u16(&head[field::DDP_SSN]))
        {
            return None;
        }
        let stag = read_u32(&head[field::STAG]);
        let to = read_u64(&head[field::TO]);
        let placement = stags
            .check_access(
                Stag(stag),
                to,
                payload.len(),
                self.stream,
                self.pd,
                Access::REMOTE_WRITE,
            )
            .ok()?;
        let last = control & ctrl::L != 0;
        let len = payload.len();
        let r = regions.region(placement.region)?;
        self.place_in(&r, placement.region, placement.offset, payload, last)
            .ok()?;
        self.stats.segments += 1;
        self.stats.in_order_tagged += 1;
        self.stats.placed_bytes += len as u64;
        let info = last.then(|| MessageInfo::Tagged {
            stag,
            rsvd_ulp: head[field::TAGGED_RSVD_ULP.start],
            control,
            to,
            last_len: len as u32,
        });
        let delivered = self.delivery.place_next(info);
        if delivered.is_some() {
            self.stats.messages += 1;
        }
        Some((len, delivered))
    }

    /// Places `payload` at `offset` of region `r` (number `region`), and asks for the lines of
    /// the next placement. A sequential writer's next one starts where this one ended:
    /// certainly within a message (RFC 5041 §5.2: a tagged message's segments are contiguous
    /// from its TO, an untagged one's from its MO), and for a stream of messages written one
    /// after the other once this one began where the last ended. Asking for those lines now
    /// overlaps their misses with the next packet's work (`port::prefetch`).
    ///
    /// At the end of such a message the next one's second and third segments are asked for
    /// too, at the end of the data core's turn (`prefetch::for_write_later`): a writer that
    /// waits for each completion (`ib_write_lat`'s pattern) otherwise meets them in memory,
    /// and a 4 KiB write at MTU 1500 waited ~250 ns for its second segment's lines
    /// (benches/README.md, "Session 50").
    #[inline(always)]
    fn place_in(
        &mut self,
        r: &Region,
        region: u32,
        offset: u64,
        payload: &[u8],
        last: bool,
    ) -> Result<(), crate::port::region::OutOfBounds> {
        r.place(offset, payload)?;
        let len = payload.len();
        let end = offset + len as u64;
        if !last {
            r.prefetch_for_write(end, len);
            self.stride = len;
        } else if self.placed_end == (region, offset) {
            r.prefetch_for_write(end, len);
            // Placements from STREAM_MIN on go around the cache: nothing to ask for.
            let stride = self.stride.max(len);
            if stride < crate::port::region::STREAM_MIN {
                r.prefetch_for_write_later(end + stride as u64, 2 * stride);
            }
        }
        self.placed_end = (region, end);
        Ok(())
    }

    fn check_and_place<R: Regions + ?Sized, U: Ulp + ?Sized>(
        &mut self,
        chunk: &[u8],
        stags: &StagTable,
        regions: &R,
        ulp: &mut U,
    ) -> Result<usize, RxError> {
        let packet = SegmentPacket::new_checked(chunk).map_err(|_| RxError::Truncated)?;
        if packet.version() != DDP_VERSION {
            // RFC 5041 §7.2: the version error of the segment's own buffer model.
            return Err(RxError::Ddp(if packet.tagged() {
                DdpError::TaggedVersion
            } else {
                DdpError::UntaggedVersion
            }));
        }
        let seg = SegmentRepr::parse(&packet).map_err(|_| RxError::Truncated)?;
        let at = self
            .delivery
            .checked(seg.ddp_ssn, seg.last)
            .map_err(RxError::Sequence)?;
        let need = ulp.check(&seg)?;
        let len = seg.payload.len();
        let placement = match seg.header {
            // An STag the peer invalidated earlier in this packet (RFC 5040 §5.3), still in
            // the table until the packet ends, fails as one invalidated in an earlier packet
            // does, at the same point: after the ULP's own checks (RDMAP's version and
            // opcode), as RFC 5041 §7.1 check 1. It failed before them, so the Terminate's
            // error depended on SCTP's bundling.
            Header::Tagged(h) => (if len > 0 && ulp.revoked().contains(&Stag(h.stag)) {
                Err(TagFault::InvalidStag)
            } else {
                stags.check_access(Stag(h.stag), h.to, len, self.stream, self.pd, need)
            })
            .map_err(|f| {
                // Local write is the right of the ULP's own buffers: the ULP found the
                // segment where it asked the peer to write (RDMAP: inside an outstanding
                // Read's Data Sink), so an STag that no longer allows it is its own doing
                // (RFC 5040 §4.8, RFC 5041 §7.2: the error is attributed to the local
                // side), not the peer's Invalid STag or bounds violation.
                if need == Access::LOCAL_WRITE {
                    RxError::SinkRevoked {
                        stag: h.stag,
                        to: h.to,
                    }
                } else {
                    RxError::Ddp(f.as_ddp())
                }
            }),
            Header::Untagged(h) => {
                let p = self
                    .queues
                    .check(h.qn, h.msn, h.mo, len)
                    .map_err(|e| self.untagged_refused(e, &h, len, at))?;
                // Check 2 again for the memory under the buffer: it may have been deregistered
                // since the buffer was posted, and then it no longer "allows Placement". The
                // STag must still name local-write memory that holds the whole buffer: a
                // re-issued STag value (same index and key, RFC 5041 §8.3) for other memory
                // does not revive a stale buffer. Nor may the peer have invalidated it earlier
                // in this packet (RFC 5040 §5.3). A buffer is there, so this is no "no buffer
                // available" (0x2/0x02), which would blame the peer: it is the Data Sink's own
                // fault, as an invalid lkey in a posted receive is in verbs.
                match self.queues.buffer(h.qn, h.msn) {
                    Some((position, b))
                        if b.stag.is_some_and(|stag| {
                            ulp.revoked().contains(&stag) || !stags.allows_receive(stag, self.pd, b)
                        }) =>
                    {
                        return Err(RxError::BufferRevoked { qn: h.qn, position })
                    }
                    _ => Ok(p),
                }
            }
        }?;
        let info = if seg.last {
            // An untagged MO + length beyond 2^32 was already refused as too long.
            Some(
                MessageInfo::of_last_segment(&seg, packet.control())
                    .ok_or(RxError::Ddp(DdpError::TooLong))?,
            )
        } else {
            None
        };
        let inline = placement.region == INLINE_REGION && !seg.header.is_tagged();
        if len > 0 {
            // A registration naming a region that is gone, or larger than it, is our fault.
            let placed = if inline {
                self.inline
                    .as_ref()
                    .map(|r| r.place(placement.offset, seg.payload))
            } else {
                regions.region(placement.region).map(|r| {
                    self.place_in(
                        &r,
                        placement.region,
                        placement.offset,
                        seg.payload,
                        seg.last,
                    )
                })
            };
            if !matches!(placed, Some(Ok(()))) {
                return Err(RxError::Ddp(DdpError::LocalCatastrophic));
            }
        }
        // Checked above, and nothing between touched the tracker.
        self.delivery.place_checked(at, info);
        if !inline {
            self.stats.placed_bytes += len as u64;
        }
        Ok(len)
    }

    /// The error for an untagged segment (header `h`, `len` bytes of payload, at `at` in the
    /// window) that failed RFC 5041 §7.1 check `e`: a message too long for its buffer names
    /// the buffer ([`RxError::MessageTooLong`]), the others are DDP's number alone. Off the
    /// path of a segment that passes.
    ///
    /// An MO past the buffer's end fails check 3 (Invalid MO, 0x2/0x04) before check 4. In
    /// order that is right: the segment that crossed the end came first and failed check 4
    /// (0x2/0x05), so a later one past the end means a message whose segments skip offsets.
    /// But SCTP delivers a message's segments in any order (RFC 5043 §10: unordered
    /// chunks), and one that starts past the end may arrive before the one that crosses it:
    /// then all the receiver knows is the buffer the MSN picked and that the message reaches
    /// at least MO + length, past it, which is §7.2's "DDP Message too long for available
    /// buffer", as in order. So it is too long when an earlier DDP-SSN is still missing (it
    /// may be the crossing segment), unless the receiver knows the MO is invalid whatever
    /// came before: the message's L segment arrived and ended it within the buffer (it passed
    /// check 4), or MO + length is past the largest ULP Message (RFC 5041 §5.2: less than
    /// 2^32), which no message could reach. Those, and a segment with nothing missing before
    /// it, stay Invalid MO (check 3).
    #[cold]
    fn untagged_refused(
        &self,
        e: DdpError,
        h: &crate::wire::ddp::UntaggedHeader,
        len: usize,
        at: super::delivery::Checked,
    ) -> RxError {
        let (qn, msn) = (h.qn, h.msn);
        let e = match e {
            DdpError::InvalidMo
                if !self.delivery.nothing_missing_before(at)
                    && self.delivery.placed_untagged_len(qn, msn).is_none()
                    && u64::from(h.mo) + len as u64 <= u64::from(u32::MAX) =>
            {
                DdpError::TooLong
            }
            e => e,
        };
        match (e, self.queues.buffer(qn, msn)) {
            // Checks 3 and 4 run only on a posted buffer (checks 1, 2 and 5 found it), so it
            // is there; were it not, the plain number still says the error.
            (DdpError::TooLong, Some((position, _))) => RxError::MessageTooLong { qn, position },
            _ => RxError::Ddp(e),
        }
    }

    fn deliver(&mut self, ulp: &mut impl FnMut(Indication)) {
        while let Some(message) = self.delivery.poll_delivery() {
            let mut inline = None;
            let buffer = match message.info {
                MessageInfo::Untagged {
                    qn,
                    msn,
                    message_len,
                    ..
                } => {
                    // Delivery is in DDP-SSN order, and a queue's messages must complete in
                    // MSN order: a peer that numbered them otherwise gets MSN range.
                    let q = self.queues.queue(qn);
                    match q {
                        Some(q) if q.head_msn() == msn => {
                            let done = q.complete();
                            match done {
                                // The stream's own buffer: copy the message out and post
                                // the slot again, for the message `depth` MSNs on.
                                Some(b) if b.memory.region == INLINE_REGION => {
                                    let mut m = InlineMessage {
                                        bytes: [0; INLINE_SLOT],
                                        len: message_len.min(INLINE_SLOT as u32) as u8,
                                    };
                                    if let Some(r) = self.inline.as_ref() {
                                        let n = usize::from(m.len);
                                        let _ = r.read(b.memory.offset, &mut m.bytes[..n]);
                                    }
                                    inline = Some(m);
                                    let _ = q.post(b);
                                    None
                                }
                                other => other,
                            }
                        }
                        _ => {
                            // RFC 5041 §7.1's check 5, found only now: reported with the
                            // header and length of the message's last segment, as a refusal
                            // on arrival is with the refused segment's.
                            let error = RxError::Ddp(DdpError::MsnRange);
                            self.error = Some(error);
                            self.stats.errors += 1;
                            ulp(Indication::Error {
                                error,
                                header: message.last_header(),
                                segment_len: message.last_segment_len(),
                            });
                            return;
                        }
                    }
                }
                MessageInfo::Tagged { .. } => None,
            };
            self.stats.messages += 1;
            ulp(Indication::Delivered {
                message,
                buffer,
                inline,
            });
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;
    use crate::mem::{Access, RegionSlice, Registration};
    use crate::wire::ddp::{TaggedHeader, UntaggedHeader};

    const PD: Pd = Pd(1);
    const S: StreamId = StreamId(3);

    fn tagged(ssn: u16, last: bool, stag: Stag, to: u64, payload: &[u8]) -> Vec<u8> {
        let r = SegmentRepr {
            ddp_ssn: ssn,
            last,
            header: Header::Tagged(TaggedHeader {
                rsvd_ulp: 0x5a,
                stag: stag.0,
                to,
            }),
            payload,
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut SegmentPacket::new_unchecked(&mut buf[..]))
            .unwrap();
        buf
    }

    fn untagged(ssn: u16, last: bool, qn: u32, msn: u32, mo: u32, payload: &[u8]) -> Vec<u8> {
        let r = SegmentRepr {
            ddp_ssn: ssn,
            last,
            header: Header::Untagged(UntaggedHeader {
                rsvd_ulp: [1, 2, 3, 4, 5],
                qn,
                msn,
                mo,
            }),
            payload,
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut SegmentPacket::new_unchecked(&mut buf[..]))
            .unwrap();
        buf
    }

    struct Fixture {
        regions: Vec<Region>,
        stags: StagTable,
        stag: Stag,
        rx: StreamRx,
        got: Vec<Indication>,
    }

    fn fixture() -> Fixture {
        let regions = vec![Region::new(1 << 16).unwrap(), Region::new(1 << 16).unwrap()];
        let mut stags = StagTable::new(64, 77);
        let stag = stags
            .register(Registration {
                pd: PD,
                access: Access::REMOTE_WRITE,
                stream: Some(S),
                to_base: 0x10_0000,
                len: 4096,
                memory: RegionSlice {
                    region: 0,
                    offset: 1024,
                },
            })
            .unwrap();
        let mut rx = StreamRx::new(S, PD, 1, 2, 4);
        for i in 0..2 {
            rx.post(
                0,
                PostedBuffer {
                    memory: RegionSlice {
                        region: 1,
                        offset: i * 1000,
                    },
                    len: 1000,
                    stag: None,
                },
            )
            .unwrap();
        }
        Fixture {
            regions,
            stags,
            stag,
            rx,
            got: Vec::new(),
        }
    }

    impl Fixture {
        fn feed(&mut self, chunk: &[u8]) -> usize {
            let got = &mut self.got;
            self.rx
                .on_segment(chunk, &self.stags, &self.regions, &mut |i| got.push(i))
        }
        fn digest(&self) -> (u32, u32) {
            (
                self.regions[0].crc32c(0, 1 << 16).unwrap(),
                self.regions[1].crc32c(0, 1 << 16).unwrap(),
            )
        }
    }

    /// RFC 5041 §5.4 with unordered arrival: a three-segment tagged message arriving last
    /// segment first is placed byte for byte as it arrives and delivered once, complete.
    #[test]
    fn tagged_message_out_of_order_is_placed_then_delivered_once() {
        let mut f = fixture();
        let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        let segs = [
            tagged(1, false, f.stag, 0x10_0000, &data[..1000]),
            tagged(2, false, f.stag, 0x10_0000 + 1000, &data[1000..2000]),
            tagged(3, true, f.stag, 0x10_0000 + 2000, &data[2000..]),
        ];
        assert_eq!(f.feed(&segs[2]), 1000);
        assert_eq!(f.feed(&segs[0]), 1000);
        assert!(
            f.got.is_empty(),
            "nothing delivered while segment 2 is missing"
        );
        assert_eq!(f.feed(&segs[1]), 1000);
        let mut out = vec![0u8; 3000];
        f.regions[0].read(1024, &mut out).unwrap();
        assert_eq!(out, data);
        assert_eq!(f.got.len(), 1);
        let Indication::Delivered {
            message, buffer, ..
        } = f.got[0]
        else {
            panic!("{:?}", f.got[0])
        };
        assert_eq!(
            (
                message.first_ddp_ssn,
                message.last_ddp_ssn,
                message.segments
            ),
            (1, 3, 3)
        );
        assert_eq!(
            message.info,
            MessageInfo::Tagged {
                stag: f.stag.0,
                rsvd_ulp: 0x5a,
                control: 0xc1,
                to: 0x10_0000 + 2000,
                last_len: 1000,
            },
            "RsvdULP delivered (RFC 5041 §5.4)"
        );
        assert_eq!(buffer, None);
    }

    /// RFC 5041 §8.3.1 item 6 for posted buffers: after the registration under a buffer is
    /// revoked, a registration that reuses the same STag value for other memory, or for the
    /// same memory in another protection domain (item 1; an independent review), does not
    /// make the stale buffer placeable again; the same STag naming the buffer's memory in the
    /// stream's domain is fine.
    #[test]
    fn a_reissued_stag_does_not_revive_a_stale_posted_buffer() {
        let local = |offset: u64| Registration {
            pd: PD,
            access: Access::LOCAL_WRITE,
            stream: None,
            to_base: 0,
            len: 2000,
            memory: RegionSlice { region: 1, offset },
        };
        let s = Stag(0x0000_0542);
        // A buffer posted over `local(4000)` on a data core's replica (the master's choices
        // are inserted as they come), its STag then reissued as `again` (if any); what a
        // one-segment Send to it places, and what the stream said.
        let send_after = |again: Option<Registration>| {
            let mut f = fixture();
            f.stags = StagTable::replica(64);
            let _ = f.stags.insert(s, 1, local(4000));
            let mut rx = StreamRx::new(S, PD, 1, 2, 4);
            let buffer = PostedBuffer {
                memory: RegionSlice {
                    region: 1,
                    offset: 4000,
                },
                len: 1000,
                stag: Some(s),
            };
            rx.post(0, buffer).unwrap();
            f.rx = rx;
            if let Some(reg) = again {
                f.stags.invalidate(s);
                let _ = f.stags.insert(s, 257, reg);
            }
            let before = f.digest();
            let placed = f.feed(&untagged(1, true, 0, 1, 0, &[9u8; 100]));
            assert_eq!(f.digest() == before, placed == 0);
            (placed, f.got)
        };
        let revoked = |(placed, got): (usize, Vec<Indication>)| {
            // The buffer is there: its memory's revocation is our fault, not "no buffer".
            placed == 0
                && matches!(
                    got.first(),
                    Some(Indication::Error {
                        error: RxError::BufferRevoked { qn: 0, position: 0 },
                        ..
                    })
                )
        };
        assert!(revoked(send_after(Some(local(20_000)))), "other memory");
        let other_pd = Registration {
            pd: Pd(PD.0 + 1),
            ..local(4000)
        };
        assert!(
            revoked(send_after(Some(other_pd))),
            "another protection domain"
        );
        assert_eq!(send_after(None).0, 100, "its own registration");
    }

    /// RFC 5041 §5.4: an untagged message is delivered with its length (MO + length of the L
    /// segment) and the buffer it filled, which leaves the queue.
    #[test]
    fn untagged_message_delivered_with_its_length_and_buffer() {
        let mut f = fixture();
        assert_eq!(f.feed(&untagged(2, true, 0, 1, 600, b"world")), 5);
        assert_eq!(f.feed(&untagged(1, false, 0, 1, 0, &[7u8; 600])), 600);
        let Indication::Delivered {
            message, buffer, ..
        } = f.got[0]
        else {
            panic!()
        };
        assert_eq!(
            message.info,
            MessageInfo::Untagged {
                qn: 0,
                msn: 1,
                message_len: 605,
                rsvd_ulp: [1, 2, 3, 4, 5],
                control: 0x41,
                last_len: 5,
            }
        );
        assert_eq!(buffer.map(|b| b.memory.offset), Some(0));
        let mut out = [0u8; 5];
        f.regions[1].read(600, &mut out).unwrap();
        assert_eq!(&out, b"world");
        // MSN 1 is complete: MSN 2 is the head now, and another MSN 1 is out of range.
        assert_eq!(f.feed(&untagged(3, true, 0, 2, 0, b"x")), 1);
        assert_eq!(f.got.len(), 2);
    }

    /// RFC 5041 §7.1: every check refuses with its exact code, places zero bytes, reports
    /// the header and segment length, and latches: the next (valid) segment is dropped.
    #[test]
    fn every_check_places_nothing_reports_once_and_latches() {
        fn other_stag(f: &Fixture) -> Stag {
            Stag(f.stag.0 ^ 0x100)
        }
        type Make = Box<dyn Fn(&Fixture) -> Vec<u8>>;
        let cases: Vec<(&str, Make, RxError)> = vec![
            (
                "invalid STag",
                Box::new(|f| tagged(1, true, other_stag(f), 0x10_0000, b"x")),
                RxError::Ddp(DdpError::InvalidStag),
            ),
            (
                "below the base",
                Box::new(|f| tagged(1, true, f.stag, 0x0f_ffff, b"x")),
                RxError::Ddp(DdpError::BaseOrBounds),
            ),
            (
                "past the last byte",
                Box::new(|f| tagged(1, true, f.stag, 0x10_0000 + 4095, b"xy")),
                RxError::Ddp(DdpError::BaseOrBounds),
            ),
            (
                "TO far past the end (check 3 precedes the wrap check)",
                Box::new(|f| tagged(1, true, f.stag, u64::MAX, b"xy")),
                RxError::Ddp(DdpError::BaseOrBounds),
            ),
            (
                "invalid QN",
                Box::new(|_| untagged(1, true, 9, 1, 0, b"x")),
                RxError::Ddp(DdpError::InvalidQn),
            ),
            (
                "no buffer",
                Box::new(|_| untagged(1, true, 1, 1, 0, b"x")),
                RxError::Ddp(DdpError::NoBuffer),
            ),
            (
                "MSN range",
                Box::new(|_| untagged(1, true, 0, 7, 0, b"x")),
                RxError::Ddp(DdpError::MsnRange),
            ),
            (
                "invalid MO",
                Box::new(|_| untagged(1, true, 0, 1, 1001, b"x")),
                RxError::Ddp(DdpError::InvalidMo),
            ),
            (
                "too long",
                Box::new(|_| untagged(1, true, 0, 1, 999, b"xy")),
                RxError::MessageTooLong { qn: 0, position: 0 },
            ),
            (
                "DDP-SSN behind the window (RFC 5043 §10)",
                Box::new(|f| tagged(0, true, f.stag, 0x10_0000, b"x")),
                RxError::Sequence(DeliveryError::Duplicate),
            ),
            (
                "truncated",
                Box::new(|_| vec![0, 1, 0x81]),
                RxError::Truncated,
            ),
            (
                "tagged version",
                Box::new(|f| {
                    let mut c = tagged(1, true, f.stag, 0x10_0000, b"x");
                    c[2] = (c[2] & !3) | 2;
                    c
                }),
                RxError::Ddp(DdpError::TaggedVersion),
            ),
            (
                "untagged version",
                Box::new(|_| {
                    let mut c = untagged(1, true, 0, 1, 0, b"x");
                    c[2] &= !3;
                    c
                }),
                RxError::Ddp(DdpError::UntaggedVersion),
            ),
        ];
        for (what, make, want) in cases {
            let mut f = fixture();
            let before = f.digest();
            let chunk = make(&f);
            assert_eq!(f.feed(&chunk), 0, "{what}");
            assert_eq!(f.digest(), before, "{what}: zero bytes placed");
            let [Indication::Error {
                error,
                header,
                segment_len,
            }] = f.got[..]
            else {
                panic!("{what}: {:?}", f.got)
            };
            assert_eq!(error, want, "{what}");
            assert_eq!(
                header.as_bytes(),
                &chunk[..chunk.len().min(header.as_bytes().len())],
                "{what}"
            );
            assert_eq!(segment_len, chunk.len() - 2, "{what}");
            // §7.1: later segments are dropped silently, even valid ones.
            let valid = tagged(1, true, f.stag, 0x10_0000, b"fine");
            assert_eq!(f.feed(&valid), 0, "{what}");
            assert_eq!(f.digest(), before, "{what}: nothing after the error either");
            assert_eq!(f.got.len(), 1, "{what}: reported once");
            assert_eq!(f.rx.stats().dropped_after_error, 1);
            assert_eq!(f.rx.failed(), Some(want));
        }
    }

    /// RFC 5041 §8.2: a valid STag of another protection domain or another stream places
    /// nothing.
    #[test]
    fn valid_stag_of_another_pd_or_stream_is_refused() {
        for (pd, stream) in [(Pd(2), S), (PD, StreamId(4))] {
            let mut f = fixture();
            f.rx = StreamRx::new(stream, pd, 1, 1, 1);
            let before = f.digest();
            assert_eq!(f.feed(&tagged(1, true, f.stag, 0x10_0000, b"x")), 0);
            assert_eq!(f.digest(), before);
            assert!(matches!(
                f.got[..],
                [Indication::Error {
                    error: RxError::Ddp(DdpError::StagNotAssociated),
                    ..
                }]
            ));
        }
    }

    /// RFC 5041 §7.1 untagged check 4 ("DDP Message too long for available buffer", §7.2
    /// 0x2/0x05): the error names the buffer the segment's MSN picked, by its position in the
    /// queue (0: the oldest not completed), so the ULP can fail that receive. Behind a message
    /// still being placed it is the second buffer; once the first completed, the head.
    #[test]
    fn rfc5041_7_1_check_4_names_the_buffer_the_message_is_too_long_for() {
        let too_long = |position| RxError::MessageTooLong { qn: 0, position };
        // Each buffer of the fixture's queue 0 holds 1000 bytes.
        let mut f = fixture();
        let before = f.digest();
        assert_eq!(f.feed(&untagged(1, true, 0, 1, 0, &[1u8; 1001])), 0);
        assert_eq!(f.digest(), before, "nothing placed");
        assert!(
            matches!(f.got[..], [Indication::Error { error, .. }] if error == too_long(0)),
            "{:?}",
            f.got
        );
        // Message 1's first segment is placed; message 2 is too long for the buffer behind.
        let mut f = fixture();
        f.feed(&untagged(1, false, 0, 1, 0, &[1u8; 500]));
        f.feed(&untagged(2, true, 0, 2, 0, &[2u8; 1001]));
        assert!(
            matches!(f.got[..], [Indication::Error { error, .. }] if error == too_long(1)),
            "{:?}",
            f.got
        );
        assert_eq!(f.rx.failed(), Some(too_long(1)));
        // Message 1 delivered: message 2's buffer is the head now. A zero-length last segment
        // with its MO past the buffer is as much too long (RFC 5041 §5.4).
        let mut f = fixture();
        f.feed(&untagged(1, true, 0, 1, 0, &[1u8; 1000]));
        f.feed(&untagged(2, true, 0, 2, 1001, b""));
        assert!(
            matches!(
                f.got[..],
                [Indication::Delivered { .. }, Indication::Error { error, .. }]
                    if error == too_long(0)
            ),
            "{:?}",
            f.got
        );
    }

    /// RFC 5041 §7.1 checks 3 and 4 with RFC 5043 §10's unordered delivery: a message too
    /// long for its buffer whose segment past the buffer's end arrives before the one that
    /// crosses it is "DDP Message too long for available buffer" (§7.2 0x2/0x05), naming the
    /// buffer, as it is in order: an earlier segment is still missing, and the message
    /// reaches past the buffer whatever it holds. Check 3 (Invalid MO, 0x2/0x04) still
    /// refuses an MO past the end with nothing missing before it (in order the crossing
    /// segment would have failed check 4 first), one past the end of its own message (its
    /// L segment arrived and fitted), and one that no message could reach (§5.2: a ULP
    /// Message Length below 2^32).
    #[test]
    fn rfc5041_7_1_a_too_long_message_out_of_order_is_too_long_not_invalid_mo() {
        let too_long = RxError::MessageTooLong { qn: 0, position: 0 };
        let invalid_mo = RxError::Ddp(DdpError::InvalidMo);
        // Message 1 of 1800 bytes in three segments of 600, into a buffer of 1000: the second
        // crosses the buffer's end, the third starts past it.
        let segments = [
            untagged(1, false, 0, 1, 0, &[1u8; 600]),
            untagged(2, false, 0, 1, 600, &[2u8; 600]),
            untagged(3, true, 0, 1, 1200, &[3u8; 600]),
        ];
        let first_error = |order: &[usize]| {
            let mut f = fixture();
            let before = f.digest();
            for &i in order {
                f.feed(&segments[i]);
            }
            let placed = f.digest() != before;
            (f.rx.failed(), placed, f.got.len())
        };
        assert_eq!(
            first_error(&[0, 1, 2]),
            (Some(too_long), true, 1),
            "in order"
        );
        assert_eq!(
            first_error(&[2, 1, 0]),
            (Some(too_long), false, 1),
            "the segment past the end first"
        );
        assert_eq!(
            first_error(&[0, 2, 1]),
            (Some(too_long), true, 1),
            "the segment past the end before the crossing one"
        );
        // Nothing missing before it: the message skips offsets [600, 1200).
        let mut f = fixture();
        f.feed(&untagged(1, false, 0, 1, 0, &[1u8; 600]));
        f.feed(&untagged(2, true, 0, 1, 1200, &[3u8; 10]));
        assert_eq!(f.rx.failed(), Some(invalid_mo), "in order, past the end");
        // Its L segment arrived and ended the message at 700, within the buffer.
        let mut f = fixture();
        f.feed(&untagged(3, true, 0, 1, 600, &[3u8; 100]));
        f.feed(&untagged(2, false, 0, 1, 1200, &[2u8; 10]));
        assert_eq!(
            f.rx.failed(),
            Some(invalid_mo),
            "past its own message's end"
        );
        // No ULP Message reaches 2^32 - 1 octets and beyond (RFC 5041 §5.2).
        let mut f = fixture();
        f.feed(&untagged(3, true, 0, 1, u32::MAX - 5, &[3u8; 10]));
        assert_eq!(f.rx.failed(), Some(invalid_mo), "past any message");
    }

    /// Delivery in DDP-SSN order across queues must also be MSN order per queue: a peer that
    /// numbers otherwise gets MSN range, not a message in the wrong buffer.
    #[test]
    fn msn_out_of_ddp_ssn_order_is_refused_at_delivery() {
        let mut f = fixture();
        f.feed(&untagged(1, true, 0, 2, 0, b"second first"));
        assert!(matches!(
            f.got[..],
            [Indication::Error {
                error: RxError::Ddp(DdpError::MsnRange),
                ..
            }]
        ));
    }

    /// RFC 5041 §7.1 ("SHOULD include in the error report the DDP Header ... and the length
    /// of the DDP segment"): an MSN error found only at delivery is reported with the header
    /// of the message's last segment, as it arrived (its true MO, reserved bits and all), and
    /// that segment's length, although the segment that completed the message is an earlier
    /// one. It used to be reported with no header at all.
    #[test]
    fn rfc5041_7_1_an_msn_error_found_at_delivery_reports_its_last_segment() {
        let mut f = fixture();
        let mut last = untagged(2, true, 0, 2, 600, b"world");
        // A reserved bit of the control octet, which the receiver ignores (RFC 5041 §4.1) but
        // the report copies.
        last[2] |= 0x04;
        f.feed(&last);
        assert!(f.got.is_empty(), "{:?}", f.got);
        f.feed(&untagged(1, false, 0, 2, 0, &[7u8; 600]));
        let [Indication::Error {
            error,
            header,
            segment_len,
        }] = f.got[..]
        else {
            panic!("{:?}", f.got)
        };
        assert_eq!(error, RxError::Ddp(DdpError::MsnRange));
        assert_eq!(
            header.as_bytes(),
            &last[..20],
            "DDP-SSN and DDP header of the L segment"
        );
        assert_eq!(segment_len, last.len() - 2);
    }

    /// A ULP that refuses every segment whose RsvdULP is 0xee, and asks tagged ones for local
    /// write (as RDMAP asks of a Read Response's Data Sink).
    struct Refuse<'a>(&'a mut Vec<Indication>);

    impl Ulp for Refuse<'_> {
        fn check(&mut self, seg: &SegmentRepr<'_>) -> Result<Access, RxError> {
            match seg.header {
                Header::Tagged(h) if h.rsvd_ulp == 0xee => {
                    Err(RxError::Rdmap(RdmapError::UnexpectedOpcode))
                }
                _ => Ok(Access::LOCAL_WRITE),
            }
        }

        fn indicate(&mut self, i: Indication) {
            self.0.push(i)
        }
    }

    /// The ULP's check runs before any placement: a refused segment places nothing, is
    /// reported once with its header, and latches the stream like a DDP error (RFC 5041
    /// §7.1, RFC 5040 §7).
    #[test]
    fn a_segment_the_ulp_refuses_places_nothing_and_latches() {
        let mut f = fixture();
        let before = f.digest();
        let mut seg = tagged(1, true, f.stag, 0x10_0000, b"refused");
        seg[3] = 0xee;
        let placed =
            f.rx.on_segment(&seg, &f.stags, &f.regions, &mut Refuse(&mut f.got));
        assert_eq!(placed, 0);
        assert_eq!(f.digest(), before);
        let [Indication::Error { error, header, .. }] = f.got[..] else {
            panic!("{:?}", f.got)
        };
        assert_eq!(error, RxError::Rdmap(RdmapError::UnexpectedOpcode));
        assert_eq!(header.as_bytes(), &seg[..16]);
        assert_eq!(f.rx.failed(), Some(error));
    }

    /// The right the ULP asks for is the one checked: the fixture's STag grants remote write
    /// only, so a segment that needs local write is refused, nothing placed. Local write is
    /// the right of the ULP's own buffers (RDMAP's Read sinks): a refusal there is the local
    /// side's fault (`SinkRevoked`, RFC 5040 §4.8), not the peer's Invalid STag.
    #[test]
    fn the_access_the_ulp_asks_for_is_checked() {
        let mut f = fixture();
        let before = f.digest();
        let seg = tagged(1, true, f.stag, 0x10_0000, b"needs local write");
        f.rx.on_segment(&seg, &f.stags, &f.regions, &mut Refuse(&mut f.got));
        assert!(
            matches!(
                f.got[..],
                [Indication::Error {
                    error: RxError::SinkRevoked { stag, to: 0x10_0000 },
                    ..
                }] if stag == f.stag.0
            ),
            "{:?}",
            f.got
        );
        assert_eq!(f.digest(), before, "nothing placed");
    }

    /// An inline queue takes messages into the stream's own memory, hands each over as a copy
    /// and posts its slot again: a depth of 2 carries any number of messages, two at a time.
    #[test]
    fn inline_queue_delivers_copies_and_reposts() {
        let mut f = fixture();
        f.rx.set_inline_queue(1, 2).unwrap();
        assert_eq!(
            f.rx.set_inline_queue(1, 2),
            Err(QueueFull),
            "once per queue"
        );
        let before = f.digest();
        for msn in 1..=5u32 {
            let body = [msn as u8; 28];
            f.feed(&untagged(msn as u16, true, 1, msn, 0, &body));
            let Some(Indication::Delivered {
                message,
                inline,
                buffer,
            }) = f.got.pop()
            else {
                panic!("message {msn}: {:?}", f.got)
            };
            assert!(buffer.is_none(), "the slot is the stream's, not the ULP's");
            assert_eq!(inline.unwrap().as_bytes(), &body);
            assert!(
                matches!(message.info, MessageInfo::Untagged { qn: 1, msn: m, .. } if m == msn)
            );
        }
        assert_eq!(f.digest(), before, "no registered region was written");
    }

    /// An RDMAP stream's three inline queues share one region sized for them all, on 4 KiB
    /// pages: each open took a 2 MiB huge page a queue (three mapped, two unmapped again, one
    /// pinned for the stream's life) for about 2 KiB of slots (an independent review). Each
    /// queue takes its own slots; a queue named twice sets none.
    #[test]
    fn inline_queues_share_one_region_on_small_pages() {
        let mut f = fixture();
        f.rx = StreamRx::new(S, PD, 1, 4, 4);
        assert_eq!(
            f.rx.set_inline_queues(&[(1, 2), (1, 1)]),
            Err(QueueFull),
            "a queue named twice"
        );
        assert!(f.rx.inline.is_none(), "nothing set");
        f.rx.set_inline_queues(&[(1, 2), (2, 1), (3, 2)]).unwrap();
        let region = f.rx.inline.as_ref().unwrap();
        assert_eq!(region.len(), 5 * INLINE_SLOT);
        // Whatever huge pages the host has free (this one may have none).
        assert!(!region.huge(), "on 4 KiB pages");
        for (ddp_ssn, (qn, msn)) in (1..).zip([(1, 1), (2, 1), (3, 1), (1, 2), (3, 2)]) {
            let body = [qn as u8 * 16 + msn as u8; 40];
            f.feed(&untagged(ddp_ssn, true, qn, msn, 0, &body));
            let Some(Indication::Delivered { inline, .. }) = f.got.pop() else {
                panic!("QN {qn} MSN {msn}: {:?}", f.got)
            };
            assert_eq!(inline.unwrap().as_bytes(), &body, "QN {qn} MSN {msn}");
        }
    }

    /// The §7.1 checks hold on an inline queue: a message longer than a slot is too long, and
    /// an MSN ahead of the posted slots finds no buffer.
    #[test]
    fn inline_queue_checks_length_and_msn_range() {
        let mut f = fixture();
        f.rx.set_inline_queue(1, 1).unwrap();
        f.feed(&untagged(1, true, 1, 1, 0, &[0u8; INLINE_SLOT + 1]));
        assert!(matches!(
            f.got[..],
            [Indication::Error {
                error: RxError::MessageTooLong { qn: 1, position: 0 },
                ..
            }]
        ));
        // MSN 2 while only MSN 1 has a slot: no buffer (0x2/0x02); an MSN beyond what the
        // queue could ever hold (its capacity is the fixture's 4): out of range (0x2/0x03).
        for (msn, want) in [(2, DdpError::NoBuffer), (5, DdpError::MsnRange)] {
            let mut f = fixture();
            f.rx.set_inline_queue(1, 1).unwrap();
            f.feed(&untagged(1, true, 1, msn, 0, b"ahead"));
            assert!(
                matches!(f.got[..], [Indication::Error { error: RxError::Ddp(e), .. }] if e == want),
                "MSN {msn}: {:?}",
                f.got
            );
        }
    }

    /// A plain-DDP ULP that does not say so: the receive path takes every segment the
    /// general way (`check_and_place`), the reference for the in-order tagged path.
    struct General<'a>(&'a mut Vec<Indication>);

    impl Ulp for General<'_> {
        fn indicate(&mut self, i: Indication) {
            self.0.push(i)
        }
    }

    impl Fixture {
        fn feed_general(&mut self, chunk: &[u8]) -> usize {
            self.rx.on_segment(
                chunk,
                &self.stags,
                &self.regions,
                &mut General(&mut self.got),
            )
        }
        /// The stream's whole state but which path took its segments.
        fn state(&self) -> String {
            let mut stats = self.rx.stats;
            stats.in_order_tagged = 0;
            format!("{:?} {stats:?} {:?}", self.rx.delivery, self.rx.placed_end)
        }
    }

    /// RFC 5041 §5.2, §5.4: the sequential segments of tagged writes are Placed at their TO
    /// and each message Delivered once at its L segment, by the in-order path (a plain ULP),
    /// exactly as the general path does it.
    #[test]
    fn sequential_tagged_writes_take_the_in_order_path() {
        let (mut fast, mut general) = (fixture(), fixture());
        let data: Vec<u8> = (0..2000u32).map(|i| (i * 7 % 253) as u8).collect();
        for (k, piece) in data.chunks(100).enumerate() {
            let seg = tagged(
                1 + k as u16,
                k % 4 == 3,
                fast.stag,
                0x10_0000 + 100 * k as u64,
                piece,
            );
            assert_eq!(fast.feed(&seg), 100);
            assert_eq!(general.feed_general(&seg), 100);
        }
        assert_eq!(fast.rx.stats.in_order_tagged, 20, "every segment in order");
        assert_eq!(general.rx.stats.in_order_tagged, 0);
        assert_eq!(fast.rx.stats.messages, 5);
        assert_eq!(fast.got, general.got);
        assert_eq!(fast.state(), general.state());
        let mut out = vec![0u8; 2000];
        fast.regions[0].read(1024, &mut out).unwrap();
        assert_eq!(out, data);
    }

    /// The end of a message written sequentially (its last segment where the placement before
    /// it ended) sets aside the hint for the next message's second and third segments, at the
    /// stride of this one's, for the end of the data core's turn; a lone segment elsewhere
    /// does not.
    #[test]
    fn a_sequential_writers_message_end_sets_aside_the_next_messages_lines() {
        let mut f = fixture();
        let base = f.regions[0].base_addr() + 1024;
        let send = |f: &mut Fixture, ssn: u16, to: u64, lens: &[usize]| {
            let mut at = 0;
            for (k, &len) in lens.iter().enumerate() {
                let seg = tagged(
                    ssn + k as u16,
                    k + 1 == lens.len(),
                    f.stag,
                    0x10_0000 + to + at as u64,
                    &vec![7u8; len],
                );
                assert_eq!(f.feed(&seg), len);
                at += len;
            }
        };
        crate::port::prefetch::run_later();
        send(&mut f, 1, 0, &[300, 300, 200]);
        assert_eq!(crate::port::prefetch::later(), (base + 800 + 300, 600));
        crate::port::prefetch::run_later();
        // A lone segment where nothing ended: no guess.
        send(&mut f, 4, 3000, &[100]);
        assert_eq!(crate::port::prefetch::later(), (0, 0));
        // One where the last message ended: the stride is the segments' seen before.
        send(&mut f, 5, 3100, &[100]);
        assert_eq!(crate::port::prefetch::later(), (base + 3200 + 300, 600));
        // A segment bigger than the stride: the guess follows it.
        send(&mut f, 6, 3200, &[400]);
        assert_eq!(crate::port::prefetch::later(), (base + 3600 + 400, 800));
    }

    /// One segment of [`the_in_order_path_is_the_general_path`]'s traffic: what it may get
    /// wrong, each a branch of the in-order path's conditions.
    #[derive(Debug, Clone)]
    struct Arrival {
        /// Offset from the stream's next DDP-SSN (negative: a duplicate).
        ssn: i8,
        last: bool,
        untagged: bool,
        bad_version: bool,
        bad_stag: bool,
        /// TO as an offset from the registration's base (past 4096: out of bounds).
        to: u16,
        len: u8,
    }

    fn arrival() -> impl Strategy<Value = Arrival> {
        (
            prop_oneof![8 => Just(0i8), 2 => -2i8..4],
            any::<bool>(),
            prop::bool::weighted(0.1),
            prop::bool::weighted(0.05),
            prop::bool::weighted(0.05),
            prop_oneof![9 => 0u16..4000, 1 => 4000u16..4200],
            prop_oneof![9 => 1u8..=120, 1 => Just(0u8)],
        )
            .prop_map(
                |(ssn, last, untagged, bad_version, bad_stag, to, len)| Arrival {
                    ssn,
                    last,
                    untagged,
                    bad_version,
                    bad_stag,
                    to,
                    len,
                },
            )
    }

    use proptest::prelude::*;

    proptest! {
        /// The in-order tagged path has the general path's effect on every segment (RFC 5041
        /// §7.1 checks, §5.4 delivery, RFC 5043 §10 window): the same bytes Placed, the same
        /// indications, counters and tracker state, whatever the peer sends: in order, out of
        /// order, duplicated, untagged, of another version, with a bad STag, out of bounds,
        /// empty.
        #[test]
        fn the_in_order_path_is_the_general_path(
            arrivals in prop::collection::vec(arrival(), 1..40),
        ) {
            let (mut fast, mut general) = (fixture(), fixture());
            let mut next: u16 = 1;
            for (k, a) in arrivals.iter().enumerate() {
                let ssn = next.wrapping_add_signed(i16::from(a.ssn));
                let payload = vec![k as u8 ^ 0x5a; usize::from(a.len)];
                let stag = if a.bad_stag { Stag(fast.stag.0 ^ 0x100) } else { fast.stag };
                let mut seg = if a.untagged {
                    untagged(ssn, a.last, 0, 0, 0, &payload)
                } else {
                    tagged(ssn, a.last, stag, 0x10_0000 + u64::from(a.to), &payload)
                };
                if a.bad_version {
                    seg[2] ^= 0x03;
                }
                prop_assert_eq!(fast.feed(&seg), general.feed_general(&seg), "arrival {}", k);
                prop_assert_eq!(&fast.got, &general.got);
                prop_assert_eq!(fast.state(), general.state());
                prop_assert_eq!(fast.digest(), general.digest());
                if a.ssn == 0 {
                    next = next.wrapping_add(1);
                }
            }
            prop_assert_eq!(general.rx.stats.in_order_tagged, 0);
        }
    }
}
