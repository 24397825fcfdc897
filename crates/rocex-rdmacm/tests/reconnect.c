/* A listener destroyed and made again on the same port, and the RTR and RTS attributes
 * rdma_init_qp_attr gives for an RC QP, connected and before accepting.
 *   reconnect server ADDR PORT: listens, destroys the listener, waits for a line on
 *     stdin, listens again on the same port, and takes one connect request: prints the
 *     request's RTR and RTS attributes, moves its QP to RTR with them and accepts.
 *   reconnect client PEER PORT: connects (the server has no listener then), waits for a
 *     line on stdin, connects again, and disconnects after another line.
 *   reconnect orphan ADDR PORT: listens, destroys the event channel under the listening
 *     id (as perftest does on a failed connect), waits for a line on stdin, then destroys
 *     the id.
 *   reconnect connect PEER PORT: one connect, its event.
 *   reconnect families ADDR PORT: listens on [::] with AFONLY set and on 0.0.0.0, both on
 *     PORT (tgtd's two passive listeners), then rejects the one connect request, saying
 *     which listener took it.
 *   reconnect signal ADDR PORT: listens (which starts the library's event thread), then
 *     blocks SIGUSR2 and takes it from a signalfd, as tgtd does, and raises it at the
 *     process: the signalfd must get it, and no thread may take it in its stead.
 * Prints one line per step. */
#include <signal.h>
#include <unistd.h>
#include <sys/signalfd.h>

/* The next event, printed as "event NAME STATUS". */
static int next(struct rdma_cm_id **id)
{
	struct rdma_cm_event *e = await_event();
	int t = e->event;
	printf("event %s %d\n", rdma_event_str(t), e->status);
	if (id)
		*id = e->id;
	rdma_ack_cm_event(e);
	return t;
}

static void wait_line(void)
{
	char line[16];
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		exit(1);
}

/* The RTR and RTS attributes of an id, with whether each mask is the kernel CM's
 * (cm_init_qp_rtr_attr, cm_init_qp_rts_attr), each line starting with `tag`. */
static void attrs_as(struct rdma_cm_id *id, const char *tag)
{
	struct ibv_qp_attr a;
	int mask;
	const int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	const int rts = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	char dgid[INET_ADDRSTRLEN];
	char step[32];
	printf("%sqpn %u\n", tag, id->qp->qp_num);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	snprintf(step, sizeof step, "%sinit_rtr", tag);
	say(step, rdma_init_qp_attr(id, &a, &mask));
	inet_ntop(AF_INET, &a.ah_attr.grh.dgid.raw[12], dgid, sizeof(dgid));
	printf("%srtr mask %s state %d dest_qpn %u rq_psn %u mtu %d global %d dgid %s "
	       "max_dest_rd_atomic %d\n",
	       tag, mask == rtr ? "kernel" : "other", a.qp_state, a.dest_qp_num, a.rq_psn,
	       a.path_mtu, a.ah_attr.is_global, dgid, a.max_dest_rd_atomic);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	snprintf(step, sizeof step, "%sinit_rts", tag);
	say(step, rdma_init_qp_attr(id, &a, &mask));
	printf("%srts mask %s state %d sq_psn %u max_rd_atomic %d\n", tag,
	       mask == rts ? "kernel" : "other", a.qp_state, a.sq_psn, a.max_rd_atomic);
}

static void attrs(struct rdma_cm_id *id)
{
	attrs_as(id, "");
}

static int server(const char *addr, int port)
{
	struct rdma_cm_id *id;
	struct sockaddr_in sa = at(addr, port);
	struct rdma_cm_id *l = listener(addr, port, RDMA_PS_TCP);
	say("destroy_listener", rdma_destroy_id(l));
	wait_line();
	rdma_create_id(ch, &l, NULL, RDMA_PS_TCP);
	say("bind_again", rdma_bind_addr(l, (struct sockaddr *)&sa));
	say("listen_again", rdma_listen(l, 1));
	fflush(stdout);
	if (next(&id) != RDMA_CM_EVENT_CONNECT_REQUEST)
		return 1;
	make_qp(id, IBV_QPT_RC);
	printf("dst_port %u\n", ntohs(rdma_get_dst_port(id)));
	/* Before accepting: the attributes the accept will settle, and the QP moved to
	 * RTR with them by the program itself, as rdma-core's librdmacm allows. */
	attrs_as(id, "pre_");
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
	int mask;
	rdma_init_qp_attr(id, &a, &mask);
	say("modify_rtr_before_accept", ibv_modify_qp(id->qp, &a, mask));
	say("accept", rdma_accept(id, NULL));
	if (next(NULL) != RDMA_CM_EVENT_ESTABLISHED)
		return 1;
	attrs(id);
	if (next(NULL) != RDMA_CM_EVENT_DISCONNECTED)
		return 1;
	destroy_with_qp(id);
	rdma_destroy_id(l);
	return 0;
}

/* One connection attempt to peer:port: the event it ends in. */
static int connect_once(const char *peer, int port, struct rdma_cm_id **out)
{
	struct rdma_cm_id *id = resolved(peer, port, RDMA_PS_TCP, IBV_QPT_RC);
	printf("src_port %u\n", ntohs(rdma_get_src_port(id)));
	say("connect", rdma_connect(id, NULL));
	int t = next(NULL);
	*out = id;
	return t;
}

static int client(const char *peer, int port)
{
	struct rdma_cm_id *id;
	if (connect_once(peer, port, &id) != RDMA_CM_EVENT_REJECTED)
		return 1;
	destroy_with_qp(id);
	wait_line();
	if (connect_once(peer, port, &id) != RDMA_CM_EVENT_ESTABLISHED)
		return 1;
	attrs(id);
	wait_line();
	say("disconnect", rdma_disconnect(id));
	if (next(NULL) != RDMA_CM_EVENT_DISCONNECTED)
		return 1;
	destroy_with_qp(id);
	return 0;
}

static int orphan(const char *addr, int port)
{
	struct rdma_cm_id *l = listener(addr, port, RDMA_PS_TCP);
	rdma_destroy_event_channel(ch);
	printf("channel_destroyed\n");
	wait_line();
	say("destroy_orphan", rdma_destroy_id(l));
	return 0;
}

static int families(int port)
{
	struct rdma_cm_id *l6, *l4, *req;
	struct sockaddr_in6 any6 = { .sin6_family = AF_INET6, .sin6_port = htons(port),
				     .sin6_addr = IN6ADDR_ANY_INIT };
	struct sockaddr_in any4 = at("0.0.0.0", port);
	int one = 1;
	rdma_create_id(ch, &l6, NULL, RDMA_PS_TCP);
	say("afonly", rdma_set_option(l6, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, sizeof one));
	say("bind6", rdma_bind_addr(l6, (struct sockaddr *)&any6));
	say("listen6", rdma_listen(l6, 1));
	rdma_create_id(ch, &l4, NULL, RDMA_PS_TCP);
	say("bind4", rdma_bind_addr(l4, (struct sockaddr *)&any4));
	say("listen4", rdma_listen(l4, 1));
	printf("listening\n");
	fflush(stdout);
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;
	if (poll(&p, 1, 30000) != 1 || rdma_get_cm_event(ch, &e))
		return 1;
	printf("event %s on %s\n", rdma_event_str(e->event),
	       e->listen_id == l4 ? "v4" : e->listen_id == l6 ? "v6" : "?");
	req = e->id;
	rdma_ack_cm_event(e);
	say("reject", rdma_reject(req, NULL, 0));
	rdma_destroy_id(req);
	rdma_destroy_id(l4);
	rdma_destroy_id(l6);
	return 0;
}

static int signal_to_fd(const char *addr, int port)
{
	struct rdma_cm_id *l = listener(addr, port, RDMA_PS_TCP);
	sigset_t usr2;
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	sigprocmask(SIG_BLOCK, &usr2, NULL);
	int fd = signalfd(-1, &usr2, 0);
	kill(getpid(), SIGUSR2);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct signalfd_siginfo si;
	if (poll(&p, 1, 10000) != 1 || read(fd, &si, sizeof si) != sizeof si) {
		printf("signalfd got nothing\n");
		return 1;
	}
	printf("signalfd got %u\n", si.ssi_signo);
	say("destroy_listener", rdma_destroy_id(l));
	return si.ssi_signo == SIGUSR2 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	ch = rdma_create_event_channel();
	int port = atoi(argv[3]);
	struct rdma_cm_id *id;
	int r;
	if (strcmp(argv[1], "server") == 0)
		r = server(argv[2], port);
	else if (strcmp(argv[1], "orphan") == 0)
		r = orphan(argv[2], port);
	else if (strcmp(argv[1], "families") == 0)
		r = families(port);
	else if (strcmp(argv[1], "signal") == 0)
		r = signal_to_fd(argv[2], port);
	else if (strcmp(argv[1], "connect") == 0)
		r = connect_once(argv[2], port, &id) == RDMA_CM_EVENT_REJECTED ? 0 : 1;
	else
		r = client(argv[2], port);
	printf("done %d\n", r);
	return r;
}
