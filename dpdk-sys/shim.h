#ifndef DDPDK_SHIM_H
#define DDPDK_SHIM_H
/* What bindgen cannot wrap: rte_errno is a per-lcore (thread-local) variable behind a macro. */
int ddpdk_rte_errno(void);
void ddpdk_set_rte_errno(int value);
#endif
