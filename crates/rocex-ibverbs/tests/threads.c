/* Verbs from several threads of one context, as C programs call them: four threads each
 * run a ping-pong of SENDs over their own pair of RC QPs, polling their own CQ, while a
 * fifth sleeps in ibv_get_cq_event on a channel whose CQ a sixth feeds. Every message is
 * checked. Prints "ok N" with the messages received, or what went wrong. qp() and
 * connect() are rc_loopback.h's. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define ITERS 300
#define PAIRS 4

static struct ibv_context *ctx;
static int failed;

/* Posts a receive into `slot` of `mr`. */
static int recv_into(struct ibv_qp *q, struct ibv_mr *mr, int slot)
{
	struct ibv_sge s = { (uintptr_t)mr->addr + 64 * slot, 64, mr->lkey };
	struct ibv_recv_wr w = { .wr_id = slot, .sg_list = &s, .num_sge = 1 }, *bad;
	return ibv_post_recv(q, &w, &bad);
}

static int send_from(struct ibv_qp *q, struct ibv_mr *mr, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)mr->addr + 512, 64, mr->lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	return ibv_post_send(q, &w, &bad);
}

/* One completion of `cq` with `want` opcode; 0 when it came and succeeded. */
static int wait_wc(struct ibv_cq *cq, int want, struct ibv_wc *wc)
{
	for (long i = 0; i < 2000000000L; i++) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			return 1;
		if (n == 1)
			return wc->status != IBV_WC_SUCCESS || (int)wc->opcode != want;
	}
	return 1;
}

static long received;
static pthread_mutex_t count = PTHREAD_MUTEX_INITIALIZER;

static void *pingpong(void *arg)
{
	long me = (long)arg;
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	char *buf = calloc(1, 1024);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 1024, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp *a = qp(cq), *b = qp(cq);
	struct ibv_wc wc;
	if (!cq || !mr || !a || !b || connect(a, b->qp_num) || connect(b, a->qp_num)) {
		failed = 1;
		return NULL;
	}
	for (int i = 0; i < ITERS; i++) {
		uint64_t v = ((uint64_t)me << 32) | i;
		memcpy(buf + 512, &v, 8);
		if (recv_into(b, mr, 0) || send_from(a, mr, v)) {
			failed = 2;
			return NULL;
		}
		/* The send and the receive, in either order. */
		int got = 0;
		for (int k = 0; k < 2; k++) {
			if (ibv_poll_cq(cq, 1, &wc) != 1) {
				k--;
				continue;
			}
			if (wc.status != IBV_WC_SUCCESS) {
				failed = 3;
				return NULL;
			}
			if (wc.opcode == IBV_WC_RECV) {
				uint64_t r;
				memcpy(&r, buf, 8);
				got = r == v && wc.byte_len == 64;
			}
		}
		if (!got) {
			failed = 4;
			return NULL;
		}
		pthread_mutex_lock(&count);
		received++;
		pthread_mutex_unlock(&count);
	}
	return NULL;
}

static struct ibv_comp_channel *ch;
static struct ibv_cq *ecq;
static int events, erecv, stop;

static void *event_thread(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		struct ibv_cq *cq;
		void *c;
		struct ibv_wc wc;
		if (ibv_get_cq_event(ch, &cq, &c) || cq != ecq) {
			failed = 5;
			return NULL;
		}
		ibv_ack_cq_events(cq, 1);
		__atomic_add_fetch(&events, 1, __ATOMIC_RELEASE);
		ibv_req_notify_cq(cq, 0);
		while (ibv_poll_cq(cq, 1, &wc) == 1)
			if (wc.opcode == IBV_WC_RECV)
				__atomic_add_fetch(&erecv, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1)
		return printf("no device\n"), 1;
	ctx = ibv_open_device(list[0]);
	pd = ibv_alloc_pd(ctx);
	if (!ctx || !pd || ibv_query_gid(ctx, 1, 1, &gid))
		return printf("setup\n"), 1;

	ch = ibv_create_comp_channel(ctx);
	ecq = ibv_create_cq(ctx, 16, NULL, ch, 0);
	char *ebuf = calloc(1, 1024);
	struct ibv_mr *emr = ibv_reg_mr(pd, ebuf, 1024, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp *ea = qp(ecq), *eb = qp(ecq);
	if (!ch || !ecq || !emr || connect(ea, eb->qp_num) || connect(eb, ea->qp_num))
		return printf("event setup\n"), 1;
	ibv_req_notify_cq(ecq, 0);

	pthread_t t[PAIRS + 1];
	pthread_create(&t[PAIRS], NULL, event_thread, NULL);
	for (long i = 0; i < PAIRS; i++)
		pthread_create(&t[i], NULL, pingpong, (void *)i);
	/* This thread feeds the event CQ: one SEND at a time, once the event thread (woken by
	 * events only) has taken the previous one's receive. */
	for (int i = 0; i < ITERS && !failed; i++) {
		if (recv_into(eb, emr, 0) || send_from(ea, emr, i)) {
			failed = 6;
			break;
		}
		while (__atomic_load_n(&erecv, __ATOMIC_ACQUIRE) <= i && !failed)
			;
	}
	/* One more message wakes the event thread to see `stop`. */
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	int r1 = recv_into(eb, emr, 0), r2 = send_from(ea, emr, ITERS);
	if (r1 || r2) {
		printf("last post: %d %d\n", r1, r2);
		failed = 7;
	}
	for (int i = 0; i <= PAIRS; i++)
		pthread_join(t[i], NULL);
	if (failed)
		return printf("failed %d after %ld\n", failed, received), 1;
	/* Every fed message was taken by the thread woken only by events; one event may
	 * cover two messages when the poll after it re-armed the CQ finds the next one too. */
	printf("ok %ld %d\n", received,
	       events >= 1 && __atomic_load_n(&erecv, __ATOMIC_ACQUIRE) >= ITERS);
	return 0;
}
