/* The DPDK API surface ddpdk uses. Keep it small: every static-inline function matched by the
 * allowlist in build.rs gets a C wrapper compiled into this crate. */
#include <rte_config.h>
#include <rte_common.h>
#include <rte_version.h>
#include <rte_eal.h>
#include <rte_alarm.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_launch.h>
#include <rte_cycles.h>
#include <rte_memory.h>
#include <rte_malloc.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_ethdev.h>
#include <rte_eth_ring.h>
#include <rte_flow.h>
#include <rte_dev.h>
#include <rte_bus_vdev.h>
#include <rte_pdump.h>
#include <rte_crypto.h>
#include <rte_cryptodev.h>
#include <rte_security.h>
#include <rte_ipsec.h>
#include <rte_telemetry.h>
#include "shim.h"
