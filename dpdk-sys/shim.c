#include <rte_errno.h>
#include "shim.h"

int ddpdk_rte_errno(void) { return rte_errno; }
void ddpdk_set_rte_errno(int value) { rte_errno = value; }
