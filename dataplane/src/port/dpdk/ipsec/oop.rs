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
//! hardware lookaside device makes the data core wait for it here, for at most [`STALL`]
//! without progress: a device past that is given up (see [`run_ops`]).
//!
//! What it costs (`esp-bench`, same run): at MTU 9000 out of place is 1.10-1.14x as fast as a
//! copy and an in-place seal; at MTU 1500 0.83-0.89x (an op and a second mbuf per packet weigh
//! more than a 1.4 KB copy that stays in cache).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

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
    /// The inner IP header's Don't Fragment ([`EspSa::framed`]).
    df: bool,
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
        // Bytes of the frames before, taken for sealing: the hard lifetime counts them.
        let mut pending = 0u64;
        for frame in frames {
            match self.out_ready(frame, pool, now, pending) {
                Ok((m, eth, before, df, dst)) => {
                    pending += before as u64;
                    ready.push(Ready {
                        i: results.len(),
                        src: ptr(&m),
                        eth,
                        before,
                        df,
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
        pending: u64,
    ) -> Result<(Mbuf, [u8; ETH], usize, bool, Option<Mbuf>), EspDrop> {
        if self.expired_after(now, pending) {
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
        let (m, eth, before, df) = self.framed(m)?;
        Ok((m, eth, before, df, dst))
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
        self.stats.sequence.fetch_add(k as u64, Ordering::Relaxed);
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
        let run = self.run_ops(dev, &mut queued);
        free_ops(&ops[..n], &run.held);
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
                self.seal_done(m, &r.eth, r.before, r.df)
            } else if run.stalled.contains(&r.src) {
                Err(EspDrop::Stalled)
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
    /// RX_SEC_OFFLOAD_FAILED for `rte_ipsec_pkt_process`; those that failed because the device
    /// stalled are returned too (their frames are left to it: dropping them frees nothing).
    pub(super) fn prepare_through_ops(
        &self,
        session: &super::Session,
        ptrs: &mut [*mut sys::rte_mbuf],
    ) -> (usize, i32, Vec<*mut sys::rte_mbuf>) {
        let dev = &*self.dev;
        let _qp = dev.qp.lock().unwrap_or_else(|p| p.into_inner());
        let mut prepared = Vec::with_capacity(ptrs.len());
        let mut refused = Vec::new();
        let mut errno = 0;
        let mut stalled = Vec::new();
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
            let run = self.run_ops(dev, &mut queued);
            free_ops(&ops[..n], &run.held);
            stalled.extend(run.stalled);
            prepared.extend_from_slice(&chunk[..k]);
            refused.extend_from_slice(&chunk[k..]);
        }
        let k = prepared.len();
        ptrs[..k].copy_from_slice(&prepared);
        ptrs[k..].copy_from_slice(&refused);
        (k, errno, stalled)
    }

    /// Enqueues `queued` on queue pair 0 of `dev` and dequeues until every op is back; an op
    /// whose crypto failed, or that the device would not take, marks its frame failed. A device
    /// that has stopped returning ops is given up after [`STALL`] (see [`run_ops`]) and from
    /// then on takes nothing: its frames fail at once. The ops it still holds are returned, not
    /// to be freed; the frames that failed for it are returned too.
    fn run_ops(&self, dev: &CryptoDev, queued: &mut Vec<*mut sys::rte_crypto_op>) -> Run {
        if dev.is_stalled() {
            // SAFETY: prepared ops of ours, never enqueued.
            return unsafe { fail_unsent(queued, 0) };
        }
        // SAFETY: queue pair 0 of a started device, ours under dev.qp (the callers hold it);
        // the ops are prepared, their frames ours.
        let run = unsafe { run_ops(&mut QueuePair(dev.id), queued, STALL) };
        if !run.held.is_empty() && !dev.stalled.swap(true, Ordering::Relaxed) {
            crate::errln!(
                "ddpdk: crypto device {} returned no op for {} ms: {} ops and their frames are \
                 left to it (not freed); every packet its SAs would send through it is dropped \
                 from now on (counted as `stalled`), restart ddpdk to use it again",
                dev.name,
                STALL.as_millis(),
                run.held.len()
            );
        }
        run
    }
}

/// How long a data core waits on a device that neither takes nor returns an op before it gives
/// the device up. A software PMD does the work inside the calls and a hardware lookaside device
/// within microseconds, so a device this slow has stopped; waiting longer would stop the data
/// core with it (every association on the core, not only the SA's).
const STALL: Duration = Duration::from_millis(100);
/// Empty polls the wait must also have made: one long pause of the thread itself (preempted,
/// a VM's stolen time) is not a device that stopped.
const STALL_POLLS: u32 = 1000;

/// A queue pair of ops, as [`run_ops`] uses one: a device's, or a double in the tests.
trait OpQueue {
    /// Offers `ops` in order; returns how many the device took.
    fn enqueue(&mut self, ops: &mut [*mut sys::rte_crypto_op]) -> usize;
    /// Ops the device is done with, into `done`; returns how many.
    fn dequeue(&mut self, done: &mut [*mut sys::rte_crypto_op]) -> usize;
}

/// Queue pair 0 of device `.0`, which the caller holds (`CryptoDev::qp`).
struct QueuePair(u8);

impl OpQueue for QueuePair {
    fn enqueue(&mut self, ops: &mut [*mut sys::rte_crypto_op]) -> usize {
        // SAFETY: queue pair 0 of a started device, held by the caller; the ops are complete
        // (run_ops' contract). At most OPS_AT_ONCE of them.
        usize::from(unsafe {
            sys::rte_cryptodev_enqueue_burst(self.0, 0, ops.as_mut_ptr(), ops.len() as u16)
        })
    }

    fn dequeue(&mut self, done: &mut [*mut sys::rte_crypto_op]) -> usize {
        // SAFETY: as above; `done` has room for the count asked.
        usize::from(unsafe {
            sys::rte_cryptodev_dequeue_burst(self.0, 0, done.as_mut_ptr(), done.len() as u16)
        })
    }
}

/// What [`run_ops`] leaves behind.
#[derive(Debug, Default)]
pub(super) struct Run {
    /// Ops the device took and never gave back: it may still write them and their frames, so
    /// they are not freed, and their frames are not freed either (each segment's reference
    /// count was raised: dropping the frame leaves it allocated).
    pub held: Vec<*mut sys::rte_crypto_op>,
    /// The frames (`m_src`) that failed because the device stalled.
    pub stalled: Vec<*mut sys::rte_mbuf>,
}

/// Runs `queued` (at most [`OPS_AT_ONCE`]) through `q` until every op the device took is back.
/// An op whose crypto failed, or that the device would not take, marks its frame failed
/// (RX_SEC_OFFLOAD_FAILED, which rte_ipsec checks). When for `stall` the device neither takes
/// nor returns an op while some are in it, the wait ends: those ops are [`Run::held`], their
/// frames leaked and failed, and the ops not yet taken fail too (after [`STALL_POLLS`] empty
/// polls as well, the last of them after the time is up). An op dequeued that is not one of these
/// is ignored: the wait ends when each of ours is back.
///
/// # Safety
/// Each op is prepared (rte_ipsec filled it) for an `m_src` chain of ours, `m_dst` null or a
/// single mbuf of ours; `q`'s ops are these.
unsafe fn run_ops(
    q: &mut impl OpQueue,
    queued: &mut Vec<*mut sys::rte_crypto_op>,
    stall: Duration,
) -> Run {
    debug_assert!(queued.len() <= OPS_AT_ONCE);
    let mut sent = 0;
    let mut back = 0;
    // Bit j: queued[j] is no longer in the device (returned, or refused at enqueue).
    let mut out_of_device = 0u64;
    let mut idle_since: Option<Instant> = None;
    let mut idle_polls = 0u32;
    let mut last_turn = false;
    let mut done = [std::ptr::null_mut::<sys::rte_crypto_op>(); OPS_AT_ONCE];
    let mut refused_all = Vec::new();
    while back < queued.len() {
        let mut taken = 0;
        if sent < queued.len() {
            taken = q.enqueue(&mut queued[sent..]);
            sent += taken;
            // A device that works inside enqueue (crypto_openssl) stops at an op it could
            // not process (status ERROR) and never returns it: that frame fails, the ops
            // behind it are offered again.
            // SAFETY: a prepared op of ours, not in flight (the device refused it).
            let refused = sent < queued.len()
                && unsafe { (*queued[sent]).__bindgen_anon_1.__bindgen_anon_1.status }
                    == sys::RTE_CRYPTO_OP_STATUS_ERROR as u8;
            if refused {
                // SAFETY: as above; its m_src is one of our frames.
                unsafe { fail(queued[sent]) };
                out_of_device |= 1 << sent;
                sent += 1;
                back += 1;
                taken += 1;
            } else if taken == 0 && back == sent {
                // The device takes nothing and holds nothing of ours (our queue pair, so no
                // one else's either): it is not working; what is left fails, as for a stall,
                // but nothing is left to it.
                // SAFETY: prepared ops of ours, never taken.
                refused_all = unsafe { fail_unsent(queued, sent) }.stalled;
                queued.truncate(sent);
            }
        }
        let d = q.dequeue(&mut done);
        let mut returned = 0;
        for &op in &done[..d] {
            // Only ours, each once: a stray op must not end the wait while one of ours is in
            // the device (it would be freed under it).
            let Some(j) = queued[..sent]
                .iter()
                .position(|&o| o == op)
                .filter(|&j| out_of_device & (1 << j) == 0)
            else {
                continue;
            };
            out_of_device |= 1 << j;
            returned += 1;
            // SAFETY: a dequeued op of ours; its m_src is one of our frames.
            if unsafe { (*op).__bindgen_anon_1.__bindgen_anon_1.status }
                != sys::RTE_CRYPTO_OP_STATUS_SUCCESS as u8
            {
                // SAFETY: as above.
                unsafe { fail(op) };
            }
        }
        back += returned;
        if taken > 0 || returned > 0 {
            idle_since = None;
            idle_polls = 0;
            last_turn = false;
            continue;
        }
        // The clock is read only on a turn with nothing done: a working device has none.
        idle_polls = idle_polls.saturating_add(1);
        let now = Instant::now();
        let since = *idle_since.get_or_insert(now);
        if now.duration_since(since) < stall || idle_polls < STALL_POLLS || back == queued.len() {
            continue;
        }
        // One more turn, whose dequeue comes after the time is up (this turn's came before
        // the clock was read, and the thread may have been away in between).
        if !last_turn {
            last_turn = true;
            continue;
        }
        let mut run = Run::default();
        for (j, &op) in queued[..sent].iter().enumerate() {
            if out_of_device & (1 << j) == 0 {
                // SAFETY: an op of ours the device holds; its frames are ours.
                unsafe { leak(op) };
                run.held.push(op);
                // SAFETY: as above.
                run.stalled.push(unsafe { fail(op) });
            }
        }
        // SAFETY: the ops from `sent` on were never taken.
        let unsent = unsafe { fail_unsent(queued, sent) };
        run.stalled.extend(unsent.stalled);
        return run;
    }
    Run {
        held: Vec::new(),
        stalled: refused_all,
    }
}

/// Fails the frames of `queued[from..]`, ops the device never took (they may be freed).
///
/// # Safety
/// As for [`run_ops`].
unsafe fn fail_unsent(queued: &[*mut sys::rte_crypto_op], from: usize) -> Run {
    Run {
        held: Vec::new(),
        // SAFETY: per the contract.
        stalled: queued[from..]
            .iter()
            .map(|&op| unsafe { fail(op) })
            .collect(),
    }
}

/// Marks the frame of `op` failed for rte_ipsec; returns it.
///
/// # Safety
/// `op`'s m_src is a live mbuf of ours.
unsafe fn fail(op: *mut sys::rte_crypto_op) -> *mut sys::rte_mbuf {
    // SAFETY: per the contract.
    unsafe {
        let m = (*sym_of(op)).m_src;
        (*m).ol_flags |= RX_SEC_OFFLOAD_FAILED;
        m
    }
}

/// Leaves the frames of `op` to a device that may still read and write them: one more
/// reference on every segment of `m_src` and on `m_dst`, so that dropping them frees nothing.
///
/// # Safety
/// `op`'s m_src is a live chain of ours, its m_dst null or a live mbuf of ours.
unsafe fn leak(op: *mut sys::rte_crypto_op) {
    // SAFETY: per the contract; each `next` is null or a live segment of the chain.
    unsafe {
        let sym = sym_of(op);
        let mut seg = (*sym).m_src;
        while !seg.is_null() {
            sys::rte_mbuf_refcnt_update(seg, 1);
            seg = (*seg).next;
        }
        if !(*sym).m_dst.is_null() {
            sys::rte_mbuf_refcnt_update((*sym).m_dst, 1);
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

/// Gives ops back to their pool, but those a stalled device still holds.
fn free_ops(ops: &[*mut sys::rte_crypto_op], held: &[*mut sys::rte_crypto_op]) {
    for &op in ops.iter().filter(|op| !held.contains(op)) {
        // SAFETY: each came from alloc_ops and is in no device (run_ops returned, and the
        // held are skipped).
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
pub(super) fn chain_is_ours_to_relink(frame: &Mbuf) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An op as a crypto op pool lays it out: the header, the symmetric op right behind it.
    #[repr(C)]
    struct FakeOp {
        op: sys::rte_crypto_op,
        sym: sys::rte_crypto_sym_op,
    }

    /// `n` ops, each with a source frame of two segments and a destination, none in a pool:
    /// run_ops reads and writes only their fields and the mbufs' flags and reference counts.
    // Boxed: each is pointed at, and must not move as the vectors grow.
    #[allow(clippy::vec_box)]
    struct Ops {
        ops: Vec<Box<FakeOp>>,
        mbufs: Vec<Box<sys::rte_mbuf>>,
    }

    fn mbuf() -> Box<sys::rte_mbuf> {
        // SAFETY: an all-zero rte_mbuf is a valid plain value (no data, no links).
        let mut m: Box<sys::rte_mbuf> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: a live mbuf of the test's.
        unsafe { sys::rte_mbuf_refcnt_set(&mut *m, 1) };
        m
    }

    impl Ops {
        fn new(n: usize) -> Ops {
            let mut ops = Vec::new();
            let mut mbufs = Vec::new();
            for _ in 0..n {
                let (mut src, mut span, mut dst) = (mbuf(), mbuf(), mbuf());
                src.next = &mut *span;
                // SAFETY: all-zero ops are valid plain values.
                let mut op: Box<FakeOp> = Box::new(unsafe { std::mem::zeroed() });
                op.sym.m_src = &mut *src;
                op.sym.m_dst = &mut *dst;
                ops.push(op);
                mbufs.extend([src, span, dst]);
            }
            Ops { ops, mbufs }
        }

        fn queued(&mut self) -> Vec<*mut sys::rte_crypto_op> {
            self.ops.iter_mut().map(|o| &mut o.op as *mut _).collect()
        }

        /// Per op: its source's failure flag, and the reference counts of the source's two
        /// segments and of the destination.
        fn frames(&self) -> Vec<(bool, [u16; 3])> {
            self.mbufs
                .chunks(3)
                .map(|m| {
                    // SAFETY: live mbufs of the test's.
                    let rc = |b: &sys::rte_mbuf| unsafe { sys::rte_mbuf_refcnt_read(b) };
                    (
                        m[0].ol_flags & RX_SEC_OFFLOAD_FAILED != 0,
                        [rc(&m[0]), rc(&m[1]), rc(&m[2])],
                    )
                })
                .collect()
        }
    }

    /// A device double: takes every op offered (none if `refuses`), and gives back (done,
    /// status SUCCESS) at most `returns` of them, after `silent` dequeues that return nothing;
    /// `stray` ops, not ours, come back first.
    struct Device {
        held: Vec<*mut sys::rte_crypto_op>,
        returns: usize,
        silent: usize,
        dequeues: usize,
        refuses: bool,
        stray: Vec<*mut sys::rte_crypto_op>,
    }

    impl OpQueue for Device {
        fn enqueue(&mut self, ops: &mut [*mut sys::rte_crypto_op]) -> usize {
            if self.refuses {
                return 0;
            }
            self.held.extend_from_slice(ops);
            ops.len()
        }

        fn dequeue(&mut self, done: &mut [*mut sys::rte_crypto_op]) -> usize {
            self.dequeues += 1;
            if !self.stray.is_empty() {
                let n = self.stray.len().min(done.len());
                for (slot, op) in done.iter_mut().zip(self.stray.drain(..n)) {
                    *slot = op;
                }
                return n;
            }
            if self.dequeues <= self.silent {
                return 0;
            }
            let n = self.returns.min(self.held.len()).min(done.len());
            for (slot, op) in done.iter_mut().zip(self.held.drain(..n)) {
                // SAFETY: one of the test's ops.
                unsafe {
                    (*op).__bindgen_anon_1.__bindgen_anon_1.status =
                        sys::RTE_CRYPTO_OP_STATUS_SUCCESS as u8;
                }
                *slot = op;
            }
            self.returns -= n;
            n
        }
    }

    fn device(returns: usize, silent: usize) -> Device {
        Device {
            held: Vec::new(),
            returns,
            silent,
            dequeues: 0,
            refuses: false,
            stray: Vec::new(),
        }
    }

    #[test]
    fn a_stray_op_does_not_end_the_wait_for_ours() {
        let mut ops = Ops::new(2);
        let mut queued = ops.queued();
        let mut other = Ops::new(2);
        let mut dev = device(0, 0);
        // Two ops that are not these: were they counted, the wait would end with both of ours
        // still in the device, and free them under it.
        dev.stray = other.queued();
        // SAFETY: the test's ops and frames.
        let run = unsafe { run_ops(&mut dev, &mut queued, Duration::from_millis(20)) };
        assert_eq!(run.held, queued);
        assert_eq!(ops.frames(), vec![(true, [2, 2, 2]); 2]);
        assert_eq!(other.frames(), vec![(false, [1, 1, 1]); 2]);
    }

    #[test]
    fn a_device_that_takes_nothing_fails_the_frames_as_stalled_and_holds_none() {
        let mut ops = Ops::new(3);
        let mut queued = ops.queued();
        let mut dev = device(0, 0);
        dev.refuses = true;
        // SAFETY: the test's ops and frames.
        let run = unsafe { run_ops(&mut dev, &mut queued, Duration::from_secs(60)) };
        assert!(run.held.is_empty(), "{run:?}");
        assert_eq!(run.stalled.len(), 3);
        assert_eq!(ops.frames(), vec![(true, [1, 1, 1]); 3]);
    }

    #[test]
    fn a_device_that_returns_no_op_is_given_up_and_what_it_holds_is_left_to_it() {
        let mut ops = Ops::new(4);
        let mut queued = ops.queued();
        let mut dev = device(0, 0);
        // SAFETY: the test's ops and frames.
        let run = unsafe { run_ops(&mut dev, &mut queued, Duration::from_millis(20)) };
        // The data core is back, every frame failed and held by one more reference on each
        // segment and the destination: dropping them frees nothing the device may write.
        assert_eq!(run.held, queued);
        assert_eq!(run.stalled.len(), 4);
        assert_eq!(ops.frames(), vec![(true, [2, 2, 2]); 4]);
    }

    #[test]
    fn ops_back_before_the_stall_pass_and_only_the_rest_are_held() {
        let mut ops = Ops::new(4);
        let mut queued = ops.queued();
        let mut dev = device(3, 0);
        // SAFETY: the test's ops and frames.
        let run = unsafe { run_ops(&mut dev, &mut queued, Duration::from_millis(20)) };
        assert_eq!(run.held, vec![queued[3]]);
        let mut want = vec![(false, [1, 1, 1]); 3];
        want.push((true, [2, 2, 2]));
        assert_eq!(ops.frames(), want);
    }

    #[test]
    fn a_slow_device_is_waited_for() {
        let mut ops = Ops::new(4);
        let mut queued = ops.queued();
        // Thousands of empty dequeues, far within a stall limit of a minute.
        let mut dev = device(4, 5000);
        // SAFETY: the test's ops and frames.
        let run = unsafe { run_ops(&mut dev, &mut queued, Duration::from_secs(60)) };
        assert!(run.held.is_empty() && run.stalled.is_empty(), "{run:?}");
        assert_eq!(ops.frames(), vec![(false, [1, 1, 1]); 4]);
        assert_eq!(dev.dequeues, 5001);
    }

    #[test]
    fn frames_not_yet_taken_by_a_stalled_device_fail_but_are_not_held() {
        let mut ops = Ops::new(4);
        let queued = ops.queued();
        // SAFETY: the test's ops and frames, none enqueued.
        let run = unsafe { fail_unsent(&queued, 1) };
        assert!(run.held.is_empty());
        assert_eq!(run.stalled.len(), 3);
        let mut want = vec![(false, [1, 1, 1])];
        want.extend([(true, [1, 1, 1]); 3]);
        assert_eq!(ops.frames(), want);
    }
}
