/*
 * LD_PRELOAD shim for tgtd: a passive getaddrinfo(NULL, port) answers with the IPv4
 * wildcard only. tgtd's iSER portal binds one rdma_cm listener per answer (:: with
 * AFONLY, then 0.0.0.0, on the same port); rocex's librdmacm keeps one listener per port
 * whatever the family, so the second bind fails with EADDRINUSE (docs/storage.md).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <string.h>
#include <sys/socket.h>

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		struct addrinfo **res)
{
	static int (*real)(const char *, const char *, const struct addrinfo *,
			   struct addrinfo **);
	struct addrinfo h;

	if (!real)
		real = (int (*)(const char *, const char *, const struct addrinfo *,
				struct addrinfo **))dlsym(RTLD_NEXT, "getaddrinfo");
	if (!node && hints && (hints->ai_flags & AI_PASSIVE) && hints->ai_family == AF_UNSPEC) {
		memcpy(&h, hints, sizeof(h));
		h.ai_family = AF_INET;
		hints = &h;
	}
	return real(node, service, hints, res);
}
