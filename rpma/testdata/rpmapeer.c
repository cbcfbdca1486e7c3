/*
 * rpmapeer: a C librpma peer for the rpma package's interoperability
 * tests (rpma/interop_vm_test.go), built during the test with
 *
 *     gcc -O2 -Wall -Werror -o rpmapeer rpmapeer.c -lrpma -libverbs
 *
 * Usage: rpmapeer server|client ADDR PORT SCENARIO
 *
 * A server listens on ADDR:PORT (printing "LISTENING" once it does) and
 * takes one connection; a client connects to ADDR:PORT. Either side
 * prints "OK <scenario> <role> ..." and exits 0 when everything it
 * checked was right; on the first error it prints "FAIL ..." to stderr
 * and exits 1. An alarm ends it after a minute whatever it waits for.
 * A server prints "ESTABLISHED" once its connection is; the read, write
 * and atomic clients, which never hear from the server, wait for a line
 * on stdin (the Go server's word that its connection is established)
 * before their first operation.
 *
 * Descriptors travel as private data in the layout of librpma's
 * examples (struct common_data below: a data offset, the sizes of the
 * memory region and peer configuration descriptors, then the
 * descriptors). Data is pat(seed, i) = seed + 7*i + i/256 (mod 256).
 * The Go side of each scenario is in interop_vm_test.go and uses the
 * same constants.
 *
 * Scenarios (the server registers the remote region; the client acts):
 *
 *   read        server: 4096 bytes READ_SRC of pat(0x5a, i), data offset
 *               256. client: reads 1024 bytes at the data offset into
 *               its region at 100, checks them.
 *   write       server: 4096 zero bytes WRITE_DST|FLUSH_TYPE_VISIBILITY|
 *               FLUSH_TYPE_PERSISTENT, peer configuration with direct
 *               write to PMem, data offset 512. client: writes 1024 bytes
 *               of pat(0xa1) at the offset, flushes them to visibility;
 *               checks that a persistent flush is refused before the
 *               server's configuration is applied; applies it, writes
 *               1024 bytes of pat(0xb2) after the first ones, flushes
 *               them to persistence; disconnects. The server checks its
 *               region after the disconnect.
 *   atomic      server: 4096 zero bytes WRITE_DST|FLUSH_TYPE_VISIBILITY,
 *               data offset 64. client: atomic write of 01 23 45 67 89
 *               ab cd ef at the offset (completion printed as
 *               "opcode=..."), flush to visibility, disconnect. The
 *               server checks the 8 bytes and that nothing else changed.
 *   msg         both: a receive CQ, three receives posted before the
 *               connection (conn_req_recv), a WRITE_DST target region
 *               whose descriptor goes in the private data of both sides
 *               (data offset: server 128, client 640). The client sends
 *               SEND 100 bytes pat(0x11); SEND_WITH_IMM 200 bytes
 *               pat(0x12) imm 0x12345678; WRITE_WITH_IMM 300 bytes
 *               pat(0x13) imm 0x9abcdef0; the server checks them and
 *               answers SEND 110 pat(0x21); SEND_WITH_IMM 210 pat(0x22)
 *               imm 0x0badf00d; WRITE_WITH_IMM 310 pat(0x23) imm
 *               0xfeedface; the client checks them and disconnects.
 *   srq         server: an SRQ (rq 10, receive CQ 10) in the connection
 *               configuration, three receives posted to it. client:
 *               SEND 64 pat(0x31); SEND_WITH_IMM 128 pat(0x32) imm
 *               0x5151aaaa; SEND_WITH_IMM of 0 bytes imm 0x77. The
 *               server takes the completions from the SRQ's receive CQ,
 *               checks them (and their QP number), and disconnects.
 *   nativeflush server only: as write's server, but it checks nothing
 *               while connected; after the connection ends it prints
 *               "OK nativeflush server event=<event> first=<yes|no>":
 *               how the connection ended, and whether the 1024 bytes
 *               of pat(0xa1) are at the data offset.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librpma.h>

#define DESCRIPTORS_MAX_SIZE 24

/* The private data of librpma's examples. */
struct common_data {
	uint16_t data_offset;
	uint8_t mr_desc_size;
	uint8_t pcfg_desc_size;
	char descriptors[DESCRIPTORS_MAX_SIZE];
};

#define REGION 4096
#define TIMEOUT_MS 10000

static const char *role, *scenario;

static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "FAIL %s %s: ", scenario ? scenario : "-", role ? role : "-");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void check(int ret, const char *what)
{
	if (ret)
		fail("%s: %s (%d)", what, rpma_err_2str(ret), ret);
}

static uint8_t pat(uint8_t seed, size_t i)
{
	return (uint8_t)(seed + 7 * i + (i >> 8));
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pat(seed, i);
}

/* expect fails unless p[0:n] is pat(seed, first+i). */
static void expect(const char *what, const uint8_t *p, size_t n, uint8_t seed, size_t first)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pat(seed, first + i))
			fail("%s: byte %zu is %#x, want %#x", what, i, p[i], pat(seed, first + i));
}

static void expect_zero(const char *what, const uint8_t *p, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (p[i] != 0)
			fail("%s: byte %zu is %#x, want 0 (nothing wrote there)", what, i, p[i]);
}

static uint8_t *alloc_region(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, n))
		fail("posix_memalign(%zu) failed", n);
	memset(p, 0, n);
	return p;
}

static struct rpma_mr_local *reg(struct rpma_peer *peer, void *p, size_t n, int usage)
{
	struct rpma_mr_local *mr = NULL;
	check(rpma_mr_reg(peer, p, n, usage, &mr), "rpma_mr_reg");
	return mr;
}

static struct rpma_peer *make_peer(const char *addr, enum rpma_util_ibv_context_type side)
{
	struct ibv_context *dev = NULL;
	struct rpma_peer *peer = NULL;
	check(rpma_utils_get_ibv_context(addr, side, &dev), "rpma_utils_get_ibv_context");
	check(rpma_peer_new(dev, &peer), "rpma_peer_new");
	return peer;
}

static struct rpma_conn_cfg *make_cfg(void)
{
	struct rpma_conn_cfg *cfg = NULL;
	check(rpma_conn_cfg_new(&cfg), "rpma_conn_cfg_new");
	check(rpma_conn_cfg_set_timeout(cfg, TIMEOUT_MS), "rpma_conn_cfg_set_timeout");
	return cfg;
}

static void expect_event(struct rpma_conn *conn, enum rpma_conn_event want)
{
	enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
	check(rpma_conn_next_event(conn, &ev), "rpma_conn_next_event");
	if (ev != want)
		fail("connection event \"%s\", want \"%s\"", rpma_utils_conn_event_2str(ev),
			rpma_utils_conn_event_2str(want));
}

/* accept connects an incoming request and waits until it is established. */
static struct rpma_conn *accept_req(struct rpma_conn_req *req, const void *pdata, size_t len)
{
	struct rpma_conn *conn = NULL;
	struct rpma_conn_private_data pd = {(void *)pdata, (uint8_t)len};
	check(rpma_conn_req_connect(&req, len ? &pd : NULL, &conn), "rpma_conn_req_connect");
	expect_event(conn, RPMA_CONN_ESTABLISHED);
	printf("ESTABLISHED\n");
	fflush(stdout);
	return conn;
}

/*
 * await_server waits for a line on stdin: the Go server's word that it
 * saw its connection established. A client that only reads or writes
 * could otherwise disconnect before the server's IB CM took the RTU, and
 * the server's first event would be a close (its CM drops an RTU that
 * comes after the DREQ). It is called before the first operation: on
 * siw the server's QP takes its socket only just before the server is
 * told the connection is established, and a frame that arrives before
 * that stays unread until more data comes (siw's accept race,
 * docs/testing.md), which a client waiting for its read never sends.
 */
static void await_server(void)
{
	char line[64];
	if (fgets(line, sizeof line, stdin) == NULL)
		fail("stdin ended before the server said it was established");
}

static struct rpma_ep *listen_on(struct rpma_peer *peer, const char *addr, const char *port)
{
	struct rpma_ep *ep = NULL;
	check(rpma_ep_listen(peer, addr, port, &ep), "rpma_ep_listen");
	printf("LISTENING\n");
	fflush(stdout);
	return ep;
}

static struct rpma_conn_req *next_req(struct rpma_ep *ep, struct rpma_conn_cfg *cfg)
{
	struct rpma_conn_req *req = NULL;
	check(rpma_ep_next_conn_req(ep, cfg, &req), "rpma_ep_next_conn_req");
	return req;
}

static struct rpma_conn_req *new_req(struct rpma_peer *peer, const char *addr, const char *port,
	struct rpma_conn_cfg *cfg)
{
	struct rpma_conn_req *req = NULL;
	check(rpma_conn_req_new(peer, addr, port, cfg, &req), "rpma_conn_req_new");
	return req;
}

/* common_pdata fills cd with the descriptors of mr and pcfg (may be NULL). */
static void common_pdata(struct common_data *cd, uint16_t off, struct rpma_mr_local *mr,
	struct rpma_peer_cfg *pcfg)
{
	size_t msize = 0, psize = 0;
	memset(cd, 0, sizeof(*cd));
	cd->data_offset = off;
	check(rpma_mr_get_descriptor_size(mr, &msize), "rpma_mr_get_descriptor_size");
	if (pcfg)
		check(rpma_peer_cfg_get_descriptor_size(pcfg, &psize), "rpma_peer_cfg_get_descriptor_size");
	if (msize + psize > DESCRIPTORS_MAX_SIZE)
		fail("descriptors of %zu+%zu bytes do not fit", msize, psize);
	check(rpma_mr_get_descriptor(mr, cd->descriptors), "rpma_mr_get_descriptor");
	if (pcfg)
		check(rpma_peer_cfg_get_descriptor(pcfg, cd->descriptors + msize), "rpma_peer_cfg_get_descriptor");
	cd->mr_desc_size = (uint8_t)msize;
	cd->pcfg_desc_size = (uint8_t)psize;
}

/* remote_from decodes the other side's private data: its region, and its peer configuration if pcfg. */
static struct rpma_mr_remote *remote_from(const struct rpma_conn_private_data *pd, uint16_t *off,
	struct rpma_peer_cfg **pcfg)
{
	struct common_data cd;
	struct rpma_mr_remote *mr = NULL;
	if (pd->ptr == NULL || pd->len < sizeof(cd))
		fail("private data of %u bytes, want at least %zu", pd->len, sizeof(cd));
	memcpy(&cd, pd->ptr, sizeof(cd));
	if (cd.mr_desc_size + cd.pcfg_desc_size > DESCRIPTORS_MAX_SIZE)
		fail("descriptor sizes %u+%u", cd.mr_desc_size, cd.pcfg_desc_size);
	check(rpma_mr_remote_from_descriptor(cd.descriptors, cd.mr_desc_size, &mr),
		"rpma_mr_remote_from_descriptor");
	if (pcfg) {
		if (cd.pcfg_desc_size == 0)
			fail("no peer configuration descriptor in the private data");
		check(rpma_peer_cfg_from_descriptor(cd.descriptors + cd.mr_desc_size, cd.pcfg_desc_size, pcfg),
			"rpma_peer_cfg_from_descriptor");
	}
	*off = cd.data_offset;
	return mr;
}

static void wait_wc(struct rpma_cq *cq, struct ibv_wc *wc, const char *what)
{
	for (;;) {
		int ret = rpma_cq_get_wc(cq, 1, wc, NULL);
		if (ret == 0)
			break;
		if (ret != RPMA_E_NO_COMPLETION)
			check(ret, "rpma_cq_get_wc");
		check(rpma_cq_wait(cq), "rpma_cq_wait");
	}
	if (wc->status != IBV_WC_SUCCESS)
		fail("%s: completion wr_id %" PRIu64 " status %s (%d)", what, wc->wr_id,
			ibv_wc_status_str(wc->status), wc->status);
}

static void expect_wc(struct rpma_cq *cq, uint64_t wr_id, enum ibv_wc_opcode op, const char *what)
{
	struct ibv_wc wc;
	wait_wc(cq, &wc, what);
	if (wc.wr_id != wr_id || wc.opcode != op)
		fail("%s: completion wr_id %" PRIu64 " opcode %d, want %" PRIu64 " and %d", what, wc.wr_id,
			wc.opcode, wr_id, op);
}

static struct rpma_cq *conn_cq(struct rpma_conn *conn)
{
	struct rpma_cq *cq = NULL;
	check(rpma_conn_get_cq(conn, &cq), "rpma_conn_get_cq");
	return cq;
}

/* end_active disconnects and waits for the connection to close. */
static void end_active(struct rpma_conn *conn)
{
	check(rpma_conn_disconnect(conn), "rpma_conn_disconnect");
	expect_event(conn, RPMA_CONN_CLOSED);
	check(rpma_conn_delete(&conn), "rpma_conn_delete");
}

/* end_passive waits for the other side to disconnect. */
static void end_passive(struct rpma_conn *conn)
{
	expect_event(conn, RPMA_CONN_CLOSED);
	check(rpma_conn_disconnect(conn), "rpma_conn_disconnect");
	check(rpma_conn_delete(&conn), "rpma_conn_delete");
}

#define CTX(n) ((const void *)(uintptr_t)(n))

/* ---- read ---- */

#define READ_SEED 0x5a
#define READ_OFF 256
#define READ_LEN 1024
#define READ_DST 100

static void read_server(struct rpma_peer *peer, const char *addr, const char *port)
{
	uint8_t *mem = alloc_region(REGION);
	fill(mem, REGION, READ_SEED);
	struct rpma_mr_local *mr = reg(peer, mem, REGION, RPMA_MR_USAGE_READ_SRC);
	struct rpma_peer_cfg *pcfg = NULL;
	check(rpma_peer_cfg_new(&pcfg), "rpma_peer_cfg_new");
	struct common_data cd;
	common_pdata(&cd, READ_OFF, mr, pcfg);
	struct rpma_ep *ep = listen_on(peer, addr, port);
	struct rpma_conn *conn = accept_req(next_req(ep, NULL), &cd, sizeof(cd));
	check(rpma_ep_shutdown(&ep), "rpma_ep_shutdown");
	end_passive(conn);
	expect("region after the connection", mem, REGION, READ_SEED, 0);
	check(rpma_peer_cfg_delete(&pcfg), "rpma_peer_cfg_delete");
	check(rpma_mr_dereg(&mr), "rpma_mr_dereg");
	printf("OK read server\n");
}

static void read_client(struct rpma_peer *peer, const char *addr, const char *port)
{
	uint8_t *mem = alloc_region(REGION);
	struct rpma_mr_local *mr = reg(peer, mem, REGION, RPMA_MR_USAGE_READ_DST);
	struct rpma_conn_cfg *cfg = make_cfg();
	struct rpma_conn *conn = NULL;
	struct rpma_conn_req *req = new_req(peer, addr, port, cfg);
	check(rpma_conn_req_connect(&req, NULL, &conn), "rpma_conn_req_connect");
	expect_event(conn, RPMA_CONN_ESTABLISHED);
	struct rpma_conn_private_data pd;
	check(rpma_conn_get_private_data(conn, &pd), "rpma_conn_get_private_data");
	uint16_t off;
	struct rpma_peer_cfg *pcfg = NULL;
	struct rpma_mr_remote *rmr = remote_from(&pd, &off, &pcfg);
	size_t size = 0;
	int ftype = -1;
	bool direct = true;
	check(rpma_mr_remote_get_size(rmr, &size), "rpma_mr_remote_get_size");
	check(rpma_mr_remote_get_flush_type(rmr, &ftype), "rpma_mr_remote_get_flush_type");
	check(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &direct), "rpma_peer_cfg_get_direct_write_to_pmem");
	if (size != REGION || ftype != 0 || off != READ_OFF || direct)
		fail("remote region of %zu bytes, flush type %d, data offset %u, direct write %d; want %d, 0, %d, 0",
			size, ftype, off, direct, REGION, READ_OFF);
	await_server();
	check(rpma_read(conn, mr, READ_DST, rmr, off, READ_LEN, RPMA_F_COMPLETION_ALWAYS, CTX(1)), "rpma_read");
	expect_wc(conn_cq(conn), 1, IBV_WC_RDMA_READ, "read");
	expect("read data", mem + READ_DST, READ_LEN, READ_SEED, READ_OFF);
	expect_zero("around the read data", mem, 0, READ_DST);
	expect_zero("around the read data", mem, READ_DST + READ_LEN, REGION);
	end_active(conn);
	check(rpma_mr_remote_delete(&rmr), "rpma_mr_remote_delete");
	check(rpma_peer_cfg_delete(&pcfg), "rpma_peer_cfg_delete");
	check(rpma_mr_dereg(&mr), "rpma_mr_dereg");
	check(rpma_conn_cfg_delete(&cfg), "rpma_conn_cfg_delete");
	printf("OK read client %d bytes\n", READ_LEN);
}

/* ---- write, atomic, nativeflush ---- */

#define WRITE_OFF 512
#define WRITE_LEN 1024
#define WRITE_SEED_A 0xa1
#define WRITE_SEED_B 0xb2
#define ATOMIC_OFF 64
static const char atomic_val[8] = {0x01, 0x23, 0x45, 0x67, (char)0x89, (char)0xab, (char)0xcd, (char)0xef};

/* target_server registers a zeroed region with usage, offers it with a
 * peer configuration of direct write to PMem, and returns when the
 * client's connection has ended, with how it ended in *ev. */
static uint8_t *target_server(struct rpma_peer *peer, const char *addr, const char *port, int usage,
	uint16_t off, enum rpma_conn_event *ev)
{
	uint8_t *mem = alloc_region(REGION);
	struct rpma_mr_local *mr = reg(peer, mem, REGION, usage);
	struct rpma_peer_cfg *pcfg = NULL;
	check(rpma_peer_cfg_new(&pcfg), "rpma_peer_cfg_new");
	check(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true), "rpma_peer_cfg_set_direct_write_to_pmem");
	struct common_data cd;
	common_pdata(&cd, off, mr, pcfg);
	struct rpma_ep *ep = listen_on(peer, addr, port);
	struct rpma_conn *conn = accept_req(next_req(ep, NULL), &cd, sizeof(cd));
	check(rpma_ep_shutdown(&ep), "rpma_ep_shutdown");
	check(rpma_conn_next_event(conn, ev), "rpma_conn_next_event");
	(void) rpma_conn_disconnect(conn);
	check(rpma_conn_delete(&conn), "rpma_conn_delete");
	check(rpma_mr_dereg(&mr), "rpma_mr_dereg");
	check(rpma_peer_cfg_delete(&pcfg), "rpma_peer_cfg_delete");
	return mem;
}

static void write_server(struct rpma_peer *peer, const char *addr, const char *port)
{
	enum rpma_conn_event ev;
	uint8_t *mem = target_server(peer, addr, port, RPMA_MR_USAGE_WRITE_DST |
		RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT, WRITE_OFF, &ev);
	if (ev != RPMA_CONN_CLOSED)
		fail("connection ended with \"%s\"", rpma_utils_conn_event_2str(ev));
	expect("first write (flushed to visibility)", mem + WRITE_OFF, WRITE_LEN, WRITE_SEED_A, 0);
	expect("second write (flushed to persistence)", mem + WRITE_OFF + WRITE_LEN, WRITE_LEN, WRITE_SEED_B, 0);
	expect_zero("around the writes", mem, 0, WRITE_OFF);
	expect_zero("around the writes", mem, WRITE_OFF + 2 * WRITE_LEN, REGION);
	printf("OK write server\n");
}

static void nativeflush_server(struct rpma_peer *peer, const char *addr, const char *port)
{
	enum rpma_conn_event ev;
	uint8_t *mem = target_server(peer, addr, port, RPMA_MR_USAGE_WRITE_DST |
		RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT, WRITE_OFF, &ev);
	bool first = true;
	for (size_t i = 0; i < WRITE_LEN; i++)
		first = first && mem[WRITE_OFF + i] == pat(WRITE_SEED_A, i);
	printf("OK nativeflush server event=%s first=%s\n", rpma_utils_conn_event_2str(ev), first ? "yes" : "no");
}

static void atomic_server(struct rpma_peer *peer, const char *addr, const char *port)
{
	enum rpma_conn_event ev;
	uint8_t *mem = target_server(peer, addr, port, RPMA_MR_USAGE_WRITE_DST |
		RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY, ATOMIC_OFF, &ev);
	if (ev != RPMA_CONN_CLOSED)
		fail("connection ended with \"%s\"", rpma_utils_conn_event_2str(ev));
	if (memcmp(mem + ATOMIC_OFF, atomic_val, 8) != 0)
		fail("atomic write target holds %02x%02x%02x%02x%02x%02x%02x%02x", mem[ATOMIC_OFF],
			mem[ATOMIC_OFF + 1], mem[ATOMIC_OFF + 2], mem[ATOMIC_OFF + 3], mem[ATOMIC_OFF + 4],
			mem[ATOMIC_OFF + 5], mem[ATOMIC_OFF + 6], mem[ATOMIC_OFF + 7]);
	expect_zero("around the atomic write", mem, 0, ATOMIC_OFF);
	expect_zero("around the atomic write", mem, ATOMIC_OFF + 8, REGION);
	printf("OK atomic server\n");
}

/* target_client connects and decodes the server's region and configuration. */
static struct rpma_conn *target_client(struct rpma_peer *peer, const char *addr, const char *port,
	struct rpma_conn_cfg *cfg, struct rpma_mr_remote **rmr, uint16_t *off, struct rpma_peer_cfg **pcfg)
{
	struct rpma_conn *conn = NULL;
	struct rpma_conn_req *req = new_req(peer, addr, port, cfg);
	check(rpma_conn_req_connect(&req, NULL, &conn), "rpma_conn_req_connect");
	expect_event(conn, RPMA_CONN_ESTABLISHED);
	struct rpma_conn_private_data pd;
	check(rpma_conn_get_private_data(conn, &pd), "rpma_conn_get_private_data");
	*rmr = remote_from(&pd, off, pcfg);
	return conn;
}

static void write_client(struct rpma_peer *peer, const char *addr, const char *port)
{
	uint8_t *mem = alloc_region(REGION);
	fill(mem, WRITE_LEN, WRITE_SEED_A);
	fill(mem + WRITE_LEN, WRITE_LEN, WRITE_SEED_B);
	struct rpma_mr_local *mr = reg(peer, mem, REGION, RPMA_MR_USAGE_WRITE_SRC);
	struct rpma_conn_cfg *cfg = make_cfg();
	struct rpma_mr_remote *rmr;
	struct rpma_peer_cfg *pcfg;
	uint16_t off;
	struct rpma_conn *conn = target_client(peer, addr, port, cfg, &rmr, &off, &pcfg);
	struct rpma_cq *cq = conn_cq(conn);
	int ftype = 0;
	bool direct = false;
	check(rpma_mr_remote_get_flush_type(rmr, &ftype), "rpma_mr_remote_get_flush_type");
	check(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &direct), "rpma_peer_cfg_get_direct_write_to_pmem");
	int want = RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT;
	if (ftype != want || !direct || off != WRITE_OFF)
		fail("remote flush type %#x, direct write %d, data offset %u; want %#x, 1, %d", ftype, direct, off,
			want, WRITE_OFF);

	await_server();
	check(rpma_write(conn, rmr, off, mr, 0, WRITE_LEN, RPMA_F_COMPLETION_ON_ERROR, CTX(1)), "rpma_write");
	check(rpma_flush(conn, rmr, off, WRITE_LEN, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS, CTX(2)),
		"rpma_flush(VISIBILITY)");
	/* librpma 1.2 flushes by reading: the completion is an RDMA read's. */
	expect_wc(cq, 2, IBV_WC_RDMA_READ, "flush to visibility");

	int ret = rpma_flush(conn, rmr, off, WRITE_LEN, RPMA_FLUSH_TYPE_PERSISTENT, RPMA_F_COMPLETION_ALWAYS, CTX(3));
	if (ret != RPMA_E_NOSUPP)
		fail("persistent flush before the remote configuration was applied: %d, want RPMA_E_NOSUPP", ret);
	check(rpma_conn_apply_remote_peer_cfg(conn, pcfg), "rpma_conn_apply_remote_peer_cfg");
	check(rpma_write(conn, rmr, off + WRITE_LEN, mr, WRITE_LEN, WRITE_LEN, RPMA_F_COMPLETION_ON_ERROR, CTX(4)),
		"rpma_write");
	check(rpma_flush(conn, rmr, off + WRITE_LEN, WRITE_LEN, RPMA_FLUSH_TYPE_PERSISTENT,
		RPMA_F_COMPLETION_ALWAYS, CTX(5)), "rpma_flush(PERSISTENT)");
	expect_wc(cq, 5, IBV_WC_RDMA_READ, "flush to persistence");
	end_active(conn);
	check(rpma_mr_remote_delete(&rmr), "rpma_mr_remote_delete");
	check(rpma_peer_cfg_delete(&pcfg), "rpma_peer_cfg_delete");
	check(rpma_mr_dereg(&mr), "rpma_mr_dereg");
	check(rpma_conn_cfg_delete(&cfg), "rpma_conn_cfg_delete");
	printf("OK write client\n");
}

static void atomic_client(struct rpma_peer *peer, const char *addr, const char *port)
{
	struct rpma_conn_cfg *cfg = make_cfg();
	struct rpma_mr_remote *rmr;
	struct rpma_peer_cfg *pcfg;
	uint16_t off;
	struct rpma_conn *conn = target_client(peer, addr, port, cfg, &rmr, &off, &pcfg);
	struct rpma_cq *cq = conn_cq(conn);
	if (off != ATOMIC_OFF)
		fail("data offset %u, want %d", off, ATOMIC_OFF);
	await_server();
	check(rpma_atomic_write(conn, rmr, off, atomic_val, RPMA_F_COMPLETION_ALWAYS, CTX(1)), "rpma_atomic_write");
	struct ibv_wc wc;
	wait_wc(cq, &wc, "atomic write");
	const char *op = wc.opcode == IBV_WC_RDMA_WRITE ? "RDMA_WRITE" :
		wc.opcode == IBV_WC_ATOMIC_WRITE ? "ATOMIC_WRITE" : NULL;
	if (wc.wr_id != 1 || op == NULL)
		fail("atomic write completion wr_id %" PRIu64 " opcode %d", wc.wr_id, wc.opcode);
	check(rpma_flush(conn, rmr, off, 8, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS, CTX(2)),
		"rpma_flush(VISIBILITY)");
	expect_wc(cq, 2, IBV_WC_RDMA_READ, "flush to visibility");
	end_active(conn);
	check(rpma_mr_remote_delete(&rmr), "rpma_mr_remote_delete");
	check(rpma_peer_cfg_delete(&pcfg), "rpma_peer_cfg_delete");
	check(rpma_conn_cfg_delete(&cfg), "rpma_conn_cfg_delete");
	printf("OK atomic client opcode=%s\n", op);
}

/* ---- messages ---- */

enum kind { M_SEND, M_SEND_IMM, M_WRITE_IMM };

struct msg {
	enum kind kind;
	size_t len;
	uint8_t seed;
	uint32_t imm;
};

#define NMSG 3
#define SLOT 512
#define SEND_SLOT 1024
#define MSG_SERVER_OFF 128
#define MSG_CLIENT_OFF 640
#define RECV_CTX 10
#define SRQ_CTX 20

static const struct msg client_msgs[NMSG] = {
	{M_SEND, 100, 0x11, 0}, {M_SEND_IMM, 200, 0x12, 0x12345678}, {M_WRITE_IMM, 300, 0x13, 0x9abcdef0}};
static const struct msg server_msgs[NMSG] = {
	{M_SEND, 110, 0x21, 0}, {M_SEND_IMM, 210, 0x22, 0x0badf00d}, {M_WRITE_IMM, 310, 0x23, 0xfeedface}};
static const struct msg srq_msgs[NMSG] = {
	{M_SEND, 64, 0x31, 0}, {M_SEND_IMM, 128, 0x32, 0x5151aaaa}, {M_SEND_IMM, 0, 0, 0x77}};

/* send_msgs sends msgs (a write goes to rmr at off) and checks their completions. */
static void send_msgs(struct rpma_conn *conn, struct rpma_mr_local *mr, uint8_t *mem, const struct msg *msgs,
	struct rpma_mr_remote *rmr, uint16_t off)
{
	for (int k = 0; k < NMSG; k++) {
		const struct msg *m = &msgs[k];
		size_t at = (size_t)k * SEND_SLOT;
		fill(mem + at, m->len, m->seed);
		struct rpma_mr_local *src = m->len ? mr : NULL;
		size_t soff = m->len ? at : 0;
		switch (m->kind) {
		case M_SEND:
			check(rpma_send(conn, src, soff, m->len, RPMA_F_COMPLETION_ALWAYS, CTX(k + 1)), "rpma_send");
			break;
		case M_SEND_IMM:
			check(rpma_send_with_imm(conn, src, soff, m->len, RPMA_F_COMPLETION_ALWAYS, m->imm, CTX(k + 1)),
				"rpma_send_with_imm");
			break;
		case M_WRITE_IMM:
			check(rpma_write_with_imm(conn, rmr, off, src, soff, m->len, RPMA_F_COMPLETION_ALWAYS, m->imm,
				CTX(k + 1)), "rpma_write_with_imm");
			break;
		}
	}
	struct rpma_cq *cq = conn_cq(conn);
	for (int k = 0; k < NMSG; k++)
		expect_wc(cq, (uint64_t)k + 1, msgs[k].kind == M_WRITE_IMM ? IBV_WC_RDMA_WRITE : IBV_WC_SEND,
			"sent message");
}

/* recv_msgs takes NMSG receive completions from cq and checks each
 * against msgs in order of arrival: the receive's buffer (slot wr_id -
 * ctx of recv), or target at off for a write. qp_num 0: not checked. */
static void recv_msgs(struct rpma_cq *cq, const uint8_t *recv, const uint8_t *target, uint16_t off,
	const struct msg *msgs, uint64_t ctx, uint32_t qp_num)
{
	bool seen[NMSG] = {false};
	for (int i = 0; i < NMSG; i++) {
		const struct msg *m = &msgs[i];
		struct ibv_wc wc;
		wait_wc(cq, &wc, "received message");
		if (wc.wr_id < ctx || wc.wr_id >= ctx + NMSG || seen[wc.wr_id - ctx])
			fail("message %d: receive completion wr_id %" PRIu64, i, wc.wr_id);
		size_t slot = wc.wr_id - ctx;
		seen[slot] = true;
		enum ibv_wc_opcode op = m->kind == M_WRITE_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
		bool imm = m->kind != M_SEND;
		if (wc.opcode != op || wc.byte_len != m->len || !!(wc.wc_flags & IBV_WC_WITH_IMM) != imm)
			fail("message %d: opcode %d, %u bytes, flags %#x; want opcode %d, %zu bytes, imm %d", i, wc.opcode,
				wc.byte_len, wc.wc_flags, op, m->len, imm);
		if (imm && ntohl(wc.imm_data) != m->imm)
			fail("message %d: imm %#x, want %#x", i, ntohl(wc.imm_data), m->imm);
		if (qp_num && wc.qp_num != qp_num)
			fail("message %d: qp_num %u, want the connection's %u", i, wc.qp_num, qp_num);
		if (m->kind == M_WRITE_IMM)
			expect("written data", target + off, m->len, m->seed, 0);
		else
			expect("message data", recv + slot * SLOT, m->len, m->seed, 0);
	}
}

struct msg_mem {
	uint8_t *recv, *send, *target;
	struct rpma_mr_local *recv_mr, *send_mr, *target_mr;
};

static void msg_mem_new(struct rpma_peer *peer, struct msg_mem *mm)
{
	mm->recv = alloc_region(REGION);
	mm->send = alloc_region(REGION);
	mm->target = alloc_region(REGION);
	mm->recv_mr = reg(peer, mm->recv, REGION, RPMA_MR_USAGE_RECV);
	mm->send_mr = reg(peer, mm->send, REGION, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_WRITE_SRC);
	mm->target_mr = reg(peer, mm->target, REGION, RPMA_MR_USAGE_WRITE_DST);
}

static void msg_mem_delete(struct msg_mem *mm)
{
	check(rpma_mr_dereg(&mm->recv_mr), "rpma_mr_dereg");
	check(rpma_mr_dereg(&mm->send_mr), "rpma_mr_dereg");
	check(rpma_mr_dereg(&mm->target_mr), "rpma_mr_dereg");
}

static struct rpma_conn_cfg *msg_cfg(void)
{
	struct rpma_conn_cfg *cfg = make_cfg();
	check(rpma_conn_cfg_set_rcq_size(cfg, 10), "rpma_conn_cfg_set_rcq_size");
	return cfg;
}

static struct rpma_cq *conn_rcq(struct rpma_conn *conn)
{
	struct rpma_cq *rcq = NULL;
	check(rpma_conn_get_rcq(conn, &rcq), "rpma_conn_get_rcq");
	if (rcq == NULL)
		fail("the connection has no receive CQ");
	return rcq;
}

static void msg_server(struct rpma_peer *peer, const char *addr, const char *port)
{
	struct msg_mem mm;
	msg_mem_new(peer, &mm);
	struct rpma_conn_cfg *cfg = msg_cfg();
	struct common_data cd;
	common_pdata(&cd, MSG_SERVER_OFF, mm.target_mr, NULL);
	struct rpma_ep *ep = listen_on(peer, addr, port);
	struct rpma_conn_req *req = next_req(ep, cfg);
	struct rpma_conn_private_data pd;
	check(rpma_conn_req_get_private_data(req, &pd), "rpma_conn_req_get_private_data");
	uint16_t off;
	struct rpma_mr_remote *rmr = remote_from(&pd, &off, NULL);
	for (int k = 0; k < NMSG; k++)
		check(rpma_conn_req_recv(req, mm.recv_mr, (size_t)k * SLOT, SLOT, CTX(RECV_CTX + k)),
			"rpma_conn_req_recv");
	struct rpma_conn *conn = accept_req(req, &cd, sizeof(cd));
	check(rpma_ep_shutdown(&ep), "rpma_ep_shutdown");
	recv_msgs(conn_rcq(conn), mm.recv, mm.target, MSG_SERVER_OFF, client_msgs, RECV_CTX, 0);
	send_msgs(conn, mm.send_mr, mm.send, server_msgs, rmr, off);
	end_passive(conn);
	check(rpma_mr_remote_delete(&rmr), "rpma_mr_remote_delete");
	msg_mem_delete(&mm);
	check(rpma_conn_cfg_delete(&cfg), "rpma_conn_cfg_delete");
	printf("OK msg server\n");
}

static void msg_client(struct rpma_peer *peer, const char *addr, const char *port)
{
	struct msg_mem mm;
	msg_mem_new(peer, &mm);
	struct rpma_conn_cfg *cfg = msg_cfg();
	struct common_data cd;
	common_pdata(&cd, MSG_CLIENT_OFF, mm.target_mr, NULL);
	struct rpma_conn_req *req = new_req(peer, addr, port, cfg);
	for (int k = 0; k < NMSG; k++)
		check(rpma_conn_req_recv(req, mm.recv_mr, (size_t)k * SLOT, SLOT, CTX(RECV_CTX + k)),
			"rpma_conn_req_recv");
	struct rpma_conn *conn = NULL;
	struct rpma_conn_private_data pd = {&cd, sizeof(cd)};
	check(rpma_conn_req_connect(&req, &pd, &conn), "rpma_conn_req_connect");
	expect_event(conn, RPMA_CONN_ESTABLISHED);
	check(rpma_conn_get_private_data(conn, &pd), "rpma_conn_get_private_data");
	uint16_t off;
	struct rpma_mr_remote *rmr = remote_from(&pd, &off, NULL);
	if (off != MSG_SERVER_OFF)
		fail("server data offset %u, want %d", off, MSG_SERVER_OFF);
	send_msgs(conn, mm.send_mr, mm.send, client_msgs, rmr, off);
	recv_msgs(conn_rcq(conn), mm.recv, mm.target, MSG_CLIENT_OFF, server_msgs, RECV_CTX, 0);
	end_active(conn);
	check(rpma_mr_remote_delete(&rmr), "rpma_mr_remote_delete");
	msg_mem_delete(&mm);
	check(rpma_conn_cfg_delete(&cfg), "rpma_conn_cfg_delete");
	printf("OK msg client\n");
}

/* ---- SRQ ---- */

static void srq_server(struct rpma_peer *peer, const char *addr, const char *port)
{
	uint8_t *recv = alloc_region(REGION);
	struct rpma_mr_local *mr = reg(peer, recv, REGION, RPMA_MR_USAGE_RECV);
	struct rpma_srq_cfg *scfg = NULL;
	struct rpma_srq *srq = NULL;
	struct rpma_cq *rcq = NULL;
	check(rpma_srq_cfg_new(&scfg), "rpma_srq_cfg_new");
	check(rpma_srq_cfg_set_rq_size(scfg, 10), "rpma_srq_cfg_set_rq_size");
	check(rpma_srq_cfg_set_rcq_size(scfg, 10), "rpma_srq_cfg_set_rcq_size");
	check(rpma_srq_new(peer, scfg, &srq), "rpma_srq_new");
	check(rpma_srq_get_rcq(srq, &rcq), "rpma_srq_get_rcq");
	if (rcq == NULL)
		fail("the SRQ has no receive CQ");
	struct rpma_conn_cfg *cfg = make_cfg();
	check(rpma_conn_cfg_set_srq(cfg, srq), "rpma_conn_cfg_set_srq");
	for (int k = 0; k < NMSG; k++)
		check(rpma_srq_recv(srq, mr, (size_t)k * SLOT, SLOT, CTX(SRQ_CTX + k)), "rpma_srq_recv");
	struct rpma_ep *ep = listen_on(peer, addr, port);
	struct rpma_conn *conn = accept_req(next_req(ep, cfg), NULL, 0);
	check(rpma_ep_shutdown(&ep), "rpma_ep_shutdown");
	struct rpma_cq *crcq = (struct rpma_cq *)1;
	check(rpma_conn_get_rcq(conn, &crcq), "rpma_conn_get_rcq");
	if (crcq != NULL)
		fail("a connection on an SRQ with a receive CQ has a receive CQ of its own");
	uint32_t qpn = 0;
	check(rpma_conn_get_qp_num(conn, &qpn), "rpma_conn_get_qp_num");
	recv_msgs(rcq, recv, NULL, 0, srq_msgs, SRQ_CTX, qpn);
	end_active(conn);
	check(rpma_conn_cfg_delete(&cfg), "rpma_conn_cfg_delete");
	check(rpma_srq_delete(&srq), "rpma_srq_delete");
	check(rpma_srq_cfg_delete(&scfg), "rpma_srq_cfg_delete");
	check(rpma_mr_dereg(&mr), "rpma_mr_dereg");
	printf("OK srq server qp=%u\n", qpn);
}

static void srq_client(struct rpma_peer *peer, const char *addr, const char *port)
{
	uint8_t *mem = alloc_region(REGION);
	struct rpma_mr_local *mr = reg(peer, mem, REGION, RPMA_MR_USAGE_SEND);
	struct rpma_conn_cfg *cfg = make_cfg();
	struct rpma_conn *conn = NULL;
	struct rpma_conn_req *req = new_req(peer, addr, port, cfg);
	check(rpma_conn_req_connect(&req, NULL, &conn), "rpma_conn_req_connect");
	expect_event(conn, RPMA_CONN_ESTABLISHED);
	send_msgs(conn, mr, mem, srq_msgs, NULL, 0);
	/* the server disconnects once it has checked the messages */
	end_passive(conn);
	check(rpma_mr_dereg(&mr), "rpma_mr_dereg");
	check(rpma_conn_cfg_delete(&cfg), "rpma_conn_cfg_delete");
	printf("OK srq client\n");
}

struct scenario {
	const char *name;
	void (*server)(struct rpma_peer *, const char *, const char *);
	void (*client)(struct rpma_peer *, const char *, const char *);
};

static const struct scenario scenarios[] = {
	{"read", read_server, read_client},
	{"write", write_server, write_client},
	{"atomic", atomic_server, atomic_client},
	{"msg", msg_server, msg_client},
	{"srq", srq_server, srq_client},
	{"nativeflush", nativeflush_server, NULL},
};

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(60);
	if (argc != 5 || (strcmp(argv[1], "server") != 0 && strcmp(argv[1], "client") != 0)) {
		fprintf(stderr, "usage: rpmapeer server|client ADDR PORT SCENARIO\n");
		return 2;
	}
	role = argv[1];
	scenario = argv[4];
	bool server = strcmp(role, "server") == 0;
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		const struct scenario *s = &scenarios[i];
		if (strcmp(s->name, scenario) != 0)
			continue;
		void (*run)(struct rpma_peer *, const char *, const char *) = server ? s->server : s->client;
		if (run == NULL)
			break;
		struct rpma_peer *peer = make_peer(argv[2], server ? RPMA_UTIL_IBV_CONTEXT_LOCAL :
			RPMA_UTIL_IBV_CONTEXT_REMOTE);
		run(peer, argv[2], argv[3]);
		check(rpma_peer_delete(&peer), "rpma_peer_delete");
		return 0;
	}
	fprintf(stderr, "rpmapeer: no scenario %s for the %s\n", scenario, role);
	return 2;
}
