#!/bin/sh
# Builds an optimised libusrsctp.so.2 from Debian's own source package, for sctp-bench.
#
# Debian 12's libusrsctp2 (0.9.5.0-2) is a debug build: usrsctp's configure defaults to
# --enable-debug, which appends "-g -O0" (and defines SCTP_DEBUG) after dpkg's "-O2", so the
# library runs unoptimised. This compiles the same source with the same defines at -O2 into
# DIR (default /tmp/usrsctp-O2); nothing is installed. Then:
#
#   LD_LIBRARY_PATH=/tmp/usrsctp-O2 target/release/sctp-bench
#
# sctp-bench prints which libusrsctp it loaded. Needs gcc, dpkg-dev and network access to
# deb.debian.org (a private deb-src list; the system's apt configuration is not touched).
set -eu

DIR=${1:-/tmp/usrsctp-O2}
VERSION=0.9.5.0-2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

mkdir -p "$WORK/lists/partial" "$WORK/parts" "$DIR"
echo "deb-src http://deb.debian.org/debian bookworm main" >"$WORK/sources.list"
APT="-o Dir::Etc::SourceList=$WORK/sources.list -o Dir::Etc::SourceParts=$WORK/parts \
     -o APT::Sandbox::User=root \
     -o Dir::State::Lists=$WORK/lists"
# shellcheck disable=SC2086
apt-get $APT update >/dev/null
# shellcheck disable=SC2086
(cd "$WORK" && apt-get $APT source "libusrsctp=$VERSION" >/dev/null)

SRC=$(echo "$WORK"/libusrsctp-*/usrsctplib)
# What Debian's build uses (configure.ac's LIBCFLAGS, its Linux flags, the HAVE_* it detects,
# -DINET -DINET6 as usrsctp.pc says, SCTP_DEBUG as --enable-debug defines, Debian's
# hardening), with -O2 in place of -O0.
CFLAGS="-O2 -g -fPIC -std=c99 -pthread -D_GNU_SOURCE -Wno-address-of-packed-member \
  -Wno-deprecated-declarations -fstack-protector-strong -D_FORTIFY_SOURCE=2 \
  -DSCTP_PROCESS_LEVEL_LOCKS -DSCTP_SIMPLE_ALLOCATOR -D__Userspace__ -DSCTP_DEBUG \
  -DINET -DINET6 -DHAVE_STDATOMIC_H -DHAVE_SYS_QUEUE_H -DHAVE_LINUX_IF_ADDR_H \
  -DHAVE_LINUX_RTNETLINK_H -DHAVE_NETINET_IP_ICMP_H"
cd "$SRC"
for f in *.c netinet/*.c netinet6/*.c; do
    # shellcheck disable=SC2086
    gcc $CFLAGS -I. -c "$f" -o "$WORK/$(echo "$f" | tr / _).o"
done
gcc -shared -pthread -Wl,-soname,libusrsctp.so.2 -o "$DIR/libusrsctp.so.2" "$WORK"/*.o
echo "built $DIR/libusrsctp.so.2; run sctp-bench with LD_LIBRARY_PATH=$DIR"
