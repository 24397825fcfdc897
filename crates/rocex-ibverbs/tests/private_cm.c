/* The ROCEX_PRIVATE_1 entry points librdmacm builds on: rocexd's CM driven through the
 * control connection that owns the QP. Device A (argv[1]) listens, device B (argv[2])
 * connects an RC QP to it; A accepts with its own QP and private data for the REP, which
 * B's established event carries; a SEND crosses; both disconnect.
 * Prints one line per step: "step value". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>

struct rocex_cm_event {
	uint32_t kind, id, family;
	uint8_t addr[16];
	uint16_t port, reason;
	uint32_t private_data_len;
	uint8_t private_data[196];
	uint16_t ps, peer_port;
	uint32_t qkey, remote_qpn, sq_psn, rq_psn;
	uint8_t path_mtu, max_rd_atomic, max_dest_rd_atomic, retry_cnt, rnr_retry, timeout,
		traffic_class;
};
int rocex_context_addr(struct ibv_context *, uint8_t (*)[16]);
int rocex_cm_listen(struct ibv_context *, uint16_t, uint16_t);
int rocex_cm_connect(struct ibv_qp *, uint32_t, const uint8_t (*)[16], uint16_t, uint16_t, uint8_t,
		     const uint8_t *, size_t, uint32_t *);
/* rdma_cm's TCP port space (RDMA_PS_TCP). */
#define PS_TCP 0x0106
int rocex_cm_accept(struct ibv_qp *, uint32_t, const uint8_t *, size_t);
int rocex_cm_disconnect(struct ibv_context *, uint32_t);
int rocex_cm_poll(struct ibv_context *, struct rocex_cm_event *);

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
};

static struct ibv_context *open_at(const char *sock)
{
	int n;
	setenv("ROCEX_SOCKET", sock, 1);
	struct ibv_device **l = ibv_get_device_list(&n);
	/* As librdmacm opens it: a direct context when rocexd grants a slot (its QPs are this
	 * process's, which the CM calls move), else the daemon path. */
	return l && n == 1 ? ibv_open_device(l[0]) : NULL;
}

static int setup(struct end *e, const char *sock)
{
	e->ctx = open_at(sock);
	if (!e->ctx)
		return 1;
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	e->buf = calloc(1, 4096);
	e->mr = ibv_reg_mr(e->pd, e->buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp_init_attr a = { .send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	e->qp = ibv_create_qp(e->pd, &a);
	struct ibv_qp_attr q = { .qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE };
	return !e->pd || !e->cq || !e->mr || !e->qp ||
	       ibv_modify_qp(e->qp, &q, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					    IBV_QP_ACCESS_FLAGS);
}

/* The next event of `ctx` (kind), waiting up to ~10 s. */
static int next_event(struct ibv_context *ctx, struct rocex_cm_event *ev)
{
	for (int i = 0; i < 100000; i++) {
		int r = rocex_cm_poll(ctx, ev);
		if (r != 0)
			return r < 0 ? r : (int)ev->kind;
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct end a, b;
	struct rocex_cm_event ev;
	uint8_t addr[16];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 3 || setup(&a, argv[1]) || setup(&b, argv[2]))
		return printf("setup failed\n"), 1;
	int fam = rocex_context_addr(a.ctx, &addr);
	printf("addr_family %d\n", fam == AF_INET);
	printf("listen %d\n", rocex_cm_listen(a.ctx, PS_TCP, 7471));

	struct ibv_sge rs = { (uintptr_t)a.buf, 64, a.mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = &rs, .num_sge = 1 }, *rbad;
	printf("post_recv %d\n", ibv_post_recv(a.qp, &rw, &rbad));

	uint32_t id = 0;
	const uint8_t pdata[] = "hello";
	printf("connect %d\n", rocex_cm_connect(b.qp, fam, &addr, 7471, 0, 0, pdata, sizeof pdata, &id));
	int k = next_event(a.ctx, &ev);
	printf("request %d %d %d\n", k, ev.port, memcmp(ev.private_data, pdata, sizeof pdata) == 0);
	const uint8_t rep[] = "welcome";
	printf("accept %d\n", rocex_cm_accept(a.qp, ev.id, rep, sizeof rep));
	uint32_t aid = ev.id;
	k = next_event(b.ctx, &ev);
	printf("established_b %d %u %d\n", k, ev.private_data_len,
	       memcmp(ev.private_data, rep, sizeof rep) == 0);
	printf("established_a %d\n", next_event(a.ctx, &ev));

	strcpy(b.buf, "over rocex cm");
	struct ibv_sge ss = { (uintptr_t)b.buf, 64, b.mr->lkey };
	struct ibv_send_wr sw = { .wr_id = 2, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *sbad;
	printf("post_send %d\n", ibv_post_send(b.qp, &sw, &sbad));
	struct ibv_wc wc;
	int got = 0;
	for (long i = 0; i < 1000000000L && !got; i++)
		got = ibv_poll_cq(a.cq, 1, &wc);
	printf("received %d %d %d\n", got, wc.status, strcmp(a.buf, "over rocex cm") == 0);

	printf("disconnect %d\n", rocex_cm_disconnect(b.ctx, id));
	printf("disconnected_a %d %d\n", next_event(a.ctx, &ev), ev.id == aid);
	printf("disconnected_b %d\n", next_event(b.ctx, &ev));
	return 0;
}
