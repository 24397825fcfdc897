/* Bad input through the drop-in library, as an ordinary C program built against the
 * system's verbs.h sees it: each line is "check value", which tests/bad_input.rs compares
 * with what rdma-core's contract (and kernel rxe) answers. Two RC QPs of one device are
 * connected to each other. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_mr *mr;
static char *buf;
static union ibv_gid gid;

static struct ibv_qp *new_qp(void)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2 },
	};
	return ibv_create_qp(pd, &a);
}

static int to_rts(struct ibv_qp *qp, uint32_t dest, int global)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
	int r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (r)
		return r;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = global;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.port_num = 1;
	r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (r)
		return r;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* One signaled WRITE of `len` bytes at `off` in the MR with `lkey` to `rkey`; the status
 * of its completion, or -errno if posting failed, or -1000 if none came. */
static int write_to(uint32_t lkey, size_t off, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_qp *a = new_qp(), *b = new_qp();
	if (!a || !b || to_rts(a, b->qp_num, 1) || to_rts(b, a->qp_num, 1))
		return -2000;
	struct ibv_sge sge = { .addr = (uintptr_t)buf + off, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	int r = ibv_post_send(a, &wr, &bad);
	if (r)
		return -r;
	struct ibv_wc wc;
	for (long i = 0; i < 400000000L; i++) {
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n > 0 && wc.wr_id == 7) {
			ibv_destroy_qp(a);
			ibv_destroy_qp(b);
			return wc.status;
		}
	}
	return -1000;
}

static int write_status(uint32_t lkey, size_t off, uint32_t len, uint32_t rkey)
{
	return write_to(lkey, off, len, (uintptr_t)buf + 8192, rkey);
}

/* 1 when this process maps a memfd of rocex's MRs. */
static int maps_memfd(void)
{
	char line[512];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof line, f))
		found |= strstr(line, "memfd:rocex-mr") != NULL;
	if (f)
		fclose(f);
	return found;
}

/* Registrations that overlap: remote WRITEs through each must land in the program's own
 * bytes, and a forked child's writes must not reach the parent's. */
static void overlap(void)
{
	char *b2 = aligned_alloc(4096, 16384);
	memset(b2, 0, 16384);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_mr *a = ibv_reg_mr(pd, b2, 8192, acc);
	struct ibv_mr *b = ibv_reg_mr(pd, b2 + 4096, 8192, acc);
	struct ibv_mr *c = ibv_reg_mr(pd, b2 + 100, 100, acc);
	printf("overlap_reg %d\n", a && b && c);
	printf("maps_memfd %d\n", maps_memfd());
	memset(buf, 'A', 64);
	int ra = write_to(mr->lkey, 0, 64, (uintptr_t)b2 + 6000, a->rkey);
	memset(buf, 'B', 64);
	int rb = write_to(mr->lkey, 0, 64, (uintptr_t)b2 + 6100, b->rkey);
	memset(buf, 'C', 64);
	int rc = write_to(mr->lkey, 0, 64, (uintptr_t)b2 + 120, c->rkey);
	printf("overlap_writes %d %d %d\n", ra, rb, rc);
	printf("overlap_seen %d %d %d\n", b2[6000] == 'A' && b2[6063] == 'A',
	       b2[6100] == 'B' && b2[6163] == 'B', b2[120] == 'C' && b2[183] == 'C');
	pid_t pid = fork();
	if (pid == 0) {
		b2[0] = 'X';
		_exit(b2[0] == 'X' ? 0 : 1);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	printf("fork_private %d %d\n", WIFEXITED(st) && WEXITSTATUS(st) == 0, b2[0] == 0);
	printf("overlap_dereg %d %d %d\n", ibv_dereg_mr(c), ibv_dereg_mr(b), ibv_dereg_mr(a));
	printf("after_dereg %d\n", b2[6000] == 'A' && b2[120] == 'C');
}

/* Receives through an SRQ read with the extended CQ API (ibv_start_poll): each frees its
 * request's place in the SRQ, which then takes a new one, as with ibv_poll_cq. Twelve
 * SENDs one at a time through an SRQ of four; prints how many arrived and how many
 * reposts the SRQ took. */
static void srq_cq_ex(void)
{
	struct ibv_cq_init_attr_ex ca = { .cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &ca);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cqx ? ibv_cq_ex_to_cq(cqx) : NULL, .srq = srq,
		.qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 16, .max_send_sge = 1 },
	};
	struct ibv_qp *a = new_qp(), *b = srq ? ibv_create_qp(pd, &qa) : NULL;
	if (!a || !b || to_rts(a, b->qp_num, 1) || to_rts(b, a->qp_num, 1)) {
		printf("srq_cq_ex_setup failed\n");
		return;
	}
	struct ibv_sge rs = { .addr = (uintptr_t)buf + 4096, .length = 64, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .sg_list = &rs, .num_sge = 1 }, *rbad;
	for (int i = 0; i < 4; i++)
		ibv_post_srq_recv(srq, &rwr, &rbad);
	struct ibv_sge ss = { .addr = (uintptr_t)buf, .length = 16, .lkey = mr->lkey };
	struct ibv_send_wr swr = { .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED }, *sbad;
	struct ibv_poll_cq_attr pa = { 0 };
	struct ibv_wc wc;
	int received = 0, reposted = 0;
	for (int i = 0; i < 12 && !ibv_post_send(a, &swr, &sbad); i++) {
		long t = 0;
		while (t < 100000000L && ibv_start_poll(cqx, &pa) == ENOENT)
			t++;
		if (t == 100000000L)
			break;
		received += cqx->status == IBV_WC_SUCCESS && ibv_wc_read_opcode(cqx) == IBV_WC_RECV;
		ibv_end_poll(cqx);
		reposted += ibv_post_srq_recv(srq, &rwr, &rbad) == 0;
		for (t = 0; t < 100000000L && ibv_poll_cq(cq, 1, &wc) == 0; t++)
			;
	}
	printf("srq_cq_ex %d %d\n", received, reposted);
	ibv_destroy_qp(b);
	ibv_destroy_qp(a);
	ibv_destroy_srq(srq);
	ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
}

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		printf("devices 0\n");
		return 1;
	}
	ctx = ibv_open_device(list[0]);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	buf = aligned_alloc(4096, 16384);
	memset(buf, 0x5a, 16384);
	mr = ibv_reg_mr(pd, buf, 16384, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ);
	if (!ctx || !pd || !cq || !mr || ibv_query_gid(ctx, 1, 1, &gid)) {
		printf("setup failed %d\n", errno);
		return 1;
	}

	/* Unsupported verbs: NULL with errno EOPNOTSUPP, or the code. */
	/* (Each call is made before its printf: C leaves argument order unspecified.) */
	void *p;
	int r0;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	struct ibv_srq_attr srqa = { .max_wr = 64 };
	printf("create_srq %s\n", srq ? "ok" : "null");
	printf("resize_srq %d\n", ibv_modify_srq(srq, &srqa, IBV_SRQ_MAX_WR));
	struct ibv_sge ssge[2] = { { .addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey },
				   { .addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey } };
	struct ibv_recv_wr srwr = { .sg_list = ssge, .num_sge = 2 }, *srbad = NULL;
	r0 = ibv_post_srq_recv(srq, &srwr, &srbad);
	printf("post_srq_too_many_sges %d %d\n", r0, srbad == &srwr);
	srwr.num_sge = 1;
	for (int i = 0; i < 8; i++)
		r0 = ibv_post_srq_recv(srq, &srwr, &srbad);
	printf("post_srq_ninth %d %d\n", ibv_post_srq_recv(srq, &srwr, &srbad), r0);
	printf("destroy_srq %d\n", ibv_destroy_srq(srq));
	errno = 0;
	p = ibv_alloc_mw(pd, 3);
	printf("alloc_mw_type3 %s %d\n", p ? "ok" : "null", errno);
	struct ibv_cq_init_attr_ex cqa = { .cqe = 8, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP };
	errno = 0;
	p = ibv_create_cq_ex(ctx, &cqa);
	printf("create_cq_ex_timestamp %s %d\n", p ? "ok" : "null", errno);
	printf("attach_mcast %d\n", ibv_attach_mcast(NULL, &gid, 0));
	struct ibv_ah_attr aha = { .port_num = 1 };
	errno = 0;
	p = ibv_create_ah(pd, &aha);
	printf("create_ah_no_grh %s %d\n", p ? "ok" : "null", errno);

	/* Posting in the wrong state: rxe refuses a send before RTS and a receive in RESET. */
	struct ibv_qp *q = new_qp();
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr swr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND }, *sbad = NULL;
	struct ibv_recv_wr rwr = { .sg_list = &sge, .num_sge = 1 }, *rbad = NULL;
	int r = ibv_post_send(q, &swr, &sbad);
	printf("post_send_reset %d %d\n", r, sbad == &swr);
	r = ibv_post_recv(q, &rwr, &rbad);
	printf("post_recv_reset %d %d\n", r, rbad == &rwr);
	struct ibv_sge three[3] = { sge, sge, sge };
	swr.sg_list = three;
	swr.num_sge = 3;
	printf("modify_no_grh %d\n", to_rts(q, q->qp_num, 0));
	ibv_destroy_qp(q);
	q = new_qp();
	to_rts(q, 1, 1);
	printf("post_send_too_many_sges %d\n", ibv_post_send(q, &swr, &sbad));
	swr.opcode = IBV_WR_BIND_MW;
	swr.num_sge = 1;
	printf("post_send_bind_mw %d\n", ibv_post_send(q, &swr, &sbad));
	ibv_destroy_qp(q);

	/* Completion statuses. */
	printf("write_ok %d\n", write_status(mr->lkey, 0, 4096, mr->rkey));
	printf("write_bad_lkey %d\n", write_status(mr->lkey ^ 0x5a5a00, 0, 64, mr->rkey));
	printf("write_sge_out_of_mr %d\n", write_status(mr->lkey, 16000, 4096, mr->rkey));
	printf("write_bad_rkey %d\n", write_status(mr->lkey, 0, 64, mr->rkey ^ 0x5a5a00));
	overlap();
	srq_cq_ex();
	printf("dealloc_busy_pd %d\n", ibv_dealloc_pd(pd));
	printf("done 1\n");
	return 0;
}
