#include <unistd.h>
#include <sys/prctl.h>
#include <rte_errno.h>
#include "shim.h"

int ddpdk_rte_errno(void) { return rte_errno; }
void ddpdk_set_rte_errno(int value) { rte_errno = value; }

size_t ddpdk_sys_page_size(void)
{
	long p = sysconf(_SC_PAGESIZE);
	/* sysconf cannot fail for _SC_PAGESIZE on Linux; 4 KiB is the smallest page anywhere. */
	return p > 0 ? (size_t)p : 4096;
}

int ddpdk_set_timer_slack_ns(unsigned long ns)
{
	return prctl(PR_SET_TIMERSLACK, ns, 0, 0, 0);
}

#if defined(__x86_64__)
#include <string.h>
#include <nmmintrin.h>

/* SSE 4.2 by attribute, whatever -march the build passes: on x86-64 ddpdk always calls this
 * for small packets, and a silent fall back to the bit-at-a-time loop would cost ~3000 steps a
 * packet. DPDK's x86-64 baseline has SSE 4.2; its EAL refuses a CPU without. */
__attribute__((target("sse4.2")))
uint32_t ddpdk_sctp_crc32c(const uint8_t *packet, uint32_t len)
{
	uint64_t word = 0;
	uint64_t crc = 0xffffffffu;
	if (len < 12)
		return 0;
	/* Ports and verification tag, then the checksum field as four zero bytes. */
	memcpy(&word, packet, 8);
	crc = _mm_crc32_u64(crc, word);
	crc = _mm_crc32_u32((uint32_t)crc, 0);
	packet += 12;
	len -= 12;
	for (; len >= 8; len -= 8, packet += 8) {
		memcpy(&word, packet, 8);
		crc = _mm_crc32_u64(crc, word);
	}
	if (len & 4) {
		uint32_t v;
		memcpy(&v, packet, 4);
		crc = _mm_crc32_u32((uint32_t)crc, v);
		packet += 4;
	}
	if (len & 2) {
		uint16_t v;
		memcpy(&v, packet, 2);
		crc = _mm_crc32_u16((uint32_t)crc, v);
		packet += 2;
	}
	if (len & 1)
		crc = _mm_crc32_u8((uint32_t)crc, *packet);
	return ~(uint32_t)crc;
}
#else
uint32_t ddpdk_sctp_crc32c(const uint8_t *packet, uint32_t len)
{
	uint32_t crc = 0xffffffffu;
	if (len < 12)
		return 0;
	for (uint32_t i = 0; i < len; i++) {
		crc ^= (i >= 8 && i < 12) ? 0 : packet[i];
		for (int b = 0; b < 8; b++)
			crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
	}
	return ~crc;
}
#endif
