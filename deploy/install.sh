#!/usr/bin/env bash
# Installs ddpdk as a service on a bare-metal host (docs/deploy.md): the binary, the systemd
# units, the Prometheus exporter and dashboard, the Wireshark dissector and the docs. Idempotent;
# an existing /etc/ddpdk/*.env is never overwritten.
#
#   bash deploy/install.sh                 into / (as root), /usr/local by default
#   DESTDIR=/tmp/stage bash deploy/install.sh   into a staging tree (packages, tests)
#   PREFIX=/opt/ddpdk BIN=path/to/ddpdk ...     another prefix; a binary already built
#
# Then: cp /etc/ddpdk/example.env /etc/ddpdk/NAME.env (and NAME.cmds), edit them, check the
# host with `ddpdk preflight <the EAL options>`, and `systemctl enable --now ddpdk@NAME`.
set -euo pipefail
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
# A relative DESTDIR is the caller's, as BIN is: resolved before the cd below (it staged into
# the source tree).
if [ -n "$DESTDIR" ]; then
    DESTDIR=$(realpath -m "$DESTDIR")
fi
# A BIN given is the binary to install, resolved against the caller's directory before the
# cd below; it must exist (building something else in its place would install the wrong
# thing). Only without BIN is the release binary built when missing.
if [ -n "${BIN:-}" ]; then
    if [ ! -f "$BIN" ] || [ ! -x "$BIN" ]; then
        echo "install: BIN=$BIN: no such executable file" >&2
        exit 1
    fi
    BIN=$(realpath "$BIN")
    cd "$(dirname "$0")/.."
else
    cd "$(dirname "$0")/.."
    BIN=${CARGO_TARGET_DIR:-target}/release/ddpdk
    if [ ! -x "$BIN" ]; then
        echo "install: building $BIN"
        cargo build --release -q -p ddpdk-cli --bin ddpdk
    fi
fi
# The units name the prefix's paths; another prefix rewrites them as they are copied.
unit() {
    sed -e "s#/usr/local/#$PREFIX/#g" "$1" > "$2"
    chmod 0644 "$2"
}
install -d "$DESTDIR$PREFIX/bin" "$DESTDIR$PREFIX/lib/ddpdk" "$DESTDIR$PREFIX/share/doc/ddpdk" \
    "$DESTDIR$PREFIX/share/ddpdk" "$DESTDIR/etc/systemd/system" "$DESTDIR/etc/ddpdk"
install -m 0755 "$BIN" "$DESTDIR$PREFIX/bin/ddpdk"
install -m 0755 deploy/prometheus/ddpdk-exporter.py "$DESTDIR$PREFIX/lib/ddpdk/"
install -m 0644 deploy/prometheus/grafana-dashboard.json deploy/wireshark/ddp.lua \
    "$DESTDIR$PREFIX/share/ddpdk/"
install -m 0644 README.md docs/*.md "$DESTDIR$PREFIX/share/doc/ddpdk/"
for u in ddpdk@.service ddpdk-exporter@.service; do
    unit "deploy/systemd/$u" "$DESTDIR/etc/systemd/system/$u"
done
for f in example.env example.cmds; do
    [ -e "$DESTDIR/etc/ddpdk/$f" ] || install -m 0644 "deploy/systemd/$f" "$DESTDIR/etc/ddpdk/$f"
done
echo "installed ddpdk into ${DESTDIR:-/}: $PREFIX/bin/ddpdk, /etc/systemd/system/ddpdk@.service, /etc/ddpdk/example.env"
if [ -z "$DESTDIR" ] && [ -d /run/systemd/system ]; then
    systemctl daemon-reload
fi
