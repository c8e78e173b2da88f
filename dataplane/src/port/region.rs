//! Region memory: what a remote peer writes into (RFC 5041 §8.3: an Advertised Buffer).
//!
//! This is port-layer memory for the same reason mbufs are: the wire writes into it. A data
//! core places validated segments with [`Region::place`] while the application may be reading
//! other parts of the same region, so the bytes are never exposed as a `&[u8]` or `&mut [u8]`
//! (but a send span's, for the length of a CRC: [`Region::digest`]):
//! every access is a bounds-checked copy in or out through the raw mapping (DESIGN.md: "Memory
//! that a core writes while the application may read it is never exposed as a plain &[u8]
//! while placement can happen"). The happens-before edge that makes a placed message visible
//! to the application is the completion event (Release on the core, Acquire in the poller),
//! not anything here; placements written around the cache are fenced before it is sent (at
//! once, or at the end of the data core's [`PlacementBatch`]).
//!
//! Memory comes from one of two sources, both zeroed:
//!
//! - [`Region::new`]: an anonymous mapping on 2 MiB huge pages (`MAP_HUGETLB`) when the host
//!   has them free, else on normal pages, which [`Region::huge`] reports so the caller can warn.
//!   Unmapped on drop. Needs no DPDK.
//! - `Region::from_dpdk` (crate feature `dpdk`): DPDK's own heap (`rte_zmalloc_socket`), on the
//!   NUMA socket asked for, i.e. the hugepage memory the EAL reserved (DMA-able, IOVA-mapped).
//!   [`Region::huge`] and [`Region::page_size`] report the page size of the memseg list that
//!   backs the allocation, so an EAL started with `--no-huge` gives normal pages and says so.
//!   Given back with `rte_free` on drop, which must happen before the EAL is cleaned up (as for
//!   pools and ports: `rte_eal_cleanup` unmaps DPDK memory).

use core::fmt;
use core::ptr::NonNull;
use core::sync::atomic::Ordering;

use memmap2::{MmapMut, MmapOptions};

#[cfg(feature = "dpdk")]
use crate::port::dpdk::{DpdkError, Eal};

/// Placements of at least this many bytes store their whole lines with non-temporal stores,
/// around the caches (`stream_copy`).
///
/// A jumbo segment's placement through the cache pulls its ~140 destination lines into L1 (a
/// read for ownership each) on top of the ~140 of the frame the CRC32c and the copy read:
/// more than the 32 KiB of L1 each packet, which evicts the connection's own state (session,
/// delivery window, STag entry, indications) between packets. `ddp-rx-bench` on an AMD EPYC
/// (Zen 4), `conn` path, M segments a second (benches/README.md, "Session 35" and "Session
/// 36"): with a fence each placement, 8938 B 0.75 -> 1.17 and 4096 B 2.15 -> 2.20, but 2048 B
/// 4.75 -> 3.18. With one fence a burst ([`PlacementBatch`]) 2048 B wins too (4.3 -> 5.1
/// against ordinary stores; 3000 B 3.05 -> 4.0), while 1438 B still loses, even with the
/// partial last line asked for ahead ([`Region::prefetch_for_write`]: 5.35 -> 5.0, 3.3
/// without that hint): hence the bound. On the Xeon VM of sessions 20-22 the same stores from
/// 256 or 512 bytes on halved MTU 1500 goodput and left MTU 9000's unchanged
/// (benches/README.md): below the bound nothing changes there either.
pub const STREAM_MIN: usize = 2048;

thread_local! {
    /// This thread's open [`PlacementBatch`]es, and whether a placement made within them still
    /// waits for its store fence.
    static BATCH: core::cell::Cell<(u32, bool)> = const { core::cell::Cell::new((0, false)) };
}

/// A scope in which this thread's non-temporal placements share one store fence, issued when
/// the outermost batch ends, instead of one each.
///
/// The fence is what lets a completion event publish bytes written around the cache
/// (`stream_copy`): it makes them globally visible before any later store. Within a batch
/// the placements are visible to this thread at once and to other agents only after the
/// fence. The rule for the holder: nothing may let another thread or a device read the placed
/// bytes, or tell another thread they are there or that their memory is no longer written,
/// before the batch ends or [`PlacementBatch::settle`] has paid the fence. A data core holds
/// one over the frames of a burst and drops it before it answers for them (events to the
/// ULP); its transmit side settles before a burst goes to the device (a frame may carry
/// region bytes by reference: an RDMA Read Response), and its STag changes settle before a
/// revocation is acknowledged. A SACK may leave within the batch: it exposes no region bytes,
/// and an RDMA Write's completion at the data source promises nothing about the data sink's
/// memory (RFC 5040 §5.5: the sink's ULP learns of placed data from its own events).
///
/// `ddp-rx-bench` `conn`, M segments a second, against a fence a placement: 8938 B
/// 1.08-1.15 -> 1.21-1.29, 4096 B 1.93-2.14 -> 3.08-3.33 (benches/README.md, "Session 36").
/// Outside a batch every such placement is fenced on its own, so no other caller needs to
/// know. Two ways to lose the fence: `batch = PlacementBatch::begin()` over a live batch
/// opens the new one before the old one ends (drop the old one first), and a forgotten batch
/// (`mem::forget`) leaves this thread's large placements unfenced.
#[derive(Debug)]
#[must_use = "the placements are fenced when the batch is dropped"]
pub struct PlacementBatch {
    // Per thread: the batch must end on the thread that began it.
    _thread: core::marker::PhantomData<*const ()>,
}

impl PlacementBatch {
    /// Opens a batch on this thread (batches nest; the outermost one fences).
    #[inline]
    pub fn begin() -> Self {
        BATCH.with(|b| {
            let (depth, pending) = b.get();
            b.set((depth + 1, pending));
        });
        PlacementBatch {
            _thread: core::marker::PhantomData,
        }
    }

    /// Pays now the fence this thread's open batches owe, if any; they stay open. For the
    /// points within a batch where another agent may read placed bytes or learn about their
    /// memory (the type's documentation): one thread-local read when nothing is owed.
    #[inline]
    pub fn settle() {
        BATCH.with(|b| {
            let (depth, pending) = b.get();
            if pending {
                store_fence();
                b.set((depth, false));
            }
        });
    }
}

impl Drop for PlacementBatch {
    #[inline]
    fn drop(&mut self) {
        BATCH.with(|b| {
            let (depth, pending) = b.get();
            if depth == 1 && pending {
                store_fence();
                b.set((0, false));
            } else {
                b.set((depth - 1, pending));
            }
        });
    }
}

/// Whether a non-temporal placement made now may leave its fence to a batch: then the batch
/// is told it owes one.
#[cfg(target_arch = "x86_64")]
#[inline]
fn fence_deferred() -> bool {
    BATCH.with(|b| {
        let (depth, _) = b.get();
        if depth > 0 {
            b.set((depth, true));
        }
        depth > 0
    })
}

/// Orders every earlier store of this thread, non-temporal ones included, before any later
/// one (SFENCE on x86-64; elsewhere [`stream_copy`] uses ordinary stores, which a Release
/// store already orders).
#[inline]
fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SFENCE is an SSE instruction, part of the x86-64 baseline; it only orders
    // stores. (The toolchains before the intrinsic became safe, rust-version 1.87, need the
    // block.)
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_mm_sfence()
    }
}

/// An access outside the region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfBounds {
    pub offset: u64,
    pub len: usize,
    pub region_len: usize,
}

impl fmt::Display for OutOfBounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} bytes at offset {} outside a region of {} bytes",
            self.len, self.offset, self.region_len
        )
    }
}

impl std::error::Error for OutOfBounds {}

/// Why an atomic operation on region memory was not performed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicFault {
    OutOfBounds(OutOfBounds),
    /// The word is not 64-bit aligned (RFC 7306 §5.1.1, §5.1.2).
    Misaligned,
}

impl fmt::Display for AtomicFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AtomicFault::OutOfBounds(e) => e.fmt(f),
            AtomicFault::Misaligned => f.write_str("atomic target not 64-bit aligned"),
        }
    }
}

impl std::error::Error for AtomicFault {}

/// A block of memory that data cores place into and the application reads from.
pub struct Region {
    /// Owns the memory (released on drop); never dereferenced after `ptr` is taken from it.
    _backing: Backing,
    ptr: NonNull<u8>,
    len: usize,
    huge: bool,
    page_size: Option<usize>,
}

/// Where a region's memory comes from, and so how it is given back.
enum Backing {
    /// An anonymous mapping, unmapped when dropped.
    Mmap { _map: MmapMut },
    /// An element of DPDK's heap, given back with `rte_free` when dropped.
    #[cfg(feature = "dpdk")]
    Dpdk { _alloc: DpdkAlloc },
}

/// Owns one `rte_zmalloc_socket` allocation, and the shared-info block through which mbufs
/// reference it for zero-copy transmit (`rte_pktmbuf_attach_extbuf`).
#[cfg(feature = "dpdk")]
struct DpdkAlloc {
    ptr: NonNull<u8>,
    /// Its refcnt is [`BASE_REFS`] (this allocation's own) plus one per attached mbuf not yet
    /// freed; the free callback therefore never runs, since the region outlives its mbufs.
    shinfo: NonNull<dpdk_sys::rte_mbuf_ext_shared_info>,
    /// The EAL maps IOVA = VA, so a span's IOVA is its address.
    iova_is_va: bool,
}

/// The IOVA of `addr`: its memseg's IOVA plus the offset into it (what the device would DMA).
/// `rte_malloc_virt2iova` only takes the start of an allocation.
///
/// # Safety
/// `addr` lies in memory the EAL manages (a DPDK heap element), and the EAL is up.
#[cfg(feature = "dpdk")]
unsafe fn memseg_iova(addr: *const u8) -> Option<u64> {
    // SAFETY: per the contract; a null list makes DPDK find it, and a null result means no
    // memseg holds the address. The memseg is read at once, not kept.
    let ms = unsafe { dpdk_sys::rte_mem_virt2memseg(addr.cast(), core::ptr::null()).as_ref()? };
    // SAFETY: the memseg's start address (a union of two views of one pointer).
    let base = unsafe { ms.__bindgen_anon_1.addr_64 };
    if ms.iova == u64::MAX {
        return None;
    }
    Some(ms.iova + (addr as u64 - base))
}

/// The references a region holds on its own shared info. Two, not one: DPDK's
/// `rte_mbuf_ext_refcnt_update` (and the extbuf free) takes a non-atomic fast path when it reads
/// a count of 1, assuming a sole owner; the data cores attach and free spans of one region
/// concurrently, so the count must never read 1 while the region lives.
#[cfg(feature = "dpdk")]
const BASE_REFS: u16 = 2;

/// The free callback of a region's shared info: never reached (see [`DpdkAlloc::shinfo`]);
/// the region, not its last mbuf, gives the memory back.
#[cfg(feature = "dpdk")]
unsafe extern "C" fn region_extbuf_free(
    _addr: *mut core::ffi::c_void,
    _opaque: *mut core::ffi::c_void,
) {
}

#[cfg(feature = "dpdk")]
impl DpdkAlloc {
    fn new(ptr: NonNull<u8>) -> DpdkAlloc {
        let shinfo = Box::new(dpdk_sys::rte_mbuf_ext_shared_info {
            free_cb: Some(region_extbuf_free),
            fcb_opaque: core::ptr::null_mut(),
            refcnt: BASE_REFS,
        });
        DpdkAlloc {
            ptr,
            shinfo: NonNull::from(Box::leak(shinfo)),
            // SAFETY: reads the EAL's configured IOVA mode; the EAL is up (the caller holds
            // an `Eal`).
            iova_is_va: unsafe { dpdk_sys::rte_eal_iova_mode() } == dpdk_sys::RTE_IOVA_VA,
        }
    }
}

#[cfg(feature = "dpdk")]
impl Drop for DpdkAlloc {
    fn drop(&mut self) {
        // SAFETY: `shinfo` came from Box::leak in `new` and is only read atomically here.
        let refs = unsafe { dpdk_sys::rte_mbuf_ext_refcnt_read(self.shinfo.as_ptr()) };
        if refs != BASE_REFS {
            // An mbuf still references the memory (a frame not yet sent, say): freeing it would
            // let the device read freed memory. Leak it instead; this cannot happen while the
            // engine owns the region table, which outlives every port queue.
            // Said as what it is, a deliberate leak (it read as a fault: an outside-in review
            // met it after a memif peer vanished with frames queued); tests grep "not freed".
            crate::errln!(
                "ddpdk: {} frame buffer(s) the device has not given back still point into a \
                 region being released: its memory is kept (not freed) until the process ends",
                refs.wrapping_sub(BASE_REFS)
            );
            return;
        }
        // DPDK reads the count relaxed: the last mbuf's release (its acq-rel decrement, after
        // the device's last read of the span) must happen before the memory is given back.
        core::sync::atomic::fence(Ordering::Acquire);
        // SAFETY: the pointer came from rte_zmalloc_socket and is freed exactly once, here. The
        // owning Region has no other way to reach it after this (it is being dropped), no mbuf
        // references it (checked above), and the EAL is still up because regions are dropped
        // before the Eal (module documentation). rte_free takes the heap lock, so any thread
        // may call it. `shinfo` is given back to the Box it came from, once.
        unsafe {
            dpdk_sys::rte_free(self.ptr.as_ptr().cast());
            drop(Box::from_raw(self.shinfo.as_ptr()));
        }
    }
}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("huge", &self.huge)
            .finish()
    }
}

// SAFETY: the region is a plain block of process memory owned by this value; every access goes
// through the bounds-checked copies below, which are valid from any thread. Concurrent copies
// into overlapping bytes can only come from a peer targeting the same bytes twice, and leave
// those bytes with one of the values written, exactly as a NIC's DMA would: formally a data
// race in Rust's model, accepted as for DMA (module documentation). The one Rust reference to
// region bytes is a send span's, for the length of one CRC (`digest`; an attached span's mbuf
// slices, `Mbuf::data`): bytes the ULP keeps unchanged while the send is in flight.
unsafe impl Send for Region {}
// SAFETY: as for Send: `&Region` only allows the copies below.
unsafe impl Sync for Region {}

const HUGE_PAGE: usize = 2 << 20;

/// Alignment of DPDK regions: a normal page, so placement offsets map to pages the way they do
/// in an mmap region. DPDK's minimum is a cache line (64).
#[cfg(feature = "dpdk")]
const DPDK_ALIGN: u32 = 4096;

/// `ENOMEM` and `EINVAL`, for DPDK calls that fail without setting `rte_errno`.
#[cfg(feature = "dpdk")]
const ENOMEM: i32 = 12;
#[cfg(feature = "dpdk")]
const EINVAL: i32 = 22;

/// Faults in every page of a fresh allocation, writable, before anyone places into it.
///
/// A registered region is memory the wire writes into at any moment (an RNIC's registration
/// pins and maps its pages for that reason), and the first write to a page the kernel has not
/// populated yet is a page fault: microseconds of kernel time on the data core placing a
/// segment there, in the middle of a burst. DPDK's heap under `--no-huge` is such memory, and
/// `rte_zmalloc` does not touch pages it knows to be zero. Each page gets one write of the
/// byte it already holds, so the contents (zero) are unchanged.
#[cfg(feature = "dpdk")]
fn populate(ptr: NonNull<u8>, len: usize, page: usize) {
    let base = ptr.as_ptr();
    let mut at = 0;
    while at < len {
        // SAFETY: `at < len`, and `ptr` is a live allocation of `len` bytes that nothing else
        // references yet (it was just allocated and is not shared until `from_dpdk` returns).
        // Volatile, so the read-and-write-back is not removed as a no-op.
        unsafe {
            let p = base.add(at);
            p.write_volatile(p.read_volatile());
        }
        at += page;
    }
}

impl Region {
    /// Maps `len` bytes (at least 1), zeroed: huge pages if possible, else normal pages.
    pub fn new(len: usize) -> std::io::Result<Region> {
        Region::mapped(len, true)
    }

    /// Maps `len` bytes (at least 1), zeroed, on 4 KiB pages: for a few KiB a protocol keeps
    /// for itself, which a 2 MiB huge page would waste a thousand times over.
    pub fn small(len: usize) -> std::io::Result<Region> {
        Region::mapped(len, false)
    }

    /// [`Region::new`], on 4 KiB pages unless `try_huge`.
    fn mapped(len: usize, try_huge: bool) -> std::io::Result<Region> {
        let len = len.max(1);
        let huge_len = len.div_ceil(HUGE_PAGE) * HUGE_PAGE;
        // MAP_POPULATE: every page is faulted in here, not on a data core's first placement
        // into it (see `populate`).
        let huge_map = try_huge
            .then(|| {
                MmapOptions::new()
                    .len(huge_len)
                    .huge(Some(21))
                    .populate()
                    .map_anon()
                    .ok()
            })
            .flatten();
        let (mut map, huge) = match huge_map {
            Some(m) => (m, true),
            None => (MmapOptions::new().len(len).populate().map_anon()?, false),
        };
        let ptr = NonNull::new(map.as_mut_ptr()).ok_or(std::io::ErrorKind::OutOfMemory)?;
        Ok(Region {
            _backing: Backing::Mmap { _map: map },
            ptr,
            len,
            huge,
            page_size: huge.then_some(HUGE_PAGE),
        })
    }

    /// Allocates `len` bytes (at least 1), zeroed, from DPDK's heap with `rte_zmalloc_socket`:
    /// on NUMA socket `socket`, or any socket (`SOCKET_ID_ANY`) for `None`. The memory is
    /// aligned to 4 KiB and lives on whatever pages the EAL reserved; [`Region::huge`] and
    /// [`Region::page_size`] report them. `eal` proves the EAL is up; drop the region before
    /// the EAL (`rte_eal_cleanup` unmaps DPDK's memory).
    ///
    /// Fails with `EINVAL` for a socket number DPDK cannot represent, and with DPDK's
    /// `rte_errno` (or `ENOMEM`) when the heap cannot supply the memory.
    #[cfg(feature = "dpdk")]
    pub fn from_dpdk(eal: &Eal, len: usize, socket: Option<u32>) -> Result<Region, DpdkError> {
        let _ = eal; // its existence is the proof that the EAL is up
        let len = len.max(1);
        let op = || format!("rte_zmalloc_socket({len} bytes, socket {socket:?})");
        let socket_id = match socket {
            None => dpdk_sys::SOCKET_ID_ANY,
            Some(s) => i32::try_from(s).map_err(|_| DpdkError::new(op(), EINVAL))?,
        };
        // SAFETY: sets the calling thread's rte_errno, so a stale value is not reported below.
        unsafe { dpdk_sys::ddpdk_set_rte_errno(0) };
        // SAFETY: the EAL is initialised (`eal` exists); the type string is a static C string;
        // the alignment is a power of two; DPDK checks size and socket and returns NULL on
        // failure.
        let raw = unsafe {
            dpdk_sys::rte_zmalloc_socket(c"ddpdk_region".as_ptr(), len, DPDK_ALIGN, socket_id)
        };
        let Some(ptr) = NonNull::new(raw.cast::<u8>()) else {
            let errno = match dpdk_sys::rte_errno() {
                0 => ENOMEM,
                e => e,
            };
            return Err(DpdkError::new(op(), errno));
        };
        // Owned from here on: freed when the region (or this value, on a panic) is dropped.
        let alloc = DpdkAlloc::new(ptr);
        // SAFETY: `ptr` is a live DPDK heap element, so it lies in one memseg list (a heap
        // element never spans lists). The list is part of the EAL's memory configuration and
        // stays valid while the EAL lives; it is read at once, not kept.
        let page_size = unsafe {
            let msl = dpdk_sys::rte_mem_virt2memseg_list(ptr.as_ptr().cast_const().cast());
            msl.as_ref().map(|msl| msl.page_sz)
        }
        .and_then(|p| usize::try_from(p).ok());
        // SAFETY: sysconf(_SC_PAGESIZE); no preconditions.
        let base_page = unsafe { dpdk_sys::ddpdk_sys_page_size() };
        populate(ptr, len, page_size.unwrap_or(base_page).max(base_page));
        Ok(Region {
            _backing: Backing::Dpdk { _alloc: alloc },
            ptr,
            len,
            huge: page_size.is_some_and(|p| p > base_page),
            page_size,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the region lives on huge pages.
    pub fn huge(&self) -> bool {
        self.huge
    }

    /// The size of the pages backing the region, where the source tells: the memseg list's page
    /// size for DPDK memory (4 KiB under `--no-huge`), 2 MiB for a `MAP_HUGETLB` mapping. `None`
    /// for a mapping on normal pages (the system's base page size, which `std` does not expose).
    pub fn page_size(&self) -> Option<usize> {
        self.page_size
    }

    fn span(&self, offset: u64, len: usize) -> Result<usize, OutOfBounds> {
        let err = OutOfBounds {
            offset,
            len,
            region_len: self.len,
        };
        let start = usize::try_from(offset).map_err(|_| err)?;
        match start.checked_add(len) {
            Some(end) if end <= self.len => Ok(start),
            _ => Err(err),
        }
    }

    /// Copies `src` to `offset` (a validated placement). From [`STREAM_MIN`] bytes on, the
    /// whole lines of the destination are written around the cache (`stream_copy`) and
    /// fenced before this returns, or when this thread's [`PlacementBatch`] ends if one is
    /// open.
    pub fn place(&self, offset: u64, src: &[u8]) -> Result<(), OutOfBounds> {
        let start = self.span(offset, src.len())?;
        // SAFETY: `start + src.len() <= self.len`, so the destination lies inside the mapping,
        // which lives as long as `self`. `src` is a Rust slice, so it is not region bytes
        // being placed (the ranges do not overlap) unless it is an attached span's
        // (`Mbuf::data` of a span from `attach_region`): received chains are copied into one
        // buffer before anything parses them (`runtime::single_segment`), so no caller places
        // from a span. No reference to the destination bytes exists (module documentation)
        // but a send span's, which the ULP keeps unchanged while the send is in flight (a
        // peer's write into one is the race `digest` describes).
        unsafe {
            let dst = self.ptr.as_ptr().add(start);
            if src.len() >= STREAM_MIN {
                stream_copy(src.as_ptr(), dst, src.len());
            } else {
                core::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len());
            }
        }
        Ok(())
    }

    /// Asks for the lines under `len` bytes from `offset` to be made ready for stores: where
    /// the caller expects its next placement (`port::prefetch`). The part outside the region
    /// is left out; the bytes are not changed.
    #[inline]
    pub fn prefetch_for_write(&self, offset: u64, len: usize) {
        let Some((start, len)) = self.within(offset, len) else {
            return;
        };
        // A placement that large goes around the cache, all but the partial line at its end,
        // which ordinary stores write (a read for ownership): only that line is asked for
        // (8938-byte segments 1.24-1.28 -> 1.34-1.69 M a second in `ddp-rx-bench`). Its whole
        // lines asked for would only be evicted by the stores.
        let (from, len) = if len >= STREAM_MIN {
            (start + len - 1, 1)
        } else {
            (start, len)
        };
        crate::port::prefetch::for_write(self.ptr.as_ptr().wrapping_add(from), len);
    }

    /// As [`Region::prefetch_for_write`], for lines that cached stores will write (under
    /// [`STREAM_MIN`] a placement), at the thread's next [`crate::port::prefetch::run_later`].
    #[inline]
    pub fn prefetch_for_write_later(&self, offset: u64, len: usize) {
        if let Some((start, len)) = self.within(offset, len) {
            crate::port::prefetch::for_write_later(self.ptr.as_ptr().wrapping_add(start), len);
        }
    }

    /// The part of `len` bytes from `offset` inside the region, as (start, length); `None`
    /// if it begins outside.
    #[inline(always)]
    fn within(&self, offset: u64, len: usize) -> Option<(usize, usize)> {
        let start = usize::try_from(offset).ok().filter(|&s| s < self.len)?;
        Some((start, len.min(self.len - start)))
    }

    /// The address of byte 0, for a test of hints that carry addresses.
    #[cfg(test)]
    pub(crate) fn base_addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Copies `dst.len()` bytes from `offset` out.
    pub fn read(&self, offset: u64, dst: &mut [u8]) -> Result<(), OutOfBounds> {
        let start = self.span(offset, dst.len())?;
        // SAFETY: the source range is inside the mapping (checked above); `dst` is a distinct
        // exclusive slice.
        unsafe {
            core::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(start),
                dst.as_mut_ptr(),
                dst.len(),
            );
        }
        Ok(())
    }

    /// Writes `len` copies of `byte` from `offset`.
    pub fn fill(&self, offset: u64, len: usize, byte: u8) -> Result<(), OutOfBounds> {
        let start = self.span(offset, len)?;
        // SAFETY: the range is inside the mapping (checked above).
        unsafe {
            core::ptr::write_bytes(self.ptr.as_ptr().add(start), byte, len);
        }
        Ok(())
    }

    /// CRC32c of `len` bytes from `offset`, read through a bounce buffer so no reference to
    /// region bytes is held while cores may place (for `mr checksum` and tests).
    pub fn crc32c(&self, offset: u64, len: usize) -> Result<u32, OutOfBounds> {
        let mut digest = crate::wire::crc32c::Stream::default();
        self.span(offset, len)?;
        let mut bounce = [0u8; 2048];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(bounce.len());
            self.read(offset + done as u64, &mut bounce[..n])?;
            digest.update(&bounce[..n]);
            done += n;
        }
        Ok(digest.finish())
    }

    /// Feeds `len` bytes from `offset` to a running CRC `digest`: the software checksum of a
    /// frame that carries a send span of this region by reference. The CRC reads the bytes
    /// where they are; a bounce buffer would read each byte twice and write it once more, and
    /// was most of the zero-copy sender's time at 9 KB (`ddp-tx-bench`).
    pub fn digest(
        &self,
        digest: &mut crate::wire::crc32c::Stream,
        offset: u64,
        len: usize,
    ) -> Result<(), OutOfBounds> {
        let start = self.span(offset, len)?;
        // SAFETY: the range is inside the mapping (checked above). The slice lives only for
        // this call. It is a send span: the ULP keeps those bytes unchanged until the send
        // completes (`Payload::Region`'s contract), the same contract under which the device
        // reads them for the frame. Nothing here stops a peer's RDMA Write from placing into
        // the same bytes meanwhile, if the ULP has also opened them to that peer (an STag with
        // remote write over the span): then the slice is a shared reference racing a store,
        // formally undefined; in practice the CRC may then not match the bytes the device
        // sends, and the receiver drops the packet.
        let span = unsafe { core::slice::from_raw_parts(self.ptr.as_ptr().add(start), len) };
        digest.update(span);
        Ok(())
    }

    /// RFC 7306's atomic read-modify-write of the 64-bit word at `offset`, in this machine's
    /// byte order (§5.1.1: "performed in the endian format of the target memory"): `f` maps the
    /// original value to the new one (`None`: leave it, as a CmpSwap that did not match).
    /// Returns the original value. Atomic against every other atomic operation on the word,
    /// from any data core (§5.3, §5.4 rule 2); a placement into the same bytes is not ordered
    /// with it (§5.4 rule 2's note makes that optional). The word must lie in the region and be
    /// 64-bit aligned (§5.1.1, §5.1.2); otherwise nothing is read or written.
    pub fn fetch_update_u64(
        &self,
        offset: u64,
        f: impl FnMut(u64) -> Option<u64>,
    ) -> Result<u64, AtomicFault> {
        let start = self.span(offset, 8).map_err(AtomicFault::OutOfBounds)?;
        // SAFETY: `start + 8 <= self.len` (checked above), so the pointer is inside the
        // mapping, which lives as long as `self`.
        let word = unsafe { self.ptr.as_ptr().add(start) };
        if !word.cast::<u64>().is_aligned() {
            return Err(AtomicFault::Misaligned);
        }
        // SAFETY: `word` is valid for 8 bytes and aligned for u64 (checked above). Region bytes
        // are never exposed as Rust references (module documentation), so no `&`/`&mut` to
        // them is alive. The atomic lives only for this call. Other atomics on the word are
        // ordered with it (RFC 7306 §5.3). A placement or `read` of the same bytes by another
        // core at the same moment (a peer's RDMA Write on another association, the
        // application) is a plain copy racing an atomic: formally a data race in Rust's model,
        // accepted here as it is for every region byte (module documentation), where the
        // hardware makes an aligned 8-byte atomic indivisible to such copies on x86-64 and
        // AArch64, and RFC 7306 §5.4 rule 2 makes atomicity against non-atomic access optional.
        let atomic = unsafe { core::sync::atomic::AtomicU64::from_ptr(word.cast::<u64>()) };
        Ok(atomic
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, f)
            .unwrap_or_else(|original| original))
    }

    /// Mbufs that reference this region now (zero-copy frames not yet freed); 0 for memory
    /// outside DPDK.
    pub fn mbuf_references(&self) -> usize {
        match &self._backing {
            #[cfg(feature = "dpdk")]
            Backing::Dpdk { _alloc: a } => {
                // SAFETY: `shinfo` lives as long as the allocation; its refcnt is read
                // atomically.
                let refs = unsafe { dpdk_sys::rte_mbuf_ext_refcnt_read(a.shinfo.as_ptr()) };
                usize::from(refs.wrapping_sub(BASE_REFS))
            }
            Backing::Mmap { .. } => 0,
        }
    }

    /// Makes `m` (a fresh, direct mbuf) reference `len` bytes of this region from `offset`
    /// instead of its own buffer (`rte_pktmbuf_attach_extbuf`), for zero-copy transmit. False,
    /// with `m` unchanged, when the region is not DPDK memory, the span is out of bounds or
    /// longer than an mbuf can describe, or it is not contiguous in IOVA space (a device could
    /// not DMA it as one segment).
    #[cfg(feature = "dpdk")]
    pub(crate) fn attach_to(
        &self,
        m: NonNull<dpdk_sys::rte_mbuf>,
        offset: u64,
        len: usize,
    ) -> bool {
        let Backing::Dpdk { _alloc: alloc } = &self._backing else {
            return false;
        };
        let Ok(start) = self.span(offset, len) else {
            return false;
        };
        let (Ok(len16), false) = (u16::try_from(len), len == 0) else {
            return false;
        };
        // SAFETY: `start + len <= self.len` (span), so the address is inside the allocation.
        let addr = unsafe { self.ptr.as_ptr().add(start) };
        let iova = if alloc.iova_is_va {
            addr as u64
        } else {
            // Checking the two ends is enough only while a span (under 64 KiB) touches at most
            // two memsegs, i.e. on pages of 64 KiB or more (huge pages). With smaller pages and
            // IOVAs that are not addresses (IOVA as PA on 4 KiB pages, if the EAL gives those
            // real IOVAs at all: not checked here) a page between the ends could lie elsewhere,
            // and every memseg of the span would need checking.
            // SAFETY: both addresses lie inside a live DPDK heap element, hence in memsegs of
            // the EAL's memory configuration.
            let (first, last) = unsafe { (memseg_iova(addr), memseg_iova(addr.add(len - 1))) };
            match (first, last) {
                (Some(f), Some(l)) if l == f.wrapping_add(len as u64 - 1) => f,
                _ => return false,
            }
        };
        let shinfo = alloc.shinfo.as_ptr();
        // SAFETY: `shinfo` is live while the region is (DpdkAlloc) and aligned (a Box of the
        // struct); DPDK accesses its refcnt only with __atomic builtins (the count never
        // reads 1, so never by its plain fast path: BASE_REFS), the same instructions as a
        // Rust atomic. The atomic lives only for this call.
        let refcnt = unsafe { core::sync::atomic::AtomicU16::from_ptr(&raw mut (*shinfo).refcnt) };
        // The count is a u16: the reference is taken only below the cap, in one atomic step.
        // A read then an update let data cores attaching at once all pass the check at the cap
        // and wrap the count, after which DpdkAlloc would free memory mbufs still reference.
        if refcnt
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                c.checked_add(1).filter(|&n| n < u16::MAX)
            })
            .is_err()
        {
            return false;
        }
        // SAFETY: `m` is a fresh mbuf the caller owns (refcnt 1, direct). The reference taken
        // above is dropped by DPDK when the mbuf is freed (__rte_pktmbuf_free_extbuf), and the
        // region outlives that: DpdkAlloc leaks rather than free memory still referenced.
        // data_len/pkt_len are set to the span attached, which attach_extbuf left at zero.
        unsafe {
            dpdk_sys::rte_pktmbuf_attach_extbuf(m.as_ptr(), addr.cast(), iova, len16, shinfo);
            let mb = &mut *m.as_ptr();
            mb.data_len = len16;
            mb.pkt_len = u32::from(len16);
        }
        true
    }
}

/// Copies `len` bytes from `src` to `dst`: the partial lines at either end of `dst` with
/// ordinary stores, the whole lines between with non-temporal ones, then a store fence, or
/// the fence owed to this thread's [`PlacementBatch`]: that keeps the module's promise that
/// the completion event is what publishes the bytes, since a Release store does not order
/// earlier non-temporal stores on x86 and an SFENCE does. Out of line: inlined into the
/// receive path it cost small packets 25 instructions each (callgrind), and the fence's
/// thread-local test is here for the same reason.
///
/// # Safety
///
/// `src` is readable and `dst` writable for `len` bytes, and the two ranges do not overlap.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
unsafe fn stream_copy(src: *const u8, dst: *mut u8, len: usize) {
    use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
    const LINE: usize = 64;
    let head = ((LINE - dst as usize % LINE) % LINE).min(len);
    let lines = (len - head) / LINE;
    let tail_at = head + lines * LINE;
    // SAFETY: every range below ends at or before `len`, so inside both (the caller's promise);
    // `dst + head` is 64-byte aligned, so every 16-byte stream store is aligned as
    // MOVNTDQ requires; SSE2 (the loads and stores) is part of the x86-64 baseline.
    unsafe {
        core::ptr::copy_nonoverlapping(src, dst, head);
        for k in 0..lines {
            let at = head + k * LINE;
            let from = src.add(at).cast::<__m128i>();
            let to = dst.add(at).cast::<__m128i>();
            let parts = [
                _mm_loadu_si128(from),
                _mm_loadu_si128(from.add(1)),
                _mm_loadu_si128(from.add(2)),
                _mm_loadu_si128(from.add(3)),
            ];
            for (i, p) in parts.into_iter().enumerate() {
                _mm_stream_si128(to.add(i), p);
            }
        }
        core::ptr::copy_nonoverlapping(src.add(tail_at), dst.add(tail_at), len - tail_at);
    }
    if !fence_deferred() {
        store_fence();
    }
}

/// Elsewhere an ordinary copy: the bound was measured on x86-64 only.
///
/// # Safety
///
/// As for the x86-64 version.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn stream_copy(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: the caller's promise.
    unsafe { core::ptr::copy_nonoverlapping(src, dst, len) }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;

    /// Minor page faults of the calling thread so far (`/proc/thread-self/stat`, field 10).
    fn minor_faults() -> u64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        rest.split(' ').nth(7).and_then(|f| f.parse().ok()).unwrap()
    }

    /// A new region's pages are faulted in when it is mapped (MAP_POPULATE), not on the first
    /// placement into each: on 4 KiB pages, 2048 placements into 2048 pages take (almost) no
    /// fault; without MAP_POPULATE each takes one. On 4 KiB pages whatever the machine has
    /// reserved: 8 MiB of 2 MiB pages are 4 faults unpopulated, which the placement path's own
    /// few (its stack, a debug build's code pages: 6-12 on one machine) would hide.
    #[test]
    fn a_new_region_is_populated_before_any_placement() {
        const LEN: usize = 8 << 20;
        let r = Region::mapped(LEN, false).unwrap();
        assert_eq!(r.page_size(), None, "4 KiB pages");
        let pages = (LEN / 4096) as u64;
        let before = minor_faults();
        for at in (0..LEN).step_by(4096) {
            r.place(at as u64, &[1]).unwrap();
        }
        let faults = minor_faults() - before;
        assert!(
            faults <= pages / 16 + 2,
            "{faults} faults over {pages} pages"
        );
    }

    /// The kilobytes of huge pages the kernel has given the mapping that starts at `addr`
    /// (`/proc/self/smaps`: a hugetlb mapping's pages show as `Private_Hugetlb`, not `Rss`).
    fn hugetlb_kb(addr: usize) -> Option<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let start = format!("{addr:x}-");
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&start));
        lines.next()?;
        let mut kb = 0;
        for l in lines {
            // The next mapping's header line: `start-end perms ...`.
            if l.split_whitespace().next().is_some_and(|w| w.contains('-')) {
                break;
            }
            if let Some(v) = l
                .strip_prefix("Private_Hugetlb:")
                .or_else(|| l.strip_prefix("Shared_Hugetlb:"))
            {
                kb += v
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap();
            }
        }
        Some(kb)
    }

    /// As above on 2 MiB pages, where too few faults would be left to count: the kernel's own
    /// account of the mapping says every huge page is in before the first placement (without
    /// MAP_POPULATE a hugetlb mapping holds none until touched). Where no huge page could be
    /// had (none reserved) there is nothing to check, and the test says so.
    #[test]
    fn a_new_region_on_huge_pages_is_populated_before_any_placement() {
        const LEN: usize = 8 << 20;
        let r = Region::mapped(LEN, true).unwrap();
        if r.page_size() != Some(HUGE_PAGE) {
            eprintln!("no 2 MiB pages to be had here (none reserved?): not checked");
            return;
        }
        let kb = hugetlb_kb(r.ptr.as_ptr() as usize).unwrap_or_else(|| panic!("no smaps entry"));
        assert_eq!(
            kb,
            (LEN / 1024) as u64,
            "huge pages in before any placement"
        );
    }

    #[test]
    fn place_read_fill_within_bounds_only() {
        let r = Region::new(4096).unwrap();
        assert_eq!(r.len(), 4096);
        r.place(4090, b"abcdef").unwrap();
        let mut out = [0u8; 6];
        r.read(4090, &mut out).unwrap();
        assert_eq!(&out, b"abcdef");
        assert!(r.place(4091, b"abcdef").is_err(), "one byte past the end");
        assert!(r.place(u64::MAX, b"a").is_err());
        assert!(r.read(4096, &mut [0u8; 1]).is_err());
        r.fill(0, 4096, 0x5a).unwrap();
        r.read(4090, &mut out).unwrap();
        assert_eq!(out, [0x5a; 6]);
        assert!(r.fill(1, 4096, 0).is_err());
    }

    #[test]
    fn rfc7306_5_1_atomic_word_is_native_order_aligned_and_in_bounds() {
        let r = Region::new(4096).unwrap();
        r.place(8, &41u64.to_ne_bytes()).unwrap();
        assert_eq!(r.fetch_update_u64(8, |v| Some(v + 1)), Ok(41));
        let mut out = [0u8; 8];
        r.read(8, &mut out).unwrap();
        assert_eq!(
            u64::from_ne_bytes(out),
            42,
            "written back in the memory's byte order"
        );
        // `None` leaves the word (a CmpSwap that did not match) and still returns it.
        assert_eq!(r.fetch_update_u64(8, |_| None), Ok(42));
        r.read(8, &mut out).unwrap();
        assert_eq!(u64::from_ne_bytes(out), 42);
        // §5.1.1: a misaligned target is an error and memory is not modified.
        r.place(16, &[0xaa; 16]).unwrap();
        assert_eq!(
            r.fetch_update_u64(20, |_| Some(0)),
            Err(AtomicFault::Misaligned)
        );
        let mut all = [0u8; 16];
        r.read(16, &mut all).unwrap();
        assert_eq!(all, [0xaa; 16]);
        assert!(matches!(
            r.fetch_update_u64(4096 - 4, |_| Some(0)),
            Err(AtomicFault::OutOfBounds(_))
        ));
    }

    #[test]
    fn rfc7306_5_3_atomics_from_several_threads_lose_no_update() {
        let r = std::sync::Arc::new(Region::new(4096).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        r.fetch_update_u64(64, |v| Some(v + 1)).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(r.fetch_update_u64(64, |_| None), Ok(40_000));
    }

    /// A prefetch is a hint: whatever the range (past the end, at the end, an offset no
    /// pointer can hold), the bytes stay as they were and nothing faults.
    #[test]
    fn prefetch_for_write_changes_nothing() {
        let r = Region::new(8192).unwrap();
        r.place(0, &[0x5a; 8192]).unwrap();
        r.prefetch_for_write(0, STREAM_MIN - 1);
        r.prefetch_for_write(8000, STREAM_MIN - 1);
        r.prefetch_for_write(100, STREAM_MIN);
        r.prefetch_for_write(8192 - STREAM_MIN as u64, STREAM_MIN);
        r.prefetch_for_write(8000, 1 << 20);
        r.prefetch_for_write(8192, 64);
        r.prefetch_for_write(u64::MAX, 64);
        let mut back = vec![0; 8192];
        r.read(0, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0x5a));
    }

    /// Placements from `STREAM_MIN` bytes on take the non-temporal path: at every alignment of
    /// the destination within a line, and lengths that end mid-line or on a line, every byte
    /// lands and the bytes on either side stay as they were.
    #[test]
    fn a_large_placement_lands_whole_at_any_alignment() {
        let r = Region::new(16384).unwrap();
        for len in [STREAM_MIN, STREAM_MIN + 1, STREAM_MIN + 63, 8938] {
            let src: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            for offset in (1..70).chain([128, 1000]) {
                r.place(0, &[0xee; 16384]).unwrap();
                r.place(offset, &src).unwrap();
                let mut back = vec![0; len + 2];
                r.read(offset - 1, &mut back).unwrap();
                assert_eq!(back[0], 0xee, "the byte before, offset {offset} len {len}");
                assert_eq!(&back[1..=len], &src[..], "offset {offset} len {len}");
                assert_eq!(
                    back[len + 1],
                    0xee,
                    "the byte after, offset {offset} len {len}"
                );
            }
        }
    }

    /// Within a batch a non-temporal placement leaves its fence owed, and only the outermost
    /// batch's end (or a settle, which leaves the batch open) pays it; placements outside any
    /// batch, or too small to go around the cache, owe nothing. The bytes are there for this
    /// thread at once either way.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_batch_owes_one_fence_for_its_large_placements() {
        let state = || BATCH.with(|b| b.get());
        let r = Region::new(3 * STREAM_MIN).unwrap();
        let big: Vec<u8> = (0..STREAM_MIN).map(|i| (i * 13) as u8).collect();
        r.place(0, &big).unwrap();
        assert_eq!(state(), (0, false), "outside a batch: fenced at once");
        let outer = PlacementBatch::begin();
        r.place(1, &big[..STREAM_MIN - 1]).unwrap();
        assert_eq!(
            state(),
            (1, false),
            "a small placement is not around the cache"
        );
        let inner = PlacementBatch::begin();
        r.place(STREAM_MIN as u64 + 5, &big).unwrap();
        let mut back = vec![0; STREAM_MIN];
        r.read(STREAM_MIN as u64 + 5, &mut back).unwrap();
        assert_eq!(back, big, "this thread sees its placement before the fence");
        assert_eq!(state(), (2, true));
        drop(inner);
        assert_eq!(
            state(),
            (1, true),
            "an inner batch leaves the fence to the outer one"
        );
        PlacementBatch::settle();
        assert_eq!(state(), (1, false), "settled: paid, the batch still open");
        r.place(2 * STREAM_MIN as u64, &big).unwrap();
        assert_eq!(state(), (1, true), "owed again by the next placement");
        drop(outer);
        assert_eq!(state(), (0, false), "the outermost batch fenced");
    }

    #[test]
    fn crc32c_matches_the_bytes() {
        let r = Region::new(200_000).unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 255) as u8).collect();
        r.place(0, &data).unwrap();
        assert_eq!(
            r.crc32c(0, data.len()).unwrap(),
            crate::wire::crc32c::crc32c(&data)
        );
        assert_eq!(
            r.crc32c(5, 10).unwrap(),
            crate::wire::crc32c::crc32c(&data[5..15])
        );
    }

    /// Two threads place into disjoint halves at once; after both are joined (the
    /// happens-before edge) every byte is what its writer put there.
    #[test]
    fn concurrent_placement_into_disjoint_ranges() {
        let r = std::sync::Arc::new(Region::new(1 << 20).unwrap());
        let half = (1 << 19) as u64;
        let writers: Vec<_> = (0..2u8)
            .map(|k| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for i in 0..512u64 {
                        r.place(u64::from(k) * half + i * 1024, &[k + 1; 1024])
                            .unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let mut a = vec![0u8; 1 << 19];
        r.read(0, &mut a).unwrap();
        assert!(a.iter().all(|&b| b == 1));
        r.read(half, &mut a).unwrap();
        assert!(a.iter().all(|&b| b == 2));
    }
}
