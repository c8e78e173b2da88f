//! Out-of-place sealing: a zero-copy frame's payload stays in its registered region until the
//! crypto reads it (issue 15 item 1), and the ciphertext is written into an mbuf of ours.
//!
//! CPU crypto works in place, so the rest of this module copies such a frame first. A lookaside
//! crypto op can name a destination (`m_dst`), and a device with
//! RTE_CRYPTODEV_FF_OOP_SGL_IN_LB_OUT reads a chain and writes one buffer. rte_ipsec still
//! frames the packet, through a lookaside session on the same SA: sequence number, IV, ESP
//! header, padding, trailer and AAD come from it as they would in place; the op it fills is then
//! pointed at our destination.
//!
//! The device is a `crypto_aesni_gcm` beside the SA's own ([`CryptoDev::open`](super::CryptoDev::open)): it walks the
//! chain with one GCM update per segment. `crypto_aesni_mb` can do the same, but submits a job
//! per segment to its job manager, and (DPDK 22.11 `handle_aead_sgl_job`) does not cap a step
//! at the bytes left to encrypt, so a source segment running past the ciphertext is read past
//! it.
//!
//! What that needs, and why (DPDK 22.11):
//! - rte_ipsec writes the trailer into the last segment's tailroom. An attached span has none
//!   (its `buf_len` is the span), so a small mbuf of ours is chained behind it to take the
//!   trailer; the region is never written.
//! - The digest is pointed into the destination, behind the ciphertext, and the room rte_ipsec
//!   left for it in the source is taken off again: the source ends where the ciphertext does.
//! - AES-GCM only. `crypto_aesni_gcm` has no AES-CBC, and `crypto_aesni_mb` gathers a chain
//!   for AES-CBC + HMAC into a buffer it allocates per op (`handle_sgl_linear`): a copy and an
//!   `rte_zmalloc` per packet, worse than ours. Those SAs keep the copy and CPU crypto
//!   (`SaStats::copied` counts it).
//!
//! The same ops carry every packet on a device without CPU crypto (a hardware lookaside
//! device's case; `crypto_openssl` here): [`EspSa::seal_out_of_place`] seals frames of our own
//! in place through them, and [`EspSa::prepare_through_ops`] stands in for CPU crypto when
//! opening.
//!
//! The ops go through the device's queue pair 0 and are dequeued before the call returns: the
//! software PMD does the work inside the dequeue, so this is as synchronous as CPU crypto. A
//! hardware lookaside device would make the data core wait for it here.
//!
//! What it costs (`esp-bench`, same run): at MTU 9000 out of place is 1.10-1.14x as fast as a
//! copy and an in-place seal; at MTU 1500 0.83-0.89x (an op and a second mbuf per packet weigh
//! more than a 1.4 KB copy that stays in cache).

use std::time::Instant;

use dpdk_sys as sys;

use super::{clear_sec_flags, own_copy, own_room, refused, CryptoDev, EspDrop, EspSa};
use super::{DpdkError, Mbuf, Mempool, ETH, RX_SEC_OFFLOAD_FAILED, TAIL_SCRATCH};
use crate::port::PacketBuf;

/// Ops in flight at once: under queue pair 0's ring (64 descriptors).
const OPS_AT_ONCE: usize = 32;
/// Ops in a device's pool: a few data cores' worth of bursts.
const OPS: u32 = 255;

/// The pool of crypto ops of device `id` (found if it exists): each op has room behind it for
/// the IV at `IV_OFFSET`.
pub(super) fn op_pool(id: u8) -> Result<*mut sys::rte_mempool, DpdkError> {
    let name = std::ffi::CString::new(format!("ipsec_ops_{id}"))
        .map_err(|_| DpdkError::new("pool name", 22))?;
    // SAFETY: a valid name.
    let found = unsafe { sys::rte_mempool_lookup(name.as_ptr()) };
    if !found.is_null() {
        return Ok(found);
    }
    // SAFETY: a valid name; DPDK validates the sizes. 16 bytes of private data hold the largest
    // IV (AES-CBC's) at IV_OFFSET, right behind the symmetric op.
    let pool = unsafe {
        sys::rte_crypto_op_pool_create(
            name.as_ptr(),
            sys::RTE_CRYPTO_OP_TYPE_SYMMETRIC,
            OPS,
            0,
            16,
            0,
        )
    };
    if pool.is_null() {
        return Err(DpdkError::from_rte_errno("rte_crypto_op_pool_create"));
    }
    Ok(pool)
}

/// A frame submitted: where its result goes, what it looked like before, and the mbuf its
/// ciphertext is written to (`None`: sealed in place, a frame of our own already).
struct Ready {
    i: usize,
    /// The frame, which `results[i]` holds until it is finished.
    src: *mut sys::rte_mbuf,
    eth: [u8; ETH],
    before: usize,
    dst: Option<Mbuf>,
}

fn ptr(m: &Mbuf) -> *mut sys::rte_mbuf {
    m.as_non_null().as_ptr()
}

/// The symmetric op behind a crypto op header (rte_crypto.h: `sym` follows the header).
fn sym_of(op: *mut sys::rte_crypto_op) -> *mut sys::rte_crypto_sym_op {
    op.wrapping_add(1).cast()
}

impl EspSa {
    /// [`EspSa::encrypt_burst`]'s work for a burst with a zero-copy frame in it, on an SA with
    /// a lookaside session: frames of our own are sealed in place, the others out of place.
    pub(super) fn seal_out_of_place(
        &self,
        frames: Vec<Mbuf>,
        pool: &Mempool,
        now: Instant,
    ) -> Vec<Result<Mbuf, EspDrop>> {
        let mut results: Vec<Result<Mbuf, EspDrop>> = Vec::with_capacity(frames.len());
        let mut ready: Vec<Ready> = Vec::with_capacity(frames.len());
        for frame in frames {
            match self.out_ready(frame, pool, now) {
                Ok((m, eth, before, dst)) => {
                    ready.push(Ready {
                        i: results.len(),
                        src: ptr(&m),
                        eth,
                        before,
                        dst,
                    });
                    results.push(Ok(m));
                }
                Err(why) => results.push(Err(why)),
            }
        }
        if !ready.is_empty() {
            let engine = self.engine.lock().unwrap_or_else(|p| p.into_inner());
            // The lookaside session beside CPU crypto, or the SA's own on a device of ops.
            let (session, dev) = match engine.lookaside.as_ref() {
                Some(la) => (&*la.session, &*la.dev),
                None => (&*engine.session, &*self.dev),
            };
            for chunk in ready.chunks_mut(OPS_AT_ONCE) {
                self.seal_chunk(session, dev, chunk, &mut results);
            }
        }
        for r in &results {
            if let Err(why) = r {
                self.count(*why);
            }
        }
        results
    }

    /// One frame made ready: a zero-copy frame with a trailer mbuf chained behind it and its
    /// destination allocated; a frame of our own as for CPU crypto; lengths set.
    #[allow(clippy::type_complexity)]
    fn out_ready(
        &self,
        frame: Mbuf,
        pool: &Mempool,
        now: Instant,
    ) -> Result<(Mbuf, [u8; ETH], usize, Option<Mbuf>), EspDrop> {
        if self.expired(now) {
            return Err(EspDrop::Expired);
        }
        let tail = self.config.algorithm.block() - 1 + TAIL_SCRATCH;
        let (m, dst) =
            if !self.out_of_place || own_room(&frame).is_some() || !chain_is_ours_to_relink(&frame)
            {
                (own_copy(frame, pool, tail, &self.stats.copied)?, None)
            } else {
                let before = frame.frame_len();
                let dst = Mbuf::alloc(pool).ok_or(EspDrop::NoRoom)?;
                if dst.tailroom_total() < before + self.config.overhead() {
                    return Err(EspDrop::NoRoom);
                }
                let trailer = Mbuf::alloc(pool).ok_or(EspDrop::NoRoom)?;
                if trailer.tailroom_total() < tail {
                    return Err(EspDrop::NoRoom);
                }
                let mut frame = frame;
                frame.chain(trailer).map_err(|_| EspDrop::NoRoom)?;
                (frame, Some(dst))
            };
        // The headers are in the first segment (the zero-copy sender's own buffer).
        let (m, eth, before) = self.framed(m)?;
        Ok((m, eth, before, dst))
    }

    /// Prepares, encrypts and finishes up to [`OPS_AT_ONCE`] frames; each one's result replaces
    /// the frame in `results`.
    fn seal_chunk(
        &self,
        session: &super::Session,
        dev: &CryptoDev,
        chunk: &mut [Ready],
        results: &mut [Result<Mbuf, EspDrop>],
    ) {
        let _qp = dev.qp.lock().unwrap_or_else(|p| p.into_inner());
        let n = chunk.len();
        let mut ptrs: Vec<*mut sys::rte_mbuf> = chunk.iter().map(|r| r.src).collect();
        let Some(mut ops) = dev.alloc_ops(n) else {
            for r in chunk.iter() {
                results[r.i] = Err(EspDrop::NoRoom);
            }
            return;
        };
        // SAFETY: the frames are ours, their lengths set (out_ready), their last segments ours
        // with room for the trailer.
        let (k, errno) = unsafe { crypto_prepare(session, &mut ptrs, &mut ops) };
        // Where ptrs[j] is in the chunk: the same place unless prepare refused some (rare).
        let at: Vec<usize> = ptrs[..k]
            .iter()
            .enumerate()
            .map(|(j, &p)| {
                if k == n {
                    j
                } else {
                    chunk.iter().position(|r| r.src == p).unwrap_or(j)
                }
            })
            .collect();
        let mut prepared = [false; OPS_AT_ONCE];
        // With ESN rte_ipsec keeps the high sequence bits between trailer and ICV (they are
        // in GCM's AAD, not on the wire).
        let sqh = if self.config.esn { 4 } else { 0 };
        let mut queued: Vec<*mut sys::rte_crypto_op> = Vec::with_capacity(k);
        let mut in_place: Vec<*mut sys::rte_mbuf> = Vec::with_capacity(k);
        for (j, &src) in ptrs[..k].iter().enumerate() {
            let (op, c) = (ops[j], at[j]);
            prepared[c] = true;
            // SAFETY: op was filled for src by prepare; dst (if any) is an mbuf we own.
            let ok = unsafe {
                match chunk[c].dst.as_mut() {
                    Some(dst) => redirect(op, dst, self.config.algorithm.icv_len(), sqh),
                    None => {
                        in_place.push(src);
                        true
                    }
                }
            };
            if ok {
                queued.push(op);
            } else {
                // SAFETY: src is a live mbuf of ours.
                unsafe { (*src).ol_flags |= RX_SEC_OFFLOAD_FAILED };
            }
        }
        self.run_ops(dev, &mut queued);
        free_ops(&ops[..n]);
        // The frames sealed in place are finished by rte_ipsec (with ESN it moves the ICV over
        // the high sequence bits it kept behind the trailer), which checks each one's failure
        // flag and moves the failed behind the good. The sources of out-of-place seals are
        // dropped, so only their flag counts: rte_ipsec would trim them again.
        let good_in_place = if in_place.is_empty() {
            0
        } else {
            // SAFETY: these frames were prepared and their ops completed.
            usize::from(unsafe {
                sys::rte_ipsec_pkt_process(&session.0, in_place.as_mut_ptr(), in_place.len() as u16)
            })
        };
        let mut sealed = [false; OPS_AT_ONCE];
        for (c, r) in chunk.iter().enumerate() {
            if r.dst.is_some() {
                // SAFETY: a live mbuf of ours.
                sealed[c] =
                    prepared[c] && unsafe { (*r.src).ol_flags } & RX_SEC_OFFLOAD_FAILED == 0;
            }
        }
        // Frames of our own are few in a burst of zero-copy frames: found by search.
        for &p in &in_place[..good_in_place] {
            if let Some(c) = chunk.iter().position(|r| r.src == p) {
                sealed[c] = true;
            }
        }
        for (c, r) in chunk.iter_mut().enumerate() {
            let Ok(src) = std::mem::replace(&mut results[r.i], Err(EspDrop::Malformed)) else {
                continue;
            };
            results[r.i] = if sealed[c] {
                // An out-of-place seal's source (headers, region spans, trailer) is freed
                // here; its destination is the frame.
                let mut m = r.dst.take().unwrap_or(src);
                clear_sec_flags(&mut m);
                self.seal_done(m, &r.eth, r.before)
            } else if prepared[c] {
                Err(EspDrop::Malformed)
            } else {
                Err(refused(errno))
            };
        }
    }

    /// What `rte_ipsec_pkt_cpu_prepare` does, on a device of crypto ops: rte_ipsec prepares
    /// `ptrs` (frames of our own) for `session` and the device runs their crypto, a chunk at a
    /// time. As with the CPU call, the prepared come first in `ptrs` (their number returned,
    /// with the errno prepare left for the others), and each whose crypto failed is flagged
    /// RX_SEC_OFFLOAD_FAILED for `rte_ipsec_pkt_process`.
    pub(super) fn prepare_through_ops(
        &self,
        session: &super::Session,
        ptrs: &mut [*mut sys::rte_mbuf],
    ) -> (usize, i32) {
        let dev = &*self.dev;
        let _qp = dev.qp.lock().unwrap_or_else(|p| p.into_inner());
        let mut prepared = Vec::with_capacity(ptrs.len());
        let mut refused = Vec::new();
        let mut errno = 0;
        for chunk in ptrs.chunks_mut(OPS_AT_ONCE) {
            let n = chunk.len();
            let Some(mut ops) = dev.alloc_ops(n) else {
                refused.extend_from_slice(chunk);
                errno = 28;
                continue;
            };
            // SAFETY: frames of ours with their lengths set (open_ready).
            let (k, e) = unsafe { crypto_prepare(session, chunk, &mut ops) };
            if k < n {
                errno = e;
            }
            let mut queued = ops[..k].to_vec();
            self.run_ops(dev, &mut queued);
            free_ops(&ops[..n]);
            prepared.extend_from_slice(&chunk[..k]);
            refused.extend_from_slice(&chunk[k..]);
        }
        let k = prepared.len();
        ptrs[..k].copy_from_slice(&prepared);
        ptrs[k..].copy_from_slice(&refused);
        (k, errno)
    }

    /// Enqueues `queued` on queue pair 0 of `dev` and dequeues until every op is back; an op
    /// whose crypto failed, or that the device would not take, marks its frame failed.
    fn run_ops(&self, dev: &CryptoDev, queued: &mut Vec<*mut sys::rte_crypto_op>) {
        let mut sent = 0;
        let mut back = 0;
        let mut done = [std::ptr::null_mut::<sys::rte_crypto_op>(); OPS_AT_ONCE];
        while back < queued.len() {
            if sent < queued.len() {
                // SAFETY: queue pair 0 of a started device, ours under dev.qp; the ops are
                // complete.
                let e = usize::from(unsafe {
                    sys::rte_cryptodev_enqueue_burst(
                        dev.id,
                        0,
                        queued[sent..].as_mut_ptr(),
                        (queued.len() - sent) as u16,
                    )
                });
                sent += e;
                // A device that works inside enqueue (crypto_openssl) stops at an op it could
                // not process (status ERROR) and never returns it: that frame fails, the ops
                // behind it are offered again.
                // SAFETY: a prepared op of ours, not in flight (the device refused it).
                let refused = sent < queued.len()
                    && unsafe { (*queued[sent]).__bindgen_anon_1.__bindgen_anon_1.status }
                        == sys::RTE_CRYPTO_OP_STATUS_ERROR as u8;
                if refused {
                    // SAFETY: as above; its m_src is one of our frames.
                    unsafe { (*(*sym_of(queued[sent])).m_src).ol_flags |= RX_SEC_OFFLOAD_FAILED };
                    sent += 1;
                    back += 1;
                } else if e == 0 && back == sent {
                    // The device takes nothing and holds nothing of ours: what is left fails.
                    for &op in &queued[sent..] {
                        // SAFETY: a prepared op of ours; its m_src is one of our frames.
                        unsafe { (*(*sym_of(op)).m_src).ol_flags |= RX_SEC_OFFLOAD_FAILED };
                    }
                    queued.truncate(sent);
                }
            }
            // SAFETY: as above; `done` has room for every op in flight. The software PMD
            // processes what it dequeues, so every op comes back.
            let d = usize::from(unsafe {
                sys::rte_cryptodev_dequeue_burst(dev.id, 0, done.as_mut_ptr(), OPS_AT_ONCE as u16)
            });
            for &op in &done[..d] {
                // SAFETY: a dequeued op of ours; its m_src is one of our frames.
                unsafe {
                    if (*op).__bindgen_anon_1.__bindgen_anon_1.status
                        != sys::RTE_CRYPTO_OP_STATUS_SUCCESS as u8
                    {
                        (*(*sym_of(op)).m_src).ol_flags |= RX_SEC_OFFLOAD_FAILED;
                    }
                }
            }
            back += d;
        }
    }
}

impl CryptoDev {
    /// `n` (at most [`OPS_AT_ONCE`]) fresh crypto ops of this device, or `None` when its pool
    /// is dry.
    fn alloc_ops(&self, n: usize) -> Option<[*mut sys::rte_crypto_op; OPS_AT_ONCE]> {
        let mut ops = [std::ptr::null_mut::<sys::rte_crypto_op>(); OPS_AT_ONCE];
        // SAFETY: a live op pool of this device (a device used through ops has one);
        // n <= OPS_AT_ONCE; all or none are allocated.
        let got = unsafe {
            sys::rte_crypto_op_bulk_alloc(
                self.ops,
                sys::RTE_CRYPTO_OP_TYPE_SYMMETRIC,
                ops.as_mut_ptr(),
                n.min(OPS_AT_ONCE) as u16,
            )
        };
        (got as usize == n).then_some(ops)
    }
}

/// Gives ops back to their pool.
fn free_ops(ops: &[*mut sys::rte_crypto_op]) {
    for &op in ops {
        // SAFETY: each came from alloc_ops and none is in flight any more (run_ops returned).
        unsafe { sys::rte_crypto_op_free(op) };
    }
}

/// rte_ipsec's lookaside prepare of `mbufs` into `ops`: it moves the frames it refuses behind
/// the ones it takes and fills `ops[j]` for `mbufs[j]`, j < k. Returns k and the errno it left
/// for the others (0 when it took all).
///
/// # Safety
/// The frames are live mbufs of ours with their l2/l3 lengths set, and the last segment of
/// each has room for the trailer; `ops` are fresh, at least `mbufs.len()` of them.
unsafe fn crypto_prepare(
    session: &super::Session,
    mbufs: &mut [*mut sys::rte_mbuf],
    ops: &mut [*mut sys::rte_crypto_op],
) -> (usize, i32) {
    let n = mbufs.len().min(ops.len());
    // SAFETY: per the contract; the session was prepared for this SA in EspSa::new.
    let k = usize::from(unsafe {
        sys::rte_ipsec_pkt_crypto_prepare(
            &session.0,
            mbufs.as_mut_ptr(),
            ops.as_mut_ptr(),
            n as u16,
        )
    });
    (k, if k < n { dpdk_sys::rte_errno() } else { 0 })
}

/// Whether every segment of `frame` is held by this frame alone, the first one in its own
/// buffer: the chain may then be relinked (a trailer chained behind it) and its first segment
/// written (ESP header), while the attached spans are only read.
fn chain_is_ours_to_relink(frame: &Mbuf) -> bool {
    let mut seg: *const sys::rte_mbuf = frame.as_non_null().as_ptr();
    let mut first = true;
    // SAFETY: we own the chain; each `next` is null or a live segment of it.
    unsafe {
        while let Some(m) = seg.as_ref() {
            if sys::rte_mbuf_refcnt_read(seg) != 1 || (first && m.ol_flags & (1 << 61) != 0) {
                return false;
            }
            first = false;
            seg = m.next;
        }
    }
    true
}

/// Points a prepared op's output at `dst`: the bytes before the ciphertext (headers, ESP
/// header, IV) copied there, the digest written behind the ciphertext there, and the room
/// rte_ipsec left behind it in the source (`sqh` bytes of high sequence bits with ESN, the
/// ICV) taken off the source (see the module's notes). False, with nothing changed, when the layout
/// is not the one rte_ipsec makes or `dst` is too small.
///
/// # Safety
/// `op` is an op rte_ipsec prepared for a chain of ours whose first segment holds everything
/// up to the ciphertext; `dst` is a single-segment mbuf of ours.
unsafe fn redirect(op: *mut sys::rte_crypto_op, dst: &mut Mbuf, icv: usize, sqh: usize) -> bool {
    // SAFETY: per the contract: op, its sym op and src's chain are live and ours; the copy
    // stays inside src's first segment (off <= data_len) and dst's room (checked).
    unsafe {
        let sym = sym_of(op);
        let aead = (*sym).__bindgen_anon_2.aead;
        let (off, len) = (aead.data.offset as usize, aead.data.length as usize);
        let src = (*sym).m_src;
        let total = (*src).pkt_len as usize;
        let last = sys::rte_pktmbuf_lastseg(src);
        if off + len + sqh + icv != total
            || off > usize::from((*src).data_len)
            || usize::from((*last).data_len) < sqh + icv
            || dst.tailroom_total() < total - sqh
            || total > usize::from(u16::MAX)
        {
            return false;
        }
        dst.set_len((total - sqh) as u16);
        let head = (*src)
            .buf_addr
            .cast::<u8>()
            .add(usize::from((*src).data_off));
        dst.data_mut()[..off].copy_from_slice(std::slice::from_raw_parts(head, off));
        let d = dst.as_non_null().as_ptr();
        let at = off + len;
        (*sym).__bindgen_anon_2.aead.digest.data = dst.data_mut()[at..].as_mut_ptr();
        (*sym).__bindgen_anon_2.aead.digest.phys_addr =
            (*d).buf_iova + u64::from((*d).data_off) + at as u64;
        (*last).data_len -= (sqh + icv) as u16;
        (*src).pkt_len -= (sqh + icv) as u32;
        (*sym).m_dst = d;
        true
    }
}
