/* A device listed while its rocexd lived, opened after the daemon died: prints
 * "listed N", then for each line read from stdin tries ibv_open_device on the first
 * device and prints "open ok" or "open: STRERROR" (the errno ibv_open_device left). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	printf("listed %d\n", n);
	fflush(stdout);
	if (!list || n < 1)
		return 1;
	char line[64];
	while (fgets(line, sizeof(line), stdin)) {
		errno = 0;
		struct ibv_context *ctx = ibv_open_device(list[0]);
		if (ctx) {
			printf("open ok\n");
			ibv_close_device(ctx);
		} else {
			printf("open: %s\n", strerror(errno));
		}
		fflush(stdout);
	}
	ibv_free_device_list(list);
	return 0;
}
