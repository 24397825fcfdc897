/* ibv_query_gid_ex and ibv_query_gid_table (verbs.h's inline wrappers of rdma-core's
 * _ibv_query_gid_ex and _ibv_query_gid_table) against ibv_query_gid: two RoCE v2 entries,
 * index 0 and 1 of port 1, the same GIDs; the kernel's errnos for a bad port (EINVAL),
 * an empty or out-of-range index (ENODATA), flags (EINVAL) and a table too small for the
 * entries (-EINVAL). Prints "ok" and each entry, or the first check that failed. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

#define FAIL(...) do { printf(__VA_ARGS__); printf("\n"); return 1; } while (0)

int main(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	if (!ctx)
		FAIL("no device");
	struct ibv_gid_entry t[8];
	ssize_t n = ibv_query_gid_table(ctx, t, 8, 0);
	if (n != 2)
		FAIL("ibv_query_gid_table: %zd entries", n);
	for (int i = 0; i < 2; i++) {
		union ibv_gid g;
		struct ibv_gid_entry e;
		if (ibv_query_gid(ctx, 1, i, &g) || ibv_query_gid_ex(ctx, 1, i, &e, 0))
			FAIL("GID %d: query failed", i);
		if (t[i].gid_index != (uint32_t)i || t[i].port_num != 1 ||
		    t[i].gid_type != IBV_GID_TYPE_ROCE_V2 || memcmp(&t[i].gid, &g, 16) ||
		    memcmp(&e, &t[i], sizeof e))
			FAIL("GID %d: the table's entry differs from ibv_query_gid(_ex)", i);
		char s[40];
		const uint8_t *r = g.raw;
		snprintf(s, sizeof s, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
			 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11],
			 r[12], r[13], r[14], r[15]);
		printf("%d %s\n", i, s);
	}
	struct ibv_gid_entry e;
	if (ibv_query_gid_ex(ctx, 2, 0, &e, 0) != EINVAL)
		FAIL("port 2 is not EINVAL");
	if (ibv_query_gid_ex(ctx, 1, 2, &e, 0) != ENODATA || ibv_query_gid_ex(ctx, 1, 5000, &e, 0) != ENODATA)
		FAIL("an empty or out-of-range index is not ENODATA");
	if (ibv_query_gid_ex(ctx, 1, 0, &e, 1) != EINVAL)
		FAIL("flags 1 is not EINVAL");
	if (ibv_query_gid_table(ctx, t, 1, 0) != -EINVAL)
		FAIL("a one-entry table is not -EINVAL");
	printf("ok\n");
	return 0;
}
