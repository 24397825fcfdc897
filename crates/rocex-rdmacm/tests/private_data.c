/* Private data in each CM message, as rdma_cm's events hand it on.
 *   private_data server ADDR PORT: listens; rejects the first request (after trying 149
 *     bytes) with 148 bytes, accepts the second (after trying 197 bytes) with 196.
 *   private_data client PEER PORT: connects twice with 5 bytes, "hello".
 *   private_data udserver ADDR PORT, udclient PEER PORT: the same over UD (SIDR), with
 *     136 bytes in the rejecting and the accepting SIDR_REP (137: refused); the server
 *     prints its QP's number, the client the QPN and Q_Key its ESTABLISHED names.
 * Prints each event with its private data's length and bytes in hex, and each call's
 * result. */
/* Whether the ids are UD (RDMA_PS_UDP: SIDR) rather than RC. */
static int ud;

/* The next event, printed as "event NAME STATUS LEN HEX". */
static int next(struct rdma_cm_id **id)
{
	struct rdma_cm_event *e = await_event();
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

static int ud_server(const char *addr, int port)
{
	struct rdma_cm_id *id;
	unsigned char rej[137], rep[137];
	for (int i = 0; i < 137; i++) {
		rej[i] = i * 7 + 1;
		rep[i] = 255 - i;
	}
	struct rdma_cm_id *l = listener(addr, port, RDMA_PS_UDP);
	if (next(&id) != RDMA_CM_EVENT_CONNECT_REQUEST)
		return 1;
	say("reject_137", rdma_reject(id, rej, 137));
	say("reject_136", rdma_reject(id, rej, 136));
	rdma_destroy_id(id);
	if (next(&id) != RDMA_CM_EVENT_CONNECT_REQUEST)
		return 1;
	make_qp(id, IBV_QPT_UD);
	printf("qpn %u\n", id->qp->qp_num);
	struct rdma_conn_param cp = { .private_data = rep, .private_data_len = 137 };
	say("accept_137", rdma_accept(id, &cp));
	cp.private_data_len = 136;
	say("accept_136", rdma_accept(id, &cp));
	/* Nothing follows an accepted SIDR request; stay until the client is done. */
	char line[8];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	destroy_with_qp(id);
	rdma_destroy_id(l);
	return 0;
}

static int server(const char *addr, int port)
{
	struct rdma_cm_id *id;
	unsigned char rej[149], rep[197];
	for (int i = 0; i < 149; i++)
		rej[i] = i * 7 + 1;
	for (int i = 0; i < 197; i++)
		rep[i] = 255 - i;
	struct rdma_cm_id *l = listener(addr, port, RDMA_PS_TCP);
	if (next(&id) != RDMA_CM_EVENT_CONNECT_REQUEST)
		return 1;
	say("reject_149", rdma_reject(id, rej, 149));
	say("reject_148", rdma_reject(id, rej, 148));
	rdma_destroy_id(id);
	if (next(&id) != RDMA_CM_EVENT_CONNECT_REQUEST)
		return 1;
	make_qp(id, IBV_QPT_RC);
	struct rdma_conn_param cp = { .private_data = rep, .private_data_len = 197 };
	say("accept_197", rdma_accept(id, &cp));
	cp.private_data_len = 196;
	say("accept_196", rdma_accept(id, &cp));
	if (next(NULL) != RDMA_CM_EVENT_ESTABLISHED)
		return 1;
	if (next(NULL) != RDMA_CM_EVENT_DISCONNECTED)
		return 1;
	destroy_with_qp(id);
	rdma_destroy_id(l);
	return 0;
}

/* One connection attempt with "hello": the event it ends in. */
static int connect_once(const char *peer, int port, struct rdma_cm_id **out)
{
	struct rdma_cm_id *id = ud ? resolved(peer, port, RDMA_PS_UDP, IBV_QPT_UD)
				   : resolved(peer, port, RDMA_PS_TCP, IBV_QPT_RC);
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
	destroy_with_qp(id);
	if (connect_once(peer, port, &id) != RDMA_CM_EVENT_ESTABLISHED)
		return 1;
	destroy_with_qp(id);
	return 0;
}

static int client(const char *peer, int port)
{
	struct rdma_cm_id *id;
	if (connect_once(peer, port, &id) != RDMA_CM_EVENT_REJECTED)
		return 1;
	destroy_with_qp(id);
	if (connect_once(peer, port, &id) != RDMA_CM_EVENT_ESTABLISHED)
		return 1;
	say("disconnect", rdma_disconnect(id));
	if (next(NULL) != RDMA_CM_EVENT_DISCONNECTED)
		return 1;
	destroy_with_qp(id);
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
