#!/usr/bin/env python3
"""Writes seed inputs for each fuzz target from the golden captures in shared/vectors, into
seeds/TARGET (not kept: remade from the captures each run; the corpus the fuzzers grow and the
repository keeps is corpus/TARGET, see run.sh).

link_frame and ipsec_flow get whole frames; sctp_packet and init_params get the SCTP packets, sctp_assoc each
packet as one record for the association under attack; ddp_segment gets
the user data of every PPID 16/17 DATA chunk, and ddp_conn the same chunks as records for the
server connection under attack (tagged ones with the registered STag stamped in);
rdmap_headers gets hand-built RDMAP headers, which no capture carries yet. Idempotent: files are named after capture and frame.
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "vectors"))


def frames(path):
    with open(path, "rb") as f:
        b = f.read()
    magic, = struct.unpack_from("<I", b, 0)
    assert magic == 0xA1B2C3D4, path
    off = 24
    n = 0
    while off + 16 <= len(b):
        incl, = struct.unpack_from("<I", b, off + 8)
        n += 1
        yield n, b[off + 16: off + 16 + incl]
        off += 16 + incl


def data_chunks(sctp):
    off = 12
    while off + 4 <= len(sctp):
        ctype, _flags, length = struct.unpack_from("!BBH", sctp, off)
        if length < 4:
            return
        if ctype == 0 and length >= 16:
            ppid, = struct.unpack_from("!I", sctp, off + 12)
            yield ppid, sctp[off + 16: off + length]
        off += (length + 3) & ~3


def main():
    if not os.path.isdir(VECTORS):
        print(f"no captures at {VECTORS}: no seeds; the kept corpus alone")
        return
    out = {t: os.path.join(HERE, "seeds", t) for t in ("link_frame", "net_interface", "sctp_packet", "init_params", "ddp_segment", "sctp_assoc", "ddp_conn", "rdmap_headers", "ipsec_flow")}
    for d in out.values():
        os.makedirs(d, exist_ok=True)
    count = 0
    for name in sorted(os.listdir(VECTORS)):
        if not name.endswith(".pcap"):
            continue
        stem = name[:-5]
        for n, frame in frames(os.path.join(VECTORS, name)):
            def put(target, tag, data):
                nonlocal count
                with open(os.path.join(out[target], f"{stem}-{n}{tag}"), "wb") as f:
                    f.write(data)
                count += 1
            put("link_frame", "", frame)
            put("ipsec_flow", "", frame)
            # net_interface reads records of [length (16 bits), frame].
            put("net_interface", "", len(frame).to_bytes(2, "big") + frame)
            sctp = frame[34:]
            put("sctp_packet", "", sctp)
            # sctp_assoc reads records of [kind, length (16 bits), packet]; kind 0 sends the
            # packet to the established association with its tag rewritten.
            put("sctp_assoc", "", bytes([0]) + len(sctp).to_bytes(2, "big") + sctp)
            if len(sctp) > 16 and sctp[12] in (1, 2):  # INIT, INIT ACK
                put("init_params", "", sctp)
            for i, (ppid, payload) in enumerate(data_chunks(sctp)):
                if ppid in (16, 17):
                    put("ddp_segment", f"-{i}", bytes([ppid]) + payload)
                    # ddp_conn records: [stream, kind, length (16 bits), chunk]; kind 0 is
                    # PPID 16, kind 2 PPID 17, bit 2 stamps the registered STag.
                    kind = 2 if ppid == 17 else (4 if len(payload) > 2 and payload[2] & 0x80 else 0)
                    put("ddp_conn", f"-{i}", bytes([1, kind]) + len(payload).to_bytes(2, "big") + payload)
    # No capture carries RDMAP yet: rdmap_headers starts from hand-built headers (RFC 5040 §4.4,
    # §4.8): a Read Request, and Terminates with no header, a tagged DDP header, and both.
    read_request = bytes.fromhex("11223344" "0102030405060708" "00010000" "55667788" "0a0b0c0d0e0f1011")
    seeds = {
        "read-request": b"\x01" + read_request,
        "terminate-bare": b"\x00" + bytes.fromhex("02070000"),
        "terminate-tagged": b"\x00" + bytes.fromhex("1101c000" "0020" "8140deadbeef000000000000" "1000"),
        "terminate-read": b"\x00" + bytes.fromhex("0100e000" "002e" "414100000000" "00000001" "00000007" "00000000") + read_request,
    }
    for name, data in seeds.items():
        with open(os.path.join(out["rdmap_headers"], name), "wb") as f:
            f.write(data)
        count += 1
    print(f"seeded {count} files under {os.path.join(HERE, 'seeds')}")


if __name__ == "__main__":
    main()
