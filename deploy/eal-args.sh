#!/usr/bin/env bash
# Prints EAL arguments for running ddpdk on this host: hugepages when some are free and
# hugetlbfs is mounted, --no-huge otherwise. No PCI scan (the embedded default uses virtual
# devices only). Usage: deploy/eal-args.sh [LCORES] [MEMORY_MB] [FILE_PREFIX] [private]
# "private": the hugepage files are unlinked once mapped (--huge-unlink), so the pages go back
# to the system when the process exits, however it exits; no secondary process (dpdk-dumpcap,
# dpdk-proc-info) can attach to it then. Without it a primary's files outlive it (until the
# next DPDK primary on this host clears them).
lcores=${1:-0-1}
mem=${2:-512}
prefix=${3:-ddpdk}
unlink=
[ "${4:-}" = private ] && unlink=" --huge-unlink"
free=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo 2>/dev/null)
if [ "${free:-0}" -ge $(( mem / 2 )) ] && grep -qs ' hugetlbfs ' /proc/mounts; then
  echo "-l $lcores -m $mem --no-pci --file-prefix $prefix$unlink --log-level=*:warning"
else
  # The prefix names the runtime directory, where the telemetry socket is, even without
  # hugepages.
  echo "-l $lcores -m $mem --no-huge --no-pci --no-shconf --file-prefix $prefix --log-level=*:warning"
fi
