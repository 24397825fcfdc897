/* Bad input to rdma_cm, answered as rdma-core's librdmacm answers it on kernel rxe.
 * argv[1]: a peer host where nothing listens; argv[2]: an address no route reaches;
 * argv[3]: an address of no local interface; argv[4]: rocex's library directory.
 * Prints one line per step: "step value". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

static struct sockaddr_in at(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

/* The next event on ch within 30 s: its type, and its status in *status. */
static int next(struct rdma_event_channel *ch, int *status)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;
	if (poll(&p, 1, 30000) != 1 || rdma_get_cm_event(ch, &e))
		return -1;
	int t = e->event;
	*status = e->status;
	rdma_ack_cm_event(e);
	return t;
}

/* -1 and errno of a failed call, as "rc errno". */
#define SAY(step, call)                                                        \
	do {                                                                   \
		errno = 0;                                                     \
		int r_ = (call);                                               \
		printf("%s %d %s\n", step, r_, r_ ? strerror(errno) : "ok");   \
	} while (0)

/* Whether the library that defines fn is the file `so` of directory dir. */
static int loaded_from(void *fn, const char *dir, const char *so)
{
	Dl_info info;
	char want[PATH_MAX], path[PATH_MAX], got[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", dir, so);
	return dladdr(fn, &info) && realpath(info.dli_fname, got) && realpath(path, want) &&
	       !strcmp(got, want);
}

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	/* Both libraries are rocex's, librdmacm's own libibverbs too. */
	int n = 0;
	struct ibv_context **devs = rdma_get_devices(&n);
	printf("devices %d %s\n", n, n ? ibv_get_device_name(devs[0]->device) : "-");
	rdma_free_devices(devs);
	printf("librdmacm rocex %d\n", loaded_from((void *)rdma_create_id, argv[4], "librdmacm.so.1"));
	printf("libibverbs rocex %d\n", loaded_from((void *)ibv_open_device, argv[4], "libibverbs.so.1"));
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	int st, v = 1;
	uint8_t tos = 0;

	/* A channel with nothing in it, made non-blocking. */
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	struct rdma_cm_event *e;
	SAY("get_event_empty", rdma_get_cm_event(ch, &e));
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) & ~O_NONBLOCK);

	SAY("create_id_bad_ps", rdma_create_id(ch, &id, NULL, 0x7777));
	SAY("create_id", rdma_create_id(ch, &id, NULL, RDMA_PS_TCP));

	/* Options: the kernel's ucma_set_option answers. */
	SAY("option_unknown_name", rdma_set_option(id, RDMA_OPTION_ID, 99, &v, sizeof v));
	SAY("option_unknown_level", rdma_set_option(id, 7, RDMA_OPTION_ID_TOS, &tos, 1));
	SAY("option_tos_bad_len", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &v, sizeof v));
	SAY("option_tos", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1));
	SAY("option_reuseaddr", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof v));

	/* An address of no interface. */
	struct sockaddr_in nowhere = at(argv[3], 0);
	SAY("bind_foreign", rdma_bind_addr(id, (struct sockaddr *)&nowhere));

	/* No route: the resolution fails as an event. */
	struct sockaddr_in unrouted = at(argv[2], 7471);
	SAY("resolve_unrouted", rdma_resolve_addr(id, NULL, (struct sockaddr *)&unrouted, 2000));
	int t = next(ch, &st);
	printf("unrouted_event %s %s\n", rdma_event_str(t), strerror(-st));
	rdma_destroy_id(id);

	/* A peer where nothing listens: the peer's CM rejects (invalid service ID, 8). */
	struct sockaddr_in peer = at(argv[1], 7999);
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	SAY("resolve", rdma_resolve_addr(id, NULL, (struct sockaddr *)&peer, 2000));
	t = next(ch, &st);
	printf("event %s %d\n", rdma_event_str(t), st);
	SAY("connect_before_route", rdma_connect(id, NULL));
	SAY("resolve_route", rdma_resolve_route(id, 2000));
	t = next(ch, &st);
	printf("event %s %d\n", rdma_event_str(t), st);
	SAY("connect_without_qp", rdma_connect(id, NULL));
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	SAY("create_qp", rdma_create_qp(id, NULL, &qa));
	char big[57] = { 0 };
	struct rdma_conn_param too_much = { .private_data = big, .private_data_len = sizeof big };
	SAY("connect_57_bytes", rdma_connect(id, &too_much));
	SAY("connect", rdma_connect(id, NULL));
	t = next(ch, &st);
	printf("connect_event %s %d\n", rdma_event_str(t), st);
	SAY("disconnect_rejected", rdma_disconnect(id));
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	/* perftest 4.5 resolves again on the id it has just destroyed after a rejection:
	 * rdma-core's library reads freed memory there; rocex's answers EINVAL, and a second
	 * destroy too. */
	SAY("resolve_destroyed", rdma_resolve_addr(id, NULL, (struct sockaddr *)&peer, 2000));
	SAY("destroy_destroyed", rdma_destroy_id(id));

	/* rdma_cm over UD: the peer's CM answers a SIDR_REQ for a port nobody listens on
	 * with status 1 (service ID not supported), UNREACHABLE with that status; 181 bytes
	 * of private data are one more than a SIDR_REQ carries after rdma_cm's header. */
	SAY("create_id_udp", rdma_create_id(ch, &id, NULL, RDMA_PS_UDP));
	rdma_resolve_addr(id, NULL, (struct sockaddr *)&peer, 2000);
	next(ch, &st);
	rdma_resolve_route(id, 2000);
	next(ch, &st);
	struct ibv_qp_init_attr ua = { .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	SAY("create_qp_ud", rdma_create_qp(id, NULL, &ua));
	char bigger[181] = { 0 };
	struct rdma_conn_param sidr_too_much = { .private_data = bigger, .private_data_len = sizeof bigger };
	SAY("connect_ud_181_bytes", rdma_connect(id, &sidr_too_much));
	SAY("connect_ud", rdma_connect(id, NULL));
	t = next(ch, &st);
	printf("connect_ud_event %s %d\n", rdma_event_str(t), st);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);

	/* IPoIB's port space and multicast need multicast groups, which rocex has not. */
	SAY("create_id_ipoib", rdma_create_id(ch, &id, NULL, RDMA_PS_IPOIB));
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	SAY("join_multicast", rdma_join_multicast(id, (struct sockaddr *)&peer, NULL));
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}
