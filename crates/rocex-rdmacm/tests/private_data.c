/* Private data in each CM message, as rdma_cm's events hand it on.
 *   private_data server ADDR PORT: listens; rejects the first request (after trying 149
 *     bytes) with 148 bytes, accepts the second (after trying 197 bytes) with 196.
 *   private_data client PEER PORT: connects twice with 5 bytes, "hello".
 *   private_data udserver ADDR PORT, udclient PEER PORT: the same over UD (SIDR), with
 *     136 bytes in the rejecting and the accepting SIDR_REP (137: refused); the server
 *     prints its QP's number, the client the QPN and Q_Key its ESTABLISHED names.
 * Prints each event with its private data's length and bytes in hex, and each call's
 * result. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

static struct rdma_event_channel *ch;
/* Whether the ids are UD (RDMA_PS_UDP: SIDR) rather than RC. */
static int ud;

static struct sockaddr_in at(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

/* The next event within 30 s, printed as "event NAME STATUS LEN HEX"; *id gets its id. */
static int next(struct rdma_cm_id **id)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;
	if (poll(&p, 1, 30000) != 1 || rdma_get_cm_event(ch, &e)) {
		printf("no event\n");
		exit(1);
	}
	int t = e->event;
	if (ud && t == RDMA_CM_EVENT_ESTABLISHED)
		printf("ud qpn %u qkey %#x global %d\n", e->param.ud.qp_num, e->param.ud.qkey,
		       e->param.ud.ah_attr.is_global);
	const unsigned char *d = e->param.conn.private_data;
	printf("event %s %d %u ", rdma_event_str(t), e->status, e->param.conn.private_data_len);
	for (int i = 0; d && i < e->param.conn.private_data_len; i++)
		printf("%02x", d[i]);
	printf("\n");
	if (id)
		*id = e->id;
	rdma_ack_cm_event(e);
	return t;
}

static void say(const char *step, int rc)
{
	printf("%s %d %s\n", step, rc, rc ? strerror(errno) : "ok");
}

static void make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = ud ? IBV_QPT_UD : IBV_QPT_RC,
	};
	say("create_qp", rdma_create_qp(id, NULL, &qa));
}

static int ud_server(const char *addr, int port)
{
	struct rdma_cm_id *l, *id;
	struct sockaddr_in sa = at(addr, port);
	unsigned char rej[137], rep[137];
	for (int i = 0; i < 137; i++) {
		rej[i] = i * 7 + 1;
		rep[i] = 255 - i;
	}
	rdma_create_id(ch, &l, NULL, RDMA_PS_UDP);
	say("bind", rdma_bind_addr(l, (struct sockaddr *)&sa));
	say("listen", rdma_listen(l, 1));
	if (next(&id) != RDMA_CM_EVENT_CONNECT_REQUEST)
		return 1;
	say("reject_137", rdma_reject(id, rej, 137));
	say("reject_136", rdma_reject(id, rej, 136));
	rdma_destroy_id(id);
	if (next(&id) != RDMA_CM_EVENT_CONNECT_REQUEST)
		return 1;
	make_qp(id);
	printf("qpn %u\n", id->qp->qp_num);
	struct rdma_conn_param cp = { .private_data = rep, .private_data_len = 137 };
	say("accept_137", rdma_accept(id, &cp));
	cp.private_data_len = 136;
	say("accept_136", rdma_accept(id, &cp));
	/* Nothing follows an accepted SIDR request; stay until the client is done. */
	char line[8];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_id(l);
	return 0;
}

static int server(const char *addr, int port)
{
	struct rdma_cm_id *l, *id;
	struct sockaddr_in sa = at(addr, port);
	unsigned char rej[149], rep[197];
	for (int i = 0; i < 149; i++)
		rej[i] = i * 7 + 1;
	for (int i = 0; i < 197; i++)
		rep[i] = 255 - i;
	rdma_create_id(ch, &l, NULL, RDMA_PS_TCP);
	say("bind", rdma_bind_addr(l, (struct sockaddr *)&sa));
	say("listen", rdma_listen(l, 1));
	if (next(&id) != RDMA_CM_EVENT_CONNECT_REQUEST)
		return 1;
	say("reject_149", rdma_reject(id, rej, 149));
	say("reject_148", rdma_reject(id, rej, 148));
	rdma_destroy_id(id);
	if (next(&id) != RDMA_CM_EVENT_CONNECT_REQUEST)
		return 1;
	make_qp(id);
	struct rdma_conn_param cp = { .private_data = rep, .private_data_len = 197 };
	say("accept_197", rdma_accept(id, &cp));
	cp.private_data_len = 196;
	say("accept_196", rdma_accept(id, &cp));
	if (next(NULL) != RDMA_CM_EVENT_ESTABLISHED)
		return 1;
	if (next(NULL) != RDMA_CM_EVENT_DISCONNECTED)
		return 1;
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_id(l);
	return 0;
}

/* One connection attempt with "hello": the event it ends in. */
static int connect_once(const char *peer, int port, struct rdma_cm_id **out)
{
	struct rdma_cm_id *id;
	struct sockaddr_in da = at(peer, port);
	rdma_create_id(ch, &id, NULL, ud ? RDMA_PS_UDP : RDMA_PS_TCP);
	rdma_resolve_addr(id, NULL, (struct sockaddr *)&da, 2000);
	if (next(NULL) != RDMA_CM_EVENT_ADDR_RESOLVED)
		exit(1);
	rdma_resolve_route(id, 2000);
	if (next(NULL) != RDMA_CM_EVENT_ROUTE_RESOLVED)
		exit(1);
	make_qp(id);
	struct rdma_conn_param cp = { .private_data = "hello", .private_data_len = 5 };
	say("connect", rdma_connect(id, &cp));
	*out = id;
	return next(NULL);
}

static int ud_client(const char *peer, int port)
{
	struct rdma_cm_id *id;
	if (connect_once(peer, port, &id) != RDMA_CM_EVENT_UNREACHABLE)
		return 1;
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	if (connect_once(peer, port, &id) != RDMA_CM_EVENT_ESTABLISHED)
		return 1;
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	return 0;
}

static int client(const char *peer, int port)
{
	struct rdma_cm_id *id;
	if (connect_once(peer, port, &id) != RDMA_CM_EVENT_REJECTED)
		return 1;
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	if (connect_once(peer, port, &id) != RDMA_CM_EVENT_ESTABLISHED)
		return 1;
	say("disconnect", rdma_disconnect(id));
	if (next(NULL) != RDMA_CM_EVENT_DISCONNECTED)
		return 1;
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	ch = rdma_create_event_channel();
	int port = atoi(argv[3]);
	ud = strncmp(argv[1], "ud", 2) == 0;
	int r;
	if (strcmp(argv[1], "server") == 0)
		r = server(argv[2], port);
	else if (strcmp(argv[1], "client") == 0)
		r = client(argv[2], port);
	else if (strcmp(argv[1], "udserver") == 0)
		r = ud_server(argv[2], port);
	else
		r = ud_client(argv[2], port);
	printf("done %d\n", r);
	return r;
}
