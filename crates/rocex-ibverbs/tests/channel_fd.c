/* A completion channel driven by an event loop, as tgtd's is: the program waits until the
 * channel's fd is readable, then takes the event with ibv_get_cq_event, which on a device
 * never waits then. Each round arms the CQ, sends a message between two RC QPs of one
 * context, waits in poll(2) on the channel's fd, takes and acks the event, and polls the
 * completions. After the event is taken the fd must not read as ready: a program that
 * trusts it would block in ibv_get_cq_event. Prints "ok N" with the rounds, or the first
 * round that went wrong and how. qp() and connect() are rc_loopback.h's. */
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define ROUNDS 50

/* poll(2) on the channel's fd: 1 when readable within `ms`. */
static int readable(struct ibv_comp_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

int main(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	if (!ctx || ibv_query_gid(ctx, 1, 1, &gid)) {
		printf("no device\n");
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ch ? ibv_create_cq(ctx, 16, NULL, ch, 0) : NULL;
	char *buf = calloc(1, 1024);
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, 1024, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_qp *a = cq ? qp(cq) : NULL, *b = cq ? qp(cq) : NULL;
	if (!mr || !a || !b || connect(a, b->qp_num) || connect(b, a->qp_num)) {
		printf("setup failed\n");
		return 1;
	}
	/* tgtd's loop never blocks: a wait in ibv_get_cq_event shows as EAGAIN here. */
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	int round;
	for (round = 0; round < ROUNDS; round++) {
		struct ibv_sge rs = { (uintptr_t)buf, 64, mr->lkey }, ss = { (uintptr_t)buf + 512, 64, mr->lkey };
		struct ibv_recv_wr rw = { .sg_list = &rs, .num_sge = 1 }, *rbad;
		struct ibv_send_wr sw = { .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *sbad;
		struct ibv_cq *ecq;
		struct ibv_wc wc[2];
		void *ectx;
		if (ibv_req_notify_cq(cq, 0) || ibv_post_recv(b, &rw, &rbad) || ibv_post_send(a, &sw, &sbad)) {
			printf("round %d: post failed\n", round);
			return 1;
		}
		if (!readable(ch, 5000)) {
			printf("round %d: no event within 5 s\n", round);
			return 1;
		}
		if (ibv_get_cq_event(ch, &ecq, &ectx) || ecq != cq) {
			printf("round %d: the fd was readable but ibv_get_cq_event had no event\n", round);
			return 1;
		}
		ibv_ack_cq_events(cq, 1);
		/* Both completions, then nothing owed: the fd must be quiet. */
		for (int got = 0; got < 2;) {
			int n = ibv_poll_cq(cq, 2 - got, wc);
			if (n < 0 || (n > 0 && wc[0].status != IBV_WC_SUCCESS)) {
				printf("round %d: completion failed\n", round);
				return 1;
			}
			got += n;
		}
		if (readable(ch, 0)) {
			printf("round %d: the fd reads as ready with no event owed\n", round);
			return 1;
		}
	}
	printf("ok %d\n", round);
	return 0;
}
