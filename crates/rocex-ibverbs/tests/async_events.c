/* Asynchronous events as rxe raises them, read the way event loops read them: async_fd is
 * made non-blocking and poll(2)ed, and ibv_get_async_event is called only when it is
 * readable. qp() and connect() are rc_loopback.h's; the receiving QP takes its requests
 * from an SRQ.
 *
 * 1. Nothing owed: async_fd is quiet and ibv_get_async_event says EAGAIN.
 * 2. An SRQ of 4 requests armed with limit 3 (a limit beyond its size is EINVAL): the first
 *    SEND leaves 3 (no event), the second 2, below the limit: IBV_EVENT_SRQ_LIMIT_REACHED
 *    naming the SRQ, once; the limit reads 0 afterwards and a third SEND raises nothing.
 * 3. A WRITE from the SRQ's QP to one that grants no remote access is NAKed
 *    (IBV_WC_REM_INV_REQ_ERR, as rxe's responder answers it) and moves both QPs to error:
 *    rxe raises no QP_FATAL for either, only IBV_EVENT_QP_LAST_WQE_REACHED for the QP of
 *    the SRQ (flush_recv_queue), once.
 * 4. Prints "armed" and waits in poll(2) for the test to kill rocexd: then
 *    IBV_EVENT_DEVICE_FATAL, once.
 * Prints "ok" at the end, or the first step that went wrong. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#define FAIL(...) do { printf(__VA_ARGS__); printf("\n"); return 1; } while (0)

static struct ibv_context *ctx;

static int readable(int ms)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* Nothing owed: quiet, and EAGAIN. */
static int quiet(void)
{
	struct ibv_async_event e;
	return !readable(0) && ibv_get_async_event(ctx, &e) == -1 && errno == EAGAIN;
}

/* Waits for `n` completions; 0 when all succeeded (the first status otherwise). */
static int complete(struct ibv_cq *cq, int n, enum ibv_wc_status *first)
{
	struct ibv_wc wc;
	int bad = 0;
	while (n > 0) {
		int r = ibv_poll_cq(cq, 1, &wc);
		if (r < 0)
			return -1;
		if (r == 1) {
			if (wc.status != IBV_WC_SUCCESS && !bad) {
				bad = 1;
				*first = wc.status;
			}
			n--;
		}
	}
	return bad;
}

int main(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	if (!ctx || ibv_query_gid(ctx, 1, 1, &gid))
		FAIL("no device");
	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
	if (!quiet())
		FAIL("step 1: an event with nothing owed");

	pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = pd ? ibv_create_srq(pd, &sa) : NULL;
	char *buf = calloc(1, 4096);
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE |
					    IBV_ACCESS_REMOTE_WRITE) : NULL;
	struct ibv_qp *a = cq ? qp(cq) : NULL;
	struct ibv_qp_init_attr ba = { .send_cq = cq, .recv_cq = cq, .srq = srq,
		.qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 4, .max_send_sge = 1 } };
	struct ibv_qp *b = srq ? ibv_create_qp(pd, &ba) : NULL;
	if (!mr || !a || !b || connect(a, b->qp_num) || connect(b, a->qp_num))
		FAIL("setup failed");

	struct ibv_srq_attr lim = { .srq_limit = sa.attr.max_wr + 1 };
	if (ibv_modify_srq(srq, &lim, IBV_SRQ_LIMIT) != EINVAL)
		FAIL("step 2: a limit beyond the SRQ's %u requests was taken", sa.attr.max_wr);
	lim.srq_limit = 3;
	if (ibv_modify_srq(srq, &lim, IBV_SRQ_LIMIT))
		FAIL("step 2: limit 3 refused");
	for (int i = 0; i < 4; i++) {
		struct ibv_sge s = { (uintptr_t)buf + 64 * i, 64, mr->lkey };
		struct ibv_recv_wr w = { .wr_id = i, .sg_list = &s, .num_sge = 1 }, *bad;
		if (ibv_post_srq_recv(srq, &w, &bad))
			FAIL("step 2: post_srq_recv %d failed", i);
	}
	for (int i = 0; i < 3; i++) {
		struct ibv_sge s = { (uintptr_t)buf + 2048, 16, mr->lkey };
		struct ibv_send_wr w = { .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED }, *bad;
		enum ibv_wc_status st;
		if (ibv_post_send(a, &w, &bad) || complete(cq, 2, &st))
			FAIL("step 2: SEND %d failed", i);
		if (i == 1) {
			struct ibv_async_event e;
			if (!readable(0))
				FAIL("step 2: async_fd quiet with 2 of 4 requests left, limit 3");
			if (ibv_get_async_event(ctx, &e))
				FAIL("step 2: ibv_get_async_event: %d", errno);
			if (e.event_type != IBV_EVENT_SRQ_LIMIT_REACHED || e.element.srq != srq)
				FAIL("step 2: event %d (%s) on %p, not SRQ_LIMIT_REACHED on the SRQ %p",
				     e.event_type, ibv_event_type_str(e.event_type),
				     (void *)e.element.srq, (void *)srq);
			ibv_ack_async_event(&e);
			if (ibv_query_srq(srq, &lim) || lim.srq_limit != 0)
				FAIL("step 2: the limit reads %u after its event, not 0", lim.srq_limit);
		}
		if (!quiet())
			FAIL("step 2: an event after SEND %d", i);
	}

	struct ibv_sge s = { (uintptr_t)buf + 2048, 16, mr->lkey };
	struct ibv_send_wr w = { .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr.rdma = { (uintptr_t)buf, mr->rkey } }, *bad;
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	if (ibv_post_send(b, &w, &bad) || complete(cq, 1, &st) != 1 || st != IBV_WC_REM_INV_REQ_ERR)
		FAIL("step 3: a WRITE without remote access completed with %s", ibv_wc_status_str(st));
	struct ibv_async_event qe;
	if (!readable(0) || ibv_get_async_event(ctx, &qe))
		FAIL("step 3: no event for the SRQ's QP in error");
	if (qe.event_type != IBV_EVENT_QP_LAST_WQE_REACHED || qe.element.qp != b)
		FAIL("step 3: event %d (%s), not QP_LAST_WQE_REACHED on the SRQ's QP",
		     qe.event_type, ibv_event_type_str(qe.event_type));
	ibv_ack_async_event(&qe);
	if (!quiet())
		FAIL("step 3: a second event after REM_INV_REQ_ERR");

	printf("armed\n");
	fflush(stdout);
	if (!readable(60000))
		FAIL("step 4: async_fd quiet 60 s after rocexd was killed");
	struct ibv_async_event e;
	if (ibv_get_async_event(ctx, &e) || e.event_type != IBV_EVENT_DEVICE_FATAL)
		FAIL("step 4: no IBV_EVENT_DEVICE_FATAL");
	ibv_ack_async_event(&e);
	if (!quiet())
		FAIL("step 4: DEVICE_FATAL reported twice");
	printf("ok\n");
	return 0;
}
