#ifndef DDPDK_SHIM_H
#define DDPDK_SHIM_H
#include <stddef.h>
/* What bindgen cannot wrap: rte_errno is a per-lcore (thread-local) variable behind a macro. */
int ddpdk_rte_errno(void);
void ddpdk_set_rte_errno(int value);
/* The system's base page size (sysconf(_SC_PAGESIZE)): what memory that is not on huge pages
 * is mapped with. DPDK's own rte_mem_page_size() is internal API. */
size_t ddpdk_sys_page_size(void);
/* The calling thread's timer slack (prctl PR_SET_TIMERSLACK): how late the kernel may end its
 * timed sleeps, 50 us by default, which would dominate a data core's short idle sleeps.
 * 0 on success, -1 with errno otherwise. */
int ddpdk_set_timer_slack_ns(unsigned long ns);
/* The SCTP checksum (RFC 9260 §6.8, Appendix A: CRC32c, the checksum field taken as zero) of
 * a packet of len >= 12 bytes, one SSE 4.2 crc32 instruction per eight bytes in place; 0 for a
 * shorter one. On x86-64 it needs SSE 4.2 (DPDK's baseline there); elsewhere it goes a bit at
 * a time: correct, slow, and not called by ddpdk (which takes crc-fast there). */
#include <stdint.h>
uint32_t ddpdk_sctp_crc32c(const uint8_t *packet, uint32_t len);
#endif
