/* ibv_resize_cq as rxe answers it (rxe_cq_chk_attr, rxe_cq_resize_queue). Two RC QPs of
 * one context (connect() is rc_loopback.h's): `a` sends, `b` receives into the CQ `rcq`,
 * made with 4 entries.
 *
 * 1. 0, a negative count and more than the device's max_cqe are EINVAL.
 * 2. Three receives complete into rcq, unpolled: resizing to 2 is EINVAL once all three
 *    are there (the program cannot see them land without taking them, so it resizes to 2
 *    until it is refused: each success is a new ring, the completions staying in the old
 *    ones), then 3 is taken and cq->cqe reads 3.
 * 3. Grown to 64, rcq takes 40 more receives without overrunning: all 43 are polled in
 *    order (wr_id 0..42), the first three from the rings they landed in.
 * Prints "ok" or the first step that went wrong. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define FAIL(...) do { printf(__VA_ARGS__); printf("\n"); return 1; } while (0)
#define MORE 40

static struct ibv_qp *mkqp(struct ibv_cq *scq, struct ibv_cq *rcq)
{
	struct ibv_qp_init_attr a = { .send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1 } };
	return ibv_create_qp(pd, &a);
}

/* `n` SENDs from a into receives posted on b with wr_id from `first`; waits for the sends'
 * completions on scq (not for the receives'). */
static int exchange(struct ibv_qp *a, struct ibv_qp *b, struct ibv_cq *scq, struct ibv_mr *mr,
		    char *buf, int first, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge s = { (uintptr_t)buf, 16, mr->lkey };
		struct ibv_recv_wr w = { .wr_id = first + i, .sg_list = &s, .num_sge = 1 }, *bad;
		if (ibv_post_recv(b, &w, &bad))
			return 1;
	}
	for (int i = 0; i < n; i++) {
		struct ibv_sge s = { (uintptr_t)buf + 1024, 16, mr->lkey };
		struct ibv_send_wr w = { .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED }, *bad;
		if (ibv_post_send(a, &w, &bad))
			return 1;
	}
	for (int got = 0; got < n;) {
		struct ibv_wc wc;
		int r = ibv_poll_cq(scq, 1, &wc);
		if (r < 0 || (r == 1 && wc.status != IBV_WC_SUCCESS))
			return 1;
		got += r;
	}
	return 0;
}

int main(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	struct ibv_device_attr da;
	if (!ctx || ibv_query_gid(ctx, 1, 1, &gid) || ibv_query_device(ctx, &da))
		FAIL("no device");
	pd = ibv_alloc_pd(ctx);
	struct ibv_cq *scq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	char *buf = calloc(1, 4096);
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_qp *a = scq ? mkqp(scq, scq) : NULL, *b = rcq ? mkqp(scq, rcq) : NULL;
	if (!mr || !a || !b || connect(a, b->qp_num) || connect(b, a->qp_num))
		FAIL("setup failed");

	if (ibv_resize_cq(rcq, 0) != EINVAL || ibv_resize_cq(rcq, -1) != EINVAL ||
	    ibv_resize_cq(rcq, da.max_cqe + 1) != EINVAL)
		FAIL("step 1: 0, -1 or max_cqe + 1 (%d) was not EINVAL", da.max_cqe + 1);
	if (rcq->cqe != 4)
		FAIL("step 1: a refused resize changed cqe to %d", rcq->cqe);

	if (exchange(a, b, scq, mr, buf, 0, 3))
		FAIL("step 2: the three SENDs failed");
	int tries, r = 0;
	for (tries = 0; tries < 100000; tries++) {
		r = ibv_resize_cq(rcq, 2);
		if (r != 0)
			break;
	}
	if (r != EINVAL)
		FAIL("step 2: resizing to 2 with 3 completions waiting gave %d after %d tries", r, tries);
	if (ibv_resize_cq(rcq, 3) || rcq->cqe != 3)
		FAIL("step 2: resizing to 3 with 3 waiting failed (cqe %d)", rcq->cqe);

	if (ibv_resize_cq(rcq, 64) || rcq->cqe != 64)
		FAIL("step 3: growing to 64 failed");
	if (exchange(a, b, scq, mr, buf, 3, MORE))
		FAIL("step 3: the %d SENDs failed", MORE);
	for (int want = 0; want < 3 + MORE;) {
		struct ibv_wc wc[8];
		int n = ibv_poll_cq(rcq, 8, wc);
		if (n < 0)
			FAIL("step 3: ibv_poll_cq: %d", n);
		for (int i = 0; i < n; i++, want++)
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != (uint64_t)want ||
			    wc[i].opcode != IBV_WC_RECV)
				FAIL("step 3: completion %d: wr_id %llu status %s", want,
				     (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
	}
	struct ibv_wc extra;
	if (ibv_poll_cq(rcq, 1, &extra) != 0)
		FAIL("step 3: a completion beyond the 43");
	printf("ok\n");
	return 0;
}
