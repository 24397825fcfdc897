/* Memory windows through the drop-in libibverbs: two RC QPs of one context, `a` writing
 * into memory `b` exposes through a window over part of an MR.
 *
 * Type 2: a BIND_MW request with ibv_inc_rkey's key completes as IBV_WC_BIND_MW; a
 * WRITE through that key lands in the window; LOCAL_INV (IBV_WC_LOCAL_INV) frees it and
 * a bind under the next key byte reaches it again; a SEND_WITH_INV from the peer names
 * that key in the receive completion (IBV_WC_WITH_INV) and invalidates it, after which a
 * WRITE through it fails with IBV_WC_REM_ACCESS_ERR.
 * Type 1, on two new QPs: ibv_bind_mw gives mw->rkey the next key byte; a WRITE through
 * it lands; a bind to another range while bound is taken, and a WRITE at the old range
 * then fails with IBV_WC_REM_ACCESS_ERR.
 * The work-request API, on two more QPs: ibv_wr_bind_mw binds a type-2 window (reached by
 * a WRITE) and ibv_wr_local_inv frees it (then IBV_WC_REM_ACCESS_ERR).
 * LOCAL_INV naming a type-1 window completes with IBV_WC_LOC_QP_OP_ERR, and a peer's
 * SEND_WITH_INV naming it with IBV_WC_REM_INV_REQ_ERR on the receive, as on rxe.
 * A bind's and a LOCAL_INV's completions on a CQ with a channel raise its event, armed
 * before or after.
 * Also: the device announces windows (IBV_DEVICE_MEM_WINDOW, _TYPE_2B, max_mw), type 3 is EINVAL, ibv_bind_mw on a type-2 window is EINVAL (verbs.h), and both
 * windows are freed at the end. Prints "ok" or the first step that went wrong. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define FAIL(...) do { printf(__VA_ARGS__); printf("\n"); return 1; } while (0)

static struct ibv_cq *cq;
static char *buf;
static struct ibv_mr *mr;

/* rc_loopback.h's QPs, eight requests deep, the peer granted WRITE and READ. */
static struct ibv_qp *mw_qp(void)
{
	return qp_depth(cq, 8);
}

static int connect_qp(struct ibv_qp *q, uint32_t dest)
{
	return connect_with(q, dest, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 1);
}

/* The next completion. */
static struct ibv_wc next(void)
{
	struct ibv_wc wc;
	while (ibv_poll_cq(cq, 1, &wc) != 1)
		;
	return wc;
}

/* A WRITE of `len` bytes from buf + 3072 to `addr` through `rkey`: its status. */
static enum ibv_wc_status write_through(struct ibv_qp *a, uint64_t addr, uint32_t rkey, int len)
{
	struct ibv_sge s = { (uintptr_t)buf + 3072, len, mr->lkey };
	struct ibv_send_wr w = { .wr_id = 7, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED, .wr.rdma = { addr, rkey } }, *bad;
	if (ibv_post_send(a, &w, &bad))
		return IBV_WC_GENERAL_ERR;
	return next().status;
}

/* A type-2 bind of `mw` under `rkey` to [addr, addr + len) through `b`: the completion. */
static struct ibv_wc bind2(struct ibv_qp *b, struct ibv_mw *mw, uint32_t rkey, uint64_t addr, int len)
{
	struct ibv_send_wr w = { .wr_id = 2, .opcode = IBV_WR_BIND_MW,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	w.bind_mw.mw = mw;
	w.bind_mw.rkey = rkey;
	w.bind_mw.bind_info.mr = mr;
	w.bind_mw.bind_info.addr = addr;
	w.bind_mw.bind_info.length = len;
	w.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (ibv_post_send(b, &w, &bad)) {
		struct ibv_wc none = { .status = IBV_WC_GENERAL_ERR };
		return none;
	}
	return next();
}

int main(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	if (!ctx || ibv_query_gid(ctx, 1, 1, &gid))
		FAIL("no device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	buf = calloc(1, 4096);
	mr = pd ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			     IBV_ACCESS_MW_BIND) : NULL;
	struct ibv_qp *a = cq ? mw_qp() : NULL, *b = cq ? mw_qp() : NULL;
	if (!mr || !a || !b || connect_qp(a, b->qp_num) || connect_qp(b, a->qp_num))
		FAIL("setup failed");
	uint64_t base = (uintptr_t)buf;
	struct ibv_device_attr da;
	if (ibv_query_device(ctx, &da) || !(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) ||
	    !(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) || da.max_mw <= 0)
		FAIL("the device does not announce memory windows");

	if (ibv_alloc_mw(pd, 3) || errno != EINVAL)
		FAIL("type 3: not EINVAL");
	struct ibv_mw *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	if (!mw2 || mw2->type != IBV_MW_TYPE_2 || mw2->pd != pd)
		FAIL("type 2: ibv_alloc_mw failed (errno %d)", errno);
	struct ibv_mw_bind mb = { .wr_id = 1, .send_flags = IBV_SEND_SIGNALED,
				  .bind_info = { mr, base + 1024, 256, IBV_ACCESS_REMOTE_WRITE } };
	if (ibv_bind_mw(b, mw2, &mb) != EINVAL)
		FAIL("type 2: ibv_bind_mw was not EINVAL");

	uint32_t key = ibv_inc_rkey(mw2->rkey);
	struct ibv_wc wc = bind2(b, mw2, key, base + 1024, 256);
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_BIND_MW || wc.wr_id != 2)
		FAIL("type 2: bind completed with %s, opcode %d", ibv_wc_status_str(wc.status), wc.opcode);
	memcpy(buf + 3072, "window write ok!", 16);
	if (write_through(a, base + 1024 + 16, key, 16) != IBV_WC_SUCCESS ||
	    memcmp(buf + 1024 + 16, "window write ok!", 16))
		FAIL("type 2: a WRITE through the window did not land");

	struct ibv_send_wr inv = { .wr_id = 3, .opcode = IBV_WR_LOCAL_INV,
				   .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = key }, *bad;
	if (ibv_post_send(b, &inv, &bad))
		FAIL("type 2: LOCAL_INV not posted");
	wc = next();
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_LOCAL_INV || wc.wr_id != 3)
		FAIL("type 2: LOCAL_INV completed with %s", ibv_wc_status_str(wc.status));
	key = ibv_inc_rkey(key);
	wc = bind2(b, mw2, key, base + 1024, 256);
	memcpy(buf + 3072, "bound once more!", 16);
	if (wc.status != IBV_WC_SUCCESS || write_through(a, base + 1024 + 32, key, 16) != IBV_WC_SUCCESS ||
	    memcmp(buf + 1024 + 32, "bound once more!", 16))
		FAIL("type 2: the window bound again after LOCAL_INV was not reachable");

	struct ibv_sge rs = { base + 512, 64, mr->lkey }, ss = { base + 3072, 16, mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 4, .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct ibv_send_wr sw = { .wr_id = 5, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_INV,
				  .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = key };
	if (ibv_post_recv(b, &rw, &rbad) || ibv_post_send(a, &sw, &bad))
		FAIL("type 2: SEND_WITH_INV not posted");
	int seen = 0;
	for (int i = 0; i < 2; i++) {
		wc = next();
		if (wc.status != IBV_WC_SUCCESS)
			FAIL("type 2: SEND_WITH_INV: %s", ibv_wc_status_str(wc.status));
		if (wc.wr_id == 4 && (wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == key)
			seen = 1;
	}
	if (!seen)
		FAIL("type 2: the receive did not name the invalidated rkey");
	if (write_through(a, base + 1024, key, 16) != IBV_WC_REM_ACCESS_ERR)
		FAIL("type 2: a WRITE through the invalidated window was not REM_ACCESS_ERR");

	struct ibv_qp *a1 = mw_qp(), *b1 = mw_qp();
	if (!a1 || !b1 || connect_qp(a1, b1->qp_num) || connect_qp(b1, a1->qp_num))
		FAIL("type 1: setup failed");
	/* a's and b's flushed work (none posted) leaves nothing in the CQ. */
	struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	if (!mw1 || mw1->type != IBV_MW_TYPE_1)
		FAIL("type 1: ibv_alloc_mw failed (errno %d)", errno);
	uint32_t before = mw1->rkey;
	mb.bind_info.addr = base + 2048;
	mb.bind_info.length = 128;
	if (ibv_bind_mw(b1, mw1, &mb))
		FAIL("type 1: ibv_bind_mw failed");
	wc = next();
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_BIND_MW || wc.wr_id != 1 ||
	    mw1->rkey != ibv_inc_rkey(before))
		FAIL("type 1: bind completed with %s, rkey %#x after %#x",
		     ibv_wc_status_str(wc.status), mw1->rkey, before);
	memcpy(buf + 3072, "type one window!", 16);
	if (write_through(a1, base + 2048, mw1->rkey, 16) != IBV_WC_SUCCESS ||
	    memcmp(buf + 2048, "type one window!", 16))
		FAIL("type 1: a WRITE through the window did not land");
	mb.bind_info.addr = base + 2560;
	mb.bind_info.length = 64;
	if (ibv_bind_mw(b1, mw1, &mb) || next().status != IBV_WC_SUCCESS)
		FAIL("type 1: binding again while bound failed");
	if (write_through(a1, base + 2048, mw1->rkey, 16) != IBV_WC_REM_ACCESS_ERR)
		FAIL("type 1: a WRITE at the range the window left was not REM_ACCESS_ERR");

	/* The work-request API: ibv_wr_bind_mw and ibv_wr_local_inv on two more QPs. */
	struct ibv_qp *a3 = mw_qp(), *b3 = mw_qp();
	if (!a3 || !b3 || connect_qp(a3, b3->qp_num) || connect_qp(b3, a3->qp_num))
		FAIL("wr API: setup failed");
	struct ibv_mw *mw3 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(b3);
	if (!mw3 || !x)
		FAIL("wr API: no window or no ibv_qp_ex");
	uint32_t key3 = ibv_inc_rkey(mw3->rkey);
	struct ibv_mw_bind_info info3 = { mr, base + 3584, 64, IBV_ACCESS_REMOTE_WRITE };
	ibv_wr_start(x);
	x->wr_id = 9;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(x, mw3, key3, &info3);
	if (ibv_wr_complete(x))
		FAIL("wr API: ibv_wr_complete of a bind failed");
	wc = next();
	memcpy(buf + 3072, "work request api", 16);
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_BIND_MW || wc.wr_id != 9 ||
	    write_through(a3, base + 3584, key3, 16) != IBV_WC_SUCCESS ||
	    memcmp(buf + 3584, "work request api", 16))
		FAIL("wr API: the window bound by ibv_wr_bind_mw was not reachable");
	ibv_wr_start(x);
	x->wr_id = 10;
	ibv_wr_local_inv(x, key3);
	if (ibv_wr_complete(x))
		FAIL("wr API: ibv_wr_complete of a LOCAL_INV failed");
	wc = next();
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_LOCAL_INV || wc.wr_id != 10)
		FAIL("wr API: LOCAL_INV completed with %s", ibv_wc_status_str(wc.status));
	if (write_through(a3, base + 3584, key3, 16) != IBV_WC_REM_ACCESS_ERR)
		FAIL("wr API: a WRITE through the invalidated window was not REM_ACCESS_ERR");

	/* LOCAL_INV may not name a type-1 window (rxe_invalidate_mw): IBV_WC_LOC_QP_OP_ERR. */
	struct ibv_qp *a4 = mw_qp(), *b4 = mw_qp();
	if (!a4 || !b4 || connect_qp(a4, b4->qp_num) || connect_qp(b4, a4->qp_num))
		FAIL("type 1 LOCAL_INV: setup failed");
	inv.wr_id = 11;
	inv.invalidate_rkey = mw1->rkey;
	if (ibv_post_send(b4, &inv, &bad))
		FAIL("type 1 LOCAL_INV: not posted");
	wc = next();
	if (wc.status != IBV_WC_LOC_QP_OP_ERR || wc.wr_id != 11)
		FAIL("type 1 LOCAL_INV: completed with %s", ibv_wc_status_str(wc.status));

	/* A peer's SEND_WITH_INV naming a type-1 window: the receive completes with
	 * IBV_WC_REM_INV_REQ_ERR (rxe's class J error) and the window stays bound. */
	struct ibv_qp *a6 = mw_qp(), *b6 = mw_qp();
	if (!a6 || !b6 || connect_qp(a6, b6->qp_num) || connect_qp(b6, a6->qp_num))
		FAIL("type 1 SEND_WITH_INV: setup failed");
	rw.wr_id = 14;
	sw.wr_id = 15;
	sw.invalidate_rkey = mw1->rkey;
	if (ibv_post_recv(b6, &rw, &rbad) || ibv_post_send(a6, &sw, &bad))
		FAIL("type 1 SEND_WITH_INV: not posted");
	int refused = 0;
	for (int i = 0; i < 2; i++) {
		wc = next();
		if (wc.wr_id == 14 && wc.status == IBV_WC_REM_INV_REQ_ERR)
			refused = 1;
	}
	if (!refused)
		FAIL("type 1 SEND_WITH_INV: the receive did not complete with REM_INV_REQ_ERR");

	/* Events: a bind's completion on an armed CQ with a channel is owed its event, and so
	 * is a LOCAL_INV's that came before the CQ was armed. */
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *ecq = ch ? ibv_create_cq(ctx, 8, NULL, ch, 0) : NULL;
	struct ibv_qp_init_attr ea = { .send_cq = ecq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *a5 = mw_qp(), *b5 = ecq ? ibv_create_qp(pd, &ea) : NULL;
	if (!a5 || !b5 || connect_qp(a5, b5->qp_num) || connect_qp(b5, a5->qp_num))
		FAIL("events: setup failed");
	struct ibv_mw *mw5 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	struct ibv_cq *evcq;
	void *evctx;
	struct ibv_send_wr bw = { .wr_id = 12, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED };
	bw.bind_mw.mw = mw5;
	bw.bind_mw.rkey = ibv_inc_rkey(mw5->rkey);
	bw.bind_mw.bind_info = info3;
	if (!mw5 || ibv_req_notify_cq(ecq, 0) || ibv_post_send(b5, &bw, &bad))
		FAIL("events: bind not posted");
	if (ibv_get_cq_event(ch, &evcq, &evctx) || evcq != ecq)
		FAIL("events: no event for the bind's completion");
	ibv_ack_cq_events(ecq, 1);
	if (ibv_poll_cq(ecq, 1, &wc) != 1 || wc.wr_id != 12 || wc.opcode != IBV_WC_BIND_MW)
		FAIL("events: the bind's completion is not in its CQ");
	inv.wr_id = 13;
	inv.invalidate_rkey = bw.bind_mw.rkey;
	if (ibv_post_send(b5, &inv, &bad) || ibv_req_notify_cq(ecq, 0))
		FAIL("events: LOCAL_INV not posted");
	if (ibv_get_cq_event(ch, &evcq, &evctx) || evcq != ecq)
		FAIL("events: no event for a completion waiting when the CQ was armed");
	ibv_ack_cq_events(ecq, 1);
	if (ibv_poll_cq(ecq, 1, &wc) != 1 || wc.wr_id != 13 || wc.status != IBV_WC_SUCCESS)
		FAIL("events: the LOCAL_INV's completion is not in its CQ");

	if (ibv_dealloc_mw(mw1) || ibv_dealloc_mw(mw2) || ibv_dealloc_mw(mw3) || ibv_dealloc_mw(mw5))
		FAIL("ibv_dealloc_mw failed");
	printf("ok\n");
	return 0;
}
