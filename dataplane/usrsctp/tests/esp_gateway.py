#!/usr/bin/python3
"""A bump-in-the-wire ESP gateway (RFC 4301 §3.3) built on scapy's RFC 4303 implementation:
an independent ESP peer for ddpdk, in front of a host (usrsctp) that has no IPsec of its own.

    usage: esp_gateway.py HOST_IF WIRE_IF SPI_OUT KEY_OUT SPI_IN KEY_IN
                          [--algo aes-128-gcm|aes-256-gcm|aes-128-cbc]
                          [--tunnel GATEWAY_ADDR PEER_ADDR] [--attack N]
                          [--too-big MTU ROUTER_ADDR]

It bridges Ethernet frames between HOST_IF (the host's side) and WIRE_IF (ddpdk's side):
- IPv4 or IPv6 SCTP from the host leaves on the wire as ESP under SPI_OUT with KEY_OUT, in transport
  mode (for the host) or, with --tunnel, in a tunnel from GATEWAY_ADDR to PEER_ADDR;
- ESP from the wire under SPI_IN is verified and opened with KEY_IN, and the SCTP packet it
  carried goes to the host; ESP that does not verify, or for another SPI, is dropped;
- everything else (ARP, clear packets the wire sends) passes unchanged both ways; clear SCTP
  from the wire is dropped: the host must only see what came through the SA.

Keys are hex: AES-GCM's 16 or 32 key bytes followed by the 4-byte salt (RFC 4106 §8.1);
AES-CBC's key, a slash, and the HMAC-SHA-256 key (RFC 3602, RFC 4868).

--attack N: after every Nth packet it seals, it also sends on the wire, in this order, the
same packet again (a replay, RFC 4303 §3.4.3), a copy with one ciphertext bit flipped (an
ICV that does not verify, §3.4.4), a copy under an SPI nobody has (§3.4.2) and a copy cut
short inside its ICV. The receiver must drop and count each.

--too-big MTU ROUTER_ADDR: the host sits behind a router (ROUTER_ADDR) whose link takes IPv4
packets of at most MTU bytes. An opened packet larger than that with DF set is not passed on:
the router's ICMP Fragmentation Needed (RFC 1191 §4, quoting as much of it as fits 576 bytes,
RFC 1812 §4.3.2.3) goes back to its sender through the SA, as a gateway carries what its
network sends back (RFC 4301 §6.2 has the receiver judge it by the packet it quotes). One
without DF is passed on in fragments, as the router would cut it.

It prints one line when it is ready and, on SIGTERM or SIGINT, its counters as one line:
`gateway: sealed N, opened N, dropped N, passed N, attacks N, too_big N`.
"""
import select
import signal
import socket
import sys

from scapy.layers.inet import ICMP, IP, fragment
from scapy.layers.inet6 import IPv6
from scapy.layers.ipsec import ESP, SecurityAssociation
from scapy.layers.l2 import Ether

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
UNKNOWN_SPI = 0x0BAD0BAD


def sa(spi, algo, key_hex, tunnel):
    kw = {}
    if algo.endswith("gcm"):
        kw.update(crypt_algo="AES-GCM", crypt_key=bytes.fromhex(key_hex))
    else:
        cipher, auth = key_hex.split("/")
        kw.update(crypt_algo="AES-CBC", crypt_key=bytes.fromhex(cipher),
                  auth_algo="SHA2-256-128", auth_key=bytes.fromhex(auth))
    if tunnel:
        kw["tunnel_header"] = IP(src=tunnel[0], dst=tunnel[1])
    return SecurityAssociation(ESP, spi=spi, **kw)


def attacks(sealed_ip):
    """The four forgeries of one sealed packet (an IP packet carrying ESP), as IP bytes.
    The flipped and the short copy carry sequence numbers far ahead of the original, new to
    the receiver's window, so that it is the ICV (or the length) that refuses them, not the
    replay check (RFC 4303 §3.4.3 comes before §3.4.4)."""
    raw = bytes(sealed_ip)
    ihl = (raw[0] & 0x0F) * 4
    seq = int.from_bytes(raw[ihl + 4:ihl + 8], "big")

    def renumbered(n):
        b = bytearray(raw)
        b[ihl + 4:ihl + 8] = ((seq + n) & 0xFFFFFFFF).to_bytes(4, "big")
        return b

    flipped = renumbered(1 << 20)
    flipped[ihl + 8 + 16] ^= 0x01  # past the ESP header and the IV: ciphertext
    stranger = bytearray(raw)
    stranger[ihl:ihl + 4] = UNKNOWN_SPI.to_bytes(4, "big")
    short = IP(bytes(renumbered((1 << 20) + 1))[:-8])  # ends inside the ICV
    short.len = len(raw) - 8
    del short.chksum
    return [raw, bytes(flipped), bytes(stranger), bytes(short)]


def main():
    host_if, wire_if, spi_out, key_out, spi_in, key_in = sys.argv[1:7]
    rest = sys.argv[7:]
    algo, tunnel, attack_every, too_big = "aes-128-gcm", None, 0, None
    while rest:
        opt = rest.pop(0)
        if opt == "--algo":
            algo = rest.pop(0)
        elif opt == "--tunnel":
            tunnel = (rest.pop(0), rest.pop(0))
        elif opt == "--attack":
            attack_every = int(rest.pop(0))
        elif opt == "--too-big":
            too_big = (int(rest.pop(0)), rest.pop(0))
        else:
            sys.exit(f"esp_gateway: unknown option {opt}")
    out_sa = sa(int(spi_out), algo, key_out, tunnel)
    in_sa = sa(int(spi_in), algo, key_in, tunnel and (tunnel[1], tunnel[0]))
    socks = {}
    for name in (host_if, wire_if):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((name, 0))
        socks[name] = s
    host, wire = socks[host_if], socks[wire_if]
    counts = {"sealed": 0, "opened": 0, "dropped": 0, "passed": 0, "attacks": 0, "too_big": 0}
    running = [True]

    def stop(*_):
        running[0] = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("gateway: ready", flush=True)
    while running[0]:
        try:
            ready, _, _ = select.select([host, wire], [], [], 0.1)
        except InterruptedError:
            continue
        for s in ready:
            frame, addr = s.recvfrom(65535)
            if addr[2] == PACKET_OUTGOING:
                continue
            eth = Ether(frame)
            ip = eth.payload if isinstance(eth.payload, (IP, IPv6)) else None
            family = type(ip) if ip is not None else None
            proto = None if ip is None else (ip.nh if family is IPv6 else ip.proto)

            def to(sock, payload, back=False):
                kind = 0x86DD if payload[0] >> 4 == 6 else 0x0800
                src, dst = (eth.dst, eth.src) if back else (eth.src, eth.dst)
                sock.send(bytes(Ether(src=src, dst=dst, type=kind)) + payload)

            if s is host:
                if proto == 132:
                    sealed = out_sa.encrypt(family(bytes(ip)))
                    to(wire, bytes(sealed))
                    counts["sealed"] += 1
                    if attack_every and counts["sealed"] % attack_every == 0:
                        for forged in attacks(sealed):
                            to(wire, forged)
                            counts["attacks"] += 1
                else:
                    wire.send(frame)
                    counts["passed"] += 1
            elif proto == 50:
                try:
                    if ip[ESP].spi != int(spi_in):
                        raise ValueError("another SPI")
                    opened = in_sa.decrypt(family(bytes(ip)))
                except Exception:  # a forgery, another SPI: the SA's to refuse
                    counts["dropped"] += 1
                    continue
                counts["opened"] += 1
                raw = bytes(opened)
                if too_big and family is IP and len(raw) > too_big[0]:
                    inner = IP(raw)
                    if inner.flags.DF:
                        icmp = IP(src=too_big[1], dst=inner.src) / ICMP(
                            type=3, code=4, nexthopmtu=too_big[0]) / raw[:548]
                        to(wire, bytes(out_sa.encrypt(IP(bytes(icmp)))), back=True)
                        counts["too_big"] += 1
                    else:
                        for piece in fragment(inner, fragsize=(too_big[0] - 20) // 8 * 8):
                            to(host, bytes(piece))
                    continue
                to(host, raw)
            elif proto == 132:
                counts["dropped"] += 1
            else:
                host.send(frame)
                counts["passed"] += 1
    print("gateway: sealed {sealed}, opened {opened}, dropped {dropped}, passed {passed}, "
          "attacks {attacks}, too_big {too_big}".format(**counts), flush=True)


if __name__ == "__main__":
    main()
