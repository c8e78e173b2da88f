#!/usr/bin/python3
"""An independent ESP peer for ddpdk's tests: scapy's RFC 4303 implementation.

Reads JSON requests on stdin, one a line, and answers each with one line on stdout, "ok <hex>"
or "err <what failed>", so that a test starts Python and scapy once, not once a packet:
  {"op": "encrypt" | "decrypt", "packet": "<hex of an IP packet>", "sa": {
     "spi": 1000, "algo": "aes-128-gcm" | "aes-256-gcm" | "aes-128-cbc" | "aes-256-cbc",
     "key": "<hex>", "salt": "<hex, GCM>", "auth_key": "<hex, CBC>",
     "tunnel": null | {"src": "...", "dst": "..."}, "esn": false, "seq": 1}}
"encrypt" protects the packet with sequence number "seq" (its low 32 bits on the wire, the
high ones in the ICV with ESN); "decrypt" verifies and opens an ESP packet and prints the
packet it carried. The peer ends at the end of its input.
"""
import hashlib
import hmac
import json
import struct
import sys

from scapy.layers.inet import IP
from scapy.layers.inet6 import IPv6
from scapy.layers.ipsec import ESP, SecurityAssociation


def ip(data):
    return IPv6(data) if data[0] >> 4 == 6 else IP(data)


def answer(req):
    sa = req["sa"]
    algo = sa["algo"]
    key = bytes.fromhex(sa["key"])
    kw = {}
    if algo.endswith("gcm"):
        # scapy takes the RFC 4106 salt as the key's last 4 bytes.
        kw.update(crypt_algo="AES-GCM", crypt_key=key + bytes.fromhex(sa["salt"]))
    else:
        kw.update(crypt_algo="AES-CBC", crypt_key=key, auth_algo="SHA2-256-128",
                  auth_key=bytes.fromhex(sa["auth_key"]))
    t = sa.get("tunnel")
    if t:
        kw["tunnel_header"] = (IPv6 if ":" in t["src"] else IP)(src=t["src"], dst=t["dst"])
    seq = sa.get("seq", 1)
    if sa.get("esn"):
        kw.update(esn_en=True, esn=seq >> 32)
    esp = SecurityAssociation(ESP, spi=sa["spi"], **kw)
    pkt = ip(bytes.fromhex(req["packet"]))
    # scapy 2.5 leaves the ESN high bits out of an ESP integrity check value (it hands them to
    # AH only), where RFC 4303 §3.3.2.1 appends them to what the ICV covers: with ESN and HMAC,
    # the ICV is computed here with Python's hmac.
    esn_hmac = sa.get("esn") and not algo.endswith("gcm")
    if req["op"] == "encrypt":
        out = bytes(esp.encrypt(pkt, seq_num=seq & 0xFFFFFFFF))
        if esn_hmac:
            esp_at = len(out) - len(out_esp(out))
            body = out[esp_at:-16]
            out = out[:-16] + icv(sa, body, seq >> 32)
    else:
        raw = bytes(pkt)
        if esn_hmac:
            body, tag = out_esp(raw)[:-16], raw[-16:]
            if not hmac.compare_digest(icv(sa, body, seq >> 32), tag):
                raise ValueError("ICV (with the ESN high bits) does not verify")
        out = bytes(esp.decrypt(pkt, verify=not esn_hmac))
    return out.hex()


def out_esp(packet):
    """The ESP header and everything after it."""
    return bytes(ip(packet)[ESP])


def icv(sa, body, seq_hi):
    key = bytes.fromhex(sa["auth_key"])
    return hmac.new(key, body + struct.pack("!L", seq_hi), hashlib.sha256).digest()[:16]


def main():
    for line in sys.stdin:
        try:
            reply = "ok " + answer(json.loads(line))
        except Exception as e:  # noqa: BLE001 - any failure is the answer
            reply = f"err esp_peer: {type(e).__name__}: {e}"
        print(reply, flush=True)


if __name__ == "__main__":
    main()
