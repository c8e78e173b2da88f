//! Steering Tags (RFC 5041 §2.2, §8.2, §8.3) and the checks a tagged segment passes before a
//! byte moves (RFC 5041 §7.1, in the order siw applies them: STag valid → protection domain →
//! stream association → access right → base and bounds with the 64-bit wrap check).
//!
//! An STag is a 24-bit index into the table and an 8-bit key. Indices are handed out in a
//! random order, each starts from a random key, and every reuse of an index takes the next key,
//! so a stale or guessed STag fails the whole-STag comparison, and an STag the peer saw tells it
//! nothing of the others (RFC 5041 §8.3: STags are valid only as long as the ULP says; §8.1: a
//! peer guessing its way into memory). An 8-bit key returns after 256 reuses of its index: the
//! free list is first in, first out, so that takes 256 passes over every free index, and the
//! protection domain is checked as well. The table belongs to one owner (the control thread builds
//! it, each data core holds its own copy updated by message; DESIGN.md): nothing here is shared
//! or locked.

use core::fmt;

use crate::splitmix::SplitMix64;
use crate::wire::ddp::DdpError;
use crate::wire::rdmap::RdmapError;

/// A Steering Tag: `index << 8 | key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stag(pub u32);

impl Stag {
    pub const fn new(index: u32, key: u8) -> Stag {
        Stag((index & 0x00ff_ffff) << 8 | key as u32)
    }
    pub const fn index(self) -> u32 {
        self.0 >> 8
    }
    pub const fn key(self) -> u8 {
        self.0 as u8
    }
}

impl fmt::Display for Stag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}

/// A protection domain (RFC 5041 §8.2): locally defined, never on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pd(pub u32);

/// A DDP stream's local identity (RFC 5041 §8.2 "DDP Stream ID"): never on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamId(pub u64);

/// Access rights of a registration (RFC 5041 §8.3.1 items 4-5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    pub const LOCAL_READ: Access = Access(1);
    pub const LOCAL_WRITE: Access = Access(2);
    /// The peer may place into the region (tagged DDP segments, RDMA Write).
    pub const REMOTE_WRITE: Access = Access(4);
    /// The peer may read from it (RDMA Read source).
    pub const REMOTE_READ: Access = Access(8);
    /// The peer may run RFC 7306's atomic operations on it. RFC 7306 leaves the right unnamed
    /// (§5: "the advertisement of Tagged Buffer information for Atomic Operations is outside
    /// the scope"); an atomic reads and writes the word, so it is a right of its own, as
    /// InfiniBand's `IBV_ACCESS_REMOTE_ATOMIC`, that remote read or write alone does not grant.
    pub const REMOTE_ATOMIC: Access = Access(16);

    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
    /// Whether any remote right is granted: the STag is one the peer may be told of (an
    /// RDMA Write or Read target, an atomic's word), and so one it may invalidate.
    pub const fn any_remote(self) -> bool {
        self.0 & (Access::REMOTE_WRITE.0 | Access::REMOTE_READ.0 | Access::REMOTE_ATOMIC.0) != 0
    }
    pub const fn union(self, other: Access) -> Access {
        Access(self.0 | other.0)
    }
}

impl core::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, o: Access) -> Access {
        self.union(o)
    }
}

/// Which memory a registration covers: region `region`, bytes from `offset`. The region
/// itself (hugepage memory) is the memory module's; the table only steers to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RegionSlice {
    pub region: u32,
    pub offset: u64,
}

/// One registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    pub pd: Pd,
    pub access: Access,
    /// RFC 5041 §8.2 DDP Stream association: when set, no other stream may use the STag.
    pub stream: Option<StreamId>,
    /// The Tagged Offset of the first byte (RFC 5041 §2.2 TO: the base).
    pub to_base: u64,
    pub len: u64,
    pub memory: RegionSlice,
}

impl Registration {
    /// Whether this registration allows local writes into all of `buffer`'s memory.
    pub fn holds(&self, buffer: &crate::mem::PostedBuffer) -> bool {
        let (start, end) = (
            self.memory.offset,
            self.memory.offset.saturating_add(self.len),
        );
        let b = buffer.memory.offset;
        self.access.contains(Access::LOCAL_WRITE)
            && buffer.memory.region == self.memory.region
            && b >= start
            && b.saturating_add(u64::from(buffer.len)) <= end
    }
}

/// Where a validated segment goes: `len` bytes at `offset` of region `region`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub region: u32,
    pub offset: u64,
    pub len: usize,
}

/// Why a registration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterError {
    /// Every index is in use.
    Full,
    /// `to_base + len` does not fit 64 bits: the range must be addressable by TO.
    RangeWraps,
    /// A data core could not be told within the time allowed (its command channel stayed
    /// full): the registration was withdrawn, since that core would refuse the STag.
    CoreUnreachable,
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RegisterError::Full => "STag table full",
            RegisterError::RangeWraps => "TO range wraps past 2^64",
            RegisterError::CoreUnreachable => {
                "a data core could not be told in time; the registration was withdrawn"
            }
        })
    }
}

impl std::error::Error for RegisterError {}

#[derive(Debug, Clone, Copy)]
struct Slot {
    key: u8,
    /// How many registrations the master made at this index (a replica: the one it holds).
    /// The key comes round after 256 of them; this does not in practice, so a replica that
    /// resyncs tells the registration it holds from a newer one with the same STag
    /// (RFC 5041 §8.3.1 item 6). Never read on the fast path; 32 bits keep a slot at 64
    /// bytes.
    generation: u32,
    reg: Option<Registration>,
}

/// The STag table: fixed capacity, chosen at creation.
#[derive(Debug)]
pub struct StagTable {
    slots: Box<[Slot]>,
    /// Free indices, taken from the front, in a random order at first; an invalidated index
    /// goes to the back. Empty and unused in a replica, whose STags are chosen by the master.
    free: std::collections::VecDeque<u32>,
    replica: bool,
    used: usize,
}

/// The largest table: 24-bit indices.
pub const MAX_STAGS: usize = 1 << 24;

impl StagTable {
    /// A table of `capacity` STags (at most 2^24). `random` seeds the order of the indices and
    /// every index's first key, so STags are not predictable from one run to the next, nor one
    /// from another (RFC 5041 §8.3: a peer must not guess its way into memory); pass a real
    /// random value.
    pub fn new(capacity: usize, random: u64) -> StagTable {
        let capacity = capacity.clamp(1, MAX_STAGS);
        let mut rng = SplitMix64(random);
        let slots = (0..capacity)
            .map(|_| Slot {
                key: rng.next() as u8,
                generation: 0,
                reg: None,
            })
            .collect();
        let mut order: Vec<u32> = (0..capacity as u32).collect();
        rng.shuffle(&mut order);
        let free = order.into();
        StagTable {
            slots,
            free,
            replica: false,
            used: 0,
        }
    }

    /// A data core's copy of a master table: registrations arrive with their STags
    /// ([`StagTable::insert`]) rather than being allocated here.
    pub fn replica(capacity: usize) -> StagTable {
        let capacity = capacity.clamp(1, MAX_STAGS);
        StagTable {
            slots: vec![
                Slot {
                    key: 0,
                    generation: 0,
                    reg: None
                };
                capacity
            ]
            .into_boxed_slice(),
            free: std::collections::VecDeque::new(),
            replica: true,
            used: 0,
        }
    }

    /// Puts a registration the master made under exactly its STag and generation
    /// ([`StagTable::generation`]; replicas only, a master allocates with
    /// [`StagTable::register`]). An STag beyond the capacity is ignored. Returns the
    /// registration it replaced: the master reuses an index only once it is invalidated, so
    /// that one was revoked and this replica never heard (its invalidation went by resync).
    #[must_use = "a replaced registration was revoked: its revocation is the caller's to finish"]
    pub fn insert(
        &mut self,
        stag: Stag,
        generation: u32,
        reg: Registration,
    ) -> Option<Registration> {
        debug_assert!(self.replica, "a master table allocates its own STags");
        let slot = self.slots.get_mut(stag.index() as usize)?;
        let old = std::mem::replace(
            slot,
            Slot {
                key: stag.key(),
                generation,
                reg: Some(reg),
            },
        );
        if old.reg.is_none() {
            self.used += 1;
        }
        old.reg
    }

    /// Registers memory and returns its STag.
    pub fn register(&mut self, reg: Registration) -> Result<Stag, RegisterError> {
        if reg.to_base.checked_add(reg.len).is_none() {
            // The end of the range, to_base + len, must itself be a 64-bit value: a segment
            // reaching it would fail check 5 anyway.
            return Err(RegisterError::RangeWraps);
        }
        let index = self.free.pop_front().ok_or(RegisterError::Full)?;
        let slot = &mut self.slots[index as usize];
        // A new key for every reuse: the previous holder's STag no longer matches.
        slot.key = slot.key.wrapping_add(1);
        slot.generation = slot.generation.wrapping_add(1);
        slot.reg = Some(reg);
        self.used += 1;
        Ok(Stag::new(index, slot.key))
    }

    /// Invalidates an STag (RFC 5041 §8.3.1 item 6: after this, nothing placed through it).
    /// The index goes to the back of the free list, so it is reused as late as possible.
    pub fn invalidate(&mut self, stag: Stag) -> Option<Registration> {
        let slot = self.slots.get_mut(stag.index() as usize)?;
        if slot.key != stag.key() {
            return None;
        }
        let reg = slot.reg.take()?;
        self.used -= 1;
        if !self.replica {
            self.free.push_back(stag.index());
        }
        Some(reg)
    }

    /// Invalidates every registration `keep` refuses, given its STag and generation, handing
    /// each to `dropped_one` as it goes, and returns how many (a scan of the whole table: for a
    /// replica catching up with the master after a stall, not per packet).
    pub fn retain(
        &mut self,
        dropped_one: &mut impl FnMut(&Registration),
        mut keep: impl FnMut(Stag, u32) -> bool,
    ) -> usize {
        let mut dropped = 0;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if slot.reg.is_some() && !keep(Stag::new(i as u32, slot.key), slot.generation) {
                if let Some(reg) = slot.reg.take() {
                    dropped_one(&reg);
                }
                dropped += 1;
                if !self.replica {
                    self.free.push_back(i as u32);
                }
            }
        }
        self.used -= dropped;
        dropped
    }

    /// How many registrations the master made at `stag`'s index (0 beyond the capacity): what
    /// tells two registrations apart once the 8-bit key came round.
    pub fn generation(&self, stag: Stag) -> u32 {
        self.slots
            .get(stag.index() as usize)
            .map_or(0, |s| s.generation)
    }

    /// The capacity chosen at creation (clamped as [`StagTable::new`] says).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Whether `stag` still allows Placement into the posted receive `buffer` of a stream of
    /// protection domain `pd` (RFC 5041 §7.1 untagged check 2, §8.3.1 item 6): a valid
    /// registration of that PD granting local write over all of the buffer's memory. Asked
    /// when the buffer is posted and again before each placement into it.
    #[inline]
    pub fn allows_receive(&self, stag: Stag, pd: Pd, buffer: &crate::mem::PostedBuffer) -> bool {
        self.lookup(stag)
            .is_some_and(|r| r.pd == pd && r.holds(buffer))
    }

    /// The registration of exactly this STag: index and key must both match.
    pub fn lookup(&self, stag: Stag) -> Option<&Registration> {
        let slot = self.slots.get(stag.index() as usize)?;
        if slot.key != stag.key() {
            return None;
        }
        slot.reg.as_ref()
    }

    /// Whether any live registration steers into region `region` (a scan: for the control
    /// path, before the region is freed).
    pub fn names_region(&self, region: u32) -> bool {
        self.slots
            .iter()
            .any(|s| s.reg.is_some_and(|r| r.memory.region == region))
    }

    /// Every registration in use, with its STag, in index order (a scan: for reports).
    pub fn iter(&self) -> impl Iterator<Item = (Stag, &Registration)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            let reg = s.reg.as_ref()?;
            Some((Stag::new(i as u32, s.key), reg))
        })
    }

    /// Registrations in use.
    pub fn len(&self) -> usize {
        self.used
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// RFC 5041 §7.1, tagged: whether a segment of `len` payload bytes for `stag` at `to`,
    /// arriving on `stream` of protection domain `pd`, may be placed, and where. Nothing is
    /// placed by this call; on `Err` nothing may be.
    ///
    /// Order and numbers (§7.2): unknown STag or wrong key → Invalid STag; another protection
    /// domain or another stream (§8.2) → STag not associated with DDP Stream; no remote write
    /// right → Invalid STag (§7.1 check 2: the STag has no buffer that allows placement; siw
    /// answers the same); TO below the base → Base or bounds (check 3); TO + len past 2^64 →
    /// TO wrap (check 5, tested before check 4 so the sum is never taken wrapped); TO + len past
    /// the end → Base or bounds (check 4). A zero-length segment places nothing and is not
    /// validated (§7.1 covers "non-zero-length" segments).
    pub fn check_tagged(
        &self,
        stag: Stag,
        to: u64,
        len: usize,
        stream: StreamId,
        pd: Pd,
    ) -> Result<Placement, DdpError> {
        self.check_access(stag, to, len, stream, pd, Access::REMOTE_WRITE)
            .map_err(TagFault::as_ddp)
    }

    /// The checks of [`StagTable::check_tagged`] for a use that needs `need` rather than remote
    /// write: an RDMA Read Response into a Data Sink needs local write (the buffer is the
    /// requester's own, RFC 5040 §5.2), an RDMA Read Request's Data Source remote read. The
    /// fault keeps "access rights" apart, which RDMAP reports with a code of its own (RFC 5040
    /// §4.8, 0x1/0x02) and DDP as Invalid STag. Same order, same zero-length rule.
    // Always inlined: out of line, its `Result<Placement, _>` came back through memory in
    // narrow stores that the receive path then read wide, a store-forwarding stall on every
    // tagged segment (perf: 17-22 % of `StreamRx::on_segment`; ddp-rx-bench conn 64 B
    // 12.2-12.6 -> 13.1-13.2 M segments/s).
    #[inline(always)]
    pub fn check_access(
        &self,
        stag: Stag,
        to: u64,
        len: usize,
        stream: StreamId,
        pd: Pd,
        need: Access,
    ) -> Result<Placement, TagFault> {
        if len == 0 {
            return Ok(Placement {
                region: 0,
                offset: 0,
                len: 0,
            });
        }
        let reg = self.lookup(stag).ok_or(TagFault::InvalidStag)?;
        if reg.pd != pd || reg.stream.is_some_and(|s| s != stream) {
            return Err(TagFault::NotAssociated);
        }
        if !reg.access.contains(need) {
            return Err(TagFault::AccessRights);
        }
        if to < reg.to_base {
            return Err(TagFault::BaseOrBounds);
        }
        let rel = to - reg.to_base;
        if rel >= reg.len {
            return Err(TagFault::BaseOrBounds);
        }
        let len64 = len as u64;
        if to.checked_add(len64).is_none() {
            return Err(TagFault::ToWrap);
        }
        // rel < reg.len and len fits: no overflow here.
        if rel + len64 > reg.len {
            return Err(TagFault::BaseOrBounds);
        }
        Ok(Placement {
            region: reg.memory.region,
            offset: reg.memory.offset + rel,
            len,
        })
    }
}

/// Why [`StagTable::check_access`] refused an STag use, before it is numbered by the layer
/// that reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TagFault {
    InvalidStag,
    /// Another protection domain, or bound to another stream (RFC 5041 §8.2).
    NotAssociated,
    /// The registration does not grant the right the use needs.
    AccessRights,
    BaseOrBounds,
    ToWrap,
}

impl TagFault {
    /// The RFC 5041 §7.2 number: DDP has no access-rights code, so that is Invalid STag.
    pub const fn as_ddp(self) -> DdpError {
        match self {
            TagFault::InvalidStag | TagFault::AccessRights => DdpError::InvalidStag,
            TagFault::NotAssociated => DdpError::StagNotAssociated,
            TagFault::BaseOrBounds => DdpError::BaseOrBounds,
            TagFault::ToWrap => DdpError::ToWrap,
        }
    }

    /// The RFC 5040 §4.8 number (Remote Protection Error).
    pub const fn as_rdmap(self) -> RdmapError {
        match self {
            TagFault::InvalidStag => RdmapError::InvalidStag,
            TagFault::NotAssociated => RdmapError::StagNotAssociated,
            TagFault::AccessRights => RdmapError::AccessRights,
            TagFault::BaseOrBounds => RdmapError::BaseOrBounds,
            TagFault::ToWrap => RdmapError::ToWrap,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;

    const PD: Pd = Pd(1);
    const S: StreamId = StreamId(7);

    fn reg(to_base: u64, len: u64) -> Registration {
        Registration {
            pd: PD,
            access: Access::REMOTE_WRITE | Access::LOCAL_READ,
            stream: None,
            to_base,
            len,
            memory: RegionSlice {
                region: 3,
                offset: 4096,
            },
        }
    }

    /// RFC 5041 §8.3 (a peer must not guess its way into memory): an STag the peer saw tells
    /// it nothing of the next one. Indices used to be handed out one after another, and every
    /// index's first key was one random byte xor a fixed function of the index: the next STag
    /// followed from any one. Over 64 seeds, the next index is rarely the one after, and the
    /// two keys' difference takes many values.
    #[test]
    fn one_stag_does_not_tell_the_next_8_3() {
        let mut next_index = 0;
        let mut key_steps = std::collections::HashSet::new();
        for seed in 0..64u64 {
            let mut t = StagTable::new(1024, seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let a = t.register(reg(0, 4096)).unwrap();
            let b = t.register(reg(0, 4096)).unwrap();
            if b.index() == (a.index() + 1) % 1024 {
                next_index += 1;
            }
            key_steps.insert(b.key().wrapping_sub(a.key()) ^ (b.index() ^ a.index()) as u8);
        }
        assert!(next_index <= 2, "{next_index} of 64 took the next index");
        assert!(key_steps.len() > 32, "{} key relations", key_steps.len());
    }

    /// An index reused takes the next key: a stale STag of it fails until 256 reuses.
    #[test]
    fn a_reused_index_takes_the_next_key() {
        let mut t = StagTable::new(1, 42);
        let first = t.register(reg(0, 4096)).unwrap();
        t.invalidate(first).unwrap();
        let mut seen = vec![first];
        for _ in 0..255 {
            let s = t.register(reg(0, 4096)).unwrap();
            assert_eq!(s.index(), first.index());
            assert!(!seen.contains(&s), "{s} again within 256 reuses");
            assert!(t.lookup(first).is_none());
            seen.push(s);
            t.invalidate(s).unwrap();
        }
    }

    #[test]
    fn iter_lists_exactly_the_live_registrations() {
        let mut t = StagTable::new(16, 99);
        let reg = |len| Registration {
            pd: Pd(1),
            access: Access::REMOTE_WRITE,
            stream: None,
            to_base: 0,
            len,
            memory: RegionSlice {
                region: 0,
                offset: 0,
            },
        };
        let a = t.register(reg(10)).expect("room");
        let b = t.register(reg(20)).expect("room");
        t.invalidate(a);
        let live: Vec<(Stag, u64)> = t.iter().map(|(s, r)| (s, r.len)).collect();
        assert_eq!(live, vec![(b, 20)]);
        assert_eq!(
            t.lookup(live[0].0).map(|r| r.len),
            Some(20),
            "the STag listed is valid"
        );
    }

    /// The generation a resync compares (RFC 5041 §8.3.1 item 6) does not grow the slot the
    /// fast path reads per tagged segment.
    #[test]
    fn a_slot_with_its_generation_stays_64_bytes() {
        assert!(core::mem::size_of::<Slot>() <= 64);
    }

    #[test]
    fn stag_is_24_bit_index_and_8_bit_key() {
        let s = Stag::new(0x12_3456, 0x78);
        assert_eq!(s.0, 0x1234_5678);
        assert_eq!((s.index(), s.key()), (0x12_3456, 0x78));
    }

    /// RFC 5041 §7.1 tagged checks 3-4 at the region's first and last byte.
    #[test]
    fn first_and_last_byte_are_in_bounds_one_past_is_not() {
        let mut t = StagTable::new(16, 99);
        let stag = t
            .register(reg(0x1000, 100))
            .unwrap_or_else(|e| panic!("{e}"));
        let ok = |to, len| t.check_tagged(stag, to, len, S, PD);
        assert_eq!(
            ok(0x1000, 1),
            Ok(Placement {
                region: 3,
                offset: 4096,
                len: 1
            })
        );
        assert_eq!(ok(0x1000 + 99, 1).map(|p| p.offset), Ok(4096 + 99));
        assert_eq!(ok(0x1000, 100).map(|p| p.len), Ok(100));
        assert_eq!(ok(0x1000 + 100, 1), Err(DdpError::BaseOrBounds), "one past");
        assert_eq!(ok(0x1000 - 1, 1), Err(DdpError::BaseOrBounds), "one before");
        assert_eq!(ok(0x1000 + 99, 2), Err(DdpError::BaseOrBounds), "runs past");
        assert_eq!(ok(0x1000, 101), Err(DdpError::BaseOrBounds));
    }

    /// RFC 5041 §7.1 tagged check 5: a 64-bit TO + length that wraps is TO wrap, whatever the
    /// registration.
    #[test]
    fn to_wrap_is_its_own_error() {
        let mut t = StagTable::new(16, 5);
        // The highest registrable range ends at u64::MAX (exclusive).
        let stag = t
            .register(reg(u64::MAX - 10, 10))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            t.check_tagged(stag, u64::MAX - 1, 1, S, PD)
                .map(|p| p.offset),
            Ok(4096 + 9),
            "the last byte is placeable"
        );
        assert_eq!(
            t.check_tagged(stag, u64::MAX - 1, 4, S, PD),
            Err(DdpError::ToWrap),
            "TO + len passes 2^64"
        );
        assert_eq!(
            t.check_tagged(stag, u64::MAX - 2, 2, S, PD).map(|p| p.len),
            Ok(2),
            "ends exactly at the last byte: TO + len = 2^64 - 1, no wrap"
        );
        assert_eq!(
            t.register(reg(u64::MAX - 9, 10)),
            Err(RegisterError::RangeWraps)
        );
    }

    /// RFC 5041 §8.2: both association mechanisms; §7.2 code 0x1/0x02.
    #[test]
    fn protection_domain_and_stream_association() {
        let mut t = StagTable::new(16, 5);
        let any_stream = t.register(reg(0, 64)).unwrap_or_else(|e| panic!("{e}"));
        let one_stream = t
            .register(Registration {
                stream: Some(S),
                ..reg(0, 64)
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(t.check_tagged(any_stream, 0, 8, StreamId(99), PD).is_ok());
        assert_eq!(
            t.check_tagged(any_stream, 0, 8, S, Pd(2)),
            Err(DdpError::StagNotAssociated),
            "another protection domain"
        );
        assert!(t.check_tagged(one_stream, 0, 8, S, PD).is_ok());
        assert_eq!(
            t.check_tagged(one_stream, 0, 8, StreamId(8), PD),
            Err(DdpError::StagNotAssociated),
            "another stream of the same domain"
        );
    }

    /// RFC 5041 §8.3.1 item 5: a region without remote write is not a placement target.
    #[test]
    fn read_only_region_refuses_placement() {
        let mut t = StagTable::new(16, 5);
        let ro = t
            .register(Registration {
                access: Access::REMOTE_READ | Access::LOCAL_READ,
                ..reg(0, 64)
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.check_tagged(ro, 0, 8, S, PD), Err(DdpError::InvalidStag));
    }

    /// The same checks for a use that needs another right: an RDMA Read's Data Source needs
    /// remote read (RFC 5040 §5.2), and a missing right is "access rights" to RDMAP (§4.8
    /// 0x1/0x02) but Invalid STag to DDP (RFC 5041 §7.2 has no such code).
    #[test]
    fn rfc5040_4_8_access_rights_is_its_own_fault() {
        let mut t = StagTable::new(16, 5);
        let wo = t.register(reg(0, 64)).unwrap_or_else(|e| panic!("{e}"));
        let fault = t.check_access(wo, 0, 8, S, PD, Access::REMOTE_READ);
        assert_eq!(fault, Err(TagFault::AccessRights));
        assert_eq!(
            fault.map_err(TagFault::as_rdmap),
            Err(RdmapError::AccessRights)
        );
        assert_eq!(fault.map_err(TagFault::as_ddp), Err(DdpError::InvalidStag));
        // The order holds: the domain is judged before the right, bounds after it.
        assert_eq!(
            t.check_access(wo, 0, 8, S, Pd(9), Access::REMOTE_READ),
            Err(TagFault::NotAssociated)
        );
        let rw = t
            .register(Registration {
                access: Access::REMOTE_READ | Access::LOCAL_READ,
                ..reg(0, 64)
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            t.check_access(rw, 60, 8, S, PD, Access::REMOTE_READ),
            Err(TagFault::BaseOrBounds)
        );
        assert!(t
            .check_access(rw, 56, 8, S, PD, Access::REMOTE_READ)
            .is_ok());
    }

    /// RFC 5041 §8.3.1 item 6 and the whole-STag comparison: after invalidation the STag is
    /// dead, and when its index is reused the old STag (old key) still does not reach the new
    /// registration.
    #[test]
    fn invalidated_and_stale_stags_fail() {
        let mut t = StagTable::new(1, 5);
        let old = t.register(reg(0, 64)).unwrap_or_else(|e| panic!("{e}"));
        assert!(t.invalidate(old).is_some());
        assert_eq!(t.check_tagged(old, 0, 8, S, PD), Err(DdpError::InvalidStag));
        assert!(t.invalidate(old).is_none(), "invalidated once");
        let new = t.register(reg(0, 64)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(new.index(), old.index());
        assert_ne!(new, old);
        assert_eq!(t.check_tagged(old, 0, 8, S, PD), Err(DdpError::InvalidStag));
        assert!(t.check_tagged(new, 0, 8, S, PD).is_ok());
        assert_eq!(t.register(reg(0, 1)), Err(RegisterError::Full));
    }

    /// Random STags from an attacker: none reaches a registration except by guessing all 32
    /// bits of one.
    #[test]
    fn random_stags_are_refused() {
        let mut t = StagTable::new(1024, 0x1234_5678_9abc_def0);
        let mut live = Vec::new();
        for _ in 0..100 {
            live.push(t.register(reg(0, 4096)).unwrap_or_else(|e| panic!("{e}")));
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut hits = 0;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let s = Stag(x as u32);
            if live.contains(&s) {
                continue;
            }
            if t.check_tagged(s, 0, 1, S, PD).is_ok() {
                hits += 1;
            }
        }
        assert_eq!(hits, 0);
    }

    /// Indices start at a random point: two tables seeded differently give different first
    /// STags.
    #[test]
    fn allocation_starts_at_a_random_point() {
        let a = StagTable::new(1 << 16, 1).register(reg(0, 1));
        let b = StagTable::new(1 << 16, 0xdead_beef_0000_4321).register(reg(0, 1));
        assert_ne!(a, b);
    }

    #[test]
    fn zero_length_segments_place_nothing_and_are_not_checked() {
        let t = StagTable::new(4, 0);
        assert_eq!(
            t.check_tagged(Stag(0xffff_ffff), 0, 0, S, PD)
                .map(|p| p.len),
            Ok(0)
        );
    }
}
