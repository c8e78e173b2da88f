//! Mempools and owned mbufs.

use std::ffi::CString;
use std::ptr::NonNull;

use dpdk_sys as sys;

use super::DpdkError;
use crate::port::{PacketBuf, Region};

/// A packet mbuf pool (`rte_pktmbuf_pool_create`). Freed on drop; every port whose queues use it
/// holds an `Arc` to it, so it outlives them.
#[derive(Debug)]
pub struct Mempool {
    ptr: NonNull<sys::rte_mempool>,
    name: String,
    size: u32,
}

// SAFETY: an rte_mempool is designed for concurrent use from any lcore (per-lcore caches plus a
// multi-producer/multi-consumer ring); ddpdk only calls thread-safe functions on it.
unsafe impl Send for Mempool {}
// SAFETY: as above.
unsafe impl Sync for Mempool {}

impl Mempool {
    /// Creates a pool of `n` mbufs with `data_room` bytes each (headroom included) on `socket`.
    pub fn create(
        name: &str,
        n: u32,
        cache: u32,
        data_room: u16,
        socket: i32,
    ) -> Result<Self, DpdkError> {
        let c_name = CString::new(name).map_err(|_| DpdkError::new("mempool name", 22))?;
        let cache = cache.min(sys::RTE_MEMPOOL_CACHE_MAX_SIZE);
        // SAFETY: valid name; DPDK validates the numbers.
        let p = unsafe {
            sys::rte_pktmbuf_pool_create(c_name.as_ptr(), n, cache, 0, data_room, socket)
        };
        NonNull::new(p)
            .map(|ptr| Mempool {
                ptr,
                name: name.to_owned(),
                size: n,
            })
            .ok_or_else(|| {
                DpdkError::from_rte_errno(format!(
                    "rte_pktmbuf_pool_create({name}, {n} mbufs of {data_room} B, socket {socket})"
                ))
            })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of mbufs the pool was created with.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Mbufs currently free (in the pool's ring and the lcore caches).
    pub fn avail_count(&self) -> u32 {
        // SAFETY: valid pool.
        unsafe { sys::rte_mempool_avail_count(self.ptr.as_ptr()) }
    }

    /// Mbufs currently out of the pool: in queues, rings or held by the application.
    pub fn in_use_count(&self) -> u32 {
        // SAFETY: valid pool.
        unsafe { sys::rte_mempool_in_use_count(self.ptr.as_ptr()) }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::rte_mempool {
        self.ptr.as_ptr()
    }

    /// Appends `n` mbufs with `len` data bytes each to `out`, all or nothing.
    pub fn alloc_bulk(&self, out: &mut Vec<Mbuf>, n: usize, len: usize) -> bool {
        // DPDK counts in u32: a truncated count would have it write fewer than the n elements
        // set_len exposes below.
        let Ok(count) = u32::try_from(n) else {
            return false;
        };
        out.reserve(n);
        let spare = out.spare_capacity_mut();
        // SAFETY: `spare` has room for n pointers; Mbuf is repr(transparent) over a non-null
        // rte_mbuf pointer, so the pool writes exactly n (== count) valid Mbufs on success
        // (rc == 0) and nothing on failure.
        let rc =
            unsafe { sys::rte_pktmbuf_alloc_bulk(self.as_ptr(), spare.as_mut_ptr().cast(), count) };
        if rc != 0 {
            return false;
        }
        let old = out.len();
        // SAFETY: the n elements after `old` were initialised by the allocation above.
        unsafe { out.set_len(old + n) };
        let len16 = u16::try_from(len).unwrap_or(u16::MAX);
        for m in &mut out[old..] {
            m.set_len(len16);
        }
        true
    }

    /// A fresh mbuf of this pool that references `len` bytes of `region` from `offset` instead
    /// of its own buffer (zero-copy transmit); `None` when the pool is empty or the region
    /// cannot lend that span (`Region::attach_to`).
    pub fn attach_region(&self, region: &Region, offset: u64, len: usize) -> Option<Mbuf> {
        let m = Mbuf::alloc(self)?;
        // A refused attach leaves `m` a plain mbuf, freed on return.
        region.attach_to(m.as_non_null(), offset, len).then_some(m)
    }

    /// As [`Mempool::attach_region`], made of `m` rather than a buffer taken from the pool
    /// here: a sender that takes its buffers in bulk ([`Mempool::alloc_bulk`]) does not call
    /// the pool once for every span (`rte_pktmbuf_alloc` alone was ~3 % of a bulk sender's
    /// core in `perf`). `m` must be a fresh mbuf of this pool: one that is not (another pool's,
    /// a chain, a shared or attached one) is handed back unchanged, as is one the region does
    /// not lend the span to.
    pub fn attach_region_in(
        &self,
        m: Mbuf,
        region: &Region,
        offset: u64,
        len: usize,
    ) -> Result<Mbuf, Mbuf> {
        let raw = m.raw();
        let fresh = raw.pool == self.as_ptr()
            && raw.next.is_null()
            && raw.nb_segs == 1
            && raw.refcnt == 1
            && raw.ol_flags & (F_EXTERNAL | F_INDIRECT) == 0;
        if fresh && region.attach_to(m.as_non_null(), offset, len) {
            Ok(m)
        } else {
            Err(m)
        }
    }
}

impl Drop for Mempool {
    fn drop(&mut self) {
        let out = self.in_use_count();
        if out > 0 {
            // An Mbuf still alive would free into released memory: leak the pool instead.
            crate::errln!(
                "ddpdk: mempool {} released with {out} mbuf(s) outstanding: it is kept (not \
                 freed) until the process ends",
                self.name
            );
            return;
        }
        // SAFETY: no mbuf is outstanding and no queue references the pool any more (ports hold an
        // Arc to it and are dropped first).
        unsafe { sys::rte_mempool_free(self.ptr.as_ptr()) };
    }
}

/// An owned `rte_mbuf` (with any segments chained to it), freed on drop.
///
/// `repr(transparent)` over a non-null pointer so that a `Vec<Mbuf>` is the `struct rte_mbuf **`
/// array that the burst functions read and write.
#[repr(transparent)]
#[derive(Debug)]
pub struct Mbuf(NonNull<sys::rte_mbuf>);

// SAFETY: an mbuf is owned by exactly one Mbuf value at a time; moving it between lcores is how
// DPDK is used (freeing goes back to the pool, which is thread-safe).
unsafe impl Send for Mbuf {}

impl Mbuf {
    /// Copies the frame, every segment of its chain in order, to the front of `dst`; false
    /// (nothing copied) when `dst` is shorter than the frame.
    pub(crate) fn copy_frame_to(&self, dst: &mut [u8]) -> bool {
        let head = self.raw();
        if dst.len() < head.pkt_len as usize {
            return false;
        }
        let mut at = 0;
        let mut seg: *const sys::rte_mbuf = self.0.as_ptr();
        // SAFETY: we own the chain; each segment's `next` is null or a live segment of it, and
        // each segment's data lies inside its (own or external) buffer as in data(). The
        // segments' lengths add up to pkt_len, which fits `dst` (checked above; a segment
        // that would not fit ends the copy short instead of overrunning).
        unsafe {
            while let Some(m) = seg.as_ref() {
                let len = usize::from(m.data_len);
                let Some(to) = dst.get_mut(at..at + len) else {
                    return false;
                };
                to.copy_from_slice(std::slice::from_raw_parts(
                    m.buf_addr.cast::<u8>().add(usize::from(m.data_off)),
                    len,
                ));
                at += len;
                seg = m.next;
            }
        }
        true
    }

    fn raw(&self) -> &sys::rte_mbuf {
        // SAFETY: a live mbuf we own.
        unsafe { self.0.as_ref() }
    }

    /// Room for data after the headroom in this mbuf's buffer.
    pub fn tailroom_total(&self) -> usize {
        let m = self.raw();
        usize::from(m.buf_len) - usize::from(m.data_off)
    }

    /// Sets the data length of this single-segment mbuf, clamped to its room.
    pub fn set_len(&mut self, len: u16) {
        let room = self.tailroom_total() as u16;
        let len = len.min(room);
        // SAFETY: we own the mbuf; single segment, so pkt_len == data_len.
        let m = unsafe { self.0.as_mut() };
        m.data_len = len;
        m.pkt_len = u32::from(len);
    }

    /// The RX port id DPDK recorded in the mbuf.
    pub fn port(&self) -> u16 {
        self.raw().port
    }

    /// Segments in this mbuf's chain.
    pub fn nb_segs(&self) -> u16 {
        self.raw().nb_segs
    }

    /// Whether this segment references memory outside its pool (an attached region span).
    pub fn is_external(&self) -> bool {
        self.raw().ol_flags & F_EXTERNAL != 0
    }

    /// A fresh mbuf from `pool`, or `None` when it is empty.
    pub(crate) fn alloc(pool: &Mempool) -> Option<Mbuf> {
        // SAFETY: a valid pool; a null return means empty.
        NonNull::new(unsafe { sys::rte_pktmbuf_alloc(pool.as_ptr()) }).map(Mbuf)
    }

    pub(crate) fn as_non_null(&self) -> NonNull<sys::rte_mbuf> {
        self.0
    }
}

/// RTE_MBUF_F_EXTERNAL (rte_mbuf_core.h): the buffer is not the mbuf's own.
const F_EXTERNAL: u64 = 1 << 61;
/// RTE_MBUF_F_INDIRECT (rte_mbuf_core.h): the mbuf is attached to another's buffer.
const F_INDIRECT: u64 = 1 << 62;

impl PacketBuf for Mbuf {
    fn data(&self) -> &[u8] {
        let m = self.raw();
        // SAFETY: buf_addr + data_off .. + data_len lies inside the mbuf's buffer (DPDK keeps
        // data_off + data_len <= buf_len; set_len clamps), which lives as long as the mbuf: its
        // pool's, or for an attached span (is_external) region memory, kept by the shared
        // info's reference. The bytes are initialised memory (pool memory and regions are
        // zeroed at creation), though after alloc_bulk they hold whatever an earlier packet
        // left. A span's bytes are a send span's: the ULP keeps them unchanged until the send
        // completes (`Payload::Region`), so no store races the slice unless a peer writes into
        // a span that is also open to it (see `Region::digest`).
        unsafe {
            std::slice::from_raw_parts(
                m.buf_addr.cast::<u8>().add(usize::from(m.data_off)),
                usize::from(m.data_len),
            )
        }
    }

    fn data_mut(&mut self) -> &mut [u8] {
        let m = self.raw();
        let (addr, off, len) = (m.buf_addr, m.data_off, m.data_len);
        // SAFETY: as in data(), with exclusive access through &mut self to the mbuf's own
        // buffer. An attached span's buffer is region memory, shared with the data cores and
        // the application: no caller writes one (a span is chained behind a head of ours at
        // once, `fwd.rs`, `xmit.rs`; ESP seals a copy or out of place, `ipsec`).
        unsafe {
            std::slice::from_raw_parts_mut(
                addr.cast::<u8>().add(usize::from(off)),
                usize::from(len),
            )
        }
    }

    fn resize(&mut self, len: usize) {
        self.set_len(u16::try_from(len).unwrap_or(u16::MAX));
    }

    fn len(&self) -> usize {
        usize::from(self.raw().data_len)
    }

    fn frame_len(&self) -> usize {
        self.raw().pkt_len as usize
    }

    fn request_sctp_checksum(&mut self, l2: usize, l3: usize, ipv6: bool) {
        // SAFETY: we own the mbuf; ol_flags and the tx_offload word are plain fields the PMD
        // reads at tx_burst. tx_offload packs l2_len (7 bits) then l3_len (9 bits).
        let m = unsafe { self.0.as_mut() };
        m.ol_flags |= TX_SCTP_CKSUM | if ipv6 { TX_IPV6 } else { TX_IPV4 };
        m.__bindgen_anon_3.tx_offload = (l2 as u64 & 0x7f) | ((l3 as u64 & 0x1ff) << 7);
    }

    fn chain(&mut self, next: Mbuf) -> Result<(), Mbuf> {
        // SAFETY: both are live mbufs we own, heads of their chains; on success the tail is
        // owned by our chain (freed with it), so its handle is forgotten, not dropped. On
        // failure (-EOVERFLOW: too many segments) nothing changed.
        let rc = unsafe { sys::rte_pktmbuf_chain(self.0.as_ptr(), next.0.as_ptr()) };
        if rc == 0 {
            std::mem::forget(next);
            Ok(())
        } else {
            Err(next)
        }
    }

    fn gather_into(&self, out: &mut Vec<u8>) -> bool {
        let head = self.raw();
        if head.nb_segs <= 1 {
            return false;
        }
        out.clear();
        out.reserve(head.pkt_len as usize);
        let mut seg: *const sys::rte_mbuf = self.0.as_ptr();
        // SAFETY: we own the chain; each segment's `next` is null or a live segment of it, and
        // each segment's data lies inside its (own or external) buffer as in data().
        unsafe {
            while let Some(m) = seg.as_ref() {
                out.extend_from_slice(std::slice::from_raw_parts(
                    m.buf_addr.cast::<u8>().add(usize::from(m.data_off)),
                    usize::from(m.data_len),
                ));
                seg = m.next;
            }
        }
        true
    }

    fn l4_checksum_verdict(&self) -> Option<bool> {
        match self.raw().ol_flags & RX_L4_CKSUM_MASK {
            RX_L4_CKSUM_GOOD => Some(true),
            RX_L4_CKSUM_BAD => Some(false),
            // NONE (both bits): "the L4 checksum is not correct in the packet data, but the
            // integrity of the L4 data is verified" (rte_mbuf_core.h).
            RX_L4_CKSUM_MASK => Some(true),
            // UNKNOWN: not checked; software does it.
            _ => None,
        }
    }
}

// rte_mbuf_core.h flags (RTE_BIT64-style macros bindgen does not evaluate).
const TX_SCTP_CKSUM: u64 = 2 << 52;
const TX_IPV4: u64 = 1 << 55;
const TX_IPV6: u64 = 1 << 56;
const RX_L4_CKSUM_BAD: u64 = 1 << 3;
const RX_L4_CKSUM_GOOD: u64 = 1 << 8;
const RX_L4_CKSUM_MASK: u64 = RX_L4_CKSUM_BAD | RX_L4_CKSUM_GOOD;

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: we own the mbuf (and any chained segments) and give it back exactly once.
        unsafe { sys::rte_pktmbuf_free(self.0.as_ptr()) };
    }
}
