//! A verbs-shaped API over the runtime: protection domains, memory regions with access flags,
//! queue pairs bound to an RDMAP stream of a session, completion queues and work completions,
//! as an RDMA programmer knows them from libibverbs (and as RFC 4296 §2.2.1 describes the
//! operations). `docs/verbs.md` maps each call to its `rdma_*` and `ibv_*` counterparts.
//!
//! [`Verbs`] owns the runtime's [`Control`] and runs on its thread: [`Verbs::poll`] turns the
//! control side, and turns what the data cores report (completions, received messages, session
//! events, Terminates) into work completions on the queue pair's completion queues. The data
//! cores run where the application put them (their own threads, or polled by the same thread
//! before [`Verbs::poll`]).
//!
//! **Work requests.** `post_send` takes Send, Send with Invalidate, RDMA Write and RDMA Read
//! (RFC 5040 §5) and Local Invalidate. A scatter-gather entry names local memory by lkey (the
//! memory region's STag) and address (its Tagged Offset) and is checked against the region, its
//! protection domain and its rights before anything is submitted; a failure completes the work
//! request with [`WcStatus::LocalProtection`], in its turn, and submits nothing. One entry is
//! sent without a copy ([`Payload::Local`]); several are gathered into one buffer (a copy). An
//! RDMA Read has exactly one entry, its Data Sink (as siw's `max_sge_rd`), and so does a
//! receive.
//!
//! **Completions.** Send-queue completions come in posting order per queue pair (RFC 5040
//! §5.5): an unsignaled work request that succeeded completes silently, and any failure is
//! always reported. A failure this layer finds, or the core's refusal of a post, waits for the
//! completions of the work posted before it (behind unsignaled work, an [`RdmaOp::Mark`] says
//! when that is over); receives complete in posting order too. The core knows each work
//! request by its number in its queue pair's posting order, not by its `wr_id`, which the
//! application may repeat and every queue pair chooses alike. A receive completes with the
//! byte length of the message, whether it was solicited, and the STag it invalidated (a Send
//! with Invalidate, which every data core has dropped by then). When the stream ends (its
//! session terminated, a Terminate either way, the association gone) the queue pair moves to
//! [`QpState::Error`] and its outstanding work completes [`WcStatus::Flushed`], and so does
//! work posted to it afterwards, behind it (as with libibverbs, for `ib_drain_qp`); why it
//! ended (the RDMAP error, or the session's reason) is [`Verbs::qp_error`]. A receive the
//! error was local to completes with that error instead, in its turn: `LocalProtection` over
//! deregistered memory, [`WcStatus::LocalLength`] for a message longer than it.
//!
//! **Local Invalidate** revokes the STag on every data core without blocking this thread; its
//! completion is reported once every core has acknowledged, so it may overtake the completions
//! of work posted before it.
//!
//! **A stream that never begins.** Receives posted in [`QpState::Init`] wait here until the
//! Initiate or Accept, and complete Flushed if the stream ends first. `connect_qp` and
//! `accept_qp` return before the data core has the Initiate or Accept; if the core refuses
//! it, the queue pair moves to [`QpState::Error`] and [`Verbs::qp_refused`] says why (an
//! [`Event::Refused`] with its stream tells the application's connection management too).
//!
//! **Events.** What verbs causes itself (a receive of a queue pair reaching its core) it
//! keeps; [`Verbs::poll_event`] has what connection management needs.

use rustc_hash::FxHashMap;
use std::collections::VecDeque;

use ddpdk_dataplane::ddp::RxError;
use ddpdk_dataplane::mem::{Access, Pd, Registration, Revocation, Stag};
use ddpdk_dataplane::port::Port;
use ddpdk_dataplane::sctp::Instant;
use ddpdk_dataplane::wire::rdmap::{Control as RdmapControl, Opcode, TerminateError};

use crate::conn::{AtomicOperation, Indication, Payload, PostError, RdmaOp, RdmaRequest, Status};
use crate::memory::{MemoryError, MemoryRegistration, RegionId};
use crate::rdmap::{terminate_error, RdmaLimits};
use crate::runtime::{ConnHandle, Control, Event, Op, RuntimeError};
use crate::session::{Event as SessionEvent, LocalError, TerminationReason};

/// A protection domain (`ibv_alloc_pd`; RFC 5041 §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProtectionDomain(pub Pd);

/// A registered memory region (`ibv_reg_mr`): its lkey and rkey are one STag, its addresses
/// Tagged Offsets from `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryRegion {
    pub lkey: Stag,
    pub rkey: Stag,
    /// Tagged Offset of the first byte.
    pub addr: u64,
    pub len: u64,
    pub access: Access,
    pub pd: ProtectionDomain,
    /// The endpoint memory behind it.
    pub region: RegionId,
}

/// A completion queue (`ibv_create_cq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cq(usize);

/// A queue pair (`ibv_create_qp`): one RDMAP stream of one association.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Qp(pub u32);

/// What a queue pair is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInit {
    pub pd: ProtectionDomain,
    pub send_cq: Cq,
    pub recv_cq: Cq,
    /// The association and its stream the RDMAP stream runs on.
    pub conn: ConnHandle,
    pub stream: u16,
    /// Read limits announced in the session's Private Data (ORD/IRD, `ibv_qp_attr`'s
    /// `max_rd_atomic` / `max_dest_rd_atomic`).
    pub limits: RdmaLimits,
}

/// A queue pair's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpState {
    /// Created: receives may be posted.
    Init,
    /// The session's Initiate is out; waiting for the Accept.
    Connecting,
    /// Ready to send.
    Rts,
    /// The stream ended; outstanding work is flushed.
    Error,
}

/// Why a queue pair is in [`QpState::Error`] ([`Verbs::qp_error`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpError {
    /// An RDMAP Terminate ended the stream, ours or the peer's (RFC 5040 §4.8, §7): its
    /// layer, type and code. It stands whatever the session says afterwards.
    Terminate(TerminateError),
    /// The DDP Stream Session ended with no RDMAP Terminate (RFC 5043 §6): the peer's Reject
    /// (§6.3) or DDP Terminate (§6.2), a chunk fitting none of §6's patterns (§6.1: both
    /// sides' `connect_qp` on one stream cross, and each Initiate is an
    /// `UnexpectedInitiate` to the other, §6.2), the association's end (§11.3).
    Session(TerminationReason),
}

/// A scatter-gather entry (`ibv_sge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    /// The local memory region's STag.
    pub lkey: Stag,
    /// Tagged Offset of the first byte.
    pub addr: u64,
    pub length: u32,
}

/// What a send-queue work request does (`ibv_wr_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrOpcode {
    Send,
    /// Send with Invalidate: the peer invalidates `rkey` as the Send arrives (RFC 5040 §5.3).
    SendWithInv {
        rkey: Stag,
    },
    RdmaWrite {
        rkey: Stag,
        remote_addr: u64,
    },
    /// Reads `sg_list[0].length` bytes at the peer's `rkey`/`remote_addr` into `sg_list[0]`.
    RdmaRead {
        rkey: Stag,
        remote_addr: u64,
    },
    /// Invalidates the local STag `lkey` on every data core.
    LocalInv {
        lkey: Stag,
    },
    /// RFC 7306 §5.1.1 FetchAdd (`IBV_WR_ATOMIC_FETCH_AND_ADD`, with the masked form of
    /// `ibv_exp`'s extended atomics): adds `add` to the peer's 64-bit word at `rkey` /
    /// `remote_addr`, field by field under `mask` (0: one 64-bit add); its original value goes
    /// to `sg_list[0]` (exactly 8 bytes).
    AtomicFetchAdd {
        rkey: Stag,
        remote_addr: u64,
        add: u64,
        mask: u64,
    },
    /// RFC 7306 §5.1.2 CmpSwap (`IBV_WR_ATOMIC_CMP_AND_SWP`, masked): where the word's bits
    /// under `compare_mask` equal `compare`'s, its bits under `swap_mask` become `swap`'s; the
    /// original value goes to `sg_list[0]` (exactly 8 bytes).
    AtomicCmpSwap {
        rkey: Stag,
        remote_addr: u64,
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    },
    /// RFC 7306 §6 Immediate Data: 8 bytes into the peer's next posted receive, which
    /// completes with them (`IBV_WC_RECV` with `IBV_WC_WITH_IMM` in spirit); `sg_list` is empty.
    /// After an RDMA Write it is iWARP's RDMA Write with Immediate.
    ImmediateData {
        data: [u8; 8],
    },
}

/// A send-queue work request (`ibv_send_wr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendWr {
    pub wr_id: u64,
    pub opcode: WrOpcode,
    pub sg_list: Vec<Sge>,
    /// `IBV_SEND_SIGNALED`: report its successful completion.
    pub signaled: bool,
    /// `IBV_SEND_SOLICITED`: a Send with Solicited Event (RFC 5040 §5.3).
    pub solicited: bool,
}

/// A receive work request (`ibv_recv_wr`): exactly one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWr {
    pub wr_id: u64,
    pub sg_list: Vec<Sge>,
}

/// A work completion's status (`ibv_wc_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcStatus {
    Success,
    /// `IBV_WC_LOC_PROT_ERR`: an entry outside its region, of another protection domain,
    /// without the right it needs, or an lkey no longer valid.
    LocalProtection,
    /// `IBV_WC_LOC_QP_OP_ERR`: the queue pair could not take it (state, a full queue, too
    /// many entries).
    LocalQpOperation,
    /// `IBV_WC_LOC_LEN_ERR`: a receive that a Send or Immediate Data longer than it reached
    /// (RFC 5041 §7.1 check 4; RFC 7306 §6's 8 bytes into a smaller receive). Nothing of the
    /// message is placed beyond it; the stream ends with a Terminate (DDP 0x2/0x05).
    LocalLength,
    /// `IBV_WC_WR_FLUSH_ERR`: the stream ended before it completed.
    Flushed,
}

/// What a completed work request was (`ibv_wc_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcOpcode {
    Send,
    RdmaWrite,
    RdmaRead,
    LocalInv,
    Recv,
    /// `IBV_WC_FETCH_ADD`.
    FetchAdd,
    /// `IBV_WC_COMP_SWAP`.
    CompSwap,
    /// Immediate Data sent (RFC 7306 §6).
    ImmediateData,
}

/// A work completion (`ibv_wc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wc {
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    /// Bytes received (receive), or the work request's length.
    pub byte_len: u32,
    pub qp: Qp,
    /// The STag a Send with Invalidate invalidated here (`IBV_WC_WITH_INV`, `invalidated_rkey`).
    pub invalidated: Option<Stag>,
    /// A receive of a Send with Solicited Event (`IBV_WC_WITH_SOLICITED` in spirit).
    pub solicited: bool,
    /// A receive of RFC 7306 Immediate Data: its 8 bytes, as sent (`IBV_WC_WITH_IMM`,
    /// `imm_data`); they are also the first 8 bytes of the receive buffer (§6.2).
    pub imm_data: Option<[u8; 8]>,
}

impl Wc {
    /// A completion with no length, no invalidated STag, not solicited.
    pub fn new(wr_id: u64, status: WcStatus, opcode: WcOpcode, qp: Qp) -> Wc {
        Wc {
            wr_id,
            status,
            opcode,
            byte_len: 0,
            qp,
            invalidated: None,
            solicited: false,
            imm_data: None,
        }
    }
}

/// Why a verb was refused outright (`errno` of the verbs call); nothing was posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerbsError {
    NoSuchQp,
    NoSuchCq,
    /// The queue pair's state does not allow it (posting a send before it is ready, say).
    QpState(QpState),
    /// A queue pair on this stream of this association exists already.
    StreamTaken,
    Memory(MemoryError),
    Runtime(RuntimeError),
    /// `destroy_qp` waited [`DESTROY_WAIT`] and a data core still holds receives of the queue
    /// pair: their memory is not the application's yet. The queue pair stays destroyed
    /// (completing nothing); calling `destroy_qp` again waits again.
    Timeout,
    /// `accept_qp` with no Initiate of the peer's pending on the queue pair's stream (RFC 5043
    /// §6.3: an Accept answers one): none arrived yet, or it was answered or withdrawn, or
    /// the application has not polled its event yet ([`Verbs::poll_event`]). Nothing was
    /// sent and the queue pair is as it was: accept again once the Initiate's event is
    /// polled.
    NoPendingInitiate,
    /// `create_qp` on a connection whose association is over (its `Closed` came up,
    /// [`Control::is_closed`]) and that is not forgotten yet: no stream of it will ever carry
    /// a session, so no queue pair is made. Nothing changed.
    NotConnected,
}

/// How long [`Verbs::destroy_qp`] waits for the data core to withdraw the queue pair's
/// receives: as long as a deregistration waits for every core's acknowledgement.
pub const DESTROY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

impl std::fmt::Display for VerbsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerbsError::NoSuchQp => f.write_str("no such queue pair"),
            VerbsError::NoSuchCq => f.write_str("no such completion queue"),
            VerbsError::QpState(s) => write!(f, "the queue pair is {s:?}"),
            VerbsError::StreamTaken => f.write_str("the stream has a queue pair already"),
            VerbsError::Memory(e) => write!(f, "{e}"),
            VerbsError::Runtime(e) => write!(f, "{e}"),
            VerbsError::Timeout => f.write_str(
                "a data core still holds receives of the queue pair (it did not answer in time)",
            ),
            VerbsError::NoPendingInitiate => {
                f.write_str("no Initiate of the peer's is pending on the queue pair's stream")
            }
            VerbsError::NotConnected => f.write_str("the connection's association is over"),
        }
    }
}

impl std::error::Error for VerbsError {}

/// Work requests in posting order, numbered consecutively from `head`. The number, not the
/// application's `wr_id` (which may repeat, and which every queue pair chooses alike), is the
/// `wr_id` the core knows a work request by: its completion and its refusal name exactly it.
#[derive(Debug)]
struct Numbered<T> {
    head: u64,
    q: VecDeque<T>,
}

impl<T> Numbered<T> {
    /// Numbered from `head`: each queue pair's numbers start apart, so that a late report of a
    /// destroyed queue pair's work misses a new one on the same stream.
    fn new(head: u64) -> Numbered<T> {
        Numbered {
            head,
            q: VecDeque::new(),
        }
    }

    /// The number the next work request gets.
    fn next(&self) -> u64 {
        self.head + self.q.len() as u64
    }

    fn push(&mut self, t: T) -> u64 {
        let n = self.next();
        self.q.push_back(t);
        n
    }

    fn get(&self, n: u64) -> Option<&T> {
        let i = usize::try_from(n.checked_sub(self.head)?).ok()?;
        self.q.get(i)
    }

    fn get_mut(&mut self, n: u64) -> Option<&mut T> {
        let i = usize::try_from(n.checked_sub(self.head)?).ok()?;
        self.q.get_mut(i)
    }

    fn front(&self) -> Option<&T> {
        self.q.front()
    }

    fn pop_front(&mut self) -> Option<T> {
        let t = self.q.pop_front()?;
        self.head += 1;
        Some(t)
    }
}

/// A send-queue work request from its post until its completion is reported.
#[derive(Debug, Clone, Copy)]
struct SendSlot {
    wr_id: u64,
    opcode: WcOpcode,
    byte_len: u32,
    signaled: bool,
    /// Over, with this status, without the core's word: it failed its checks here, or the
    /// core refused it. Its completion waits for those of the work requests before it.
    done: Option<WcStatus>,
}

/// A posted receive from its post until its completion is reported.
#[derive(Debug, Clone, Copy)]
struct RecvSlot {
    wr_id: u64,
    /// Its completion, waiting for those of the receives posted before it.
    done: Option<Wc>,
}

#[derive(Debug)]
struct QpEntry {
    init: QpInit,
    state: QpState,
    sq: Numbered<SendSlot>,
    rq: Numbered<RecvSlot>,
    /// Receives posted in [`QpState::Init`]: the stream has no receive path before its
    /// session's Initiate or Accept, so they go to the core right behind it (or complete
    /// Flushed if the stream ends first: [`Verbs::fail_qp`]).
    held_recvs: Vec<Op>,
    error: Option<QpError>,
    /// Why the core refused the session's Initiate or Accept, if it did.
    refused: Option<PostError>,
    /// Being destroyed ([`Verbs::destroy_qp`]): its work completes on no CQ.
    destroyed: bool,
    /// Its DDP session is over (rejected or terminated, by either side): the core has flushed
    /// or is flushing its receives. In Error without it (the peer's RDMAP Terminate, RFC
    /// 5040 §5.4, which leaves the DDP Stream Terminate to us, RFC 5043 §6.2), the receives
    /// stay posted until our Terminate.
    session_over: bool,
    /// Its session was opened (`connect_qp` or `accept_qp` submitted).
    opened: bool,
}

/// A Local Invalidate waiting for every core's acknowledgement.
#[derive(Debug)]
struct LocalInv {
    qp: Qp,
    wr_id: u64,
    signaled: bool,
    revocation: Revocation,
}

/// The verbs context: see the module documentation.
#[derive(Debug)]
pub struct Verbs<P: Port> {
    control: Control<P>,
    qps: Vec<Option<QpEntry>>,
    by_stream: FxHashMap<(ConnHandle, u16), Qp>,
    cqs: Vec<VecDeque<Wc>>,
    local_invs: Vec<LocalInv>,
    /// Marks ([`RdmaOp::Mark`]) the command ring had no room for: the queue pair and the
    /// send-queue work request each is for, retried by [`Verbs::poll`].
    marks_owed: Vec<(Qp, u64)>,
    /// Initiates of peers that are no RDMAP peers, which an `accept_qp` found: rejected, and
    /// retried by [`Verbs::poll`] while the command ring is full.
    rejects_owed: Vec<(ConnHandle, u16)>,
    /// Runtime events verbs does not consume (connections accepted, sessions initiated by the
    /// peer, reports), for the application's connection management.
    events: VecDeque<Event>,
    /// How many `InitiateReceived` events of each stream [`Verbs::poll_event`] handed to the
    /// application: as many as the control side took in
    /// ([`Control::initiates_received`]) once the application has seen the last, the one
    /// pending. Dropped with the connection's `Closed`.
    initiates_polled: FxHashMap<(ConnHandle, u16), u64>,
}

impl<P: Port> Verbs<P> {
    pub fn new(control: Control<P>) -> Verbs<P> {
        Verbs {
            control,
            qps: Vec::new(),
            by_stream: FxHashMap::default(),
            cqs: Vec::new(),
            local_invs: Vec::new(),
            marks_owed: Vec::new(),
            rejects_owed: Vec::new(),
            events: VecDeque::new(),
            initiates_polled: FxHashMap::default(),
        }
    }

    /// The runtime's control side (connections, reports, regions' bytes).
    pub fn control(&self) -> &Control<P> {
        &self.control
    }

    pub fn control_mut(&mut self) -> &mut Control<P> {
        &mut self.control
    }

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&mut self) -> ProtectionDomain {
        ProtectionDomain(self.control.memory_mut().alloc_pd())
    }

    /// `ibv_reg_mr` (RFC 4296 `rdma_register`): `len` bytes of fresh memory registered whole
    /// for `pd` with `access`, at Tagged Offset `addr`. Every data core knows the STag when
    /// this returns ([`crate::memory::Memory::register`]).
    pub fn reg_mr(
        &mut self,
        pd: ProtectionDomain,
        len: usize,
        access: Access,
        addr: u64,
    ) -> Result<MemoryRegion, VerbsError> {
        let memory = self.control.memory_mut();
        let region = memory.alloc_region(len).map_err(|_| {
            // The region could not be allocated (memory, or the region table full).
            VerbsError::Memory(MemoryError::NoSuchRegion)
        })?;
        let reg = match memory.register(MemoryRegistration {
            pd: pd.0,
            region,
            offset: 0,
            len: len as u64,
            access,
            stream: None,
            to_base: addr,
        }) {
            Ok(reg) => reg,
            Err(e) => {
                // The region is ours alone until it is registered: give its slot back, or
                // every refused registration would hold one of the table's MAX_REGIONS for
                // good. No STag names it, so freeing it cannot be refused.
                let _ = memory.free_region(region);
                return Err(VerbsError::Memory(e));
            }
        };
        Ok(MemoryRegion {
            lkey: reg.stag,
            rkey: reg.stag,
            addr,
            len: len as u64,
            access,
            pd,
            region,
        })
    }

    /// `ibv_dereg_mr` (RFC 4296 `rdma_deregister`): returns once no data core can place into
    /// it (the cores must be polling meanwhile, on their own threads), and frees its memory's
    /// slot for later registrations. An STag already invalidated (locally or by the peer) is
    /// no error: the memory is freed all the same.
    pub fn dereg_mr(&mut self, mr: MemoryRegion) -> Result<(), VerbsError> {
        let memory = self.control.memory_mut();
        match memory.deregister(mr.lkey) {
            Ok(()) | Err(MemoryError::NoSuchStag) => {}
            Err(e) => return Err(VerbsError::Memory(e)),
        }
        memory.free_region(mr.region).map_err(VerbsError::Memory)
    }

    /// `ibv_create_cq`.
    pub fn create_cq(&mut self) -> Cq {
        self.cqs.push(VecDeque::new());
        Cq(self.cqs.len() - 1)
    }

    /// `ibv_create_qp`: a queue pair for `init.stream` of `init.conn`, in [`QpState::Init`].
    pub fn create_qp(&mut self, init: QpInit) -> Result<Qp, VerbsError> {
        if init.send_cq.0 >= self.cqs.len() || init.recv_cq.0 >= self.cqs.len() {
            return Err(VerbsError::NoSuchCq);
        }
        if self.by_stream.contains_key(&(init.conn, init.stream)) {
            return Err(VerbsError::StreamTaken);
        }
        // A handle no core owns (never made, or forgotten) would take work no core answers:
        // `Control::submit` refuses it, and nothing would ever end the queue pair.
        if self.control.owner(init.conn).is_none() {
            return Err(VerbsError::Runtime(RuntimeError::NoSuchConnection));
        }
        // One whose association is over (RFC 9260 §9, §10: nothing runs on it again) until
        // it is forgotten: a queue pair on it could only go to Error at its first
        // `connect_qp` or `accept_qp`, the core refusing it (or, with its slot given to
        // another association, not knowing it). Refused as soon as the control side has the
        // `Closed`, before the application polled it: that is a fact about the connection,
        // not a guess about what the application has seen, and the event still comes.
        if self.control.is_closed(init.conn) {
            return Err(VerbsError::NotConnected);
        }
        let qp = Qp(self.qps.len() as u32);
        self.qps.push(Some(QpEntry {
            init,
            state: QpState::Init,
            sq: Numbered::new(u64::from(qp.0) << 32),
            rq: Numbered::new(u64::from(qp.0) << 32),
            held_recvs: Vec::new(),
            error: None,
            refused: None,
            destroyed: false,
            session_over: false,
            opened: false,
        }));
        self.by_stream.insert((init.conn, init.stream), qp);
        Ok(qp)
    }

    /// `ibv_destroy_qp`: ends its stream's session and forgets it. As with libibverbs, its
    /// outstanding work does not complete (receives posted in Init, which no core has, are
    /// dropped with it), and once it returns nothing is placed into its receives: the memory
    /// is the application's again (RFC 5041 §7.1, RFC 4296 §3: no placement where the
    /// application no longer allows it). It waits, turning the control side at `now`, until
    /// the data core has withdrawn them; the cores must be polling meanwhile, on their own
    /// threads ([`Verbs::destroy_qp_polling`] for cores polled by this one).
    pub fn destroy_qp(&mut self, qp: Qp, now: Instant) -> Result<(), VerbsError> {
        self.destroy_qp_polling(qp, now, &mut std::thread::yield_now)
    }

    /// As [`Verbs::destroy_qp`], for a caller whose thread polls the data cores itself: `poll`
    /// runs while the core's withdrawal of the receives is awaited.
    ///
    /// A receive the core holds takes the next untagged Send of the stream (RFC 5041 §5.3)
    /// for as long as the stream lives: the queue pair's session is terminated (RFC 5043 §6;
    /// the peer's queue pair goes to Error, as iWARP's `ibv_destroy_qp` of a connected queue
    /// pair ends its connection), which flushes the receives on the core, or the association
    /// ends; either way each one is reported before this returns (filled or flushed, reported
    /// to no CQ). Refused with [`RuntimeError::Busy`] (nothing changed) while the core's
    /// command ring is full.
    pub fn destroy_qp_polling(
        &mut self,
        qp: Qp,
        now: Instant,
        poll: &mut dyn FnMut(),
    ) -> Result<(), VerbsError> {
        let e = self.entry(qp)?;
        let QpInit { conn, stream, .. } = e.init;
        // Our Terminate while the session may be open, a queue pair in Error included (the
        // peer's RDMAP Terminate moved it there). Again on a call after a Timeout: the core
        // may have refused the first (a session away at the control thread with its queue
        // full); one it took ends the session, which `session_over` then says.
        if e.opened && !e.session_over && e.refused.is_none() {
            match self.control.submit(conn, Op::Terminate { stream }) {
                // Forgotten: no Terminate to send. Its core aborts the association as it
                // drops it (`Control::forget`), and the Closed that brings flushes the
                // receives awaited below, so this returns Ok, not Timeout.
                Ok(()) | Err(RuntimeError::NoSuchConnection) => {}
                Err(e) => return Err(VerbsError::Runtime(e)),
            }
        }
        let e = self.entry_mut(qp)?;
        e.destroyed = true;
        // Until it is forgotten (a Timeout leaves it), it takes no more work.
        e.state = QpState::Error;
        // Its send work completes nothing any more: later reports find no slot.
        while e.sq.pop_front().is_some() {}
        // Receives posted in Init never reached a core: dropped. The rest are awaited.
        for op in std::mem::take(&mut e.held_recvs) {
            if let Some(r) = op.wr_id().and_then(|seq| e.rq.get_mut(seq)) {
                r.done
                    .get_or_insert(Wc::new(r.wr_id, WcStatus::Flushed, WcOpcode::Recv, qp));
            }
        }
        // Bounded: a core that stopped turning (its thread gone) would never report them. The
        // control side's clock runs on meanwhile, so its own timers (the gap wait before a
        // peer's Terminate, RFC 5043 §6) can end what the core waits for.
        let start = std::time::Instant::now();
        while self
            .entry(qp)
            .is_ok_and(|e| e.rq.q.iter().any(|r| r.done.is_none()))
        {
            if start.elapsed() >= DESTROY_WAIT {
                return Err(VerbsError::Timeout);
            }
            poll();
            self.poll(now + start.elapsed());
        }
        if let Some(e) = self.qps.get_mut(qp.0 as usize).and_then(Option::take) {
            self.by_stream.remove(&(e.init.conn, e.init.stream));
        }
        Ok(())
    }

    /// The active side's connect (`rdma_connect` of librdmacm): the RDMAP session's Initiate
    /// goes out with the Read limits; the queue pair is [`QpState::Rts`] once the Accept comes,
    /// [`QpState::Error`] if the data core refuses the Initiate ([`Verbs::qp_refused`]).
    pub fn connect_qp(&mut self, qp: Qp, private_data: &[u8]) -> Result<(), VerbsError> {
        self.open_session(qp, private_data, false)
    }

    /// The passive side's accept (`rdma_accept`), after the peer's Initiate arrived (an
    /// [`Event`] from [`Verbs::poll_event`]): the queue pair is ready to send at once, as
    /// operations reach the core in order behind the Accept. If the core refuses the Accept
    /// (the peer's Initiate carried no RDMAP parameters, say) it moves to [`QpState::Error`]
    /// ([`Verbs::qp_refused`]). Refused outright with [`VerbsError::NoPendingInitiate`] while
    /// no Initiate is pending on the stream ([`Control::initiate_pending`]: none came yet,
    /// or it was answered already, through `control_mut()` too), or while the application
    /// has not polled the pending one's event from [`Verbs::poll_event`]: nothing is sent
    /// and the queue pair stays in [`QpState::Init`], to accept the Initiate once it comes.
    pub fn accept_qp(&mut self, qp: Qp, private_data: &[u8]) -> Result<(), VerbsError> {
        self.open_session(qp, private_data, true)
    }

    fn open_session(
        &mut self,
        qp: Qp,
        private_data: &[u8],
        accept: bool,
    ) -> Result<(), VerbsError> {
        let e = self.entry(qp)?;
        if e.state != QpState::Init {
            return Err(VerbsError::QpState(e.state));
        }
        let QpInit {
            conn,
            stream,
            pd,
            limits,
            ..
        } = e.init;
        // RFC 5043 §6.3: an Accept answers a pending Initiate. Without one the core would
        // refuse it only after this returned, with the queue pair already in Rts and its
        // receives released to a stream that has no session; the passive side that accepts
        // before the Initiate arrived (a race it can lose) is told so now, and can retry.
        // The control side knows, whoever answered the Initiate: an application that accepts
        // or rejects one itself through `control_mut()` has answered it, and an Accept from
        // here would only be refused later (`Session(NotPending)`), the queue pair in Error.
        //
        // Pending, and seen: the application polled its event ([`Verbs::poll_event`]). An
        // Initiate the control side has, whose event still waits in a queue, is one the
        // application cannot have looked at (its Private Data, the peer's ORD and IRD):
        // accepting it would be a guess that it is the one expected (`rdma_accept` needs
        // the connect request's event), and a later one, after the first was withdrawn,
        // would be accepted for the first. So it is refused as not pending until then.
        if accept
            && !(self.control.initiate_pending(conn, stream) && self.initiate_seen(conn, stream))
        {
            return Err(VerbsError::NoPendingInitiate);
        }
        let (pd, private_data) = (pd.0, private_data.to_vec());
        let (op, next) = if accept {
            let op = Op::AcceptRdmap {
                stream,
                pd,
                limits,
                private_data,
            };
            (op, QpState::Rts)
        } else {
            let op = Op::InitiateRdmap {
                stream,
                pd,
                limits,
                private_data,
            };
            (op, QpState::Connecting)
        };
        // Answered (or, if the core refuses the Accept, rejected by `session_refused`): the
        // control side marks it so.
        self.control.submit(conn, op).map_err(VerbsError::Runtime)?;
        let e = self.entry_mut(qp)?;
        e.state = next;
        e.opened = true;
        self.release_recvs(qp, conn)
    }

    pub fn qp_state(&self, qp: Qp) -> Option<QpState> {
        self.entry(qp).ok().map(|e| e.state)
    }

    /// Why the queue pair's stream ended: the RDMAP error of either side's Terminate, or, with
    /// none, why its DDP Stream Session ended (RFC 5043 §6: the peer's Reject or Terminate,
    /// crossing Initiates, the association gone).
    pub fn qp_error(&self, qp: Qp) -> Option<QpError> {
        self.entry(qp).ok().and_then(|e| e.error)
    }

    /// Why the data core refused the queue pair's `connect_qp` or `accept_qp`, which moved
    /// it to [`QpState::Error`] (also reported as an [`Event::Refused`] from
    /// [`Verbs::poll_event`]): [`PostError::PeerNotRdmap`] for an Initiate without RDMAP's
    /// parameters, say.
    pub fn qp_refused(&self, qp: Qp) -> Option<PostError> {
        self.entry(qp).ok().and_then(|e| e.refused)
    }

    /// `ibv_post_send` (RFC 4296 `rdma_send`, `rdma_write`, `rdma_read`). Refused outright
    /// (nothing posted) only for a queue pair that is not ready yet (`Init`, `Connecting`),
    /// one destroyed, or a core that cannot take more ([`RuntimeError::Busy`]); a work request
    /// whose memory does not pass its checks completes with an error, in its turn behind the
    /// work posted before it. Posted to a queue pair in [`QpState::Error`] it is taken and
    /// completes [`WcStatus::Flushed`] in its turn, as with libibverbs (the InfiniBand rule
    /// `ib_drain_qp` relies on, which siw follows): nothing reaches the core.
    pub fn post_send(&mut self, qp: Qp, wr: &SendWr) -> Result<(), VerbsError> {
        let e = self.entry(qp)?;
        match e.state {
            QpState::Rts => {}
            QpState::Error if !e.destroyed => {
                return self.fail_send(qp, wr, wc_opcode(wr.opcode), WcStatus::Flushed)
            }
            state => return Err(VerbsError::QpState(state)),
        }
        let QpInit {
            conn, stream, pd, ..
        } = e.init;
        let seq = e.sq.next();
        if let WrOpcode::LocalInv { lkey } = wr.opcode {
            return self.local_invalidate(qp, wr, pd, lkey);
        }
        let (opcode, op) = match self.rdma_op(pd, wr) {
            Ok(op) => op,
            Err((opcode, status)) => return self.fail_send(qp, wr, opcode, status),
        };
        let data = match opcode {
            WcOpcode::RdmaRead
            | WcOpcode::FetchAdd
            | WcOpcode::CompSwap
            | WcOpcode::ImmediateData => Payload::Bytes(Vec::new()),
            _ => match self.gather(pd, &wr.sg_list) {
                Ok(p) => p,
                Err(()) => return self.fail_send(qp, wr, opcode, WcStatus::LocalProtection),
            },
        };
        let byte_len = wr
            .sg_list
            .iter()
            .map(|s| s.length)
            .fold(0u32, u32::saturating_add);
        let req = RdmaRequest {
            wr_id: seq,
            stream,
            op,
            data,
            signaled: wr.signaled,
        };
        self.control
            .submit(conn, Op::PostRdma(req))
            .map_err(VerbsError::Runtime)?;
        self.entry_mut(qp)?.sq.push(SendSlot {
            wr_id: wr.wr_id,
            opcode,
            byte_len,
            signaled: wr.signaled,
            done: None,
        });
        Ok(())
    }

    /// The RDMAP operation of a work request other than Local Invalidate, or the opcode and
    /// status it completes with when its entries do not pass their checks.
    fn rdma_op(
        &self,
        pd: ProtectionDomain,
        wr: &SendWr,
    ) -> Result<(WcOpcode, RdmaOp), (WcOpcode, WcStatus)> {
        Ok(match wr.opcode {
            WrOpcode::Send => (
                WcOpcode::Send,
                RdmaOp::Send {
                    solicited: wr.solicited,
                    invalidate: None,
                },
            ),
            WrOpcode::SendWithInv { rkey } => (
                WcOpcode::Send,
                RdmaOp::Send {
                    solicited: wr.solicited,
                    invalidate: Some(rkey),
                },
            ),
            WrOpcode::RdmaWrite { rkey, remote_addr } => (
                WcOpcode::RdmaWrite,
                RdmaOp::Write {
                    stag: rkey,
                    to: remote_addr,
                },
            ),
            WrOpcode::RdmaRead { rkey, remote_addr } => {
                let opcode = WcOpcode::RdmaRead;
                let [sink] = wr.sg_list[..] else {
                    return Err((opcode, WcStatus::LocalQpOperation));
                };
                self.check_sink(pd, &sink)
                    .map_err(|status| (opcode, status))?;
                (
                    opcode,
                    RdmaOp::Read {
                        source: rkey,
                        source_to: remote_addr,
                        sink: sink.lkey,
                        sink_to: sink.addr,
                        len: sink.length,
                    },
                )
            }
            // `post_send` takes it before.
            WrOpcode::LocalInv { .. } => {
                return Err((WcOpcode::LocalInv, WcStatus::LocalQpOperation))
            }
            WrOpcode::AtomicFetchAdd {
                rkey,
                remote_addr,
                add,
                mask,
            } => {
                let op = AtomicOperation::FetchAdd { add, mask };
                let opcode = WcOpcode::FetchAdd;
                let op = self
                    .atomic(pd, wr, op, rkey, remote_addr)
                    .map_err(|status| (opcode, status))?;
                (opcode, op)
            }
            WrOpcode::AtomicCmpSwap {
                rkey,
                remote_addr,
                compare,
                compare_mask,
                swap,
                swap_mask,
            } => {
                let op = AtomicOperation::CmpSwap {
                    compare,
                    compare_mask,
                    swap,
                    swap_mask,
                };
                let opcode = WcOpcode::CompSwap;
                let op = self
                    .atomic(pd, wr, op, rkey, remote_addr)
                    .map_err(|status| (opcode, status))?;
                (opcode, op)
            }
            WrOpcode::ImmediateData { data } => {
                let opcode = WcOpcode::ImmediateData;
                if !wr.sg_list.is_empty() {
                    return Err((opcode, WcStatus::LocalQpOperation));
                }
                (
                    opcode,
                    RdmaOp::ImmediateData {
                        data,
                        solicited: wr.solicited,
                    },
                )
            }
        })
    }

    /// An Atomic's work request checked as `ibv_post_send` does: one entry of exactly 8 bytes
    /// with local write for the original value; the status it completes with otherwise. The
    /// remote word's alignment is the peer's to check (RFC 7306 §5.2.1: the Tagged Offset may
    /// start anywhere, the address it names must be aligned).
    fn atomic(
        &self,
        pd: ProtectionDomain,
        wr: &SendWr,
        op: AtomicOperation,
        rkey: Stag,
        remote_addr: u64,
    ) -> Result<RdmaOp, WcStatus> {
        let [sink] = wr.sg_list[..] else {
            return Err(WcStatus::LocalQpOperation);
        };
        if sink.length != 8 {
            return Err(WcStatus::LocalQpOperation);
        }
        self.check_sink(pd, &sink)?;
        Ok(RdmaOp::Atomic {
            op,
            stag: rkey,
            to: remote_addr,
            sink: sink.lkey,
            sink_to: sink.addr,
        })
    }

    /// `ibv_post_recv` (RFC 4296 `rdma_post_recv`): one entry, local write needed. One that
    /// does not pass its checks completes with an error in its turn, behind the receives
    /// posted before it. Posted to a queue pair in [`QpState::Error`] it is taken and
    /// completes [`WcStatus::Flushed`] behind the receives posted before it, as with
    /// libibverbs; only a destroyed queue pair refuses it.
    pub fn post_recv(&mut self, qp: Qp, wr: &RecvWr) -> Result<(), VerbsError> {
        let e = self.entry(qp)?;
        if e.state == QpState::Error {
            if e.destroyed {
                return Err(VerbsError::QpState(e.state));
            }
            // No stream to place into: it never reaches a core, so it is over here, and
            // completes once those before it have (the core's flush of theirs).
            let seq = self.entry_mut(qp)?.rq.push(RecvSlot {
                wr_id: wr.wr_id,
                done: None,
            });
            self.recv_over(qp, seq, WcStatus::Flushed);
            return Ok(());
        }
        let QpInit {
            conn, stream, pd, ..
        } = e.init;
        let seq = e.rq.next();
        let buffer = match wr.sg_list[..] {
            [sge] => self
                .check_sge(pd, &sge, Access::LOCAL_WRITE)
                .and_then(|reg| {
                    self.control
                        .memory()
                        .receive_buffer(pd.0, sge.lkey, sge.addr - reg.to_base, sge.length)
                        .map_err(|_| WcStatus::LocalProtection)
                }),
            _ => Err(WcStatus::LocalQpOperation),
        };
        let buffer = match buffer {
            Ok(b) => b,
            Err(status) => {
                let seq = self.entry_mut(qp)?.rq.push(RecvSlot {
                    wr_id: wr.wr_id,
                    done: None,
                });
                self.recv_over(qp, seq, status);
                return Ok(());
            }
        };
        let op = Op::PostRecv {
            stream,
            qn: 0,
            wr_id: seq,
            buffer,
        };
        let slot = RecvSlot {
            wr_id: wr.wr_id,
            done: None,
        };
        let e = self.entry_mut(qp)?;
        if e.state == QpState::Init {
            e.held_recvs.push(op);
            e.rq.push(slot);
            return Ok(());
        }
        self.control.submit(conn, op).map_err(VerbsError::Runtime)?;
        self.entry_mut(qp)?.rq.push(slot);
        Ok(())
    }

    /// `ibv_poll_cq`: up to `wc.len()` completions, oldest first; returns how many.
    pub fn poll_cq(&mut self, cq: Cq, wc: &mut [Wc]) -> Result<usize, VerbsError> {
        let q = self.cqs.get_mut(cq.0).ok_or(VerbsError::NoSuchCq)?;
        let n = wc.len().min(q.len());
        for (slot, c) in wc.iter_mut().zip(q.drain(..n)) {
            *slot = c;
        }
        Ok(n)
    }

    /// Runtime events verbs did not consume: connections, a peer's Initiate to accept, session
    /// events, a refused Initiate or Accept, reports. The `Posted` of a queue pair's receives
    /// stay inside verbs.
    pub fn poll_event(&mut self) -> Option<Event> {
        let e = self.events.pop_front()?;
        match &e {
            Event::Indication {
                conn,
                indication:
                    Indication::Session {
                        stream,
                        event: SessionEvent::InitiateReceived { .. },
                    },
            } => *self.initiates_polled.entry((*conn, *stream)).or_insert(0) += 1,
            // No Initiate comes after it (a handle is never reused).
            Event::Indication {
                conn,
                indication: Indication::Closed(_),
            } => self.initiates_polled.retain(|&(c, _), _| c != *conn),
            _ => {}
        }
        Some(e)
    }

    /// Whether the application polled the event of every Initiate of the peer's on `stream`
    /// that the control side took in, so the one pending, if any, is one it has seen.
    fn initiate_seen(&self, conn: ConnHandle, stream: u16) -> bool {
        let polled = self.initiates_polled.get(&(conn, stream)).copied();
        polled.unwrap_or(0) == self.control.initiates_received(conn, stream)
    }

    /// One turn: the control side, then its events into work completions. Returns the work
    /// done.
    pub fn poll(&mut self, now: Instant) -> usize {
        let mut work = self.control.poll(now);
        while let Some(e) = self.control.poll_event() {
            work += 1;
            self.event(e);
        }
        if !self.marks_owed.is_empty() {
            for (qp, seq) in std::mem::take(&mut self.marks_owed) {
                // Unless a later report released the work request meanwhile.
                if self.entry(qp).is_ok_and(|e| e.sq.get(seq).is_some()) {
                    work += 1;
                    self.mark(qp, seq);
                }
            }
        }
        for (conn, stream) in std::mem::take(&mut self.rejects_owed) {
            work += 1;
            self.reject(conn, stream);
        }
        work + self.local_invalidations()
    }

    /// Answers the peer's Initiate on `stream` with a Reject (RFC 5043 §6.3: at the ULP's
    /// direction, which `accept_qp` was): it no longer waits for a decision the application
    /// already made, holding one of the endpoint's pending-Initiate slots (§6.4) until the
    /// association ends.
    fn reject(&mut self, conn: ConnHandle, stream: u16) {
        let op = Op::Reject {
            stream,
            private_data: Vec::new(),
        };
        if let Err(RuntimeError::Busy) = self.control.submit(conn, op) {
            self.rejects_owed.push((conn, stream));
        }
    }

    // ---- internals ----

    /// Submits the receives posted before the session's Initiate or Accept, behind it.
    fn release_recvs(&mut self, qp: Qp, conn: ConnHandle) -> Result<(), VerbsError> {
        let held = std::mem::take(&mut self.entry_mut(qp)?.held_recvs);
        for op in held {
            // `must`-less: a full command ring refuses; the receive completes with an error
            // rather than being lost.
            let seq = op.wr_id();
            if self.control.submit(conn, op).is_err() {
                if let Some(seq) = seq {
                    self.recv_over(qp, seq, WcStatus::LocalQpOperation);
                }
            }
        }
        Ok(())
    }

    /// Moves `qp` to [`QpState::Error`]: its stream ended, or never began. The receives still
    /// held here (posted in Init, never handed to a core) complete Flushed now, in posting
    /// order: no core has them, so no `RecvFlushed` will ever come for them, and a queue pair
    /// in Error can never release them. What a core holds completes as that core reports it
    /// (flushed with its session, or refused), and only then is its buffer the application's
    /// again.
    fn fail_qp(&mut self, qp: Qp) {
        let Ok(e) = self.entry_mut(qp) else {
            return;
        };
        e.state = QpState::Error;
        // Each waits in the receive queue under its number, and completes there in posting
        // order like any receive.
        for op in std::mem::take(&mut e.held_recvs) {
            if let Some(seq) = op.wr_id() {
                self.recv_over(qp, seq, WcStatus::Flushed);
            }
        }
    }

    fn entry(&self, qp: Qp) -> Result<&QpEntry, VerbsError> {
        self.qps
            .get(qp.0 as usize)
            .and_then(Option::as_ref)
            .ok_or(VerbsError::NoSuchQp)
    }

    fn entry_mut(&mut self, qp: Qp) -> Result<&mut QpEntry, VerbsError> {
        self.qps
            .get_mut(qp.0 as usize)
            .and_then(Option::as_mut)
            .ok_or(VerbsError::NoSuchQp)
    }

    fn push_wc(&mut self, cq: Cq, wc: Wc) {
        if let Some(q) = self.cqs.get_mut(cq.0) {
            q.push_back(wc);
        }
    }

    /// A send-queue work request that failed its checks here and never reaches the core: its
    /// error completion takes its turn behind the work posted before it (RFC 5040 §5.5).
    fn fail_send(
        &mut self,
        qp: Qp,
        wr: &SendWr,
        opcode: WcOpcode,
        status: WcStatus,
    ) -> Result<(), VerbsError> {
        let seq = self.entry_mut(qp)?.sq.push(SendSlot {
            wr_id: wr.wr_id,
            opcode,
            byte_len: 0,
            signaled: wr.signaled,
            done: Some(status),
        });
        self.send_over(qp, seq);
        Ok(())
    }

    /// Checks that `sge` lies in a live registration of `pd` granting `need`; returns the
    /// registration.
    fn check_sge(
        &self,
        pd: ProtectionDomain,
        sge: &Sge,
        need: Access,
    ) -> Result<&Registration, WcStatus> {
        let reg = self
            .control
            .memory()
            .stags()
            .lookup(sge.lkey)
            .filter(|r| r.pd == pd.0 && r.access.contains(need))
            .ok_or(WcStatus::LocalProtection)?;
        let inside = sge.addr.checked_sub(reg.to_base).is_some_and(|rel| {
            rel.checked_add(u64::from(sge.length))
                .is_some_and(|end| end <= reg.len)
        });
        if inside {
            Ok(reg)
        } else {
            Err(WcStatus::LocalProtection)
        }
    }

    /// A Read's or an Atomic's Data Sink: a live registration of `pd` with local write that
    /// holds the entry ([`Verbs::check_sge`]), and bound to no DDP stream (RFC 5041 §8.2). The
    /// core takes a bound sink only on the stream it is bound to, by the session's stream
    /// identity, which never reaches the control side; nor can verbs bind a registration to a
    /// queue pair (no memory windows). So verbs cannot tell a registration bound to this queue
    /// pair's session from one bound to another's, and refuses both here, before anything is
    /// submitted: the core would refuse the second ([`PostError::BadSink`]).
    fn check_sink(&self, pd: ProtectionDomain, sink: &Sge) -> Result<(), WcStatus> {
        match self.check_sge(pd, sink, Access::LOCAL_WRITE)?.stream {
            Some(_) => Err(WcStatus::LocalProtection),
            None => Ok(()),
        }
    }

    /// The bytes of a Send or a Write: one entry by reference, several gathered (a copy).
    fn gather(&self, pd: ProtectionDomain, sg_list: &[Sge]) -> Result<Payload, ()> {
        for sge in sg_list {
            self.check_sge(pd, sge, Access::default()).map_err(|_| ())?;
        }
        match sg_list {
            [] => Ok(Payload::Bytes(Vec::new())),
            [sge] => Ok(Payload::Local {
                stag: sge.lkey,
                to: sge.addr,
                len: sge.length,
            }),
            many => {
                let memory = self.control.memory();
                let mut bytes = Vec::new();
                for sge in many {
                    let reg = memory.stags().lookup(sge.lkey).ok_or(())?;
                    let region = memory.region(RegionId(reg.memory.region)).ok_or(())?;
                    let at = bytes.len();
                    bytes.resize(at + sge.length as usize, 0);
                    let offset = reg.memory.offset + (sge.addr - reg.to_base);
                    region.read(offset, &mut bytes[at..]).map_err(|_| ())?;
                }
                Ok(Payload::Bytes(bytes))
            }
        }
    }

    fn local_invalidate(
        &mut self,
        qp: Qp,
        wr: &SendWr,
        pd: ProtectionDomain,
        lkey: Stag,
    ) -> Result<(), VerbsError> {
        let ours = self
            .control
            .memory()
            .stags()
            .lookup(lkey)
            .is_some_and(|r| r.pd == pd.0);
        let started = if ours {
            self.control.memory_mut().start_revoke(lkey).ok()
        } else {
            None
        };
        match started {
            Some(revocation) => self.local_invs.push(LocalInv {
                qp,
                wr_id: wr.wr_id,
                signaled: wr.signaled,
                revocation,
            }),
            // One that cannot start waits for no core: it completes in its turn, as any
            // work request that fails its checks.
            None => return self.fail_send(qp, wr, WcOpcode::LocalInv, WcStatus::LocalProtection),
        }
        Ok(())
    }

    /// Completes the Local Invalidates every core has acknowledged.
    fn local_invalidations(&mut self) -> usize {
        let mut done = Vec::new();
        let memory = self.control.memory_mut();
        self.local_invs
            .retain(|l| match memory.revocation(l.revocation) {
                None => true,
                Some(r) => {
                    done.push((l.qp, l.wr_id, l.signaled, r.is_ok()));
                    false
                }
            });
        let n = done.len();
        for (qp, wr_id, signaled, ok) in done {
            if ok && !signaled {
                continue;
            }
            // A queue pair destroyed meanwhile completes nothing (ibv_destroy_qp).
            let Some(cq) = (self.entry(qp).ok())
                .filter(|e| !e.destroyed)
                .map(|e| e.init.send_cq)
            else {
                continue;
            };
            let status = if ok {
                WcStatus::Success
            } else {
                WcStatus::LocalQpOperation
            };
            self.push_wc(cq, Wc::new(wr_id, status, WcOpcode::LocalInv, qp));
        }
        n
    }

    fn qp_of(&self, conn: ConnHandle, stream: u16) -> Option<Qp> {
        self.by_stream.get(&(conn, stream)).copied()
    }

    fn event(&mut self, e: Event) {
        match e {
            Event::Completion { conn, completion } => {
                let Some(qp) = self.qp_of(conn, completion.stream) else {
                    return self
                        .events
                        .push_back(Event::Completion { conn, completion });
                };
                let status = match completion.status {
                    Status::Success => WcStatus::Success,
                    Status::Flushed => WcStatus::Flushed,
                    Status::LocalProtection => WcStatus::LocalProtection,
                };
                self.sq_report(qp, completion.wr_id, Some(status));
            }
            // A refused post of a queue pair's: its number there, on its stream.
            Event::Refused {
                conn,
                op,
                stream: Some(stream),
                wr_id: Some(seq),
                error,
            } => {
                let Some(qp) = self.qp_of(conn, stream) else {
                    return self.events.push_back(Event::Refused {
                        conn,
                        op,
                        stream: Some(stream),
                        wr_id: Some(seq),
                        error,
                    });
                };
                let status = match error {
                    // Work of a queue pair in Error completes Flushed (RDMAC verbs), whatever
                    // the core's reason: its stream ended, or never began, before the core had
                    // it (the receives released behind a refused Initiate or Accept, say).
                    _ if self.qp_state(qp) == Some(QpState::Error) => WcStatus::Flushed,
                    // The stream or the association ended before the core had it, though
                    // verbs has not heard yet (the session's end waits behind the refusal of
                    // an op queued after the session's return): flushed all the same, not
                    // "the queue pair could not take it".
                    PostError::Session(LocalError::Terminated) | PostError::NotConnected => {
                        WcStatus::Flushed
                    }
                    PostError::BadLocalStag | PostError::BadRegion | PostError::BadSink => {
                        WcStatus::LocalProtection
                    }
                    _ => WcStatus::LocalQpOperation,
                };
                if op == "post_recv" {
                    self.recv_over(qp, seq, status);
                } else {
                    self.send_refused(qp, seq, status, error);
                }
            }
            // An operation of a queue pair's that met no connection on its core: the
            // connection closed and its slot went to another association before the
            // operation came (a queue pair made after the Closed, before the `forget`). It
            // is taken as a closed connection's refusal, so that the work request completes
            // with its wr_id (Flushed, the queue pair in Error) and an Initiate or Accept
            // moves the queue pair to Error, instead of waiting for ever.
            Event::Unknown {
                conn,
                op,
                stream: Some(stream),
                wr_id,
            } if self.qp_of(conn, stream).is_some() => {
                let error = PostError::NotConnected;
                match wr_id {
                    Some(_) => self.event(Event::Refused {
                        conn,
                        op,
                        stream: Some(stream),
                        wr_id,
                        error,
                    }),
                    None if matches!(op, "initiate_rdmap" | "accept_rdmap") => {
                        self.session_refused(conn, op, stream, error)
                    }
                    None => {}
                }
                // The application hears of it still, as before: its connection is gone from
                // its core, and it may `forget` it.
                self.events.push_back(Event::Unknown {
                    conn,
                    op,
                    stream: Some(stream),
                    wr_id,
                });
            }
            // A receive of a queue pair's reached its core. Verbs itself caused it, and no
            // verbs application needs it: what it posts after the receive reaches the core
            // behind it, so a peer it answers finds the buffer there. Kept, one would pile
            // up per receive in front of the connection events the application does poll.
            // Posted for a stream without a queue pair (plain DDP through `control_mut`) is
            // the application's own, and goes on to it.
            Event::Posted { conn, stream, .. } if self.qp_of(conn, stream).is_some() => {}
            Event::Indication { conn, indication } => self.indication(conn, indication),
            Event::Refused {
                conn,
                op: op @ ("initiate_rdmap" | "accept_rdmap"),
                stream: Some(stream),
                wr_id: None,
                error,
            } => {
                self.session_refused(conn, op, stream, error);
                // The application's connection management hears why, as from rdma_cm.
                self.events.push_back(Event::Refused {
                    conn,
                    op,
                    stream: Some(stream),
                    wr_id: None,
                    error,
                });
            }
            other => self.events.push_back(other),
        }
    }

    /// The core refused the session's Initiate or Accept of the queue pair on `stream`
    /// (`connect_qp` and `accept_qp` return before the core has it): the stream will never
    /// carry its work, so the queue pair goes to Error at once rather than waiting in
    /// Connecting or Rts for an answer that cannot come. A peer that is no RDMAP peer, an
    /// Initiate withdrawn before the Accept reached the core, a stream whose previous session
    /// may still have chunks out (RFC 5043 §6.6), Private Data too long: each ends it here.
    /// The receives released behind the Initiate or Accept, and any work posted behind the
    /// Accept, are refused by the core in turn and complete Flushed, as the work of a queue
    /// pair in Error does.
    fn session_refused(&mut self, conn: ConnHandle, op: &str, stream: u16, error: PostError) {
        let Some(qp) = self.qp_of(conn, stream) else {
            return;
        };
        let Ok(e) = self.entry_mut(qp) else {
            return;
        };
        // Only the queue pair that sent it: one still in Init has sent nothing (an Op the
        // application submitted through the control side is its own business).
        let ours = matches!(
            (op, e.state),
            ("initiate_rdmap", QpState::Connecting | QpState::Error)
                | ("accept_rdmap", QpState::Rts | QpState::Error)
        );
        if ours {
            e.refused.get_or_insert(error);
            self.fail_qp(qp);
            // The peer's Initiate is still pending: its answer is ours to send.
            if op == "accept_rdmap" && error == PostError::PeerNotRdmap {
                self.reject(conn, stream);
            }
        }
    }

    fn indication(&mut self, conn: ConnHandle, indication: Indication) {
        match indication {
            Indication::Received {
                stream,
                wr_id: seq,
                len,
                rsvd_ulp,
                invalidated,
                imm_data,
                ..
            } if self.qp_of(conn, stream).is_some() => {
                let opcode = RdmapControl::from_byte(rsvd_ulp[0]).opcode;
                let immediate = matches!(opcode, Opcode::ImmediateData | Opcode::ImmediateDataSe);
                let Some(qp) = self.qp_of(conn, stream) else {
                    return;
                };
                // A receive this queue pair does not hold (reported already) completes nothing.
                let Some(slot) = self.entry(qp).ok().and_then(|e| e.rq.get(seq)).copied() else {
                    return;
                };
                let wc = Wc {
                    byte_len: len,
                    invalidated,
                    solicited: opcode.solicited_event(),
                    imm_data: immediate.then_some(imm_data).flatten(),
                    ..Wc::new(slot.wr_id, WcStatus::Success, WcOpcode::Recv, qp)
                };
                self.recv_done(qp, seq, wc);
            }
            // Unsignaled work the core finished silently: over now, not flushed with what
            // the stream never took (docs/verbs.md, Order).
            // Verbs' own numbers: of no use to the application, whose queue pair is gone.
            Indication::SilentSuccesses { stream, through } => {
                if let Some(qp) = self.qp_of(conn, stream) {
                    self.sq_report(qp, through, Some(WcStatus::Success));
                }
            }
            Indication::RecvFlushed { stream, wr_id, qn } => match self.qp_of(conn, stream) {
                Some(qp) => self.recv_over(qp, wr_id, WcStatus::Flushed),
                None => self.events.push_back(Event::Indication {
                    conn,
                    indication: Indication::RecvFlushed { stream, wr_id, qn },
                }),
            },
            Indication::Session { stream, event } => {
                if let Some(qp) = self.qp_of(conn, stream) {
                    match &event {
                        SessionEvent::Accepted { .. } => {
                            if let Ok(e) = self.entry_mut(qp) {
                                if e.state == QpState::Connecting {
                                    e.state = QpState::Rts;
                                }
                            }
                        }
                        SessionEvent::Rejected { .. } | SessionEvent::SessionTerminated { .. } => {
                            if let Ok(e) = self.entry_mut(qp) {
                                e.session_over = true;
                                // Why, unless a Terminate said it (RFC 5043 §6.2: crossing
                                // `connect_qp`s end both sessions with no RDMAP error, and
                                // only this reason tells the application so).
                                if let SessionEvent::SessionTerminated { reason } = &event {
                                    e.error.get_or_insert(QpError::Session(*reason));
                                }
                            }
                            self.fail_qp(qp)
                        }
                        _ => {}
                    }
                }
                self.events.push_back(Event::Indication {
                    conn,
                    indication: Indication::Session { stream, event },
                });
            }
            Indication::RdmapTerminate { stream, error } => {
                if let Some(qp) = self.qp_of(conn, stream) {
                    if let Ok(e) = self.entry_mut(qp) {
                        e.error = Some(QpError::Terminate(error));
                    }
                    self.fail_qp(qp);
                }
            }
            Indication::Error {
                stream,
                error,
                recv,
                ..
            } => {
                if let Some(qp) = self.qp_of(conn, stream) {
                    if let Ok(e) = self.entry_mut(qp) {
                        // The error our Terminate reports (the peer's, if it came first,
                        // stays); it says more than the session's end it brings.
                        if !matches!(e.error, Some(QpError::Terminate(_))) {
                            e.error = Some(QpError::Terminate(terminate_error(error)));
                        }
                    }
                    // The receive the error is local to completes with its own status in its
                    // turn, as with libibverbs, not Flushed as if the stream had ended before
                    // it was used; those behind it are flushed. The core's later RecvFlushed
                    // for it finds it over and changes nothing.
                    let status = match error {
                        // Its memory deregistered (or invalidated) since it was posted, a
                        // Send then reached it: its lkey is no longer valid.
                        RxError::BufferRevoked { .. } => Some(WcStatus::LocalProtection),
                        // A Send or Immediate Data longer than it (RFC 5041 §7.1 check 4, the
                        // Terminate says 0x2/0x05): IBV_WC_LOC_LEN_ERR, as siw completes it.
                        RxError::MessageTooLong { .. } => Some(WcStatus::LocalLength),
                        _ => None,
                    };
                    if let (Some(seq), Some(status)) = (recv, status) {
                        self.recv_over(qp, seq, status);
                    }
                    self.fail_qp(qp);
                }
            }
            Indication::Closed(reason) => {
                // In creation order (not the hash map's): queue pairs that share a CQ get
                // their completions there in a fixed order.
                let ended: Vec<Qp> = (self.qps.iter().enumerate())
                    .filter_map(|(i, e)| {
                        e.as_ref().filter(|e| e.init.conn == conn)?;
                        Some(Qp(i as u32))
                    })
                    .collect();
                for qp in ended {
                    // Unless a Terminate or its session's end said why already: a queue pair
                    // with no session (still in Init) has no other reason (RFC 5043 §11.3:
                    // the association's end ends every stream).
                    if let Ok(e) = self.entry_mut(qp) {
                        e.error
                            .get_or_insert(QpError::Session(TerminationReason::AssociationEnded));
                    }
                    self.fail_qp(qp);
                    self.sq_flush(qp);
                    self.rq_flush(qp);
                }
                self.events.push_back(Event::Indication {
                    conn,
                    indication: Indication::Closed(reason),
                });
            }
            other => self.events.push_back(Event::Indication {
                conn,
                indication: other,
            }),
        }
    }

    /// The core's report of send-queue work request `seq` (`Some` status; the request's own
    /// if it was over before, for a mark posted behind it), or the end of every report
    /// (`None`: the connection or the stream is gone). Everything posted before `seq` is over
    /// too: the core reports in posting order and says nothing of a success unsignaled, and
    /// a signaled one it never reported is flushed. Then the failures queued behind `seq`.
    fn sq_report(&mut self, qp: Qp, seq: u64, status: Option<WcStatus>) {
        let Some(e) = self.qps.get_mut(qp.0 as usize).and_then(Option::as_mut) else {
            return;
        };
        // Reported already (a mark's completion after a later report released its work
        // request), or never posted here.
        if e.sq.get(seq).is_none() {
            return;
        }
        let Some(cq) = self.cqs.get_mut(e.init.send_cq.0) else {
            return;
        };
        while e.sq.head <= seq {
            let Some(s) = e.sq.pop_front() else {
                break;
            };
            let status = match (s.done, status) {
                (Some(done), _) => done,
                (None, Some(status)) if e.sq.head > seq => status,
                (None, _) if s.signaled => WcStatus::Flushed,
                (None, _) => continue,
            };
            if status != WcStatus::Success || s.signaled {
                cq.push_back(Wc {
                    byte_len: s.byte_len,
                    ..Wc::new(s.wr_id, status, s.opcode, qp)
                });
            }
        }
        drain_sq(qp, e, cq);
    }

    /// The association is gone: every work request still in the send queue completes now, in
    /// posting order, with its own status if it has one and Flushed if not, signaled or not
    /// (the stream ended with it outstanding: unsignaled work the core finished silently was
    /// released before, by its [`Indication::SilentSuccesses`]). The core's completions for the association
    /// came before its Closed, but work posted after the core ended it and before verbs
    /// heard is still to reach the core, which refuses it later: that report, and any other
    /// for a number released here, finds no slot and is ignored, so each completes once.
    fn sq_flush(&mut self, qp: Qp) {
        let Some(e) = self.qps.get_mut(qp.0 as usize).and_then(Option::as_mut) else {
            return;
        };
        let Some(cq) = self.cqs.get_mut(e.init.send_cq.0) else {
            return;
        };
        while let Some(s) = e.sq.pop_front() {
            let status = s.done.unwrap_or(WcStatus::Flushed);
            if status != WcStatus::Success || s.signaled {
                cq.push_back(Wc {
                    byte_len: s.byte_len,
                    ..Wc::new(s.wr_id, status, s.opcode, qp)
                });
            }
        }
    }

    /// The association is gone: every receive still in the receive queue completes now,
    /// Flushed (unless it is over already), in posting order. The core reports each receive
    /// it held (filled or flushed) before its Closed, so what is left never reached it in
    /// time: a receive posted after the core ended the association and before verbs heard. If
    /// the core still holds the closed connection it refuses it later, a report that finds no
    /// slot here and is ignored; if it has given the connection's slot to another association
    /// meanwhile it answers [`Event::Unknown`], which finds none either. Either way the
    /// receive completes here, once (`docs/verbs.md`: outstanding work completes Flushed when
    /// the stream ends).
    fn rq_flush(&mut self, qp: Qp) {
        let Some(e) = self.qps.get_mut(qp.0 as usize).and_then(Option::as_mut) else {
            return;
        };
        for r in e.rq.q.iter_mut() {
            r.done
                .get_or_insert(Wc::new(r.wr_id, WcStatus::Flushed, WcOpcode::Recv, qp));
        }
        // Over, for `destroy_qp`'s wait; completed nowhere (ibv_destroy_qp).
        if e.destroyed {
            return;
        }
        let Some(cq) = self.cqs.get_mut(e.init.recv_cq.0) else {
            return;
        };
        while let Some(r) = e.rq.pop_front() {
            cq.extend(r.done);
        }
    }

    /// Send-queue work request `seq` is over without the core's completion: it failed its
    /// checks here, or the core refused it. Its completion comes once those before it have;
    /// when the one right before it is with the core unsignaled, which completes silently, a
    /// mark ([`RdmaOp::Mark`]) behind it is what says so. (One signaled reports, success or
    /// not; one over already waits itself, for the same.)
    fn send_over(&mut self, qp: Qp, seq: u64) {
        let Some(e) = self.qps.get_mut(qp.0 as usize).and_then(Option::as_mut) else {
            return;
        };
        let silent = seq
            .checked_sub(1)
            .and_then(|before| e.sq.get(before))
            .is_some_and(|b| b.done.is_none() && !b.signaled);
        if let Some(cq) = self.cqs.get_mut(e.init.send_cq.0) {
            drain_sq(qp, e, cq);
        }
        if silent {
            self.mark(qp, seq);
        }
    }

    /// The core refused send-queue work request `seq` (`status` as a completion).
    fn send_refused(&mut self, qp: Qp, seq: u64, status: WcStatus, error: PostError) {
        let Some(s) = self.entry_mut(qp).ok().and_then(|e| e.sq.get_mut(seq)) else {
            return;
        };
        match s.done {
            None => {
                s.done = Some(status);
                self.send_over(qp, seq);
            }
            // The work request was over before: this is its mark. Held operations of a
            // stream whose session is away filled up: again at the next poll.
            Some(_) if error == PostError::Full => self.marks_owed.push((qp, seq)),
            // No stream or association to report on any more: what waited is over.
            Some(_) => self.sq_report(qp, seq, None),
        }
    }

    /// Posts the mark that completes once everything before send-queue work request `seq`
    /// has, numbered as it is.
    fn mark(&mut self, qp: Qp, seq: u64) {
        let Ok(e) = self.entry(qp) else {
            return;
        };
        let (conn, stream) = (e.init.conn, e.init.stream);
        let req = RdmaRequest {
            wr_id: seq,
            stream,
            op: RdmaOp::Mark,
            data: Payload::Bytes(Vec::new()),
            signaled: true,
        };
        match self.control.submit(conn, Op::PostRdma(req)) {
            Ok(()) => {}
            // The command ring is full: again at the next poll.
            Err(RuntimeError::Busy) => self.marks_owed.push((qp, seq)),
            // The association is forgotten, and every report of its work with it.
            Err(_) => self.sq_report(qp, seq, None),
        }
    }

    /// Receive `seq` is over with `status` (its length 0).
    fn recv_over(&mut self, qp: Qp, seq: u64, status: WcStatus) {
        let Some(wr_id) = self
            .entry(qp)
            .ok()
            .and_then(|e| e.rq.get(seq))
            .map(|r| r.wr_id)
        else {
            return;
        };
        self.recv_done(qp, seq, Wc::new(wr_id, status, WcOpcode::Recv, qp));
    }

    /// Receive `seq` is over with `wc`: reported once the receives posted before it are (the
    /// core fills them in posting order, RFC 5041 §5.4's MSN order; a failure of one posted
    /// after them waits for them).
    fn recv_done(&mut self, qp: Qp, seq: u64, wc: Wc) {
        let Some(e) = self.qps.get_mut(qp.0 as usize).and_then(Option::as_mut) else {
            return;
        };
        if let Some(r) = e.rq.get_mut(seq) {
            r.done.get_or_insert(wc);
        }
        // Over, for `destroy_qp`'s wait; completed nowhere (ibv_destroy_qp).
        if e.destroyed {
            return;
        }
        let Some(cq) = self.cqs.get_mut(e.init.recv_cq.0) else {
            return;
        };
        while let Some(wc) = e.rq.front().and_then(|r| r.done) {
            e.rq.pop_front();
            cq.push_back(wc);
        }
    }
}

/// What a work request completes as (`ibv_wc_opcode` of an `ibv_wr_opcode`).
fn wc_opcode(op: WrOpcode) -> WcOpcode {
    match op {
        WrOpcode::Send | WrOpcode::SendWithInv { .. } => WcOpcode::Send,
        WrOpcode::RdmaWrite { .. } => WcOpcode::RdmaWrite,
        WrOpcode::RdmaRead { .. } => WcOpcode::RdmaRead,
        WrOpcode::LocalInv { .. } => WcOpcode::LocalInv,
        WrOpcode::AtomicFetchAdd { .. } => WcOpcode::FetchAdd,
        WrOpcode::AtomicCmpSwap { .. } => WcOpcode::CompSwap,
        WrOpcode::ImmediateData { .. } => WcOpcode::ImmediateData,
    }
}

/// Reports the failures at the front of `e`'s send queue, in posting order, into `cq`.
fn drain_sq(qp: Qp, e: &mut QpEntry, cq: &mut VecDeque<Wc>) {
    while let Some(status) = e.sq.front().and_then(|s| s.done) {
        let Some(s) = e.sq.pop_front() else {
            break;
        };
        cq.push_back(Wc {
            byte_len: s.byte_len,
            ..Wc::new(s.wr_id, status, s.opcode, qp)
        });
    }
}
