//! Registered memory, the ULP's side of RFC 4296 §2.1.2 `ddp_register` / `ddp_deregister`:
//! regions, protection domains and Steering Tags (RFC 5041 §8.2, §8.3).
//!
//! [`Memory`] owns the regions and the master STag table (through
//! [`ddpdk_dataplane::mem::Coordinator`]). Data cores hold replicas; a deregistration returns
//! only once every replica has dropped the STag, so no core can place into the memory
//! afterwards (RFC 5041 §8.3.1 item 6). With no data cores (everything on one thread, as in the
//! simulations), the master table is what placement checks against, and deregistration is
//! immediate for the same reason.

use core::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use std::time::Duration;

use ddpdk_dataplane::ddp::Regions;
use ddpdk_dataplane::mem::{
    Access, Coordinator, CoreStags, Pd, PostedBuffer, RegionSlice, RegisterError, Registration,
    Revocation, RevokeError, Stag, StagTable, StreamId,
};
use ddpdk_dataplane::port::region::Region;

/// A region's number; registrations and posted buffers name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RegionId(pub u32);

/// What to register: `len` bytes of `region` from `offset`, for protection domain `pd`, with
/// `access` rights, optionally bound to one DDP stream (RFC 5041 §8.2), addressed by the peer
/// from Tagged Offset `to_base`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryRegistration {
    pub pd: Pd,
    pub region: RegionId,
    pub offset: u64,
    pub len: u64,
    pub access: Access,
    pub stream: Option<StreamId>,
    pub to_base: u64,
}

/// A registered buffer (RFC 4296 `bdesc_t`): the STag the peer names and the TO of its first
/// byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registered {
    pub stag: Stag,
    pub to_base: u64,
    pub len: u64,
}

/// Why a memory operation was refused. Nothing changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryError {
    NoSuchRegion,
    /// The range lies outside its region.
    OutOfRegion,
    /// An access right the operation needs is missing (for example posting a receive buffer
    /// without local write).
    Access,
    /// The STag names no registration of this protection domain.
    NoSuchStag,
    Register(RegisterError),
    Revoke(RevokeError),
    /// An STag still names the region: deregister it first.
    InUse,
    /// A revocation naming the region is not yet acknowledged by every data core (one timed
    /// out on a stalled core, or one under way): that core may still place into the region or
    /// copy queued sends out of it. Retry once it has run.
    Revoking,
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryError::NoSuchRegion => f.write_str("no such region"),
            MemoryError::OutOfRegion => f.write_str("range outside its region"),
            MemoryError::Access => f.write_str("registration lacks the access right"),
            MemoryError::NoSuchStag => f.write_str("no such STag in this protection domain"),
            MemoryError::Register(e) => e.fmt(f),
            MemoryError::Revoke(e) => e.fmt(f),
            MemoryError::InUse => f.write_str("an STag still names the region"),
            MemoryError::Revoking => f.write_str(
                "a data core has yet to acknowledge the revocation of an STag that named the region",
            ),
        }
    }
}

impl std::error::Error for MemoryError {}

/// Regions an endpoint holds at once at most; a slot is reused once its region is freed
/// ([`Memory::free_region`]).
pub const MAX_REGIONS: usize = 1 << SLOT_BITS;
/// A [`RegionId`] is a slot (its low bits) and the slot's generation (the rest): an id of a
/// freed region never finds the region that reuses its slot.
const SLOT_BITS: u32 = 10;
const GEN_MASK: u32 = u32::MAX >> SLOT_BITS;

/// One region in its slot, with the generation its id carries.
#[derive(Debug)]
pub struct Slotted {
    generation: u32,
    region: Region,
}

/// One snapshot of an endpoint's regions. Immutable: a data core reads a slot with a plain
/// load, and the snapshot it holds keeps every region in it alive. [`Memory`] publishes a new
/// snapshot through [`SharedRegions`] whenever a region is added or freed; a data core takes
/// the latest once per poll, after it has applied its STag commands, so it knows every region
/// an STag it knows names.
#[derive(Debug, Clone)]
pub struct RegionTable {
    slots: Box<[Option<Arc<Slotted>>]>,
}

/// Where the latest [`RegionTable`] is published, for data cores and connections, with a
/// count of the publications: a data core asks for the table every turn, and reading a
/// counter that has not moved is one load where `ArcSwap::load` is a fenced debt-slot write
/// and a thread-local lookup (with its caller, a tenth of a latency-bound core's samples:
/// benches/README.md, "Session 29").
#[derive(Debug)]
pub struct SharedRegions {
    table: ArcSwap<RegionTable>,
    generation: AtomicU64,
}

impl SharedRegions {
    fn new(table: RegionTable) -> SharedRegions {
        SharedRegions {
            table: ArcSwap::from_pointee(table),
            generation: AtomicU64::new(0),
        }
    }

    /// The latest table, borrowed.
    pub fn load(&self) -> arc_swap::Guard<Arc<RegionTable>> {
        self.table.load()
    }

    /// The latest table, held.
    pub fn load_full(&self) -> Arc<RegionTable> {
        self.table.load_full()
    }

    /// How many tables were published before the latest. Whoever sees a count has the table
    /// published with it (or a later one) from [`SharedRegions::load`]: the count moves after
    /// the table is stored, with release, and is read with acquire.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn store(&self, table: RegionTable) {
        self.table.store(Arc::new(table));
        self.generation.fetch_add(1, Ordering::Release);
    }
}

impl RegionTable {
    fn new() -> RegionTable {
        RegionTable {
            slots: vec![None; MAX_REGIONS].into_boxed_slice(),
        }
    }

    fn get(&self, id: u32) -> Option<&Region> {
        match self.slots.get((id & (MAX_REGIONS as u32 - 1)) as usize)? {
            Some(s) if s.generation == id >> SLOT_BITS => Some(&s.region),
            _ => None,
        }
    }
}

impl Regions for RegionTable {
    type Ref<'a> = &'a Region;
    fn region(&self, id: u32) -> Option<&Region> {
        self.get(id)
    }
}

/// What placement checks against and writes into: an STag table (the master, or a data core's
/// replica) and the regions.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub stags: &'a StagTable,
    pub regions: &'a RegionTable,
}

impl<'a> From<&'a Memory> for Place<'a> {
    fn from(m: &'a Memory) -> Place<'a> {
        Place {
            stags: m.stags.master(),
            regions: &m.master,
        }
    }
}

/// Regions, protection domains and STags of one DDP endpoint.
#[derive(Debug)]
pub struct Memory {
    /// The regions as they are now; `published` holds the latest copy the cores see.
    master: RegionTable,
    published: Arc<SharedRegions>,
    /// Slots of `regions` never used yet start here.
    fresh_slot: usize,
    /// Slots freed, to reuse first, and each slot's next generation.
    free_slots: Vec<u32>,
    generations: Vec<u32>,
    /// Freed regions some data core or mbuf may still hold (an earlier snapshot, a zero-copy
    /// span not yet transmitted): their memory goes back once nothing does.
    freed: Vec<Arc<Slotted>>,
    stags: Coordinator,
    next_pd: u32,
    revoke_timeout: Duration,
}

impl Memory {
    /// Room for `stags` registrations; `cores` data-core replicas (0 when placement runs on
    /// the thread that owns this value). `random` seeds the STag allocation (RFC 5041 §8.3:
    /// pass a real random value, so STags are not guessable).
    pub fn new(stags: usize, cores: usize, random: u64) -> (Memory, Vec<CoreStags>) {
        let (coordinator, replicas) = Coordinator::new(stags, random, cores, 64);
        (
            Memory {
                master: RegionTable::new(),
                published: Arc::new(SharedRegions::new(RegionTable::new())),
                fresh_slot: 0,
                free_slots: Vec::new(),
                generations: vec![0; MAX_REGIONS],
                freed: Vec::new(),
                stags: coordinator,
                next_pd: 1,
                revoke_timeout: Duration::from_secs(1),
            },
            replicas,
        )
    }

    /// A new protection domain.
    pub fn alloc_pd(&mut self) -> Pd {
        let pd = Pd(self.next_pd);
        self.next_pd += 1;
        pd
    }

    /// Adds a zeroed region of `len` bytes: huge pages when the host has them free, else
    /// normal pages (check [`Region::huge`] and warn).
    pub fn alloc_region(&mut self, len: usize) -> std::io::Result<RegionId> {
        let region = Region::new(len)?;
        self.add_region(region)
            .map_err(|_| std::io::Error::other("region table full"))
    }

    /// Adds a region made elsewhere (for example from DPDK's hugepage heap). Fails (giving the
    /// region back) when [`MAX_REGIONS`] are held.
    pub fn add_region(&mut self, region: Region) -> Result<RegionId, Region> {
        self.reap();
        let slot = match self.free_slots.pop() {
            Some(slot) => slot as usize,
            None if self.fresh_slot < MAX_REGIONS => {
                self.fresh_slot += 1;
                self.fresh_slot - 1
            }
            None => return Err(region),
        };
        let generation = self.generations[slot];
        self.master.slots[slot] = Some(Arc::new(Slotted { generation, region }));
        self.publish();
        Ok(RegionId(generation << SLOT_BITS | slot as u32))
    }

    /// Frees a region: its slot is reused by a later [`Memory::add_region`], under a new
    /// generation, so `id` names nothing from now on. Refused while an STag still names it
    /// (deregister those first: a revocation is what guarantees no data core places into it
    /// any more), and while a revocation naming it is not acknowledged by every core
    /// ([`MemoryError::Revoking`]). The ULP must not free a region that its own sends still name
    /// ([`crate::conn::Payload::Region`] in flight): those spans would go out zeroed. The
    /// memory itself goes back once no core and no mbuf holds it.
    pub fn free_region(&mut self, id: RegionId) -> Result<(), MemoryError> {
        let slot = (id.0 & (MAX_REGIONS as u32 - 1)) as usize;
        if self.master.get(id.0).is_none() {
            return Err(MemoryError::NoSuchRegion);
        }
        if self.stags.master().names_region(id.0) {
            return Err(MemoryError::InUse);
        }
        // RFC 5041 §8.3.1 item 6: the memory is the ULP's again only once every core has let
        // go of it; a core that never acknowledged (stalled) may still copy a queued Read
        // Response out of it, which would send zeros, or the next region's bytes, as the
        // Data Source's.
        if self.stags.revoking_region(id.0) {
            return Err(MemoryError::Revoking);
        }
        if let Some(gone) = self.master.slots[slot].take() {
            self.freed.push(gone);
        }
        self.publish();
        // Generations stop one short of GEN_MASK: no id is ever u32::MAX, the number DDP's
        // receive path gives its own inline buffers (RDMAP's queues 1 and 2).
        self.generations[slot] = (self.generations[slot] + 1) % GEN_MASK;
        self.free_slots.push(slot as u32);
        self.reap();
        Ok(())
    }

    /// Regions held (allocated and not freed).
    pub fn regions_in_use(&self) -> usize {
        self.fresh_slot - self.free_slots.len()
    }

    /// Freed regions whose memory is still held by a core's snapshot or an mbuf.
    pub fn regions_draining(&mut self) -> usize {
        self.reap();
        self.freed.len()
    }

    /// Gives back the memory of freed regions nothing holds any more.
    fn reap(&mut self) {
        self.freed
            .retain(|s| Arc::strong_count(s) > 1 || s.region.mbuf_references() > 0);
    }

    pub fn region(&self, id: RegionId) -> Option<&Region> {
        self.master.get(id.0)
    }

    /// Where the regions are published, to share with data cores and connections.
    pub fn region_table(&self) -> &Arc<SharedRegions> {
        &self.published
    }

    /// Publishes the regions as they are now (a control-path copy of the slot table).
    fn publish(&self) {
        self.published.store(self.master.clone());
    }

    /// Placement against the master STag table (no data cores, or the control thread's own
    /// placement of chunks bundled with a COOKIE ECHO).
    pub fn place(&self) -> Place<'_> {
        Place::from(self)
    }

    /// The STag table placement checks against when no data core holds a replica.
    pub fn stags(&self) -> &StagTable {
        self.stags.master()
    }

    /// Has each command or resync request left for a data core wake it ([`Coordinator::set_wake`]).
    pub fn set_core_wake(&mut self, wake: ddpdk_dataplane::mem::revoke::CoreWake) {
        self.stags.set_wake(wake);
    }

    /// RFC 4296 `ddp_register`: returns the STag the peer may be told. The range must lie in
    /// its region, and the TO range must not wrap.
    pub fn register(&mut self, r: MemoryRegistration) -> Result<Registered, MemoryError> {
        let region = self.region(r.region).ok_or(MemoryError::NoSuchRegion)?;
        match r.offset.checked_add(r.len) {
            Some(end) if end <= region.len() as u64 => {}
            _ => return Err(MemoryError::OutOfRegion),
        }
        let stag = self
            .stags
            .register(Registration {
                pd: r.pd,
                access: r.access,
                stream: r.stream,
                to_base: r.to_base,
                len: r.len,
                memory: RegionSlice {
                    region: r.region.0,
                    offset: r.offset,
                },
            })
            .map_err(MemoryError::Register)?;
        Ok(Registered {
            stag,
            to_base: r.to_base,
            len: r.len,
        })
    }

    /// RFC 4296 `ddp_deregister`: once this returns `Ok`, no data core can place into the
    /// memory through `stag` (RFC 5041 §8.3.1 item 6).
    pub fn deregister(&mut self, stag: Stag) -> Result<(), MemoryError> {
        self.stags
            .revoke(stag, self.revoke_timeout)
            .map(|_| ())
            .map_err(|e| match e {
                RevokeError::Unknown => MemoryError::NoSuchStag,
                e => MemoryError::Revoke(e),
            })
    }

    /// As [`Memory::deregister`], for a caller whose thread polls the data cores itself (they
    /// must turn to acknowledge): `poll` runs while the acknowledgements are awaited.
    pub fn deregister_polling(
        &mut self,
        stag: Stag,
        poll: &mut dyn FnMut(),
    ) -> Result<(), MemoryError> {
        self.stags
            .revoke_polling(stag, self.revoke_timeout, poll)
            .map(|_| ())
            .map_err(|e| match e {
                RevokeError::Unknown => MemoryError::NoSuchStag,
                e => MemoryError::Revoke(e),
            })
    }

    /// Starts revoking `stag` on every data core without waiting (a remote invalidation,
    /// RFC 5040 §5.3, seen by the control thread, which must not stall its cores meanwhile);
    /// ask [`Memory::revocation`] until it answers.
    pub fn start_revoke(&mut self, stag: Stag) -> Result<Revocation, MemoryError> {
        self.stags
            .start_revoke(stag, self.revoke_timeout)
            .map(|(_, r)| r)
            .map_err(|e| match e {
                RevokeError::Unknown => MemoryError::NoSuchStag,
                e => MemoryError::Revoke(e),
            })
    }

    /// Takes the cores' acknowledgements and forgets the revocations nobody asks about any
    /// more (withdrawn registrations) once they are over: each control turn. Nothing is
    /// resent: a core whose channel was full drops the STag on its own next poll
    /// ([`Coordinator::start_revoke`]).
    pub fn tend_revocations(&mut self) {
        self.stags.tend();
    }

    /// `None` while a core has yet to acknowledge `r`; then its outcome. Never blocks.
    pub fn revocation(&mut self, r: Revocation) -> Option<Result<(), MemoryError>> {
        self.stags
            .revocation(r)
            .map(|done| done.map_err(MemoryError::Revoke))
    }

    /// A receive buffer for posting: `len` bytes at `offset` of the registration `stag`,
    /// which must belong to `pd` and allow local writes (the buffer is filled by incoming
    /// untagged messages, RFC 5041 §5.1.2).
    pub fn receive_buffer(
        &self,
        pd: Pd,
        stag: Stag,
        offset: u64,
        len: u32,
    ) -> Result<PostedBuffer, MemoryError> {
        let reg = self
            .stags
            .master()
            .lookup(stag)
            .filter(|r| r.pd == pd)
            .ok_or(MemoryError::NoSuchStag)?;
        if !reg.access.contains(Access::LOCAL_WRITE) {
            return Err(MemoryError::Access);
        }
        match offset.checked_add(u64::from(len)) {
            Some(end) if end <= reg.len => {}
            _ => return Err(MemoryError::OutOfRegion),
        }
        Ok(PostedBuffer {
            memory: RegionSlice {
                region: reg.memory.region,
                offset: reg.memory.offset + offset,
            },
            len,
            stag: Some(stag),
        })
    }
}

impl Regions for Memory {
    type Ref<'a> = &'a Region;
    fn region(&self, id: u32) -> Option<&Region> {
        self.master.get(id)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;

    fn reg(pd: Pd, region: RegionId, offset: u64, len: u64, access: Access) -> MemoryRegistration {
        MemoryRegistration {
            pd,
            region,
            offset,
            len,
            access,
            stream: None,
            to_base: 0x1000,
        }
    }

    /// RFC 5041 §8.3.1: a registration covers memory that exists; after deregistration the
    /// STag fails the lookup placement uses.
    #[test]
    fn register_checks_the_region_and_deregister_revokes() {
        let (mut m, _) = Memory::new(8, 0, 42);
        let pd = m.alloc_pd();
        let r = m.alloc_region(4096).unwrap();
        assert_eq!(
            m.register(reg(pd, r, 4000, 97, Access::REMOTE_WRITE)),
            Err(MemoryError::OutOfRegion)
        );
        assert_eq!(
            m.register(reg(pd, RegionId(9), 0, 1, Access::REMOTE_WRITE)),
            Err(MemoryError::NoSuchRegion)
        );
        let b = m
            .register(reg(pd, r, 96, 4000, Access::REMOTE_WRITE))
            .unwrap();
        assert!(m.stags().lookup(b.stag).is_some());
        m.deregister(b.stag).unwrap();
        assert!(m.stags().lookup(b.stag).is_none());
        assert_eq!(m.deregister(b.stag), Err(MemoryError::NoSuchStag));
    }

    /// Posted receive buffers come from registered memory of the same protection domain with
    /// local write (RFC 4296 `ddp_post_recv` takes a registered buffer).
    #[test]
    fn receive_buffers_need_local_write_in_the_same_pd() {
        let (mut m, _) = Memory::new(8, 0, 7);
        let (pd, other) = (m.alloc_pd(), m.alloc_pd());
        let r = m.alloc_region(8192).unwrap();
        let ro = m
            .register(reg(pd, r, 0, 4096, Access::REMOTE_WRITE))
            .unwrap();
        let rw = m
            .register(reg(pd, r, 4096, 4096, Access::LOCAL_WRITE))
            .unwrap();
        assert_eq!(
            m.receive_buffer(pd, ro.stag, 0, 10),
            Err(MemoryError::Access)
        );
        assert_eq!(
            m.receive_buffer(other, rw.stag, 0, 10),
            Err(MemoryError::NoSuchStag)
        );
        assert_eq!(
            m.receive_buffer(pd, rw.stag, 4000, 97),
            Err(MemoryError::OutOfRegion)
        );
        let b = m.receive_buffer(pd, rw.stag, 100, 96).unwrap();
        assert_eq!((b.memory.region, b.memory.offset, b.len), (r.0, 4196, 96));
    }

    /// Issue 14 item 4: a server that registers and frees regions for as long as it runs.
    /// Five times as many regions as the table has slots go through register, deregister and
    /// free; each reuses a slot under a new generation, so an old id finds nothing even though
    /// its slot holds a region again.
    #[test]
    fn region_slots_are_reused_and_old_ids_find_nothing() {
        let (mut m, _) = Memory::new(64, 0, 7);
        let pd = m.alloc_pd();
        let first = m.alloc_region(4096).unwrap();
        m.region(first).unwrap().fill(0, 4096, 0xaa).unwrap();
        m.free_region(first).unwrap();
        for i in 0..5 * MAX_REGIONS {
            let r = m.alloc_region(4096).unwrap();
            let reg = m
                .register(reg(pd, r, 0, 4096, Access::REMOTE_WRITE))
                .unwrap();
            m.region(r).unwrap().fill(0, 16, i as u8).unwrap();
            m.deregister(reg.stag).unwrap();
            m.free_region(r).unwrap();
            assert!(m.region(r).is_none(), "freed: {i}");
        }
        assert_eq!(m.regions_in_use(), 0);
        let again = m.alloc_region(4096).unwrap();
        assert_eq!(again.0 % MAX_REGIONS as u32, first.0, "the slot is reused");
        assert_ne!(again, first);
        assert!(m.region(first).is_none(), "the old id finds nothing");
        let mut b = [1u8; 16];
        m.region(again).unwrap().read(0, &mut b).unwrap();
        assert_eq!(b, [0; 16], "a reused slot holds fresh, zeroed memory");
        assert_eq!(m.free_region(first), Err(MemoryError::NoSuchRegion));
    }

    /// A region an STag names is not freed (its revocation is what guarantees no core places
    /// into it); once deregistered, it is.
    #[test]
    fn a_region_an_stag_names_is_not_freed() {
        let (mut m, _) = Memory::new(8, 0, 7);
        let pd = m.alloc_pd();
        let r = m.alloc_region(8192).unwrap();
        let a = m
            .register(reg(pd, r, 0, 4096, Access::REMOTE_WRITE))
            .unwrap();
        let b = m
            .register(reg(pd, r, 4096, 4096, Access::REMOTE_READ))
            .unwrap();
        assert_eq!(m.free_region(r), Err(MemoryError::InUse));
        m.deregister(a.stag).unwrap();
        assert_eq!(
            m.free_region(r),
            Err(MemoryError::InUse),
            "b still names it"
        );
        m.deregister(b.stag).unwrap();
        assert_eq!(m.free_region(r), Ok(()));
    }

    /// RFC 5041 §8.3.1 item 6: a region is not freed while a core that never acknowledged
    /// its STag's revocation (stalled past the timeout) may still reach it: that core copies
    /// queued sends out of the region when it runs again, and would copy zeros, or the next
    /// region's bytes, as the Data Source's. Once it has run, the region is freed.
    #[test]
    fn a_region_is_not_freed_before_a_stalled_core_let_go_of_it_8_3_1_item_6() {
        let (mut m, mut cores) = Memory::new(8, 2, 7);
        let pd = m.alloc_pd();
        let r = m.alloc_region(4096).unwrap();
        let a = m
            .register(reg(pd, r, 0, 4096, Access::REMOTE_READ))
            .unwrap();
        for c in &mut cores {
            c.poll();
        }
        m.revoke_timeout = Duration::from_millis(5);
        let (first, stalled) = cores.split_at_mut(1);
        let r0 = m.deregister_polling(a.stag, &mut || {
            first[0].poll();
        });
        assert!(
            matches!(r0, Err(MemoryError::Revoke(RevokeError::Timeout { .. }))),
            "{r0:?}"
        );
        assert_eq!(m.free_region(r), Err(MemoryError::Revoking));
        assert!(m.region(r).is_some());
        let mut let_go = 0;
        stalled[0].poll_revoking(|_| let_go += 1);
        assert_eq!(
            let_go, 1,
            "the stalled core drops the registration when it runs"
        );
        assert_eq!(m.free_region(r), Ok(()));
    }

    /// A data core that looked a region up before it was freed (mid-placement, or sending a
    /// span) keeps it alive: the memory goes back only once the core lets go.
    #[test]
    fn a_freed_region_lives_while_a_core_holds_it() {
        let (mut m, _) = Memory::new(8, 0, 7);
        let r = m.alloc_region(4096).unwrap();
        m.region(r).unwrap().fill(0, 4096, 0x5c).unwrap();
        // The core's snapshot, taken before the free.
        let held = m.region_table().load_full();
        m.free_region(r).unwrap();
        assert!(
            m.region_table().load().region(r.0).is_none(),
            "no new snapshot has it"
        );
        assert_eq!(m.regions_draining(), 1, "held by the core");
        let mut b = [0u8; 8];
        held.region(r.0).unwrap().read(100, &mut b).unwrap();
        assert_eq!(b, [0x5c; 8], "still the region's bytes");
        drop(held);
        assert_eq!(m.regions_draining(), 0, "given back");
    }

    /// A data core reloads its snapshot only when the publication count moves: each region
    /// added or freed moves it, and the table loaded after seeing the new count has the change.
    #[test]
    fn every_publication_moves_the_generation_with_its_table() {
        let (mut m, _) = Memory::new(8, 0, 7);
        let shared = Arc::clone(m.region_table());
        let g0 = shared.generation();
        let r = m.alloc_region(4096).unwrap();
        let g1 = shared.generation();
        assert!(g1 > g0, "an added region is a new publication");
        assert!(shared.load().region(r.0).is_some(), "published with it");
        m.free_region(r).unwrap();
        let g2 = shared.generation();
        assert!(g2 > g1, "a freed region is a new publication");
        assert!(shared.load().region(r.0).is_none(), "published without it");
        assert_eq!(shared.generation(), g2, "nothing published, no move");
    }
}
