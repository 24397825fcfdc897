/* Two RC QPs of one context joined to each other, for the C programs of these tests (the
 * Rust side puts this ahead of each program's source): the program opens the context and
 * sets `pd` and `gid` (its port's GID 1) before calling qp() and connect(), or their
 * qp_depth() and connect_with() when it needs deeper queues or remote access. */
#include <stdint.h>
#include <string.h>
#include <infiniband/verbs.h>

static struct ibv_pd *pd;
static union ibv_gid gid;

/* An RC QP on `cq` taking `wr` send and `wr` receive requests. */
static struct ibv_qp *qp_depth(struct ibv_cq *cq, uint32_t wr)
{
	struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = wr, .max_recv_wr = wr, .max_send_sge = 1, .max_recv_sge = 1 } };
	return ibv_create_qp(pd, &a);
}

static struct ibv_qp *qp(struct ibv_cq *cq)
{
	return qp_depth(cq, 4);
}

/* INIT (granting the peer `access`), RTR to `dest` and RTS, with `rd` READ/atomic
 * requests in flight each way. */
static int connect_with(struct ibv_qp *q, uint32_t dest, unsigned access, uint8_t rd)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access };
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return 1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = rd;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return 1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = rd;
	return ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int connect(struct ibv_qp *q, uint32_t dest)
{
	return connect_with(q, dest, 0, 0);
}
