#!/usr/bin/env python3
"""Prometheus exporter for ddpdk, read from DPDK's telemetry socket.

ddpdk answers /ddpdk/stats, /ddpdk/assoc/list, /ddpdk/assoc/info,ID, /ddpdk/session/list and
/ddpdk/mr/list on the telemetry socket of its EAL (docs/telemetry.md); DPDK answers
/ethdev/stats,PORT there too. This script asks them and writes the figures in Prometheus'
text exposition format, with types, help and labels (core, association, reason, code).

    ddpdk-exporter.py --file-prefix ddpdk --once          # print one scrape
    ddpdk-exporter.py --file-prefix ddpdk --listen 127.0.0.1:9465   # serve /metrics

Only the Python standard library: the socket is SOCK_SEQPACKET, one JSON reply per command.
"""

import argparse
import errno
import http.server
import json
import os
import socket
import sys
import threading
import time

# /ddpdk/stats core/N/NAME values that are levels, not counts.
CORE_GAUGES = {
    "associations": "Live associations the data core owns (closed ones kept in view not counted).",
    "stags": "STags the data core's replica holds.",
    "tx_backlog_peak": "Most frames that waited at once for room in the device's TX ring.",
}
CORE_HELP = {
    "frames_in": "Frames the data core received.",
    "frames_out": "Frames the data core sent.",
    "tx_ring_full": "Times the device's TX ring filled and held the core back (not loss).",
    "associations_refused": "Associations handed to the data core that it had no room for: "
                            "aborted.",
    "placed_bytes": "Payload bytes placed into registered memory.",
    "segments_in": "DDP segments received.",
    "segments_out": "DDP segments sent.",
    "messages_out": "DDP messages sent.",
    "reads_served": "RDMA Read Requests served from local memory (RFC 5040 5.2).",
    "reads_source_revoked": "Read Responses stopped: their Data Source STag was revoked "
                            "before they left (RFC 5041 8.3.1 item 5).",
    "reads_short": "Read Responses of the peer's that ended short of their Read (RFC 5040 5.2).",
    "inbound_gaps_given_up": "Sessions whose peer left DDP-SSNs missing before its Terminate, "
                             "given up once SCTP had every TSN up to the Terminate and 4 RTOs "
                             "had passed (RFC 5043 6).",
    "crossed_rejects": "Terminates of a rejected session attempt that crossed our Reject, "
                       "dropped so that they do not end the stream's next session (RFC 5043 6.6).",
    "crossed_rejects_unwatched": "Watches for such Terminates dropped, oldest first, when a "
                                 "stream already had 4 (RFC 5043 6.6).",
    "initiates_unanswered": "Our Initiates given up: the peer's segments came, its answer did "
                            "not within 64 RTOs of SCTP missing nothing; the held "
                            "segments were dropped (RFC 5043 10).",
    "t3_retransmits": "DATA chunks retransmitted on T3-rtx expiry (RFC 9260 6.3.3).",
    "fast_retransmits": "DATA chunks fast-retransmitted (RFC 9260 7.2.4).",
}
# /ddpdk/stats control/NAME values that are levels, not counts.
CONTROL_GAUGES = {
    "initiates_pending": "DDP Stream Session Initiates waiting for the ULP (RFC 5043 6.4).",
    "tx_backlog_peak": "The most frames the control thread's transmit queue held waiting for "
                       "the device's ring at once.",
}
CONTROL_HELP = {
    "initiates_over_limit": "Initiates answered with a Terminate: the pending limit was "
                            "reached (RFC 5043 6.4).",
    "flow_rules_removed": "Device flow rules of ended associations removed.",
    "flow_rules_remove_failed": "Device flow rules the device would not remove (they stay "
                                "until the port closes).",
    "invalidation_timeouts": "Remote invalidations (Send with Invalidate, RFC 5040 5.3) a "
                             "data core did not acknowledge in time: the receive reached the "
                             "ULP without the STag vouched revoked.",
    "peer_invalidations": "Remote invalidations (Send with Invalidate, RFC 5040 5.3) revoked "
                          "on every data core before the ULP heard of them.",
    "peer_limit_refused": "Associations a peer address completed beyond --max-assocs-per-peer "
                          "live ones, aborted.",
    "forwarded": "Packets of a live association that reached the control thread and went on "
                 "to the association's data core.",
    "returned_closed": "Forwarded packets the data core sent back: the association had "
                       "closed there (its end not yet taken by the control thread); then "
                       "answered as out of the blue (RFC 9260 8.4).",
    "neighbours_shared": "Neighbours one data core learnt and the others were told of (one "
                         "per core told).",
    "tx_ring_full": "Times the device's ring filled under the control thread's frames "
                    "(backpressure, not loss).",
    "tx_held_sent": "Control-thread packets held while their neighbour was resolved, then sent.",
}
ASSOC_GAUGES = {
    "cwnd": ("ddpdk_association_cwnd_bytes", "Congestion window.", 1),
    "peer_rwnd": ("ddpdk_association_peer_rwnd_bytes", "The peer's receive window.", 1),
    "a_rwnd": ("ddpdk_association_a_rwnd_bytes", "Receive window we may advertise.", 1),
    "rto_us": ("ddpdk_association_rto_seconds", "Retransmission timeout.", 1e-6),
    "srtt_us": ("ddpdk_association_srtt_seconds", "Smoothed round-trip time.", 1e-6),
    "streams": ("ddpdk_association_streams", "SCTP streams.", 1),
    "sessions": ("ddpdk_association_sessions", "DDP Stream Sessions not idle.", 1),
    "path_active": ("ddpdk_association_path_active",
                    "1 while the path is active, 0 after Path.Max.Retrans failures in a row "
                    "(RFC 9260 8.2).", 1),
    "error_count": ("ddpdk_association_consecutive_errors",
                    "Consecutive failures (T3-rtx expiries, unanswered HEARTBEATs; RFC 9260 "
                    "8.1): the association ends beyond Association.Max.Retrans.", 1),
}
ASSOC_COUNTERS = {
    "packets_in": "SCTP packets received.",
    "packets_out": "SCTP packets sent.",
    "data_in": "DATA chunks received.",
    "data_out": "DATA chunks sent.",
    "sacks_in": "SACKs received.",
    "sacks_out": "SACKs sent.",
    "t3_expiries": "T3-rtx expiries.",
    "t3_retransmits": "DATA chunks retransmitted on T3-rtx expiry.",
    "fast_retransmits": "DATA chunks fast-retransmitted.",
    "path_inactive": "Times the path went inactive (RFC 9260 8.2).",
    "segments_in": "DDP segments received.",
    "segments_out": "DDP segments sent.",
    "placed_bytes": "Payload bytes placed.",
    "receive_errors": "DDP streams whose receive path failed (RFC 5041 7.1).",
}
PORT_COUNTERS = {
    "ipackets": "Packets received by the port.",
    "opackets": "Packets sent by the port.",
    "ibytes": "Bytes received by the port.",
    "obytes": "Bytes sent by the port.",
    "imissed": "Packets the port dropped for lack of room in its RX queues.",
    "ierrors": "Erroneous packets received.",
    "oerrors": "Packets the port failed to send.",
    "rx_nombuf": "RX mbuf allocation failures.",
}


class Telemetry:
    """One connection to a DPDK telemetry v2 socket."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # ddpdk answers within 2 s or says why; a stuck process fails the scrape, not hangs it.
        self.sock.settimeout(5)
        self.sock.connect(path)
        info = json.loads(self.sock.recv(16384).decode())
        self.max_len = int(info.get("max_output_len", 16384))

    def ask(self, cmd):
        self.sock.send(cmd.encode())
        reply = json.loads(self.sock.recv(self.max_len).decode())
        return reply.get(cmd.split(",")[0])

    def close(self):
        self.sock.close()


class Metrics:
    """Samples grouped by metric, written with one HELP and TYPE each."""

    def __init__(self):
        self.order = []
        self.meta = {}
        self.samples = {}

    def add(self, name, kind, help_text, labels, value):
        if name not in self.meta:
            self.order.append(name)
            self.meta[name] = (kind, help_text)
            self.samples[name] = []
        self.samples[name].append((labels, value))

    def text(self):
        out = []
        for name in self.order:
            kind, help_text = self.meta[name]
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            for labels, value in self.samples[name]:
                out.append(f"{name}{fmt_labels(labels)} {fmt_value(value)}")
        return "\n".join(out) + "\n"


def fmt_labels(labels):
    if not labels:
        return ""
    esc = lambda v: str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in labels.items()) + "}"


def fmt_value(v):
    if isinstance(v, float):
        return repr(v)
    return str(int(v))


def assoc_ids(t):
    """Every association id: a reply holds 512 at most, the next asks from the last + 1."""
    first = 0
    while True:
        page = t.ask(f"/ddpdk/assoc/list,{first}") or []
        # An error (a ddpdk stopping: "not available") fails the scrape with its reason.
        if not isinstance(page, list):
            raise RuntimeError(f"/ddpdk/assoc/list,{first}: {page!r}")
        # A ddpdk that does not page (before it took FIRST) answers the same page again.
        if page and page[-1] < first:
            return
        yield from page
        if len(page) < 512:
            return
        first = page[-1] + 1


def paged(t, cmd):
    """The values of a dict command that pages (`count`, `next`: docs/telemetry.md), every
    page; its own names (`count`, `bytes`, `next`) left out."""
    cursor = ""
    while True:
        page = t.ask(f"{cmd},{cursor}" if cursor else cmd) or {}
        if not isinstance(page, dict) or "error" in page:
            raise RuntimeError(f"{cmd}: {page!r}")
        for key, value in page.items():
            if "/" in key:
                yield value
        following = page.get("next")
        if not following or following == cursor:
            return
        cursor = following


def collect(t):
    """Asks every command and returns the metrics."""
    m = Metrics()
    # One core per question: a telemetry dict holds 256 names, three cores and the control thread's.
    stats = {}
    for core in range(4096):
        reply = t.ask(f"/ddpdk/stats,{core}")
        if not isinstance(reply, dict) or "error" in reply:
            if core == 0:
                raise RuntimeError(f"/ddpdk/stats,0: {reply!r} (is this a ddpdk endpoint? "
                                   "one starting up answers once its port is set up)")
            # Past the last core ("no data core N"). Any other error (a snapshot not taken
            # in time) fails the scrape: a scrape without this core's series would pass for
            # a whole one.
            why = reply.get("error", "") if isinstance(reply, dict) else ""
            if str(why).startswith("no data core"):
                break
            raise RuntimeError(f"/ddpdk/stats,{core}: {reply!r}")
        for key, value in reply.items():
            if key.startswith("core/") or core == 0:
                stats[key] = value
    # Every control-thread counter: /ddpdk/stats has room for some only. A ddpdk before the
    # command answers it with nothing, and its /ddpdk/stats ones stand.
    control = t.ask("/ddpdk/control")
    if isinstance(control, dict) and "error" not in control:
        for key, value in control.items():
            stats[f"control/{key}"] = value
    for key, value in stats.items():
        parts = key.split("/")
        if parts[0] == "core" and len(parts) >= 3:
            core = {"core": parts[1]}
            name = parts[2]
            if name == "drop" and len(parts) == 4:
                m.add("ddpdk_drops_total", "counter",
                      "Frames, packets or segments a data core dropped, by reason.",
                      {**core, "reason": parts[3]}, value)
            elif name == "sctp_check" and len(parts) == 4:
                m.add("ddpdk_sctp_check_failures_total", "counter",
                      "SCTP packets that failed a check (bad_checksum: RFC 9260 6.8, "
                      "bad_vtag: 8.5).", {**core, "check": parts[3]}, value)
            elif name == "ddp_error" and len(parts) == 4:
                m.add("ddpdk_receive_errors_total", "counter",
                      "DDP receive errors by RFC 5041 7.2 error (and ddp_ssn, truncated, "
                      "oversize, rdmap).", {**core, "code": parts[3]}, value)
            elif name in ("busy_ns", "idle_ns"):
                m.add(f"ddpdk_core_{name[:-3]}_seconds_total", "counter",
                      f"Time the data core was {name[:-3]} (between poll turns).", core,
                      value / 1e9)
            elif name in CORE_GAUGES:
                m.add(f"ddpdk_core_{name}", "gauge", CORE_GAUGES[name], core, value)
            else:
                m.add(f"ddpdk_core_{name}_total", "counter",
                      CORE_HELP.get(name, f"Data core counter {name}."), core, value)
        elif parts[0] == "ipsec" and len(parts) == 3 and parts[1] == "drop":
            m.add("ddpdk_ipsec_drops_total", "counter",
                  "Packets IPsec policy dropped before any data core saw them, by reason "
                  "(RFC 4301 5.2).", {"reason": parts[2]}, value)
        elif parts[0] == "ipsec" and len(parts) == 3 and parts[2] in ("packets", "bytes"):
            m.add(f"ddpdk_ipsec_{parts[2]}_total", "counter",
                  f"ESP {parts[2]} through the SAs, by direction.",
                  {"direction": parts[1]}, value)
        elif parts[0] == "ipsec" and len(parts) == 3 and parts[2] == "pmtu_accepted":
            # Not a drop: ICMP PMTU messages quoting our ESP that an SA believed.
            m.add("ddpdk_ipsec_pmtu_accepted_total", "counter",
                  "ICMP PMTU messages quoting our ESP that an outbound SA believed "
                  "(RFC 4301 6.1.2, 8.2.1).", {"direction": parts[1]}, value)
        elif parts[0] == "ipsec" and len(parts) == 3 and parts[2] == "dummy":
            # Not an error (RFC 4303 2.6): dummy packets, authenticated and discarded.
            m.add("ddpdk_ipsec_dummy_total", "counter",
                  "ESP dummy packets (Next Header 59) authenticated and discarded without an "
                  "error (RFC 4303 2.6).", {"direction": parts[1]}, value)
        elif parts[0] == "ipsec" and len(parts) == 3 and parts[2] == "nic":
            # Not a drop: of the packets, those a NIC with inline crypto did.
            m.add("ddpdk_ipsec_nic_packets_total", "counter",
                  "ESP packets a NIC with inline crypto decrypted and verified (in) or was "
                  "handed to encrypt (out), of ddpdk_ipsec_packets_total.",
                  {"direction": parts[1]}, value)
        elif parts[0] == "ipsec" and len(parts) == 3:
            m.add("ddpdk_ipsec_sa_drops_total", "counter",
                  "Packets the SAs dropped, by direction and reason (RFC 4303 3.4: replay, "
                  "auth_failed, ...).", {"direction": parts[1], "reason": parts[2]}, value)
        elif parts[0] == "ipsec" and parts[1:] == ["sas"]:
            m.add("ddpdk_ipsec_sas", "gauge", "SAs installed.", {}, value)
        elif parts[0] == "control" and parts[1:] == ["clock"]:
            m.add("ddpdk_clock_info", "gauge",
                  "Always 1: what the poll loops' clock reads (tsc; monotonic; or "
                  "'monotonic, TSC dropped' once drift or the kernel made it give the TSC up).",
                  {"source": str(value)}, 1)
        elif parts[0] == "control" and len(parts) == 2 and parts[1] in CONTROL_GAUGES:
            m.add(f"ddpdk_control_{parts[1]}", "gauge", CONTROL_GAUGES[parts[1]], {}, value)
        elif parts[0] == "control" and len(parts) == 2:
            m.add(f"ddpdk_control_{parts[1]}_total", "counter",
                  CONTROL_HELP.get(parts[1], f"Control thread counter {parts[1]}."), {}, value)
        elif parts[0] == "control" and len(parts) == 3 and parts[1] == "drop":
            m.add("ddpdk_control_drops_total", "counter",
                  "Frames the control thread failed to send (INIT ACKs, ABORTs, ...), by "
                  "reason.", {"reason": parts[2]}, value)
        elif parts[0] == "control" and parts[1:3] == ["sctp", "ignored_why"] and len(parts) == 4:
            m.add("ddpdk_sctp_endpoint_ignored_by_reason_total", "counter",
                  "Packets to no association the SCTP endpoint dropped unanswered, by reason "
                  "(RFC 9260 8.4, 8.5.1: ootb_abort, zero_tag, malformed, ...).",
                  {"reason": parts[3]}, value)
        elif parts[0] == "control" and len(parts) == 3 and parts[1] == "sctp":
            m.add(f"ddpdk_sctp_endpoint_{parts[2]}_total", "counter",
                  f"The SCTP endpoint's {parts[2].replace('_', ' ')} (RFC 9260 5.1, 8.4).",
                  {}, value)
    for assoc_id in assoc_ids(t):
        info = t.ask(f"/ddpdk/assoc/info,{assoc_id}")
        if not isinstance(info, dict) or "error" in info:
            continue  # gone between the list and the question
        labels = {"association": str(assoc_id)}
        m.add("ddpdk_association_info", "gauge",
              "One per association: its peer, core and SCTP state.",
              {**labels, "peer": info.get("peer", ""), "core": info.get("core", ""),
               "state": info.get("state", "")}, 1)
        for key, (name, help_text, scale) in ASSOC_GAUGES.items():
            if key in info:
                value = info[key] * scale
                m.add(name, "gauge", help_text, labels,
                      float(value) if scale != 1 else value)
        for key, help_text in ASSOC_COUNTERS.items():
            if key in info:
                m.add(f"ddpdk_association_{key}_total", "counter", help_text, labels,
                      info[key])
    by_state = {}
    for state in paged(t, "/ddpdk/session/list"):
        # The state alone: a Terminated session's reason is free text (docs/telemetry.md),
        # and one time series per reason is what a Prometheus label must not be.
        state = state.split(" (", 1)[0]
        by_state[state] = by_state.get(state, 0) + 1
    for state, n in sorted(by_state.items()):
        m.add("ddpdk_sessions", "gauge", "DDP Stream Sessions not idle, by state.",
              {"state": state}, n)
    mrs = t.ask("/ddpdk/mr/list") or {}
    # An error is no "0 registrations": it fails the scrape with its reason.
    if not isinstance(mrs, dict) or "error" in mrs:
        raise RuntimeError(f"/ddpdk/mr/list: {mrs!r}")
    m.add("ddpdk_memory_registrations", "gauge", "Registered memory regions (STags).", {},
          mrs.get("count", 0))
    m.add("ddpdk_memory_registered_bytes", "gauge", "Bytes of registered memory.", {},
          mrs.get("bytes", 0))
    for port in t.ask("/ethdev/list") or []:
        st = t.ask(f"/ethdev/stats,{port}") or {}
        for key, help_text in PORT_COUNTERS.items():
            if key in st:
                m.add(f"ddpdk_port_{key}_total", "counter", help_text,
                      {"port": str(port)}, st[key])
    return m


def socket_path(args):
    if args.socket:
        return args.socket
    run = os.environ.get("RUNTIME_DIRECTORY") or (
        "/var/run" if os.getuid() == 0 else os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    return os.path.join(run, "dpdk", args.file_prefix, "dpdk_telemetry.v2")


# DPDK's telemetry socket listens with a backlog of one: scrapes at once (two Prometheus
# servers, a dashboard's refresh) would find it full. This process asks one at a time, and
# retries a connection refused for a full backlog (another client, dpdk-telemetry.py).
SCRAPE_LOCK = threading.Lock()
BUSY_RETRY_S = 2.0


def connect(path):
    deadline = time.monotonic() + BUSY_RETRY_S
    while True:
        try:
            return Telemetry(path)
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise OSError(errno.EAGAIN, "the socket stayed busy for "
                              f"{BUSY_RETRY_S:.0f} s (other telemetry clients)") from None
            time.sleep(0.02)


def scrape(args):
    with SCRAPE_LOCK:
        return scrape_one(args)


def scrape_one(args):
    path = socket_path(args)
    try:
        t = connect(path)
    except OSError as e:
        if e.errno == errno.EAGAIN:
            raise OSError(f"telemetry socket {path}: {e.strerror or e}") from e
        # Name the socket: a wrong --file-prefix, or a ddpdk not running (or run by another
        # user, whose runtime directory differs), is then plain to see.
        hint = ("is this ddpdk's telemetry socket?" if args.socket
                else "is ddpdk running with this --file-prefix?")
        raise OSError(f"telemetry socket {path}: {e.strerror or e} ({hint})") from e
    try:
        return collect(t).text()
    finally:
        t.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-f", "--file-prefix", default="rte",
                   help="the EAL --file-prefix of the ddpdk process (default: rte)")
    p.add_argument("--socket", help="the telemetry socket's path, instead of --file-prefix")
    p.add_argument("--once", action="store_true", help="print one scrape and exit")
    p.add_argument("--listen", default="127.0.0.1:9465",
                   help="address to serve /metrics on (default 127.0.0.1:9465)")
    args = p.parse_args()
    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        p.error(f"--listen {args.listen}: expected HOST:PORT, e.g. 127.0.0.1:9465")
    if args.once:
        try:
            sys.stdout.write(scrape(args))
        except (OSError, RuntimeError, ValueError, LookupError, TypeError) as e:
            print(f"ddpdk-exporter: {e}", file=sys.stderr)
            return 1
        return 0

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.answer(body_too=True)

        def do_HEAD(self):  # what a health check sends
            self.answer(body_too=False)

        def answer(self, body_too):
            # A query string (a scraper's `?name[]=...`) asks for the same page.
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404)
                return
            try:
                body = scrape(args).encode()
                code = 200
            except (OSError, RuntimeError, ValueError) as e:
                body = f"ddpdk-exporter: {e}\n".encode()
                code = 503
            except Exception as e:  # noqa: BLE001: an answer, never a dropped connection
                body = f"ddpdk-exporter: {type(e).__name__}: {e}\n".encode()
                code = 500
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body_too:
                self.wfile.write(body)

    class Server(http.server.ThreadingHTTPServer):
        # An IPv6 address ([::1]:9465) needs an IPv6 socket; the default is IPv4's.
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    try:
        server = Server((host.strip("[]"), int(port)), Handler)
    except OSError as e:
        print(f"ddpdk-exporter: --listen {args.listen}: {e.strerror or e}", file=sys.stderr)
        return 1
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
