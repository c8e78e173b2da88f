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
use std::sync::{Arc, OnceLock};
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
        }
    }
}

impl std::error::Error for MemoryError {}

/// Regions an endpoint may hold at most.
pub const MAX_REGIONS: usize = 1024;

/// The regions of one endpoint, shared by the control thread and every data core. Append-only:
/// a slot is set once and never changed or emptied while anyone holds the table, so a data
/// core reads it without a lock (one acquire load per lookup), and memory a registration names
/// outlives every core that could place into it.
#[derive(Debug)]
pub struct RegionTable {
    slots: Box<[OnceLock<Region>]>,
}

impl RegionTable {
    fn new() -> RegionTable {
        RegionTable {
            slots: (0..MAX_REGIONS).map(|_| OnceLock::new()).collect(),
        }
    }
}

impl Regions for RegionTable {
    fn region(&self, id: u32) -> Option<&Region> {
        self.slots.get(id as usize)?.get()
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
            regions: &m.regions,
        }
    }
}

/// Regions, protection domains and STags of one DDP endpoint.
#[derive(Debug)]
pub struct Memory {
    regions: Arc<RegionTable>,
    /// Slots of `regions` in use.
    nb_regions: usize,
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
                regions: Arc::new(RegionTable::new()),
                nb_regions: 0,
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
        let Some(slot) = self.regions.slots.get(self.nb_regions) else {
            return Err(region);
        };
        slot.set(region)?;
        self.nb_regions += 1;
        Ok(RegionId(self.nb_regions as u32 - 1))
    }

    pub fn region(&self, id: RegionId) -> Option<&Region> {
        self.regions.region(id.0)
    }

    /// The regions, to share with data cores.
    pub fn region_table(&self) -> &Arc<RegionTable> {
        &self.regions
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
    fn region(&self, id: u32) -> Option<&Region> {
        self.regions.region(id)
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
}
