/*
 * rxe-probe: one RC/UC verb at a time against a RoCE v2 peer, for the rxe lab.
 *
 *   rxe-probe server [-d DEV] [-g GIDX] [-p PORT]
 *   rxe-probe client PEER [-d DEV] [-g GIDX] [-p PORT] [--ops LIST] [--size N]
 *             [--iters N] [--mtu N] [--psn N] [--timeout N] [--retry N]
 *             [--rnr-retry N] [--min-rnr N] [--rnr-delay MS] [--uc]
 *             [--bad-rkey] [--flush-type global|persistent] [--expect STATUS]
 *             [--mr-flush none|global] [--qp-flush none|both] [--inv-mr]
 *
 * The client (requester) drives: it sends a PLAN line, both sides exchange a
 * QP line over TCP, the server (responder) answers READY once its QP is in
 * RTR/RTS, the client runs the operations, reports DONE, and the server
 * checks its memory and completions and answers RESULT. Protocol: see
 * docs/rxe-lab.md ("probe out-of-band protocol").
 *
 * Every completion is printed as a CQE line. Exit status 0 when the run
 * matched expectations (for --expect: the expected error status was seen).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define PROTO_VERSION 1
#define LINE_MAX_LEN 512
#define ATOMIC_AREA 64
#define ATOMIC_INIT 0x1000ULL
#define ATOMIC_WRITE_VALUE 0xa5a5a5a55a5a5a5aULL
#define IMM_BASE 0x12345600u
#define MW_SET_VALUE 0x5e75e75e70000000ULL
#define AW_SET_VALUE 0x0a70a70a70000000ULL

enum op {
	OP_SEND, OP_SEND_IMM, OP_SEND_INV, OP_WRITE, OP_WRITE_IMM, OP_READ,
	OP_CAS, OP_FAA, OP_ATOMIC_WRITE, OP_FLUSH,
	/* Through the server's type-2 window: WRITE, READ, an 8-byte WRITE of the atomic word. */
	OP_MW_WRITE, OP_MW_READ, OP_MW_SET,
	/* ATOMIC_WRITE of the atomic word; FLUSH of the whole MR (selectivity MR, length 0). */
	OP_AW_SET, OP_FLUSH_MR, OP_COUNT
};
static const char *op_names[OP_COUNT] = {
	"send", "send_imm", "send_inv", "write", "write_imm", "read",
	"cas", "faa", "atomic_write", "flush", "mw_write", "mw_read", "mw_set", "aw_set", "flush_mr"
};

struct opts {
	const char *dev, *peer;
	int gidx, port;
	int ops[32], nops;
	size_t size;
	int iters, mtu;
	int psn; /* -1: random */
	int timeout, retry, rnr_retry, min_rnr, rnr_delay;
	int uc, bad_rkey, flush_persistent;
	int mr_flush; /* server MR's FLUSH access: 0 none, 1 global (default) */
	int qp_flush; /* server QP's FLUSH access flags: 0 none, 1 global and persistent (default) */
	int inv_mr;   /* send_inv names the server MR's rkey instead of its window's */
	int expect; /* expected error status, -1 none */
	int expect_alt; /* --expect A,B: status B is accepted too (a NAK lost under loss), -1 none */
	int wait_s;
};

struct peer_info {
	uint32_t qpn, psn, rkey;
	union ibv_gid gid;
	uint64_t vaddr;
	uint64_t len;
};

struct ctx {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	uint8_t *buf;
	size_t buflen;
	const char *role;
	int cq_armed;
};

static const char *role = "probe";

static void msg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("[%s] ", role);
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
}

static void fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("[%s] FATAL: ", role);
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
	exit(2);
}

/* Buffer layout (both sides, size S):
 *   [0, S)        WRITE target (server) / SEND source (client)
 *   [S, 2S)       READ source (server) / READ destination (client)
 *   [2S, 2S+64)   atomic area: word 0 for CAS/FAA, word 1 for ATOMIC_WRITE
 *   [2S+64, ...)  receive buffers, S bytes each (server)
 */
static uint8_t pat_client(size_t i) { return (uint8_t)(i * 13 + 0x22); }
static uint8_t pat_server(size_t i) { return (uint8_t)(i * 7 + 0x11); }

/* ---- text lines over TCP ---- */
static int tcp_fd = -1;

static void send_line(const char *fmt, ...)
{
	char line[LINE_MAX_LEN];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	line[n++] = '\n';
	for (int off = 0; off < n;) {
		ssize_t w = write(tcp_fd, line + off, n - off);
		if (w <= 0)
			fatal("oob write: %s", strerror(errno));
		off += w;
	}
}

static void recv_line(char *line, size_t cap)
{
	size_t n = 0;
	while (n + 1 < cap) {
		char c;
		ssize_t r = read(tcp_fd, &c, 1);
		if (r == 0)
			fatal("oob: peer closed the connection");
		if (r < 0)
			fatal("oob read: %s", errno == EAGAIN ? "timeout" : strerror(errno));
		if (c == '\n')
			break;
		line[n++] = c;
	}
	line[n] = 0;
}

static void set_rcvtimeo(int fd, int secs)
{
	struct timeval tv = { .tv_sec = secs };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static int tcp_connect(const char *host, int port, int wait_s)
{
	char ports[16];
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *a;
	snprintf(ports, sizeof(ports), "%d", port);
	time_t end = time(NULL) + wait_s;
	for (;;) {
		if (getaddrinfo(host, ports, &hints, &res) == 0) {
			for (a = res; a; a = a->ai_next) {
				int fd = socket(a->ai_family, a->ai_socktype, 0);
				if (fd < 0)
					continue;
				if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
					freeaddrinfo(res);
					return fd;
				}
				close(fd);
			}
			freeaddrinfo(res);
		}
		if (time(NULL) >= end)
			fatal("cannot connect to %s:%d", host, port);
		usleep(300000);
	}
}

static int tcp_accept(int port)
{
	int one = 1, zero = 0;
	int ls = socket(AF_INET6, SOCK_STREAM, 0);
	if (ls < 0)
		fatal("socket: %s", strerror(errno));
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_port = htons(port),
				   .sin6_addr = IN6ADDR_ANY_INIT };
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 1))
		fatal("listen on %d: %s", port, strerror(errno));
	msg("listening on tcp port %d", port);
	int fd = accept(ls, NULL, NULL);
	if (fd < 0)
		fatal("accept: %s", strerror(errno));
	close(ls);
	return fd;
}

/* ---- verbs ---- */
static const char *wc_opcode_str(enum ibv_wc_opcode o)
{
	switch ((int)o) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "RDMA_READ";
	case IBV_WC_COMP_SWAP: return "COMP_SWAP";
	case IBV_WC_FETCH_ADD: return "FETCH_ADD";
	case IBV_WC_BIND_MW: return "BIND_MW";
	case IBV_WC_LOCAL_INV: return "LOCAL_INV";
	case IBV_WC_FLUSH: return "FLUSH";
	case IBV_WC_ATOMIC_WRITE: return "ATOMIC_WRITE";
	case IBV_WC_RECV: return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
	default: return "?";
	}
}

static int status_from_name(const char *s)
{
	static const struct { const char *n; int v; } t[] = {
		{ "rem_access", IBV_WC_REM_ACCESS_ERR },
		{ "rem_inv_req", IBV_WC_REM_INV_REQ_ERR },
		{ "rem_op", IBV_WC_REM_OP_ERR },
		{ "retry_exc", IBV_WC_RETRY_EXC_ERR },
		{ "rnr_retry_exc", IBV_WC_RNR_RETRY_EXC_ERR },
		{ "loc_prot", IBV_WC_LOC_PROT_ERR },
		{ "wr_flush", IBV_WC_WR_FLUSH_ERR },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(s, t[i].n))
			return t[i].v;
	char *end;
	long v = strtol(s, &end, 0);
	if (*end)
		fatal("unknown status %s", s);
	return (int)v;
}

static enum ibv_mtu mtu_enum(int m)
{
	switch (m) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	case 4096: return IBV_MTU_4096;
	}
	fatal("bad mtu %d", m);
	return IBV_MTU_1024;
}

static void print_wc(const char *what, const struct ibv_wc *wc)
{
	char extra[96] = "";
	if (wc->wc_flags & IBV_WC_WITH_IMM)
		snprintf(extra, sizeof(extra), " imm=0x%08x", ntohl(wc->imm_data));
	else if (wc->wc_flags & (IBV_WC_WITH_INV | IBV_WC_IP_CSUM_OK))
		snprintf(extra, sizeof(extra), " inv_rkey=0x%08x", wc->invalidated_rkey);
	msg("CQE %s status=%s(%d) opcode=%s byte_len=%u qp=0x%06x flags=0x%x%s", what,
	    ibv_wc_status_str(wc->status), wc->status,
	    wc->status == IBV_WC_SUCCESS ? wc_opcode_str(wc->opcode) : "-",
	    wc->byte_len, wc->qp_num, wc->wc_flags, extra);
}

/* Wait for one completion (event driven: no busy poll under emulation). */
static int get_wc(struct ctx *c, struct ibv_wc *wc, int timeout_ms)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(c->cq, 1, wc);
		if (n < 0)
			fatal("ibv_poll_cq");
		if (n == 1)
			return 1;
		if (!c->cq_armed) {
			if (ibv_req_notify_cq(c->cq, 0))
				fatal("ibv_req_notify_cq");
			c->cq_armed = 1;
			continue; /* re-poll: a completion may have raced */
		}
		struct timespec t1;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		long left = timeout_ms - ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			return 0;
		struct pollfd p = { .fd = c->ch->fd, .events = POLLIN };
		if (poll(&p, 1, left) > 0) {
			struct ibv_cq *cq;
			void *cctx;
			if (ibv_get_cq_event(c->ch, &cq, &cctx) == 0) {
				ibv_ack_cq_events(cq, 1);
				c->cq_armed = 0;
			}
		}
	}
}

static struct ibv_context *open_dev(const char *name)
{
	int n;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l || !n)
		fatal("no RDMA devices");
	for (int i = 0; i < n; i++)
		if (!name || !strcmp(ibv_get_device_name(l[i]), name)) {
			struct ibv_context *c = ibv_open_device(l[i]);
			ibv_free_device_list(l);
			if (!c)
				fatal("ibv_open_device");
			return c;
		}
	fatal("device %s not found", name);
	return NULL;
}

static int plan_has(const struct opts *o, int op)
{
	for (int i = 0; i < o->nops; i++)
		if (o->ops[i] == op)
			return 1;
	return 0;
}

static int plan_flushes(const struct opts *o)
{
	return plan_has(o, OP_FLUSH) || plan_has(o, OP_FLUSH_MR);
}

/* The server binds a type-2 window over its whole buffer for these plans. */
static int plan_wants_mw(const struct opts *o)
{
	return (plan_has(o, OP_SEND_INV) && !o->inv_mr) || plan_has(o, OP_MW_WRITE) ||
	       plan_has(o, OP_MW_READ) || plan_has(o, OP_MW_SET);
}

static int plan_recvs(const struct opts *o)
{
	int n = 0;
	for (int i = 0; i < o->nops; i++)
		if (o->ops[i] == OP_SEND || o->ops[i] == OP_SEND_IMM || o->ops[i] == OP_WRITE_IMM ||
		    o->ops[i] == OP_SEND_INV)
			n += o->ops[i] == OP_SEND_INV ? 1 : o->iters;
	return n;
}

static void setup(struct ctx *c, const struct opts *o, int server)
{
	c->ctx = open_dev(o->dev);
	c->pd = ibv_alloc_pd(c->ctx);
	c->ch = ibv_create_comp_channel(c->ctx);
	int depth = o->nops * o->iters + 16;
	c->cq = ibv_create_cq(c->ctx, depth * 2 + 16, NULL, c->ch, 0);
	if (!c->pd || !c->ch || !c->cq)
		fatal("pd/channel/cq");

	int nrecv = server ? plan_recvs(o) : 0;
	c->buflen = 2 * o->size + ATOMIC_AREA + (size_t)nrecv * o->size;
	if (posix_memalign((void **)&c->buf, 4096, c->buflen))
		fatal("memory");
	for (size_t i = 0; i < c->buflen; i++)
		c->buf[i] = server ? pat_server(i % o->size) : pat_client(i % o->size);
	if (server) {
		memset(c->buf, 0, o->size); /* WRITE target */
		memset(c->buf + 2 * o->size + ATOMIC_AREA, 0, (size_t)nrecv * o->size);
	} else {
		memset(c->buf + o->size, 0, o->size); /* READ destination */
	}
	uint64_t *atom = (uint64_t *)(c->buf + 2 * o->size);
	atom[0] = server ? ATOMIC_INIT : 0;
	atom[1] = 0;

	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (!o->uc)
		access |= IBV_ACCESS_REMOTE_ATOMIC;
	if (server && plan_wants_mw(o))
		access |= IBV_ACCESS_MW_BIND;
	if (server && plan_flushes(o) && o->mr_flush)
		access |= IBV_ACCESS_FLUSH_GLOBAL;
	c->mr = ibv_reg_mr(c->pd, c->buf, c->buflen, access);
	if (!c->mr)
		fatal("ibv_reg_mr(access=0x%x): %s", access, strerror(errno));

	struct ibv_qp_init_attr_ex a = {
		.send_cq = c->cq, .recv_cq = c->cq,
		.cap = { .max_send_wr = depth, .max_recv_wr = nrecv + 4, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 0 },
		.qp_type = o->uc ? IBV_QPT_UC : IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = c->pd,
	};
	a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			   IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
	if (!o->uc) {
		a.send_ops_flags |= IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV |
				    IBV_QP_EX_WITH_BIND_MW;
		if (plan_has(o, OP_ATOMIC_WRITE) || plan_has(o, OP_AW_SET))
			a.send_ops_flags |= IBV_QP_EX_WITH_ATOMIC_WRITE;
		if (plan_flushes(o))
			a.send_ops_flags |= IBV_QP_EX_WITH_FLUSH;
	}
	c->qp = ibv_create_qp_ex(c->ctx, &a);
	if (!c->qp)
		fatal("ibv_create_qp_ex(send_ops_flags=0x%" PRIx64 "): %s", a.send_ops_flags, strerror(errno));
	c->qpx = ibv_qp_to_qp_ex(c->qp);
	if (!c->qpx)
		fatal("ibv_qp_to_qp_ex");

	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
				  .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						     (o->uc ? 0 : IBV_ACCESS_REMOTE_ATOMIC) };
	/* rxe checks FLUSH against the QP's access flags, then the MR's. */
	if (server && plan_flushes(o) && o->qp_flush)
		at.qp_access_flags |= IBV_ACCESS_FLUSH_GLOBAL | IBV_ACCESS_FLUSH_PERSISTENT;
	if (ibv_modify_qp(c->qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		fatal("modify INIT: %s", strerror(errno));
}

static void to_rtr_rts(struct ctx *c, const struct opts *o, const struct peer_info *rem, uint32_t my_psn)
{
	struct ibv_qp_attr at = {
		.qp_state = IBV_QPS_RTR, .path_mtu = mtu_enum(o->mtu), .dest_qp_num = rem->qpn,
		.rq_psn = rem->psn, .max_dest_rd_atomic = 16, .min_rnr_timer = o->min_rnr,
		.ah_attr = { .is_global = 1, .port_num = 1, .sl = 0,
			     .grh = { .dgid = rem->gid, .sgid_index = o->gidx, .hop_limit = 64 } },
	};
	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (!o->uc)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (ibv_modify_qp(c->qp, &at, mask))
		fatal("modify RTR: %s", strerror(errno));
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTS;
	at.sq_psn = my_psn;
	at.timeout = o->timeout;
	at.retry_cnt = o->retry;
	at.rnr_retry = o->rnr_retry;
	at.max_rd_atomic = 16;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (!o->uc)
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	if (ibv_modify_qp(c->qp, &at, mask))
		fatal("modify RTS: %s", strerror(errno));
}

static void gid_hex(const union ibv_gid *g, char *out)
{
	for (int i = 0; i < 16; i++)
		sprintf(out + 2 * i, "%02x", g->raw[i]);
}

static void send_qp_line(struct ctx *c, uint32_t psn, uint32_t rkey, const struct opts *o)
{
	union ibv_gid gid;
	char gh[33];
	if (ibv_query_gid(c->ctx, 1, o->gidx, &gid))
		fatal("ibv_query_gid(%d)", o->gidx);
	gid_hex(&gid, gh);
	send_line("QP %06x %06x %s %08x %016" PRIx64 " %" PRIu64, c->qp->qp_num, psn, gh, rkey,
		  (uint64_t)(uintptr_t)c->buf, (uint64_t)c->buflen);
	msg("local  QPN 0x%06x PSN 0x%06x GID %s (index %d) rkey 0x%08x", c->qp->qp_num, psn, gh,
	    o->gidx, rkey);
}

static void recv_qp_line(struct peer_info *p)
{
	char line[LINE_MAX_LEN], gh[64];
	recv_line(line, sizeof(line));
	if (sscanf(line, "QP %x %x %40s %x %" SCNx64 " %" SCNu64, &p->qpn, &p->psn, gh, &p->rkey,
		   &p->vaddr, &p->len) != 6 || strlen(gh) != 32)
		fatal("bad QP line: %s", line);
	for (int i = 0; i < 16; i++)
		sscanf(gh + 2 * i, "%2hhx", &p->gid.raw[i]);
	msg("remote QPN 0x%06x PSN 0x%06x GID %s rkey 0x%08x vaddr 0x%" PRIx64 " len %" PRIu64,
	    p->qpn, p->psn, gh, p->rkey, p->vaddr, p->len);
}

static uint32_t pick_psn(const struct opts *o)
{
	if (o->psn >= 0)
		return (uint32_t)o->psn & 0xffffff;
	srand48(getpid() * time(NULL));
	return lrand48() & 0xffffff;
}

static void post_recvs(struct ctx *c, const struct opts *o, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)(c->buf + 2 * o->size + ATOMIC_AREA + (size_t)i * o->size),
				       .length = (uint32_t)o->size, .lkey = c->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 1000 + i, .sg_list = &sge, .num_sge = 1 }, *bad;
		int e = ibv_post_recv(c->qp, &wr, &bad);
		if (e)
			fatal("ibv_post_recv: %s", strerror(e));
	}
	msg("posted %d receives", n);
}

/* ---- plan line ---- */
static void format_ops(const struct opts *o, char *out, size_t cap)
{
	out[0] = 0;
	for (int i = 0; i < o->nops; i++) {
		strncat(out, op_names[o->ops[i]], cap - strlen(out) - 2);
		if (i + 1 < o->nops)
			strncat(out, ",", cap - strlen(out) - 1);
	}
}

static void parse_ops(struct opts *o, const char *list)
{
	char tmp[LINE_MAX_LEN];
	snprintf(tmp, sizeof(tmp), "%s", list);
	o->nops = 0;
	for (char *t = strtok(tmp, ","); t; t = strtok(NULL, ",")) {
		if (!strcmp(t, "all")) {
			for (int k = 0; k <= OP_FLUSH; k++)
				o->ops[o->nops++] = k;
			continue;
		}
		int k;
		for (k = 0; k < OP_COUNT; k++)
			if (!strcmp(t, op_names[k]))
				break;
		if (k == OP_COUNT)
			fatal("unknown op %s", t);
		if (o->nops < 32)
			o->ops[o->nops++] = k;
	}
	if (!o->nops)
		fatal("no ops");
}

/* ---- server (responder) ---- */
static int run_server(struct opts *o)
{
	char line[LINE_MAX_LEN], ops[LINE_MAX_LEN], flags[LINE_MAX_LEN];
	int ver;
	tcp_fd = tcp_accept(o->port);
	set_rcvtimeo(tcp_fd, o->wait_s);
	recv_line(line, sizeof(line));
	if (sscanf(line, "ROCEX-PROBE %d", &ver) != 1 || ver != PROTO_VERSION)
		fatal("bad hello: %s", line);
	recv_line(line, sizeof(line));
	if (sscanf(line, "PLAN %511s %zu %d %d %511s", ops, &o->size, &o->iters, &o->mtu, flags) != 5)
		fatal("bad PLAN line: %s", line);
	parse_ops(o, ops);
	for (char *t = strtok(flags, ","); t; t = strtok(NULL, ",")) {
		if (!strcmp(t, "uc"))
			o->uc = 1;
		else if (!strcmp(t, "badrkey"))
			o->bad_rkey = 1;
		else if (!strncmp(t, "rnrdelay=", 9))
			o->rnr_delay = atoi(t + 9);
		else if (!strncmp(t, "minrnr=", 7))
			o->min_rnr = atoi(t + 7);
		else if (!strncmp(t, "psn=", 4))
			o->psn = (int)strtol(t + 4, NULL, 0);
		else if (!strncmp(t, "expect=", 7))
			o->expect = atoi(t + 7);
		else if (!strcmp(t, "mrflush=none"))
			o->mr_flush = 0;
		else if (!strcmp(t, "qpflush=none"))
			o->qp_flush = 0;
		else if (!strcmp(t, "invmr"))
			o->inv_mr = 1;
	}
	msg("plan: ops=%s size=%zu iters=%d mtu=%d flags=%s", ops, o->size, o->iters, o->mtu, flags);

	struct ctx c = { .role = "server" };
	struct peer_info rem;
	setup(&c, o, 1);
	uint32_t psn = pick_psn(o);
	recv_qp_line(&rem);
	send_qp_line(&c, psn, c.mr->rkey, o);
	to_rtr_rts(&c, o, &rem, psn);

	int nrecv = plan_recvs(o);
	if (!o->rnr_delay)
		post_recvs(&c, o, nrecv);

	uint32_t inv_rkey = 0;
	if (plan_wants_mw(o)) {
		/* A type-2 memory window over the whole buffer, for SEND_WITH_INV and mw_*. */
		c.mw = ibv_alloc_mw(c.pd, IBV_MW_TYPE_2);
		if (!c.mw)
			fatal("ibv_alloc_mw: %s", strerror(errno));
		struct ibv_mw_bind_info bi = { .mr = c.mr, .addr = (uintptr_t)c.buf, .length = c.buflen,
					       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
								  (o->uc ? 0 : IBV_ACCESS_REMOTE_ATOMIC) };
		inv_rkey = ibv_inc_rkey(c.mw->rkey);
		ibv_wr_start(c.qpx);
		c.qpx->wr_id = 900;
		c.qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_bind_mw(c.qpx, c.mw, inv_rkey, &bi);
		if (ibv_wr_complete(c.qpx))
			fatal("bind_mw post: %s", strerror(errno));
		struct ibv_wc wc;
		if (!get_wc(&c, &wc, 10000))
			fatal("bind_mw: no completion");
		print_wc("bind_mw", &wc);
		if (wc.status != IBV_WC_SUCCESS)
			fatal("bind_mw failed");
		msg("memory window rkey 0x%08x", inv_rkey);
	}
	send_line("READY %08x", inv_rkey);
	if (o->rnr_delay) {
		msg("posting receives after %d ms (RNR)", o->rnr_delay);
		usleep(o->rnr_delay * 1000);
		post_recvs(&c, o, nrecv);
	}

	/* Receive completions until DONE arrives and the expected count is met. */
	int got = 0, errors = 0, imm_ok = 1, inv_seen = 0, data_bad = 0;
	uint32_t imm_next = IMM_BASE;
	recv_line(line, sizeof(line));
	unsigned n_ok = 0, n_err = 0;
	uint64_t atomic_expect = 0;
	if (sscanf(line, "DONE %u %u %" SCNx64, &n_ok, &n_err, &atomic_expect) != 3)
		fatal("bad DONE line: %s", line);
	int want = o->bad_rkey || o->expect >= 0 ? 0 : nrecv;
	while (got < want) {
		struct ibv_wc wc;
		if (!get_wc(&c, &wc, 5000))
			break;
		got++;
		print_wc("recv", &wc);
		if (wc.status != IBV_WC_SUCCESS) {
			errors++;
			continue;
		}
		if (wc.wc_flags & IBV_WC_WITH_IMM) {
			if (ntohl(wc.imm_data) != imm_next)
				imm_ok = 0;
			imm_next++;
		}
		/* The invalidated rkey shares the union with imm_data. */
		if (inv_rkey && !(wc.wc_flags & IBV_WC_WITH_IMM) && wc.invalidated_rkey == inv_rkey) {
			inv_seen = 1;
			if (!(wc.wc_flags & IBV_WC_WITH_INV))
				msg("note: invalidation reported with wc_flags 0x%x, not IBV_WC_WITH_INV (0x%x)",
				    wc.wc_flags, IBV_WC_WITH_INV);
		}
		if (wc.opcode == IBV_WC_RECV && wc.wr_id >= 1000 && wc.wr_id < 1000 + (uint64_t)nrecv) {
			const uint8_t *rb = c.buf + 2 * o->size + ATOMIC_AREA + (size_t)(wc.wr_id - 1000) * o->size;
			for (size_t i = 0; i < wc.byte_len; i++)
				if (rb[i] != pat_client(i)) {
					data_bad++;
					break;
				}
		}
	}
	/* Drain whatever else is there (errors after a NAK, flushes). */
	struct ibv_wc wc;
	while (get_wc(&c, &wc, 300))
		print_wc("extra", &wc);

	int ok = 1;
	char why[256] = "";
	if (got < want) {
		ok = 0;
		snprintf(why, sizeof(why), "only %d of %d receive completions", got, want);
	}
	if (errors && want) {
		ok = 0;
		snprintf(why, sizeof(why), "%d receive errors", errors);
	}
	if (!imm_ok) {
		ok = 0;
		snprintf(why, sizeof(why), "immediate data out of order");
	}
	if (!o->bad_rkey && o->expect < 0) {
		/* Memory checks. */
		if (plan_has(o, OP_WRITE) || plan_has(o, OP_WRITE_IMM) || plan_has(o, OP_MW_WRITE)) {
			for (size_t i = 0; i < o->size; i++)
				if (c.buf[i] != pat_client(i)) {
					ok = 0;
					snprintf(why, sizeof(why), "WRITE data wrong at %zu", i);
					break;
				}
		}
		if (data_bad) {
			ok = 0;
			snprintf(why, sizeof(why), "%d received messages with wrong data", data_bad);
		}
		uint64_t *atom = (uint64_t *)(c.buf + 2 * o->size);
		if ((plan_has(o, OP_CAS) || plan_has(o, OP_FAA) || plan_has(o, OP_MW_SET) ||
		     plan_has(o, OP_AW_SET)) && atom[0] != atomic_expect) {
			ok = 0;
			snprintf(why, sizeof(why), "atomic word 0x%" PRIx64 " expected 0x%" PRIx64, atom[0],
				 atomic_expect);
		}
		if (plan_has(o, OP_ATOMIC_WRITE) && atom[1] != ATOMIC_WRITE_VALUE) {
			ok = 0;
			snprintf(why, sizeof(why), "atomic_write word 0x%" PRIx64, atom[1]);
		}
		if (plan_has(o, OP_SEND_INV) && !o->inv_mr && !inv_seen) {
			ok = 0;
			snprintf(why, sizeof(why), "no completion invalidating 0x%08x", inv_rkey);
		}
	}
	msg("server %s: %d receive completions%s%s", ok ? "ok" : "FAILED", got, why[0] ? ", " : "", why);
	send_line("RESULT %d %d", ok ? 0 : 1, got);
	close(tcp_fd);
	return ok ? 0 : 1;
}

/* ---- client (requester) ---- */
static int run_client(struct opts *o)
{
	char line[LINE_MAX_LEN], ops[LINE_MAX_LEN], flags[LINE_MAX_LEN] = "";
	tcp_fd = tcp_connect(o->peer, o->port, o->wait_s);
	set_rcvtimeo(tcp_fd, o->wait_s);
	format_ops(o, ops, sizeof(ops));
	if (o->uc)
		strcat(flags, "uc,");
	if (o->bad_rkey)
		strcat(flags, "badrkey,");
	if (o->rnr_delay)
		sprintf(flags + strlen(flags), "rnrdelay=%d,", o->rnr_delay);
	if (o->min_rnr != 12)
		sprintf(flags + strlen(flags), "minrnr=%d,", o->min_rnr);
	if (o->psn >= 0)
		sprintf(flags + strlen(flags), "psn=0x%06x,", o->psn);
	if (o->expect >= 0)
		sprintf(flags + strlen(flags), "expect=%d,", o->expect);
	if (!o->mr_flush)
		strcat(flags, "mrflush=none,");
	if (!o->qp_flush)
		strcat(flags, "qpflush=none,");
	if (o->inv_mr)
		strcat(flags, "invmr,");
	if (!flags[0])
		strcpy(flags, "-");
	else
		flags[strlen(flags) - 1] = 0;
	send_line("ROCEX-PROBE %d", PROTO_VERSION);
	send_line("PLAN %s %zu %d %d %s", ops, o->size, o->iters, o->mtu, flags);

	struct ctx c = { .role = "client" };
	struct peer_info rem;
	setup(&c, o, 0);
	uint32_t psn = pick_psn(o);
	send_qp_line(&c, psn, c.mr->rkey, o);
	recv_qp_line(&rem);
	to_rtr_rts(&c, o, &rem, psn);
	recv_line(line, sizeof(line));
	uint32_t inv_rkey = 0;
	if (sscanf(line, "READY %x", &inv_rkey) != 1)
		fatal("bad READY line: %s", line);

	uint32_t rkey = o->bad_rkey ? rem.rkey ^ 0x00ffff00u : rem.rkey;
	uint32_t wkey = inv_rkey; /* the server's window, for mw_* */
	if (o->inv_mr) {
		inv_rkey = rem.rkey;
		msg("send_inv names the MR's rkey 0x%08x", inv_rkey);
	}
	if (o->bad_rkey)
		msg("using bad rkey 0x%08x (valid: 0x%08x)", rkey, rem.rkey);
	uint64_t r_write = rem.vaddr, r_read = rem.vaddr + o->size, r_atom = rem.vaddr + 2 * o->size;
	uint8_t *l_send = c.buf, *l_read = c.buf + o->size;
	uint64_t *l_atom = (uint64_t *)(c.buf + 2 * o->size);
	uint64_t atomic_cur = ATOMIC_INIT;
	uint32_t imm = IMM_BASE;
	unsigned n_ok = 0, n_err = 0;
	int ok = 1, expect_seen = 0, stop = 0;

	for (int k = 0; k < o->nops && !stop; k++) {
		int op = o->ops[k];
		int iters = op == OP_SEND_INV ? 1 : o->iters;
		for (int it = 0; it < iters && !stop; it++) {
			char what[48];
			snprintf(what, sizeof(what), "%s#%d", op_names[op], it);
			uint64_t cmp = atomic_cur, swp = atomic_cur + 0x1000, add = 1, aw = ATOMIC_WRITE_VALUE;
			uint64_t set = (op == OP_MW_SET ? MW_SET_VALUE : AW_SET_VALUE) + it;
			struct ibv_sge sge = { .addr = (uintptr_t)l_send, .length = (uint32_t)o->size,
					       .lkey = c.mr->lkey };
			ibv_wr_start(c.qpx);
			c.qpx->wr_id = k * 1000 + it;
			c.qpx->wr_flags = IBV_SEND_SIGNALED;
			switch (op) {
			case OP_SEND:
				ibv_wr_send(c.qpx);
				break;
			case OP_SEND_IMM:
				ibv_wr_send_imm(c.qpx, htonl(imm));
				break;
			case OP_SEND_INV:
				ibv_wr_send_inv(c.qpx, inv_rkey);
				break;
			case OP_WRITE:
				ibv_wr_rdma_write(c.qpx, rkey, r_write);
				break;
			case OP_WRITE_IMM:
				ibv_wr_rdma_write_imm(c.qpx, rkey, r_write, htonl(imm));
				break;
			case OP_READ:
				memset(l_read, 0, o->size);
				ibv_wr_rdma_read(c.qpx, rkey, r_read);
				sge.addr = (uintptr_t)l_read;
				break;
			case OP_CAS:
				ibv_wr_atomic_cmp_swp(c.qpx, rkey, r_atom, cmp, swp);
				sge.addr = (uintptr_t)l_atom;
				sge.length = 8;
				break;
			case OP_FAA:
				ibv_wr_atomic_fetch_add(c.qpx, rkey, r_atom, add);
				sge.addr = (uintptr_t)l_atom;
				sge.length = 8;
				break;
			case OP_ATOMIC_WRITE:
				ibv_wr_atomic_write(c.qpx, rkey, r_atom + 8, &aw);
				break;
			case OP_FLUSH:
				ibv_wr_flush(c.qpx, rkey, r_write, o->size,
					     o->flush_persistent ? IBV_FLUSH_PERSISTENT : IBV_FLUSH_GLOBAL,
					     IBV_FLUSH_RANGE);
				break;
			case OP_MW_WRITE:
				ibv_wr_rdma_write(c.qpx, wkey, r_write);
				break;
			case OP_MW_READ:
				memset(l_read, 0, o->size);
				ibv_wr_rdma_read(c.qpx, wkey, r_read);
				sge.addr = (uintptr_t)l_read;
				break;
			case OP_MW_SET:
				l_atom[1] = set;
				ibv_wr_rdma_write(c.qpx, wkey, r_atom);
				sge.addr = (uintptr_t)(l_atom + 1);
				sge.length = 8;
				break;
			case OP_AW_SET:
				ibv_wr_atomic_write(c.qpx, rkey, r_atom, &set);
				break;
			case OP_FLUSH_MR:
				ibv_wr_flush(c.qpx, rkey, r_write, 0,
					     o->flush_persistent ? IBV_FLUSH_PERSISTENT : IBV_FLUSH_GLOBAL,
					     IBV_FLUSH_MR);
				break;
			}
			if (op != OP_ATOMIC_WRITE && op != OP_FLUSH && op != OP_AW_SET && op != OP_FLUSH_MR)
				ibv_wr_set_sge(c.qpx, sge.lkey, sge.addr, sge.length);
			if (ibv_wr_complete(c.qpx))
				fatal("post %s: %s", what, strerror(errno));
			struct ibv_wc wc;
			if (!get_wc(&c, &wc, 60000)) {
				msg("CQE %s: no completion within 60 s", what);
				ok = 0;
				stop = 1;
				break;
			}
			print_wc(what, &wc);
			if (wc.status != IBV_WC_SUCCESS) {
				n_err++;
				if (o->expect >= 0 &&
				    ((int)wc.status == o->expect || (int)wc.status == o->expect_alt)) {
					expect_seen = 1;
					msg("expected status %s seen", ibv_wc_status_str(wc.status));
				} else {
					ok = 0;
				}
				stop = 1; /* the QP is in error now */
				break;
			}
			n_ok++;
			if (op == OP_SEND_IMM || op == OP_WRITE_IMM)
				imm++;
			if (op == OP_MW_SET || op == OP_AW_SET)
				atomic_cur = set;
			if (op == OP_READ || op == OP_MW_READ) {
				for (size_t i = 0; i < o->size; i++)
					if (l_read[i] != pat_server(i % o->size)) {
						msg("READ data wrong at offset %zu: 0x%02x", i, l_read[i]);
						ok = 0;
						break;
					}
			}
			if (op == OP_CAS || op == OP_FAA) {
				if (*l_atom != atomic_cur) {
					msg("%s returned 0x%" PRIx64 ", expected 0x%" PRIx64, what, *l_atom, atomic_cur);
					ok = 0;
				} else {
					msg("%s returned 0x%" PRIx64, what, *l_atom);
				}
				atomic_cur = op == OP_CAS ? swp : atomic_cur + add;
			}
		}
	}
	/* Drain late completions (flushes after an error). */
	struct ibv_wc wc;
	while (get_wc(&c, &wc, 200))
		print_wc("extra", &wc);
	if (o->expect >= 0 && !expect_seen) {
		msg("expected status %s not seen", ibv_wc_status_str(o->expect));
		ok = 0;
	}

	send_line("DONE %u %u %016" PRIx64, n_ok, n_err, atomic_cur);
	recv_line(line, sizeof(line));
	int srv_rc = 1, srv_n = 0;
	if (sscanf(line, "RESULT %d %d", &srv_rc, &srv_n) != 2)
		fatal("bad RESULT line: %s", line);
	if (srv_rc)
		ok = 0;
	msg("client %s: %u ok, %u errors; server %s (%d receive completions)", ok ? "ok" : "FAILED", n_ok,
	    n_err, srv_rc ? "FAILED" : "ok", srv_n);
	close(tcp_fd);
	return ok ? 0 : 1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: rxe-probe server [-d DEV] [-g GIDX] [-p PORT] [--wait S]\n"
		"       rxe-probe client PEER [-d DEV] [-g GIDX] [-p PORT] [--ops LIST] [--size N]\n"
		"                 [--iters N] [--mtu N] [--psn N] [--timeout N] [--retry N]\n"
		"                 [--rnr-retry N] [--min-rnr N] [--rnr-delay MS] [--uc] [--bad-rkey]\n"
		"                 [--flush-type global|persistent] [--expect STATUS[,STATUS]] [--wait S]\n"
		"                 [--mr-flush none|global] [--qp-flush none|both] [--inv-mr]\n"
		"ops: send,send_imm,send_inv,write,write_imm,read,cas,faa,atomic_write,flush,\n"
		"     mw_write,mw_read,mw_set,aw_set,flush_mr,all\n"
		"status: rem_access rem_inv_req rem_op retry_exc rnr_retry_exc wr_flush or a number\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct opts o = { .dev = "rxe0", .gidx = 1, .port = 18600, .size = 64, .iters = 1,
			  .mtu = 1024, .psn = -1, .timeout = 17, .retry = 7, .rnr_retry = 7,
			  .min_rnr = 12, .expect = -1, .expect_alt = -1, .wait_s = 60, .mr_flush = 1,
			  .qp_flush = 1 };
	static const struct option lo[] = {
		{ "ops", 1, 0, 'o' }, { "size", 1, 0, 's' }, { "iters", 1, 0, 'n' },
		{ "mtu", 1, 0, 'm' }, { "psn", 1, 0, 'P' }, { "timeout", 1, 0, 't' },
		{ "retry", 1, 0, 'r' }, { "rnr-retry", 1, 0, 'R' }, { "min-rnr", 1, 0, 'N' },
		{ "rnr-delay", 1, 0, 'D' }, { "uc", 0, 0, 'u' }, { "bad-rkey", 0, 0, 'b' },
		{ "flush-type", 1, 0, 'f' }, { "expect", 1, 0, 'e' }, { "wait", 1, 0, 'w' },
		{ "mr-flush", 1, 0, 'F' }, { "inv-mr", 0, 0, 'I' }, { "qp-flush", 1, 0, 'Q' },
		{ 0 } };
	if (argc < 2)
		usage();
	int server = !strcmp(argv[1], "server");
	if (!server && strcmp(argv[1], "client"))
		usage();
	role = argv[1];
	optind = 2;
	if (!server) {
		if (argc < 3 || argv[2][0] == '-')
			usage();
		o.peer = argv[2];
		optind = 3;
	}
	parse_ops(&o, "send,send_imm,write,write_imm,read,cas,faa");
	int ch;
	while ((ch = getopt_long(argc, argv, "d:g:p:", lo, NULL)) != -1) {
		switch (ch) {
		case 'd': o.dev = optarg; break;
		case 'g': o.gidx = atoi(optarg); break;
		case 'p': o.port = atoi(optarg); break;
		case 'o': parse_ops(&o, optarg); break;
		case 's': o.size = strtoul(optarg, NULL, 0); break;
		case 'n': o.iters = atoi(optarg); break;
		case 'm': o.mtu = atoi(optarg); break;
		case 'P': o.psn = (int)strtol(optarg, NULL, 0); break;
		case 't': o.timeout = atoi(optarg); break;
		case 'r': o.retry = atoi(optarg); break;
		case 'R': o.rnr_retry = atoi(optarg); break;
		case 'N': o.min_rnr = atoi(optarg); break;
		case 'D': o.rnr_delay = atoi(optarg); break;
		case 'u': o.uc = 1; break;
		case 'b': o.bad_rkey = 1; break;
		case 'f': o.flush_persistent = !strcmp(optarg, "persistent"); break;
		case 'e': {
			char first[64];
			snprintf(first, sizeof(first), "%s", optarg);
			char *alt = strchr(first, ',');
			if (alt)
				*alt++ = 0;
			o.expect = status_from_name(first);
			o.expect_alt = alt ? status_from_name(alt) : -1;
			break;
		}
		case 'w': o.wait_s = atoi(optarg); break;
		case 'F': o.mr_flush = strcmp(optarg, "none") != 0; break;
		case 'I': o.inv_mr = 1; break;
		case 'Q': o.qp_flush = strcmp(optarg, "none") != 0; break;
		default: usage();
		}
	}
	if (o.size < 8)
		o.size = 8;
	if (o.size % 8)
		o.size += 8 - o.size % 8;
	if (o.bad_rkey && o.expect < 0)
		o.expect = IBV_WC_REM_ACCESS_ERR;
	return server ? run_server(&o) : run_client(&o);
}
