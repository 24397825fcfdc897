#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
int main(void) { struct ibv_device **l = ibv_get_device_list(NULL); (void)rdma_create_event_channel; printf("%p\n", (void*)l); return 0; }
