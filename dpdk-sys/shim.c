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
