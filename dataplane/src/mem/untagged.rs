//! Untagged receive buffers (RFC 5041 §5.1.2, §5.4) and the checks an untagged segment passes
//! before a byte moves (RFC 5041 §7.1, untagged checks 1-5).
//!
//! Each DDP stream has a few queues (QN); the ULP posts buffers to a queue, and the n-th buffer
//! posted receives the message with the n-th Message Sequence Number. MSNs start at 1 and wrap
//! at 2^32 (RFC 5041 §4.3). A queue's depth is fixed when it is made.

use std::collections::VecDeque;

use super::stag::{Placement, RegionSlice, Stag};
use crate::wire::ddp::DdpError;

/// A posted buffer: `len` bytes of region memory, within the registration `stag` when it was
/// posted from one. Placement checks that registration is still valid, so deregistering memory
/// also stops posted buffers in it from being filled (RFC 5041 §8.3.1 item 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostedBuffer {
    pub memory: RegionSlice,
    pub len: u32,
    pub stag: Option<Stag>,
}

/// `post` refused the buffer: the queue holds its depth already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFull;

impl core::fmt::Display for QueueFull {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("untagged receive queue full")
    }
}

impl std::error::Error for QueueFull {}

/// The buffers of one queue, MSN order.
#[derive(Debug)]
pub struct UntaggedQueue {
    /// MSN of the oldest posted buffer (the next message to complete).
    head_msn: u32,
    buffers: VecDeque<PostedBuffer>,
    depth: usize,
}

impl UntaggedQueue {
    /// A queue of at most `depth` posted buffers; the first message has MSN 1.
    pub fn new(depth: usize) -> Self {
        UntaggedQueue {
            head_msn: 1,
            buffers: VecDeque::with_capacity(depth),
            depth,
        }
    }

    pub fn post(&mut self, buf: PostedBuffer) -> Result<(), QueueFull> {
        if self.buffers.len() >= self.depth {
            return Err(QueueFull);
        }
        self.buffers.push_back(buf);
        Ok(())
    }

    /// The MSN of the next message to complete.
    pub fn head_msn(&self) -> u32 {
        self.head_msn
    }

    pub fn posted(&self) -> usize {
        self.buffers.len()
    }

    /// RFC 5041 §7.1 untagged checks 2-5 for a segment of message `msn` at offset `mo`.
    ///
    /// The MSN picks the buffer, so it is judged first: an MSN below the head (already
    /// completed) or beyond what the queue could ever hold is out of range (0x2/0x03, check 5);
    /// one the queue could hold but whose buffer is not posted yet is no buffer (0x2/0x02,
    /// check 2). Then MO past the buffer is Invalid MO (0x2/0x04, check 3) and MO + length past
    /// it is too long (0x2/0x05, check 4). A zero-length segment still needs its buffer (its
    /// message completes into it); §7.1's checks are for non-zero-length segments, but its MO
    /// is the length of the message it ends (§5.4: "adding the MO and the ULP Payload length
    /// in the last DDP Segment"), so an MO past the buffer is a message too long for it
    /// (0x2/0x05): the ULP is never told a length its buffer does not have (an independent
    /// review found 2^31 reported for a 256-byte buffer).
    pub fn check(&self, msn: u32, mo: u32, len: usize) -> Result<Placement, DdpError> {
        let d = msn.wrapping_sub(self.head_msn) as usize;
        if d >= self.depth {
            return Err(DdpError::MsnRange);
        }
        let buf = self.buffers.get(d).ok_or(DdpError::NoBuffer)?;
        if len == 0 {
            if mo > buf.len {
                return Err(DdpError::TooLong);
            }
            return Ok(Placement {
                region: buf.memory.region,
                offset: buf.memory.offset,
                len: 0,
            });
        }
        // RFC 5041 §7.1 check 3 (the MO within the buffer's offsets), then check 4 (MO +
        // length too). A segment that starts at the buffer's end (MO == its length: MO 0 of
        // an empty buffer, the first byte past a full one) carries bytes of a message longer
        // than the buffer, which is what §7.2's 0x2/0x05 names ("DDP Message too long for
        // available buffer"), as for a segment that starts inside the buffer and runs past
        // it: how the sender cut the message into segments does not change the error (RFC
        // 7306 §6's 8 bytes of Immediate Data into a receive of 0 or 4 bytes: too long,
        // both). Only an MO past the end, which no segment in order can carry (the one
        // before it would have failed check 4 first), is Invalid MO (0x2/0x04).
        if mo > buf.len {
            return Err(DdpError::InvalidMo);
        }
        if u64::from(mo) + len as u64 > u64::from(buf.len) {
            return Err(DdpError::TooLong);
        }
        Ok(Placement {
            region: buf.memory.region,
            offset: buf.memory.offset + u64::from(mo),
            len,
        })
    }

    /// The head message was delivered: its buffer leaves the queue and the next MSN becomes
    /// the head.
    pub fn complete(&mut self) -> Option<PostedBuffer> {
        let b = self.buffers.pop_front()?;
        self.head_msn = self.head_msn.wrapping_add(1);
        Some(b)
    }
}

/// The queues of one DDP stream.
#[derive(Debug)]
pub struct UntaggedQueues {
    queues: Box<[UntaggedQueue]>,
}

impl UntaggedQueues {
    /// `n` queues (QN 0 .. n-1) of `depth` buffers each.
    pub fn new(n: usize, depth: usize) -> Self {
        UntaggedQueues {
            queues: (0..n).map(|_| UntaggedQueue::new(depth)).collect(),
        }
    }

    pub fn queue(&mut self, qn: u32) -> Option<&mut UntaggedQueue> {
        self.queues.get_mut(qn as usize)
    }

    /// How many queues (QN 0 .. this - 1).
    pub fn count(&self) -> usize {
        self.queues.len()
    }

    /// The buffer posted for message `msn` of queue `qn`, if any, with its position in the
    /// queue (0: the oldest buffer not completed, the head MSN's).
    pub fn buffer(&self, qn: u32, msn: u32) -> Option<(u32, &PostedBuffer)> {
        let q = self.queues.get(qn as usize)?;
        let position = msn.wrapping_sub(q.head_msn);
        Some((position, q.buffers.get(position as usize)?))
    }

    /// RFC 5041 §7.1 untagged check 1 (QN valid for this stream, else 0x2/0x01), then the
    /// queue's own checks.
    pub fn check(&self, qn: u32, msn: u32, mo: u32, len: usize) -> Result<Placement, DdpError> {
        self.queues
            .get(qn as usize)
            .ok_or(DdpError::InvalidQn)?
            .check(msn, mo, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(offset: u64, len: u32) -> PostedBuffer {
        PostedBuffer {
            memory: RegionSlice { region: 1, offset },
            len,
            stag: None,
        }
    }

    fn queues() -> UntaggedQueues {
        let mut q = UntaggedQueues::new(3, 4);
        for i in 0..2u64 {
            q.queue(1)
                .map(|q| q.post(buf(i * 1000, 100)))
                .unwrap_or_else(|| panic!("queue 1"))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        q
    }

    /// Each RFC 5041 §7.1 untagged check with its §7.2 code.
    #[test]
    fn each_check_has_its_code() {
        let q = queues();
        assert_eq!(q.check(3, 1, 0, 10), Err(DdpError::InvalidQn), "check 1");
        assert_eq!(
            q.check(0, 1, 0, 10),
            Err(DdpError::NoBuffer),
            "check 2: nothing posted"
        );
        assert_eq!(
            q.check(1, 3, 0, 10),
            Err(DdpError::NoBuffer),
            "check 2: MSN 3 not posted"
        );
        assert_eq!(
            q.check(1, 5, 0, 10),
            Err(DdpError::MsnRange),
            "check 5: beyond depth"
        );
        assert_eq!(
            q.check(1, 0, 0, 10),
            Err(DdpError::MsnRange),
            "check 5: below the head"
        );
        assert_eq!(q.check(1, 1, 101, 1), Err(DdpError::InvalidMo), "check 3");
        assert_eq!(q.check(1, 1, 95, 6), Err(DdpError::TooLong), "check 4");
        assert_eq!(
            q.check(1, 2, 95, 5),
            Ok(Placement {
                region: 1,
                offset: 1095,
                len: 5
            }),
            "the second buffer's last bytes"
        );
        assert_eq!(
            q.check(1, 1, 0, 100).map(|p| p.offset),
            Ok(0),
            "first byte, whole buffer"
        );
    }

    /// RFC 5041 §7.1 checks 3 and 4 with §7.2's codes: a segment starting at its buffer's
    /// end is part of a message too long for the buffer (0x2/0x05), as one running past it
    /// is, whatever the buffer's size: MO 0 of an empty buffer is its end (RFC 7306 §6's 8
    /// bytes of Immediate Data into a receive of 0 bytes were Invalid MO, into one of 4 too
    /// long).
    #[test]
    fn rfc5041_7_1_a_segment_at_its_buffers_end_is_too_long_not_invalid_mo() {
        let mut q = UntaggedQueue::new(4);
        for len in [0, 4, 100] {
            q.post(buf(0, len)).unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(q.check(1, 0, 8), Err(DdpError::TooLong), "empty buffer");
        assert_eq!(q.check(2, 0, 8), Err(DdpError::TooLong), "4 bytes");
        assert_eq!(
            q.check(3, 100, 1),
            Err(DdpError::TooLong),
            "the byte after a full one"
        );
        assert_eq!(q.check(3, 101, 1), Err(DdpError::InvalidMo), "past its end");
        assert_eq!(
            q.check(1, 0, 0).map(|p| p.len),
            Ok(0),
            "an empty message fits"
        );
    }

    /// RFC 5041 §4.3: MSNs start at 1 and wrap at 2^32; completion moves the head.
    #[test]
    fn msn_starts_at_one_and_wraps() {
        let mut q = UntaggedQueue::new(2);
        assert_eq!(q.head_msn(), 1);
        q.head_msn = u32::MAX;
        q.post(buf(0, 10)).unwrap_or_else(|e| panic!("{e}"));
        q.post(buf(10, 10)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(q.post(buf(20, 10)), Err(QueueFull));
        assert!(q.check(u32::MAX, 0, 1).is_ok());
        assert_eq!(
            q.check(0, 0, 1).map(|p| p.offset),
            Ok(10),
            "MSN 0 follows 2^32 - 1"
        );
        assert_eq!(q.complete(), Some(buf(0, 10)));
        assert_eq!(q.head_msn(), 0);
        assert_eq!(
            q.check(u32::MAX, 0, 1),
            Err(DdpError::MsnRange),
            "completed"
        );
    }

    /// A zero-length segment needs a buffer; its MO (the length of the message it ends, RFC
    /// 5041 §5.4) may reach the buffer's end, not pass it.
    #[test]
    fn zero_length_needs_a_buffer_and_an_mo_within_it() {
        let q = queues();
        assert_eq!(q.check(1, 1, 0, 0).map(|p| p.len), Ok(0));
        assert_eq!(
            q.check(1, 1, 100, 0).map(|p| p.len),
            Ok(0),
            "ends at its end"
        );
        assert_eq!(q.check(1, 1, 101, 0), Err(DdpError::TooLong), "past it");
        assert_eq!(q.check(1, 1, 5000, 0), Err(DdpError::TooLong));
        assert_eq!(q.check(0, 1, 0, 0), Err(DdpError::NoBuffer));
    }
}
