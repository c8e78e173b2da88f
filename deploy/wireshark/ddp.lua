-- Wireshark / tshark dissector for DDP over SCTP (RFC 5043 on RFC 5041) and RDMAP
-- (RFC 5040, RFC 7306), registered on SCTP PPID 16 (DDP Segment) and 17 (DDP Stream Session
-- Control). Wireshark 4.0 has no dissector for either. Filter names: rddp (segments; "ddp" is
-- AppleTalk's), rddp_sc (session control), rdmap.
--
--   wireshark -X lua_script:deploy/wireshark/ddp.lua capture.pcap
--   tshark -X lua_script:deploy/wireshark/ddp.lua -r capture.pcap -Y rddp.t==1 -T fields -e rddp.stag
--
-- Or copy it into ~/.local/lib/wireshark/plugins/. The RsvdULP of a segment is read as an
-- RDMAP control field when its version bits say RDMAP version 1 (preference "rdmap": auto),
-- always (-o rddp.rdmap:always), or never (-o rddp.rdmap:never). docs/wireshark.md has the
-- fields, the expert info and what bundling and SCTP fragments do to them.

local ddp = Proto("rddp", "Direct Data Placement over SCTP (RFC 5043, RFC 5041)")
local ddpsc = Proto("rddp_sc", "DDP Stream Session Control (RFC 5043 §5.2.3)")
local rdmap = Proto("rdmap", "RDMA Protocol (RFC 5040, RFC 7306)")

local functions = { [1] = "Initiate", [2] = "Accept", [3] = "Reject", [4] = "Terminate" }
local opcodes = {
    [0] = "RDMA Write", [1] = "RDMA Read Request", [2] = "RDMA Read Response", [3] = "Send",
    [4] = "Send with Invalidate", [5] = "Send with Solicited Event",
    [6] = "Send with Solicited Event and Invalidate", [7] = "Terminate",
    [8] = "Immediate Data", [9] = "Immediate Data with Solicited Event",
    [10] = "Atomic Request", [11] = "Atomic Response",
}
local layers = { [0] = "RDMAP", [1] = "DDP", [2] = "LLP" }
local atomic_ops = { [0] = "FetchAdd", [2] = "CmpSwap" }
-- A Terminate's error by layer, type and code: RDMAP's (RFC 5040 §4.8), DDP's (RFC 5041 §7.2).
local term_errors = {
    [0x0] = {
        [0x0] = { [0x00] = "Local Catastrophic Error" },
        [0x1] = { [0x00] = "Remote Protection Error: Invalid STag",
            [0x01] = "Remote Protection Error: Base or bounds violation",
            [0x02] = "Remote Protection Error: Access rights violation",
            [0x03] = "Remote Protection Error: STag not associated with RDMAP Stream",
            [0x04] = "Remote Protection Error: TO wrap",
            [0x09] = "Remote Protection Error: STag cannot be Invalidated",
            [0xff] = "Remote Protection Error: Unspecified Error" },
        [0x2] = { [0x05] = "Remote Operation Error: Invalid RDMAP version",
            [0x06] = "Remote Operation Error: Unexpected OpCode",
            [0x07] = "Remote Operation Error: Catastrophic error, localized to RDMAP Stream",
            [0x08] = "Remote Operation Error: Catastrophic error, global",
            [0x09] = "Remote Operation Error: STag cannot be Invalidated",
            [0xff] = "Remote Operation Error: Unspecified Error" },
    },
    [0x1] = {
        [0x0] = { [0x00] = "Local Catastrophic" },
        [0x1] = { [0x00] = "Tagged Buffer Error: Invalid STag",
            [0x01] = "Tagged Buffer Error: Base or bounds violation",
            [0x02] = "Tagged Buffer Error: STag not associated with DDP Stream",
            [0x03] = "Tagged Buffer Error: TO wrap",
            [0x04] = "Tagged Buffer Error: Invalid DDP version" },
        [0x2] = { [0x01] = "Untagged Buffer Error: Invalid QN",
            [0x02] = "Untagged Buffer Error: Invalid MSN - no buffer available",
            [0x03] = "Untagged Buffer Error: Invalid MSN - MSN range is not valid",
            [0x04] = "Untagged Buffer Error: Invalid MO",
            [0x05] = "Untagged Buffer Error: DDP Message too long for available buffer",
            [0x06] = "Untagged Buffer Error: Invalid DDP version" },
    },
}

local f = {
    sc_ssn = ProtoField.uint16("rddp_sc.ssn", "DDP-SSN"),
    sc_function = ProtoField.uint16("rddp_sc.function", "Function Code", base.DEC, functions),
    sc_private = ProtoField.bytes("rddp_sc.private_data", "Private Data"),
    sc_private_len = ProtoField.uint16("rddp_sc.private_data_len", "Private Data length"),

    ssn = ProtoField.uint16("rddp.ssn", "DDP-SSN"),
    control = ProtoField.uint8("rddp.control", "Control", base.HEX),
    t = ProtoField.bool("rddp.t", "Tagged (T)", 8, nil, 0x80),
    l = ProtoField.bool("rddp.l", "Last (L)", 8, nil, 0x40),
    dv = ProtoField.uint8("rddp.dv", "DDP version (DV)", base.DEC, nil, 0x03),
    rsvdulp = ProtoField.bytes("rddp.rsvdulp", "RsvdULP"),
    stag = ProtoField.uint32("rddp.stag", "STag", base.HEX),
    to = ProtoField.uint64("rddp.to", "Tagged Offset (TO)", base.HEX),
    qn = ProtoField.uint32("rddp.qn", "Queue Number (QN)"),
    msn = ProtoField.uint32("rddp.msn", "Message Sequence Number (MSN)"),
    mo = ProtoField.uint32("rddp.mo", "Message Offset (MO)"),
    payload_len = ProtoField.uint32("rddp.payload_len", "Payload length"),
    payload = ProtoField.bytes("rddp.payload", "Payload"),

    rv = ProtoField.uint8("rdmap.version", "RDMAP version", base.DEC, nil, 0xc0),
    opcode = ProtoField.uint8("rdmap.opcode", "Opcode", base.DEC, opcodes, 0x0f),
    inval = ProtoField.uint32("rdmap.invalidate_stag", "Invalidate STag", base.HEX),
    sink_stag = ProtoField.uint32("rdmap.read.sink_stag", "Data Sink STag", base.HEX),
    sink_to = ProtoField.uint64("rdmap.read.sink_to", "Data Sink Tagged Offset", base.HEX),
    read_size = ProtoField.uint32("rdmap.read.size", "RDMA Read Message Size"),
    src_stag = ProtoField.uint32("rdmap.read.source_stag", "Data Source STag", base.HEX),
    src_to = ProtoField.uint64("rdmap.read.source_to", "Data Source Tagged Offset", base.HEX),
    imm = ProtoField.uint64("rdmap.immediate_data", "Immediate Data", base.HEX),
    term_layer = ProtoField.uint8("rdmap.term.layer", "Layer", base.DEC, layers, 0xf0),
    term_etype = ProtoField.uint8("rdmap.term.etype", "Error type", base.HEX, nil, 0x0f),
    term_code = ProtoField.uint8("rdmap.term.code", "Error code", base.HEX),
    term_hdrct = ProtoField.uint8("rdmap.term.hdrct", "Header control (M D R)", base.HEX, nil, 0xe0),
    term_m = ProtoField.bool("rdmap.term.m", "M: DDP Segment Length valid", 8, nil, 0x80),
    term_d = ProtoField.bool("rdmap.term.d", "D: DDP Segment Length and DDP header present", 8,
        nil, 0x40),
    term_r = ProtoField.bool("rdmap.term.r", "R: RDMA Read Request header present", 8, nil, 0x20),
    term_error = ProtoField.string("rdmap.term.error", "Error"),
    term_seg_len = ProtoField.uint16("rdmap.term.ddp_segment_length", "DDP Segment Length"),
    term_ddp_hdr = ProtoField.bytes("rdmap.term.ddp_header", "Terminated DDP Header"),
    term_rdma_hdr = ProtoField.bytes("rdmap.term.rdma_header",
        "Terminated RDMA Read Request Header"),
    -- RFC 7306 §5.2.1 (Atomic Request) and §5.2.2 (Atomic Response): the Request Identifier
    -- is one field in both, so that rdmap.atomic.request_id == n shows a request and its
    -- response.
    at_op = ProtoField.uint32("rdmap.atomic.op", "Atomic Operation", base.DEC, atomic_ops, 0x0f),
    at_id = ProtoField.uint32("rdmap.atomic.request_id", "Request Identifier"),
    at_stag = ProtoField.uint32("rdmap.atomic.stag", "Remote STag", base.HEX),
    at_to = ProtoField.uint64("rdmap.atomic.to", "Remote Tagged Offset", base.HEX),
    at_data = ProtoField.uint64("rdmap.atomic.add_swap", "Add or Swap Data", base.HEX),
    at_mask = ProtoField.uint64("rdmap.atomic.add_swap_mask", "Add or Swap Mask", base.HEX),
    at_cmp = ProtoField.uint64("rdmap.atomic.compare", "Compare Data", base.HEX),
    at_cmp_mask = ProtoField.uint64("rdmap.atomic.compare_mask", "Compare Mask", base.HEX),
    at_orig = ProtoField.uint64("rdmap.atomic.original", "Original Remote Data Value", base.HEX),
}
ddpsc.fields = { f.sc_ssn, f.sc_function, f.sc_private, f.sc_private_len }
ddp.fields = { f.ssn, f.control, f.t, f.l, f.dv, f.rsvdulp, f.stag, f.to, f.qn, f.msn, f.mo,
    f.payload_len, f.payload }
rdmap.fields = { f.rv, f.opcode, f.inval, f.sink_stag, f.sink_to, f.read_size, f.src_stag,
    f.src_to, f.imm, f.term_layer, f.term_etype, f.term_code, f.term_hdrct, f.term_m, f.term_d,
    f.term_r, f.term_error, f.term_seg_len, f.term_ddp_hdr, f.term_rdma_hdr, f.at_op, f.at_id,
    f.at_stag, f.at_to, f.at_data, f.at_mask, f.at_cmp, f.at_cmp_mask, f.at_orig }

local e_short = ProtoExpert.new("rddp.malformed", "Segment shorter than its DDP header",
    expert.group.MALFORMED, expert.severity.ERROR)
local e_sc_short = ProtoExpert.new("rddp_sc.malformed",
    "Stream Session Control shorter than 4 bytes", expert.group.MALFORMED, expert.severity.ERROR)
local e_private = ProtoExpert.new("rddp_sc.private_too_long",
    "Private Data over 512 bytes (RFC 5043 §6)", expert.group.PROTOCOL, expert.severity.WARN)
local e_terminate_data = ProtoExpert.new("rddp_sc.terminate_data",
    "Terminate carries Private Data (RFC 5043 §5.2.3)", expert.group.PROTOCOL, expert.severity.WARN)
local e_rdmap_short = ProtoExpert.new("rdmap.malformed", "RDMAP header truncated",
    expert.group.MALFORMED, expert.severity.ERROR)
local e_dv = ProtoExpert.new("rddp.dv", "DDP version (DV) is not 1 (RFC 5041 §4.1)",
    expert.group.PROTOCOL, expert.severity.WARN)
local e_function = ProtoExpert.new("rddp_sc.function_unknown",
    "Function Code not defined by RFC 5043 §5.2.3 (1 to 4)", expert.group.PROTOCOL,
    expert.severity.WARN)
-- DDP-SSN analysis (RFC 5043 §5.2.1, §6: a session's DDP-SSNs, over its segments and its
-- session control messages, go up by one on each stream in each direction, with no gaps).
local e_ssn_gap = ProtoExpert.new("rddp.ssn_gap",
    "DDP-SSN gap: DDP-SSNs before this one not seen: lost / late / not captured "
        .. "(RFC 5043 §6.1)", expert.group.SEQUENCE, expert.severity.WARN)
local e_ssn_repeat = ProtoExpert.new("rddp.ssn_repeat",
    "DDP-SSN seen before on this stream: an SCTP retransmission or a duplicate",
    expert.group.SEQUENCE, expert.severity.NOTE)
local e_ssn_late = ProtoExpert.new("rddp.ssn_late",
    "DDP-SSN below one already seen and not seen before: out of order (unordered DATA "
        .. "chunks; RFC 5043 §5.2.1)", expert.group.SEQUENCE,
    expert.severity.NOTE)
-- Untagged MSN analysis (RFC 5041 §4.3: a queue's messages on a stream carry MSNs that go up
-- by one from 1, every segment of a message the same): an MSN past the next one says messages
-- of that queue were lost, are late or were not captured, as a DDP-SSN gap does for segments.
local e_msn_gap = ProtoExpert.new("rddp.msn_gap",
    "MSN gap: messages before this one on its queue not seen: lost / late / not captured "
        .. "(RFC 5041 §4.3)", expert.group.SEQUENCE, expert.severity.WARN)
local e_msn_late = ProtoExpert.new("rddp.msn_late",
    "MSN below one already seen on this queue and not seen before: out of order (unordered "
        .. "DATA chunks; RFC 5043 §5.2.1)", expert.group.SEQUENCE, expert.severity.NOTE)
ddp.experts = { e_short, e_dv, e_ssn_gap, e_ssn_repeat, e_ssn_late, e_msn_gap, e_msn_late }
ddpsc.experts = { e_sc_short, e_private, e_terminate_data, e_function }
local e_rdmap_split = ProtoExpert.new("rdmap.split",
    "RDMAP message that is one header spans several DDP segments (MO > 0 or L clear): "
        .. "its header is at MO 0 only (RFC 5040 §4.2, §4.4, §4.8; RFC 7306 §4.1)",
    expert.group.MALFORMED, expert.severity.WARN)
local e_rdmap_trailing = ProtoExpert.new("rdmap.trailing",
    "Bytes after the RDMAP header of a message that is the header alone "
        .. "(RFC 5040 §4.2, §4.4, §4.8; RFC 7306 §4.1)",
    expert.group.MALFORMED, expert.severity.WARN)
local e_rv = ProtoExpert.new("rdmap.version_invalid", "RDMAP version (RV) is not 1 "
    .. "(RFC 5040 §4.1; a peer answers with Terminate 'Invalid RDMAP version')",
    expert.group.PROTOCOL, expert.severity.WARN)
local e_opcode = ProtoExpert.new("rdmap.opcode_unknown",
    "Opcode defined by neither RFC 5040 §4.2 nor RFC 7306 §4.1", expert.group.PROTOCOL,
    expert.severity.WARN)
local e_placement = ProtoExpert.new("rdmap.wrong_queue",
    "Opcode on the wrong buffer model or untagged queue (RFC 5040 §4.2; RFC 7306 §4.1)",
    expert.group.PROTOCOL, expert.severity.WARN)
rdmap.experts = { e_rdmap_short, e_rdmap_split, e_rdmap_trailing, e_rv, e_opcode, e_placement }

-- Where each message goes (RFC 5040 §4.2's table, RFC 7306 §4.1's): tagged (true), or the
-- untagged queue number.
local placement = { [0] = true, [1] = 1, [2] = true, [3] = 0, [4] = 0, [5] = 0, [6] = 0,
    [7] = 2, [8] = 0, [9] = 0, [10] = 1, [11] = 3 }

ddp.prefs.rdmap = Pref.enum("Decode RsvdULP as RDMAP", 1,
    "When to read a segment's RsvdULP as an RDMAP control field",
    { { 1, "auto (RDMAP version 1)", 1 }, { 2, "always", 2 }, { 3, "never", 3 } }, false)

-- The SCTP stream of the DATA chunk being dissected: the last stream id SCTP has put in the
-- tree so far (a bundled packet lists one per chunk, in order).
local f_sid = Field.new("sctp.data_sid")
-- Per stream and direction: the highest DDP-SSN seen (`last`), how many steps it has moved
-- since the stream was first seen (`at`), and for each DDP-SSN the step it was seen at.
local streams = {}
-- Each chunk's verdict, kept from the first pass so that a later one (Wireshark dissects a
-- packet again when it is clicked) shows the same.
local verdicts = {}

-- Per stream and direction, each untagged queue's highest MSN (`last`) and the MSNs seen; and
-- whether the capture holds the session's start (then a queue's first MSN is 1).
local queues = {}
local msn_verdicts = {}

-- A chunk's verdict, an expert and, for a gap, its text with the count: shown on every pass.
local function show_verdict(t, v)
    if v and v[2] then
        t:add_proto_expert_info(v[1], v[2])
    elseif v then
        -- Its own text: add_proto_expert_info takes no nil for one.
        t:add_proto_expert_info(v[1])
    end
end

local function msn_gap(missing, qn)
    return { e_msn_gap, string.format("MSN gap: %d message(s) before this one on queue %d not "
        .. "seen: lost / late / not captured (RFC 5041 §4.3)", missing, qn) }
end

-- The stream and direction of the DATA chunk being dissected, and the chunk's own name.
local function chunk_key(pinfo)
    local sids = { f_sid() }
    local key = string.format("%s:%d>%s:%d/%s", tostring(pinfo.src), pinfo.src_port,
        tostring(pinfo.dst), pinfo.dst_port, tostring(sids[#sids]))
    return key, pinfo.number .. "/" .. #sids
end

local function msn_analysis(qn, msn, pinfo, t)
    local key, here = chunk_key(pinfo)
    if not pinfo.visited then
        local st = queues[key]
        if st == nil then
            st = { started = false, q = {} }
            queues[key] = st
        end
        local q = st.q[qn]
        local verdict
        if q == nil then
            -- A session whose start was captured numbers each queue's messages from 1.
            if st.started and msn ~= 1 then
                verdict = msn_gap((msn - 1) % 4294967296, qn)
            end
            st.q[qn] = { last = msn, seen = { [msn] = true } }
        else
            local ahead = (msn - q.last) % 4294967296
            if ahead >= 1 and ahead < 2147483648 then
                if ahead > 1 then
                    verdict = msn_gap(ahead - 1, qn)
                end
                q.last = msn
                q.seen[msn] = true
            elseif ahead ~= 0 and not q.seen[msn] then
                -- Another segment of a message seen before is no news (DDP-SSNs tell repeats).
                verdict = { e_msn_late }
                q.seen[msn] = true
            end
        end
        msn_verdicts[here] = verdict
    end
    show_verdict(t, msn_verdicts[here])
end

local function ssn_analysis(ssn, pinfo, t, starts)
    local key, here = chunk_key(pinfo)
    if not pinfo.visited then
        local s = streams[key]
        local verdict
        if starts then
            -- RFC 5041 §4.3: each queue's MSNs start at 1 on the new session.
            queues[key] = { started = true, q = {} }
        end
        if s == nil or starts then
            -- A stream first seen, or a session starting (RFC 5043 §6.1: DDP-SSNs start anew).
            streams[key] = { last = ssn, at = 0, seen = { [ssn] = 0 } }
        else
            local ahead = (ssn - s.last) % 65536
            if ahead >= 1 and ahead < 32768 then
                if ahead > 1 then
                    -- No commas: tshark's field output separates occurrences with them.
                    verdict = { e_ssn_gap, string.format("DDP-SSN gap: %d DDP-SSN(s) before "
                        .. "this one not seen: lost / late / not captured (RFC 5043 §6.1)",
                        ahead - 1) }
                end
                s.last = ssn
                s.at = s.at + ahead
                s.seen[ssn] = s.at
            else
                -- At or behind the highest: the step this DDP-SSN would have been seen at.
                local at = s.at - (s.last - ssn) % 65536
                if s.seen[ssn] == at then
                    verdict = { e_ssn_repeat }
                else
                    verdict = { e_ssn_late }
                    s.seen[ssn] = at
                end
            end
        end
        verdicts[here] = verdict
    end
    show_verdict(t, verdicts[here])
end

function ddpsc.dissector(buf, pinfo, tree)
    pinfo.cols.protocol = "DDP/SC"
    local t = tree:add(ddpsc, buf())
    if buf:len() < 4 then
        t:add_proto_expert_info(e_sc_short)
        return
    end
    t:add(f.sc_ssn, buf(0, 2))
    t:add(f.sc_function, buf(2, 2))
    local fc = buf(2, 2):uint()
    -- An Initiate or an Accept begins its side's DDP-SSNs (RFC 5043 §6.2).
    ssn_analysis(buf(0, 2):uint(), pinfo, t, fc == 1 or fc == 2)
    local n = buf:len() - 4
    t:add(f.sc_private_len, n):set_generated()
    if n > 0 then
        t:add(f.sc_private, buf(4, n))
    end
    if n > 512 then
        t:add_proto_expert_info(e_private)
    end
    if fc == 4 and n > 0 then
        t:add_proto_expert_info(e_terminate_data)
    end
    if not functions[fc] then
        t:add_proto_expert_info(e_function)
    end
    local name = functions[fc] or string.format("function %d", fc)
    -- SCTP writes "DATA (TSN=n) " per chunk, space after: ours ends with one too, so that
    -- the next bundled chunk's text does not run into it (RFC 9260 §6.10 bundling).
    pinfo.cols.info:append(string.format("DDP Session %s (DDP-SSN %d) ", name, buf(0, 2):uint()))
end

-- The messages whose ULP Payload is an RDMAP header and nothing else (RFC 5040 §4.2's and
-- RFC 7306 §4.1's message tables), and its length: Read Request (RFC 5040 §4.4), Immediate
-- Data (RFC 7306 §6.2), Atomic Request and Response (RFC 7306 §5.2.1, §5.2.2). A Terminate
-- (op 7) is a header too, of a length its flags give (RFC 5040 §4.8).
local header_only = { [1] = 28, [8] = 8, [9] = 8, [10] = 52, [11] = 12 }

-- The RDMAP header at the start of an untagged message's ULP Payload (RFC 5040 §4.4, §4.8;
-- RFC 7306). Returns the header's length, or nil if the payload is shorter.
local function rdmap_payload(op, payload, t)
    local len = payload:len()
    if header_only[op] and len < header_only[op] then
        t:add_proto_expert_info(e_rdmap_short)
        return nil
    end
    if op == 1 then
        t:add(f.sink_stag, payload(0, 4))
        t:add(f.sink_to, payload(4, 8))
        t:add(f.read_size, payload(12, 4))
        t:add(f.src_stag, payload(16, 4))
        t:add(f.src_to, payload(20, 8))
    elseif op == 7 then
        -- Terminate (RFC 5040 §4.8): Layer, EType, Error Code, HdrCt (M, D, R) and 13 reserved
        -- bits; then, if D, the DDP Segment Length and the terminated segment's DDP header
        -- (14 or 18 bytes as its T bit says; M says whether the length is valid); then, if R,
        -- the terminated RDMA Read Request header (28 bytes).
        if len < 4 then
            t:add_proto_expert_info(e_rdmap_short)
            return nil
        end
        t:add(f.term_layer, payload(0, 1))
        t:add(f.term_etype, payload(0, 1))
        t:add(f.term_code, payload(1, 1))
        local layer = bit.rshift(payload(0, 1):uint(), 4)
        local etype = bit.band(payload(0, 1):uint(), 0x0f)
        local code = payload(1, 1):uint()
        local name = term_errors[layer] and term_errors[layer][etype]
            and term_errors[layer][etype][code]
        if name then
            t:add(f.term_error, name):set_generated()
        end
        local h = t:add(f.term_hdrct, payload(2, 1))
        h:add(f.term_m, payload(2, 1))
        h:add(f.term_d, payload(2, 1))
        h:add(f.term_r, payload(2, 1))
        local hdrct = payload(2, 1):uint()
        local at = 4
        if bit.band(hdrct, 0x40) ~= 0 then
            if len < at + 3 then
                t:add_proto_expert_info(e_rdmap_short)
                return nil
            end
            t:add(f.term_seg_len, payload(at, 2))
            local n = bit.band(payload(at + 2, 1):uint(), 0x80) ~= 0 and 14 or 18
            if len < at + 2 + n then
                t:add_proto_expert_info(e_rdmap_short)
                return nil
            end
            t:add(f.term_ddp_hdr, payload(at + 2, n))
            at = at + 2 + n
        end
        if bit.band(hdrct, 0x20) ~= 0 then
            if len < at + 28 then
                t:add_proto_expert_info(e_rdmap_short)
                return nil
            end
            t:add(f.term_rdma_hdr, payload(at, 28))
            at = at + 28
        end
        return at
    elseif op == 8 or op == 9 then
        t:add(f.imm, payload(0, 8))
    elseif op == 10 then
        -- Atomic Request (RFC 7306 §5.2.1): 28 reserved bits and the AOpCode, Request
        -- Identifier, Remote STag and TO, Add/Swap Data and Mask, Compare Data and Mask.
        t:add(f.at_op, payload(0, 4))
        t:add(f.at_id, payload(4, 4))
        t:add(f.at_stag, payload(8, 4))
        t:add(f.at_to, payload(12, 8))
        t:add(f.at_data, payload(20, 8))
        t:add(f.at_mask, payload(28, 8))
        t:add(f.at_cmp, payload(36, 8))
        t:add(f.at_cmp_mask, payload(44, 8))
    elseif op == 11 then
        -- Atomic Response (RFC 7306 §5.2.2, Figure 6): Original Request Identifier and
        -- Original Remote Data Value, 12 bytes (§4's "32 bytes" disagrees with its own figure).
        t:add(f.at_id, payload(0, 4))
        t:add(f.at_orig, payload(4, 8))
    end
    return header_only[op]
end

function ddp.dissector(buf, pinfo, tree)
    pinfo.cols.protocol = "DDP"
    local t = tree:add(ddp, buf())
    if buf:len() < 3 then
        t:add_proto_expert_info(e_short)
        return
    end
    t:add(f.ssn, buf(0, 2))
    ssn_analysis(buf(0, 2):uint(), pinfo, t, false)
    local ctl = buf(2, 1):uint()
    local tagged = bit.band(ctl, 0x80) ~= 0
    local hdr = tagged and 14 or 18
    if buf:len() < 2 + hdr then
        t:add(f.control, buf(2, 1))
        t:add_proto_expert_info(e_short)
        return
    end
    local c = t:add(f.control, buf(2, 1))
    c:add(f.t, buf(2, 1))
    c:add(f.l, buf(2, 1))
    c:add(f.dv, buf(2, 1))
    if bit.band(ctl, 0x03) ~= 1 then
        c:add_proto_expert_info(e_dv)
    end
    local rsvd = tagged and buf(3, 1) or buf(3, 5)
    t:add(f.rsvdulp, rsvd)
    local info
    if tagged then
        t:add(f.stag, buf(4, 4))
        t:add(f.to, buf(8, 8))
        -- The TO is 64 bits (RFC 5041 §4.2): formatted from the UInt64 itself, as a Lua number
        -- loses the low bits above 2^53 and string.format raises an error near 2^64.
        local to = buf(8, 8):uint64():tohex():gsub("^0+(.)", "%1")
        info = string.format(" Tagged STag 0x%08x TO 0x%s", buf(4, 4):uint(), to)
    else
        t:add(f.qn, buf(8, 4))
        t:add(f.msn, buf(12, 4))
        t:add(f.mo, buf(16, 4))
        info = string.format(" Untagged QN %d MSN %d MO %d", buf(8, 4):uint(), buf(12, 4):uint(),
            buf(16, 4):uint())
        msn_analysis(buf(8, 4):uint(), buf(12, 4):uint(), pinfo, t)
    end
    local plen = buf:len() - 2 - hdr
    t:add(f.payload_len, plen):set_generated()
    if plen > 0 then
        t:add(f.payload, buf(2 + hdr, plen))
    end
    if bit.band(ctl, 0x40) ~= 0 then
        info = info .. " L"
    end
    -- RDMAP: version 1 in the top two bits of the first RsvdULP octet (RFC 5040 §4.1).
    local first = rsvd(0, 1):uint()
    local mode = ddp.prefs.rdmap
    if mode == 2 or (mode == 1 and bit.rshift(first, 6) == 1) then
        pinfo.cols.protocol = "RDMAP"
        local r = tree:add(rdmap, rsvd)
        r:add(f.rv, rsvd(0, 1))
        r:add(f.opcode, rsvd(0, 1))
        local op = bit.band(first, 0x0f)
        -- Only the "always" preference gets here with another version.
        if bit.rshift(first, 6) ~= 1 then
            r:add_proto_expert_info(e_rv)
        end
        local where = placement[op]
        if where == nil then
            r:add_proto_expert_info(e_opcode)
        elseif (where == true) ~= tagged or (not tagged and where ~= buf(8, 4):uint()) then
            r:add_proto_expert_info(e_placement)
        end
        if not tagged then
            -- RsvdULP[8:39] is the Invalidate STag of a Send with Invalidate or a Send with SE
            -- and Invalidate only; reserved on every other message (RFC 5040 §4.1), so not
            -- shown there, lest rdmap.invalidate_stag match Read Requests and Sends.
            if op == 4 or op == 6 then
                r:add(f.inval, rsvd(1, 4))
            end
            -- The header begins the message's ULP Payload, which a segment holds from its MO
            -- (RFC 5041 §4.3): only the segment at MO 0 has it, the rest would be read as
            -- garbage. The header alone fits one segment (MULPDU at least 516, RFC 5043 §9):
            -- such a message in several segments is flagged.
            local mo = buf(16, 4):uint()
            local last = bit.band(ctl, 0x40) ~= 0
            if header_only[op] or op == 7 then
                if mo ~= 0 or not last then
                    r:add_proto_expert_info(e_rdmap_split)
                end
                if mo == 0 and plen == 0 then
                    r:add_proto_expert_info(e_rdmap_short)
                elseif mo == 0 then
                    local n = rdmap_payload(op, buf(2 + hdr, plen):tvb(), r)
                    if n and plen > n then
                        r:add_proto_expert_info(e_rdmap_trailing)
                    end
                end
            end
        end
        info = " " .. (opcodes[op] or string.format("opcode %d", op)) .. info
    end
    -- As for session control: no leading space (SCTP's text ends with one), a trailing one.
    pinfo.cols.info:append((info:gsub("^ ", "")) .. " ")
end

local ppi = DissectorTable.get("sctp.ppi")
ppi:add(16, ddp)
ppi:add(17, ddpsc)
