#!/usr/bin/env bash
# Host set-up for building, running and testing ddpdk on Debian 12. Idempotent: it installs
# only what is missing and reserves hugepages only when fewer are reserved than wanted.
#
#   deploy/setup.sh            install packages, reserve hugepages (as root)
#   HUGEPAGES=1024 deploy/setup.sh   reserve that many 2 MiB pages (default 512 = 1 GiB)
#   NO_HUGEPAGES=1 deploy/setup.sh   packages only
set -euo pipefail

# Build: DPDK headers/libraries and pkg-config (dpdk-sys), libclang (bindgen), a C compiler.
# Run/test: the dpdk package ships the PMDs (net_ring, net_memif, net_pcap ...) and dpdk-dev the
# tools (dpdk-testpmd for the benchmark baseline, dpdk-dumpcap, dpdk-telemetry.py).
# Test peers: libusrsctp-dev (the reference SCTP stack), iproute2 (network namespaces, veth),
# tshark (an independent dissector that checks our frames' CRC32c and chunks), python3-scapy
# (an independent ESP implementation, RFC 4303, that checks our IPsec packets both ways),
# prometheus (its promtool checks the exporter's output, deploy/prometheus/), iputils-ping (the
# kernel's ping, which the endpoint's ICMP Echo responder answers), systemd (its
# systemd-analyze checks the service units, deploy/systemd/).
PACKAGES=(libdpdk-dev dpdk dpdk-dev pkg-config libclang-dev clang gcc make libusrsctp-dev iproute2 procps tshark
  python3-scapy prometheus iputils-ping systemd)

say() { printf 'setup: %s\n' "$*"; }
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else SUDO="__none__"; fi
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$SUDO" = "__none__" ]; then
    say "missing packages: ${missing[*]}; run this script as root (or install them) and retry" >&2
    exit 1
  fi
  say "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  say "packages present"
fi

if ! command -v cargo >/dev/null 2>&1; then
  say "cargo not found: install a Rust toolchain (rustup) before building" >&2
  exit 1
fi

pkg-config --atleast-version=22.11 libdpdk || { say "libdpdk >= 22.11 not found by pkg-config" >&2; exit 1; }
say "DPDK $(pkg-config --modversion libdpdk)"

# Hugepages: wanted for real runs; every test and the embedded default also work with --no-huge.
if [ -z "${NO_HUGEPAGES:-}" ]; then
  want=${HUGEPAGES:-512}
  nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
  if [ -r "$nr" ]; then
    have=$(cat "$nr")
    if [ "$have" -lt "$want" ]; then
      if { [ "$SUDO" = "__none__" ] || ! echo "$want" | $SUDO tee "$nr" >/dev/null; } 2>/dev/null; then
        say "cannot reserve hugepages here (not root or not permitted); runs use --no-huge"
      fi
      have=$(cat "$nr")
    fi
    if [ "$have" -gt 0 ]; then
      if ! grep -qs ' /dev/hugepages hugetlbfs ' /proc/mounts; then
        if [ "$SUDO" = "__none__" ] || ! { $SUDO mkdir -p /dev/hugepages &&
            $SUDO mount -t hugetlbfs -o pagesize=2M nodev /dev/hugepages; } 2>/dev/null; then
          say "cannot mount hugetlbfs on /dev/hugepages; runs use --no-huge"
        fi
      fi
      say "hugepages: $have x 2 MiB reserved (wanted $want)"
    else
      say "no hugepages reserved; runs use --no-huge"
    fi
  else
    say "this kernel offers no 2 MiB hugepages; runs use --no-huge"
  fi
fi
