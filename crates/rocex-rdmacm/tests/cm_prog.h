/* What the rdma_cm programs of these tests share (the Rust side puts this ahead of each
 * program's source): the event channel `ch`, which main() makes, one line per step, and
 * the listening and the resolved ids each program makes the same way. Each program
 * defines next(), which waits for the next event (await_event) and prints it in its
 * own words. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

static struct rdma_event_channel *ch;

/* The next event's type, printed; *id (when not NULL) gets its id. */
static int next(struct rdma_cm_id **id);

static struct sockaddr_in at(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

/* A call's result: "STEP 0 ok", or "STEP RC" and errno's text. */
static void say(const char *step, int rc)
{
	printf("%s %d %s\n", step, rc, rc ? strerror(errno) : "ok");
}

/* The next event on ch within 30 s; "no event" and exit 1 when none comes. */
static struct rdma_cm_event *await_event(void)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;
	if (poll(&p, 1, 30000) != 1 || rdma_get_cm_event(ch, &e)) {
		printf("no event\n");
		exit(1);
	}
	return e;
}

/* An id in port space `ps` bound to addr:port and listening ("bind", "listen"). */
static struct rdma_cm_id *listener(const char *addr, int port, enum rdma_port_space ps)
{
	struct rdma_cm_id *l;
	struct sockaddr_in sa = at(addr, port);
	rdma_create_id(ch, &l, NULL, ps);
	say("bind", rdma_bind_addr(l, (struct sockaddr *)&sa));
	say("listen", rdma_listen(l, 1));
	return l;
}

/* A QP of `type` for id, 4 requests deep each way ("create_qp"). */
static void make_qp(struct rdma_cm_id *id, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = type,
	};
	say("create_qp", rdma_create_qp(id, NULL, &qa));
}

/* An id and its QP, destroyed. */
static void destroy_with_qp(struct rdma_cm_id *id)
{
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

/* An id in port space `ps` with its address and route to peer:port resolved, and a QP
 * of `type`; exit 1 when either resolution fails. */
static struct rdma_cm_id *resolved(const char *peer, int port, enum rdma_port_space ps,
				   enum ibv_qp_type type)
{
	struct rdma_cm_id *id;
	struct sockaddr_in da = at(peer, port);
	rdma_create_id(ch, &id, NULL, ps);
	rdma_resolve_addr(id, NULL, (struct sockaddr *)&da, 2000);
	if (next(NULL) != RDMA_CM_EVENT_ADDR_RESOLVED)
		exit(1);
	rdma_resolve_route(id, 2000);
	if (next(NULL) != RDMA_CM_EVENT_ROUTE_RESOLVED)
		exit(1);
	make_qp(id, type);
	return id;
}
