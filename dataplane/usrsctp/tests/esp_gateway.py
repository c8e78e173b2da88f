#!/usr/bin/python3
"""A bump-in-the-wire ESP gateway (RFC 4301 §3.3) built on scapy's RFC 4303 implementation:
an independent ESP peer for ddpdk, in front of a host (usrsctp) that has no IPsec of its own.

    usage: esp_gateway.py HOST_IF WIRE_IF SPI_OUT KEY_OUT SPI_IN KEY_IN

It bridges Ethernet frames between HOST_IF (the host's side) and WIRE_IF (ddpdk's side):
- IPv4 SCTP from the host leaves on the wire as ESP in transport mode (AES-GCM-128, RFC 4106)
  under SPI_OUT with KEY_OUT (16 key bytes and the 4-byte salt, in hex);
- ESP from the wire under SPI_IN is verified and opened with KEY_IN, and the SCTP packet it
  carried goes to the host; ESP that does not verify, or for another SPI, is dropped;
- everything else (ARP, clear packets the wire sends) passes unchanged both ways; clear SCTP
  from the wire is dropped: the host must only see what came through the SA.

It prints one line when it is ready and, on SIGTERM or SIGINT, its counters as one line:
`gateway: sealed N, opened N, dropped N, passed N`.
"""
import select
import signal
import socket
import sys

from scapy.layers.inet import IP
from scapy.layers.ipsec import ESP, SecurityAssociation
from scapy.layers.l2 import Ether

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def sa(spi, key_hex):
    return SecurityAssociation(ESP, spi=spi, crypt_algo="AES-GCM",
                               crypt_key=bytes.fromhex(key_hex))


def main():
    host_if, wire_if, spi_out, key_out, spi_in, key_in = sys.argv[1:7]
    out_sa = sa(int(spi_out), key_out)
    in_sa = sa(int(spi_in), key_in)
    socks = {}
    for name in (host_if, wire_if):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((name, 0))
        socks[name] = s
    host, wire = socks[host_if], socks[wire_if]
    counts = {"sealed": 0, "opened": 0, "dropped": 0, "passed": 0}
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
            ip = eth.payload if isinstance(eth.payload, IP) else None
            if s is host:
                if ip is not None and ip.proto == 132:
                    sealed = out_sa.encrypt(IP(bytes(ip)))
                    wire.send(bytes(Ether(src=eth.src, dst=eth.dst, type=0x0800) / sealed))
                    counts["sealed"] += 1
                else:
                    wire.send(frame)
                    counts["passed"] += 1
            elif ip is not None and ip.proto == 50:
                try:
                    if ip[ESP].spi != int(spi_in):
                        raise ValueError("another SPI")
                    opened = in_sa.decrypt(IP(bytes(ip)))
                except Exception:  # a forgery, a replay, another SPI: the SA's to refuse
                    counts["dropped"] += 1
                    continue
                host.send(bytes(Ether(src=eth.src, dst=eth.dst, type=0x0800) / opened))
                counts["opened"] += 1
            elif ip is not None and ip.proto == 132:
                counts["dropped"] += 1
            else:
                host.send(frame)
                counts["passed"] += 1
    print("gateway: sealed {sealed}, opened {opened}, dropped {dropped}, passed {passed}"
          .format(**counts), flush=True)


if __name__ == "__main__":
    main()
