/*
 * cexample: a C peer for the rpma examples' cross tests
 * (rpma/examples/cross_vm_test.go), written against C librpma (Debian's
 * librpma-dev) and built during the test with
 *
 *     gcc -O2 -Wall -Werror -o cexample cexample.c -lrpma -libverbs
 *
 * Usage: cexample <example> server <addr> <port> [<args>...]
 *        cexample <example> client <addr> <port> [<args>...]
 *
 * Each example's side speaks the wire protocol of librpma's example of
 * that name and of its Go port in rpma/examples (the same private data,
 * struct common_data and hello_t bytes, GPSPM messages, operations in
 * the same order) and prints the lines the Go port prints, so the tests
 * check a C side as they check a Go one. The arguments after <port> are
 * the Go port's. PMem is kept as the Go examples keep it (at
 * <pmem-offset>, the signature "RPMA_EXAMPLE_SIG" with its zero, then
 * the data; 07's log at the start with its own "LOG" signature), so a
 * C side finds what a Go side persisted and the other way round. A
 * device is mapped from its start (2 MiB units), a regular file whole;
 * nothing is advised (FsDAX's rpma_mr_advise is left out).
 * A server prints "Waiting for incoming connection on <addr>:<port>" to
 * stderr once it listens, as the Go examples' rpma log does.
 *
 * Exit status: 0 on success; on failure the example's C status: the
 * librpma error code's low byte, or 255 (-1), or 254 (-2) for 07. An
 * alarm ends a side after two minutes whatever it waits for.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <librpma.h>

#define KILOBYTE 1024
#define DESCRIPTORS_MAX_SIZE 24

/* The private data of the examples (examples/common). */
struct common_data {
	uint16_t data_offset;
	uint8_t mr_desc_size;
	uint8_t pcfg_desc_size;
	char descriptors[DESCRIPTORS_MAX_SIZE];
};

/* struct hello_t of 03, 04, 05 and 09. */
#define HELLO_STR_SIZE 1024
enum lang_t { EN, ES };
struct hello_t {
	enum lang_t lang;
	char str[HELLO_STR_SIZE];
};
static const char *hello_str[] = {[EN] = "Hello world!", [ES] = "¡Hola Mundo!"};

#define NO_PMEM_MSG "No <pmem-path> provided. Using DRAM instead.\n"

/* The ping-pong messages: one uint64_t counter, I_M_DONE to end. */
#define MSG_SIZE sizeof(uint64_t)
#define I_M_DONE ((uint64_t)UINT64_MAX)

#define FLUSH_ID ((void *)0xF01D)

static const char *addr, *port;
/* The status a failure exits with: -1 for "return ret ? -1 : 0" mains,
 * -2 for 07's, 0 for those returning the librpma code itself. */
static int fail_status;

static void die(int ret, const char *what)
{
	fprintf(stderr, "%s failed: %s (%d)\n", what, rpma_err_2str(ret), ret);
	exit((uint8_t)(fail_status ? fail_status : ret));
}

/* own is a failure of the example's own checks (C's ret = -1). */
static void own(const char *msg)
{
	fprintf(stderr, "%s\n", msg);
	exit((uint8_t)(fail_status ? fail_status : -1));
}

#define CHECK(call)                                                                                \
	do {                                                                                       \
		int ret_ = (call);                                                                 \
		if (ret_)                                                                          \
			die(ret_, #call);                                                          \
	} while (0)

static void *alloc(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, n ? n : 1))
		own("posix_memalign failed");
	memset(p, 0, n);
	return p;
}

static struct rpma_peer *peer_via(enum rpma_util_ibv_context_type type)
{
	struct ibv_context *dev = NULL;
	struct rpma_peer *peer = NULL;
	CHECK(rpma_utils_get_ibv_context(addr, type, &dev));
	CHECK(rpma_peer_new(dev, &peer));
	return peer;
}

static struct rpma_ep *listen_ep(struct rpma_peer *peer)
{
	struct rpma_ep *ep = NULL;
	CHECK(rpma_ep_listen(peer, addr, port, &ep));
	fprintf(stderr, "Waiting for incoming connection on %s:%s\n", addr, port);
	return ep;
}

static struct rpma_mr_local *reg(struct rpma_peer *peer, void *p, size_t n, int usage)
{
	struct rpma_mr_local *mr = NULL;
	CHECK(rpma_mr_reg(peer, p, n, usage, &mr));
	return mr;
}

static void expect_event(struct rpma_conn *conn, enum rpma_conn_event want)
{
	enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
	CHECK(rpma_conn_next_event(conn, &ev));
	if (ev != want) {
		fprintf(stderr, "rpma_conn_next_event returned an unexpected event: %s\n",
			rpma_utils_conn_event_2str(ev));
		own("unexpected event");
	}
}

/*
 * Accepted connections whose client's disconnect arrived before their
 * ESTABLISHED (Linux 6.1 rxe; docs/reliability.md): the server goes on
 * as if it had seen both, as the Go examples' common code does.
 */
#define CLOSED_EARLY_MAX 64
static struct rpma_conn *closed_early[CLOSED_EARLY_MAX];

static bool take_closed_early(struct rpma_conn *conn)
{
	for (int i = 0; i < CLOSED_EARLY_MAX; i++) {
		if (closed_early[i] == conn) {
			closed_early[i] = NULL;
			return true;
		}
	}
	return false;
}

/*
 * connect_req connects (or, passive, accepts) req with pdata and waits
 * for ESTABLISHED.
 */
static struct rpma_conn *connect_req(struct rpma_conn_req *req, const void *pdata, size_t len, bool passive)
{
	struct rpma_conn *conn = NULL;
	struct rpma_conn_private_data pd = {(void *)pdata, (uint8_t)len};
	CHECK(rpma_conn_req_connect(&req, len ? &pd : NULL, &conn));
	enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
	CHECK(rpma_conn_next_event(conn, &ev));
	if (passive && ev == RPMA_CONN_CLOSED) {
		for (int i = 0; i < CLOSED_EARLY_MAX; i++) {
			if (closed_early[i] == NULL) {
				closed_early[i] = conn;
				return conn;
			}
		}
	}
	if (ev != RPMA_CONN_ESTABLISHED) {
		fprintf(stderr, "rpma_conn_next_event returned an unexpected event: %s\n",
			rpma_utils_conn_event_2str(ev));
		own("unexpected event");
	}
	return conn;
}

static struct rpma_conn_req *next_req(struct rpma_ep *ep, struct rpma_conn_cfg *cfg)
{
	struct rpma_conn_req *req = NULL;
	CHECK(rpma_ep_next_conn_req(ep, cfg, &req));
	return req;
}

static struct rpma_conn_req *new_req(struct rpma_peer *peer, struct rpma_conn_cfg *cfg)
{
	struct rpma_conn_req *req = NULL;
	CHECK(rpma_conn_req_new(peer, addr, port, cfg, &req));
	return req;
}

static struct rpma_conn *client_connect(struct rpma_peer *peer, struct rpma_conn_cfg *cfg,
	const void *pdata, size_t len)
{
	return connect_req(new_req(peer, cfg), pdata, len, false);
}

static struct rpma_conn *server_accept(struct rpma_ep *ep, struct rpma_conn_cfg *cfg,
	const void *pdata, size_t len)
{
	return connect_req(next_req(ep, cfg), pdata, len, true);
}

/* common_wait_for_conn_close_and_disconnect */
static void wait_close_and_disconnect(struct rpma_conn *conn)
{
	if (!take_closed_early(conn))
		expect_event(conn, RPMA_CONN_CLOSED);
	CHECK(rpma_conn_disconnect(conn));
	CHECK(rpma_conn_delete(&conn));
}

/* common_disconnect_and_wait_for_conn_close */
static void disconnect_and_wait_close(struct rpma_conn *conn)
{
	CHECK(rpma_conn_disconnect(conn));
	if (!take_closed_early(conn))
		expect_event(conn, RPMA_CONN_CLOSED);
	CHECK(rpma_conn_delete(&conn));
}

static struct rpma_conn_cfg *conn_cfg(uint32_t rcq_size, bool shared)
{
	struct rpma_conn_cfg *cfg = NULL;
	CHECK(rpma_conn_cfg_new(&cfg));
	if (rcq_size)
		CHECK(rpma_conn_cfg_set_rcq_size(cfg, rcq_size));
	if (shared)
		CHECK(rpma_conn_cfg_set_compl_channel(cfg, true));
	return cfg;
}

/* common_data_new packs mr's descriptor and pcfg's (if any). */
static struct common_data common_data_new(uint16_t offset, struct rpma_mr_local *mr,
	struct rpma_peer_cfg *pcfg)
{
	struct common_data d = {.data_offset = offset};
	size_t n = 0;
	CHECK(rpma_mr_get_descriptor_size(mr, &n));
	CHECK(rpma_mr_get_descriptor(mr, d.descriptors));
	d.mr_desc_size = (uint8_t)n;
	if (pcfg) {
		size_t m = 0;
		CHECK(rpma_peer_cfg_get_descriptor_size(pcfg, &m));
		if (n + m > DESCRIPTORS_MAX_SIZE)
			own("the descriptors do not fit struct common_data");
		CHECK(rpma_peer_cfg_get_descriptor(pcfg, d.descriptors + n));
		d.pcfg_desc_size = (uint8_t)m;
	}
	return d;
}

/* conn_data reads the connection's struct common_data. */
static struct common_data conn_data(struct rpma_conn *conn)
{
	struct rpma_conn_private_data pd = {0};
	struct common_data d;
	CHECK(rpma_conn_get_private_data(conn, &pd));
	if (pd.ptr == NULL || pd.len < sizeof(d)) {
		fprintf(stderr, "Received connection's private data is too small (%u < %zu)\n", pd.len, sizeof(d));
		own("private data");
	}
	memcpy(&d, pd.ptr, sizeof(d));
	if (d.mr_desc_size + d.pcfg_desc_size > DESCRIPTORS_MAX_SIZE)
		own("the descriptors' sizes exceed struct common_data's room");
	return d;
}

static struct rpma_mr_remote *remote_mr(const struct common_data *d)
{
	struct rpma_mr_remote *mr = NULL;
	CHECK(rpma_mr_remote_from_descriptor(d->descriptors, d->mr_desc_size, &mr));
	return mr;
}

/* wait_wc waits on cq's own channel for its next completion. */
static void wait_wc(struct rpma_cq *cq, struct ibv_wc *wc)
{
	for (;;) {
		int n = 0;
		int ret = rpma_cq_get_wc(cq, 1, wc, &n);
		if (ret == 0 && n == 1)
			return;
		if (ret != RPMA_E_NO_COMPLETION)
			die(ret, "rpma_cq_get_wc");
		CHECK(rpma_cq_wait(cq));
	}
}

static void check_wc(const struct ibv_wc *wc, enum ibv_wc_opcode want)
{
	if (wc->status != IBV_WC_SUCCESS) {
		fprintf(stderr, "completion failed: %s\n", ibv_wc_status_str(wc->status));
		own("completion failed");
	}
	if (wc->opcode != want) {
		fprintf(stderr, "unexpected wc.opcode value (%d != %d)\n", wc->opcode, want);
		own("unexpected completion");
	}
}

static void expect_wc(struct rpma_cq *cq, enum ibv_wc_opcode want, struct ibv_wc *wc)
{
	wait_wc(cq, wc);
	check_wc(wc, want);
}

/* expect_conn_wc waits on the connection's shared channel (scch). */
static void expect_conn_wc(struct rpma_conn *conn, enum ibv_wc_opcode want, struct ibv_wc *wc)
{
	struct rpma_cq *cq = NULL;
	int n = 0;
	CHECK(rpma_conn_wait(conn, 0, &cq, NULL));
	CHECK(rpma_cq_get_wc(cq, 1, wc, &n));
	check_wc(wc, want);
}

/*
 * expect_conn_send_recv waits on the connection's shared channel for a
 * send's and a receive's completions, in either order (the Go port's
 * common.WaitForSendAndRecv: rxe may complete the other side's answer
 * before the acknowledgement of our send); *recv is the receive's.
 */
static void expect_conn_send_recv(struct rpma_conn *conn, struct ibv_wc *recv)
{
	bool sent = false, received = false;
	while (!sent || !received) {
		struct rpma_cq *cq = NULL;
		struct ibv_wc wc;
		int n = 0;
		CHECK(rpma_conn_wait(conn, 0, &cq, NULL));
		CHECK(rpma_cq_get_wc(cq, 1, &wc, &n));
		check_wc(&wc, wc.opcode); /* its status */
		if (wc.opcode == IBV_WC_SEND && !sent) {
			sent = true;
		} else if (wc.opcode == IBV_WC_RECV && !received) {
			received = true;
			*recv = wc;
		} else {
			fprintf(stderr, "unexpected wc.opcode value (%d)\n", wc.opcode);
			own("unexpected completion");
		}
	}
}

static struct rpma_cq *conn_cq(struct rpma_conn *conn)
{
	struct rpma_cq *cq = NULL;
	CHECK(rpma_conn_get_cq(conn, &cq));
	return cq;
}

static struct rpma_cq *conn_rcq(struct rpma_conn *conn)
{
	struct rpma_cq *cq = NULL;
	CHECK(rpma_conn_get_rcq(conn, &cq));
	return cq;
}

/* strtoul_noerror reads a decimal number (the tests give valid ones). */
static uint64_t strtoul_noerror(const char *s)
{
	return strtoull(s, NULL, 10);
}

static void translate(struct hello_t *h)
{
	printf("translating...\n");
	h->lang = (h->lang + 1) % 2;
	strncpy(h->str, hello_str[h->lang], HELLO_STR_SIZE - 1);
}

/*
 * PMem, as the Go examples keep it (common.MapPMemAt): at <offset> into
 * the file or device, the signature, then the data. A device (device
 * DAX) is mapped from its start in 2 MiB units, a regular file whole.
 */
#define SIGNATURE_STR "RPMA_EXAMPLE_SIG"
#define SIGNATURE_LEN (sizeof(SIGNATURE_STR)) /* with its zero */
#define DEVDAX_ALIGN (2UL << 20)

struct mem {
	char *buf;   /* what is registered: the mapping, or DRAM */
	size_t len;
	size_t data; /* where the data starts in buf */
	bool pmem;
};

/* persist makes [p, p+n) durable: cache lines written back (x86). */
static void persist(const struct mem *m, const void *p, size_t n)
{
	if (!m->pmem)
		return;
#if defined(__x86_64__)
	for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63; a < (uintptr_t)p + n; a += 64)
		__asm__ volatile("clflush (%0)" ::"r"(a) : "memory");
	__asm__ volatile("sfence" ::: "memory");
#else
	__sync_synchronize();
#endif
}

/* map_pmem maps path with room for offset + the signature + size bytes. */
static struct mem map_pmem(const char *path, size_t offset, size_t size)
{
	struct mem m = {.pmem = true};
	size_t total = offset + SIGNATURE_LEN + size;
	int fd = open(path, O_RDWR);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		own("cannot open the PMem");
	}
	if (S_ISREG(st.st_mode)) {
		if ((size_t)st.st_size < total)
			own("the PMem file is too small");
		m.len = st.st_size;
	} else {
		m.len = (total + DEVDAX_ALIGN - 1) & ~(DEVDAX_ALIGN - 1);
	}
	m.buf = mmap(NULL, m.len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m.buf == MAP_FAILED) {
		fprintf(stderr, "mmap(%s): %s\n", path, strerror(errno));
		own("cannot map the PMem");
	}
	m.data = offset + SIGNATURE_LEN;
	return m;
}

/*
 * mem_new is the example's memory of size bytes: PMem at path (NULL:
 * DRAM) and offset; data without the signature is initialized (hello:
 * a hello_t in English, else an empty string) before the signature is
 * written.
 */
static struct mem mem_new(const char *path, size_t offset, size_t size, bool hello)
{
	struct mem m = {0};
	if (path) {
		m = map_pmem(path, offset, size);
	} else {
		fprintf(stderr, NO_PMEM_MSG);
		m.buf = alloc(size);
		m.len = size;
	}
	char *sig = m.buf + m.data - (m.pmem ? SIGNATURE_LEN : 0);
	if (!m.pmem || memcmp(sig, SIGNATURE_STR, SIGNATURE_LEN) != 0) {
		if (hello) {
			struct hello_t *h = (struct hello_t *)(m.buf + m.data);
			h->lang = EN;
			memset(h->str, 0, HELLO_STR_SIZE);
			strncpy(h->str, hello_str[EN], HELLO_STR_SIZE - 1);
			persist(&m, h, sizeof(*h));
		} else {
			m.buf[m.data] = 0;
			persist(&m, m.buf + m.data, 1);
		}
		if (m.pmem) {
			memcpy(sig, SIGNATURE_STR, SIGNATURE_LEN);
			persist(&m, sig, SIGNATURE_LEN);
		}
	}
	return m;
}

/* client_mem is a hello client's memory: [<pmem-path> [<pmem-offset>]] in args. */
static struct mem client_mem(int argc, char **argv)
{
	size_t offset = argc > 1 ? strtoul_noerror(argv[1]) : 0;
	return mem_new(argc > 0 ? argv[0] : NULL, offset, sizeof(struct hello_t), true);
}

static void mem_delete(struct mem *m)
{
	if (m->pmem)
		munmap(m->buf, m->len);
	else
		free(m->buf);
}

/* ---- 01-connection ---- */

static void server01(int argc, char **argv)
{
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_LOCAL);
	struct rpma_ep *ep = listen_ep(peer);
	static const char msg[] = "Hello client!";
	struct rpma_conn *conn = server_accept(ep, NULL, msg, sizeof(msg));
	struct rpma_conn_private_data pd = {0};
	CHECK(rpma_conn_get_private_data(conn, &pd));
	if (pd.ptr)
		printf("Received a message: %.*s\n", (int)strnlen(pd.ptr, pd.len), (char *)pd.ptr);
	else
		printf("No message received\n");
	disconnect_and_wait_close(conn);
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_peer_delete(&peer));
}

static void client01(int argc, char **argv)
{
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_REMOTE);
	static const char msg[] = "Hello server!";
	struct rpma_conn *conn = client_connect(peer, NULL, msg, sizeof(msg));
	struct rpma_conn_private_data pd = {0};
	CHECK(rpma_conn_get_private_data(conn, &pd));
	if (pd.ptr)
		printf("Received a message: %.*s\n", (int)strnlen(pd.ptr, pd.len), (char *)pd.ptr);
	else
		printf("No message received\n");
	wait_close_and_disconnect(conn);
	CHECK(rpma_peer_delete(&peer));
}

/* ---- 02-read-to-volatile ---- */

static void server02(int argc, char **argv)
{
	static const char hello[] = "Hello client!";
	char *mem = alloc(sizeof(hello));
	memcpy(mem, hello, sizeof(hello));
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_LOCAL);
	struct rpma_ep *ep = listen_ep(peer);
	struct rpma_mr_local *mr = reg(peer, mem, sizeof(hello), RPMA_MR_USAGE_READ_SRC);
	struct common_data d = common_data_new(0, mr, NULL);
	struct rpma_conn *conn = server_accept(ep, NULL, &d, sizeof(d));
	wait_close_and_disconnect(conn);
	CHECK(rpma_mr_dereg(&mr));
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_peer_delete(&peer));
}

static void client02(int argc, char **argv)
{
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_REMOTE);
	char *dst = alloc(KILOBYTE);
	struct rpma_mr_local *dst_mr = reg(peer, dst, KILOBYTE, RPMA_MR_USAGE_READ_DST);
	struct rpma_conn *conn = client_connect(peer, NULL, NULL, 0);
	struct common_data d = conn_data(conn);
	struct rpma_mr_remote *src = remote_mr(&d);
	size_t size = 0;
	CHECK(rpma_mr_remote_get_size(src, &size));
	if (size > KILOBYTE)
		own("Remote memory region size too big to reading to the sink buffer");
	CHECK(rpma_read(conn, dst_mr, 0, src, 0, size, RPMA_F_COMPLETION_ALWAYS, NULL));
	struct ibv_wc wc;
	expect_wc(conn_cq(conn), IBV_WC_RDMA_READ, &wc);
	printf("Read a message: %s\n", dst);
	disconnect_and_wait_close(conn);
	CHECK(rpma_mr_remote_delete(&src));
	CHECK(rpma_mr_dereg(&dst_mr));
	CHECK(rpma_peer_delete(&peer));
}

/* ---- 03-read-to-persistent: the server reads the client's hello ---- */

static void server03(int argc, char **argv)
{
	fail_status = -1;
	struct mem m = mem_new(argc > 0 ? argv[0] : NULL, 0, HELLO_STR_SIZE, false);
	char *mem = m.buf + m.data;
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_LOCAL);
	struct rpma_ep *ep = listen_ep(peer);
	struct rpma_mr_local *dst = reg(peer, m.buf, m.len, RPMA_MR_USAGE_READ_DST);
	struct rpma_conn *conn = server_accept(ep, NULL, NULL, 0);
	struct common_data d = conn_data(conn);
	struct rpma_mr_remote *src = remote_mr(&d);
	if (mem[0])
		printf("Old value: %s\n", mem);
	CHECK(rpma_read(conn, dst, m.data, src, d.data_offset, HELLO_STR_SIZE, RPMA_F_COMPLETION_ALWAYS, NULL));
	struct ibv_wc wc;
	expect_wc(conn_cq(conn), IBV_WC_RDMA_READ, &wc);
	persist(&m, mem, HELLO_STR_SIZE);
	printf("New value: %s\n", mem);
	disconnect_and_wait_close(conn);
	CHECK(rpma_mr_remote_delete(&src));
	CHECK(rpma_mr_dereg(&dst));
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_peer_delete(&peer));
	mem_delete(&m);
}

static void client03(int argc, char **argv)
{
	struct mem m = client_mem(argc, argv);
	struct hello_t *h = (struct hello_t *)(m.buf + m.data);
	printf("Next value: %s\n", h->str);
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_REMOTE);
	struct rpma_mr_local *mr = reg(peer, m.buf, m.len, RPMA_MR_USAGE_READ_SRC);
	struct common_data d = common_data_new(m.data + offsetof(struct hello_t, str), mr, NULL);
	struct rpma_conn *conn = client_connect(peer, NULL, &d, sizeof(d));
	wait_close_and_disconnect(conn);
	translate(h);
	persist(&m, h, sizeof(*h));
	printf("Translation: %s\n", h->str);
	CHECK(rpma_mr_dereg(&mr));
	CHECK(rpma_peer_delete(&peer));
	mem_delete(&m);
}

/* ---- 04-write-to-persistent and 05-flush-to-persistent: the client writes ---- */

static void server0405(bool flush, int argc, char **argv)
{
	struct mem m = mem_new(argc > 0 ? argv[0] : NULL, 0, HELLO_STR_SIZE, false);
	char *mem = m.buf + m.data;
	if (mem[0])
		printf("Old value: %s\n", mem);
	struct rpma_peer_cfg *pcfg = NULL;
	if (flush) {
		CHECK(rpma_peer_cfg_new(&pcfg));
		/* 05 <pmem-path> on: the server's PMem takes writes directly */
		if (argc > 1)
			CHECK(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, strcmp(argv[1], "on") == 0));
	}
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_LOCAL);
	struct rpma_ep *ep = listen_ep(peer);
	int usage = flush ? RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY
			  : RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC;
	if (flush && m.pmem)
		usage |= RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT;
	struct rpma_mr_local *mr = reg(peer, m.buf, m.len, usage);
	struct common_data d = common_data_new(m.data, mr, pcfg);
	struct rpma_conn *conn = server_accept(ep, NULL, &d, sizeof(d));
	wait_close_and_disconnect(conn);
	printf("New value: %s\n", mem);
	CHECK(rpma_mr_dereg(&mr));
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_peer_delete(&peer));
	if (pcfg)
		CHECK(rpma_peer_cfg_delete(&pcfg));
	mem_delete(&m);
}

static void server04(int argc, char **argv) { server0405(false, argc, argv); }
static void server05(int argc, char **argv) { server0405(true, argc, argv); }

static void client0405(bool flush, int argc, char **argv)
{
	struct mem m = client_mem(argc, argv);
	struct hello_t *h = (struct hello_t *)(m.buf + m.data);
	printf("Next value: %s\n", h->str);
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_REMOTE);
	struct rpma_conn *conn = client_connect(peer, NULL, NULL, 0);
	struct rpma_mr_local *src = reg(peer, m.buf, m.len, RPMA_MR_USAGE_WRITE_SRC);
	char *raw = alloc(KILOBYTE);
	struct rpma_mr_local *raw_mr = flush ? NULL : reg(peer, raw, KILOBYTE, RPMA_MR_USAGE_READ_DST);
	struct common_data d = conn_data(conn);
	bool direct = false;
	if (flush) {
		struct rpma_peer_cfg *pcfg = NULL;
		CHECK(rpma_peer_cfg_from_descriptor(d.descriptors + d.mr_desc_size, d.pcfg_desc_size, &pcfg));
		CHECK(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &direct));
		CHECK(rpma_conn_apply_remote_peer_cfg(conn, pcfg));
		CHECK(rpma_peer_cfg_delete(&pcfg));
	}
	struct rpma_mr_remote *dst = remote_mr(&d);
	size_t size = 0;
	CHECK(rpma_mr_remote_get_size(dst, &size));
	if (d.data_offset > size || size - d.data_offset < HELLO_STR_SIZE)
		own("Remote memory region size too small for writing the data of the assumed size");
	CHECK(rpma_write(conn, dst, d.data_offset, src, m.data + offsetof(struct hello_t, str), HELLO_STR_SIZE,
		RPMA_F_COMPLETION_ON_ERROR, NULL));
	struct ibv_wc wc;
	if (flush) {
		enum rpma_flush_type type = RPMA_FLUSH_TYPE_VISIBILITY;
		if (direct) {
			printf("RPMA_FLUSH_TYPE_PERSISTENT is supported\n");
			type = RPMA_FLUSH_TYPE_PERSISTENT;
		} else {
			printf("RPMA_FLUSH_TYPE_PERSISTENT is NOT supported, RPMA_FLUSH_TYPE_VISIBILITY is used instead\n");
		}
		CHECK(rpma_flush(conn, dst, d.data_offset, HELLO_STR_SIZE, type, RPMA_F_COMPLETION_ALWAYS, FLUSH_ID));
		wait_wc(conn_cq(conn), &wc);
		if (wc.wr_id != (uintptr_t)FLUSH_ID)
			own("unexpected wc.wr_id value");
		if (wc.status != IBV_WC_SUCCESS)
			own("rpma_flush() failed");
	} else {
		/* a read after the write makes it visible (04's raw read) */
		CHECK(rpma_read(conn, raw_mr, 0, dst, 0, KILOBYTE, RPMA_F_COMPLETION_ALWAYS, NULL));
		expect_wc(conn_cq(conn), IBV_WC_RDMA_READ, &wc);
	}
	translate(h);
	persist(&m, h, sizeof(*h));
	printf("Translation: %s\n", h->str);
	disconnect_and_wait_close(conn);
	CHECK(rpma_mr_remote_delete(&dst));
	if (raw_mr)
		CHECK(rpma_mr_dereg(&raw_mr));
	CHECK(rpma_mr_dereg(&src));
	CHECK(rpma_peer_delete(&peer));
	mem_delete(&m);
}

static void client04(int argc, char **argv) { client0405(false, argc, argv); }
static void client05(int argc, char **argv) { client0405(true, argc, argv); }

/* ---- 06-multiple-connections (scch: one completion channel per connection) ---- */

#define CLIENT_MAX 10
#define MAX_NAME_SIZE 32
#define TIMEOUT_15S 15000

static void server06(bool shared)
{
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_LOCAL);
	char *dst = alloc(MAX_NAME_SIZE * CLIENT_MAX);
	struct rpma_mr_local *dst_mr = reg(peer, dst, MAX_NAME_SIZE * CLIENT_MAX, RPMA_MR_USAGE_READ_DST);
	struct rpma_conn_cfg *cfg = conn_cfg(0, shared);
	struct rpma_ep *ep = listen_ep(peer);
	printf("Today I have got in touch with:\n");
	struct rpma_conn *conns[CLIENT_MAX] = {0};
	bool disconnected[CLIENT_MAX] = {false};
	int ep_fd;
	CHECK(rpma_ep_get_fd(ep, &ep_fd));
	for (;;) {
		struct pollfd fds[CLIENT_MAX + 1] = {{.fd = ep_fd, .events = POLLIN}};
		int ids[CLIENT_MAX + 1], n = 1;
		for (int i = 0; i < CLIENT_MAX; i++) {
			if (!conns[i])
				continue;
			CHECK(rpma_conn_get_event_fd(conns[i], &fds[n].fd));
			fds[n].events = POLLIN;
			ids[n++] = i;
		}
		int ready = poll(fds, n, TIMEOUT_15S);
		if (ready < 0)
			own("poll failed");
		if (ready == 0)
			break;
		if (fds[0].revents) {
			struct rpma_conn_req *req = next_req(ep, cfg);
			int id = 0;
			while (id < CLIENT_MAX && conns[id])
				id++;
			if (id == CLIENT_MAX) {
				CHECK(rpma_conn_req_delete(&req));
			} else {
				CHECK(rpma_conn_req_connect(&req, NULL, &conns[id]));
				disconnected[id] = false;
			}
		}
		for (int k = 1; k < n; k++) {
			if (!fds[k].revents)
				continue;
			int id = ids[k];
			enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
			CHECK(rpma_conn_next_event(conns[id], &ev));
			if (ev != RPMA_CONN_ESTABLISHED) {
				/* closed: the client's disconnect or our own */
				if (!disconnected[id])
					CHECK(rpma_conn_disconnect(conns[id]));
				CHECK(rpma_conn_delete(&conns[id]));
				continue;
			}
			struct common_data d = conn_data(conns[id]);
			struct rpma_mr_remote *src = remote_mr(&d);
			CHECK(rpma_read(conns[id], dst_mr, id * MAX_NAME_SIZE, src, 0, MAX_NAME_SIZE,
				RPMA_F_COMPLETION_ALWAYS, NULL));
			struct ibv_wc wc;
			if (shared)
				expect_conn_wc(conns[id], IBV_WC_RDMA_READ, &wc);
			else
				expect_wc(conn_cq(conns[id]), IBV_WC_RDMA_READ, &wc);
			printf("- %.*s\n", MAX_NAME_SIZE, dst + id * MAX_NAME_SIZE);
			CHECK(rpma_mr_remote_delete(&src));
			CHECK(rpma_conn_disconnect(conns[id]));
			disconnected[id] = true;
		}
	}
	fprintf(stderr, "Server timed out.\n");
	for (int i = 0; i < CLIENT_MAX; i++)
		if (conns[i])
			CHECK(rpma_conn_delete(&conns[i]));
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_conn_cfg_delete(&cfg));
	CHECK(rpma_mr_dereg(&dst_mr));
	CHECK(rpma_peer_delete(&peer));
}

static void server06a(int argc, char **argv) { server06(false); }
static void server06b(int argc, char **argv) { server06(true); }

static void client06(int argc, char **argv)
{
	static const char *names[] = {"Andy", "Chet", "Derek", "Janek", "Kacper", "Lukasz", "Oksana",
		"Pawel", "Piotr", "Tomasz", "Xiang", "Xiaoran", "Xiaoyan"};
	if (argc < 1)
		own("usage: 06 client <addr> <port> <seed>");
	uint64_t seed = strtoul_noerror(argv[0]);
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_REMOTE);
	char *name = alloc(MAX_NAME_SIZE);
	srand((unsigned)(seed % UINT32_MAX));
	strncpy(name, names[rand() % (sizeof(names) / sizeof(names[0]))], MAX_NAME_SIZE - 1);
	printf("My names is: %s\n", name);
	struct rpma_mr_local *mr = reg(peer, name, MAX_NAME_SIZE, RPMA_MR_USAGE_READ_SRC);
	struct common_data d = common_data_new(0, mr, NULL);
	struct rpma_conn *conn = client_connect(peer, NULL, &d, sizeof(d));
	wait_close_and_disconnect(conn);
	CHECK(rpma_mr_dereg(&mr));
	CHECK(rpma_peer_delete(&peer));
}

/* ---- 07-atomic-write: a log whose end the client moves with atomic writes ---- */

#define LOG_HDR_SIGNATURE "LOG"
#define LOG_SIGNATURE_SIZE 8
#define LOG_DATA_SIZE 1024
struct log {
	char signature[LOG_SIGNATURE_SIZE];
	uint64_t used; /* offset of the log's end from the start of struct log */
	char data[LOG_DATA_SIZE];
};

static void server07(int argc, char **argv)
{
	fail_status = -2;
	struct mem m = {0};
	struct log *log;
	int usage = RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY;
	if (argc > 0) {
		/* the log at the start of the PMem, with a signature of its own */
		m = map_pmem(argv[0], 0, sizeof(*log) - SIGNATURE_LEN);
		log = (struct log *)m.buf;
		if (strncmp(log->signature, LOG_HDR_SIGNATURE, LOG_SIGNATURE_SIZE) != 0) {
			log->used = offsetof(struct log, data);
			persist(&m, &log->used, sizeof(log->used));
			memset(log->signature, 0, LOG_SIGNATURE_SIZE);
			strcpy(log->signature, LOG_HDR_SIGNATURE);
			persist(&m, log->signature, LOG_SIGNATURE_SIZE);
		}
		usage = RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT;
	} else {
		fprintf(stderr, NO_PMEM_MSG);
		log = alloc(sizeof(*log));
		log->used = offsetof(struct log, data);
		m.buf = (char *)log;
		m.len = sizeof(*log);
	}
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_LOCAL);
	struct rpma_ep *ep = listen_ep(peer);
	struct rpma_mr_local *mr = reg(peer, m.buf, m.len, usage);
	struct common_data d = common_data_new(offsetof(struct log, used), mr, NULL);
	struct rpma_conn *conn = server_accept(ep, NULL, &d, sizeof(d));
	wait_close_and_disconnect(conn);
	uint64_t end = log->used < m.len ? log->used : m.len;
	for (char *c = log->data; c < m.buf + end; c++)
		putchar(*c ? *c : '\n');
	CHECK(rpma_mr_dereg(&mr));
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_peer_delete(&peer));
	mem_delete(&m);
}

static void client07(int argc, char **argv)
{
	fail_status = -2;
	if (argc < 1)
		own("usage: 07 client <addr> <port> <word>...");
	char *mem = alloc(KILOBYTE);
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_REMOTE);
	struct rpma_conn *conn = client_connect(peer, NULL, NULL, 0);
	struct rpma_peer_cfg *pcfg = NULL;
	CHECK(rpma_peer_cfg_new(&pcfg));
	CHECK(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true));
	CHECK(rpma_conn_apply_remote_peer_cfg(conn, pcfg));
	CHECK(rpma_peer_cfg_delete(&pcfg));
	struct rpma_mr_local *local = reg(peer, mem, KILOBYTE, RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST);
	struct common_data d = conn_data(conn);
	size_t used_offset = d.data_offset;
	struct rpma_mr_remote *remote = remote_mr(&d);
	CHECK(rpma_read(conn, local, 0, remote, used_offset, sizeof(uint64_t), RPMA_F_COMPLETION_ALWAYS, NULL));
	struct ibv_wc wc;
	struct rpma_cq *cq = conn_cq(conn);
	wait_wc(cq, &wc);
	if (wc.status != IBV_WC_SUCCESS)
		own("rpma_read() failed");
	uint64_t used;
	memcpy(&used, mem, sizeof(used));
	printf("used value: %" PRIu64 "\n", used);
	size_t size = 0;
	int flush_usage = 0;
	CHECK(rpma_mr_remote_get_size(remote, &size));
	CHECK(rpma_mr_remote_get_flush_type(remote, &flush_usage));
	if (size <= used)
		own("Log size exhausted.");
	enum rpma_flush_type type = flush_usage & RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT
					    ? RPMA_FLUSH_TYPE_PERSISTENT
					    : RPMA_FLUSH_TYPE_VISIBILITY;
	for (int i = 0; i < argc; i++) {
		memset(mem, 0, KILOBYTE);
		strncpy(mem, argv[i], KILOBYTE - 1);
		size_t n = strlen(mem) + 1;
		CHECK(rpma_write(conn, remote, used, local, 0, n, RPMA_F_COMPLETION_ON_ERROR, NULL));
		CHECK(rpma_flush(conn, remote, used, n, type, RPMA_F_COMPLETION_ON_ERROR, NULL));
		used += n;
		char u[8];
		memcpy(u, &used, sizeof(u));
		CHECK(rpma_atomic_write(conn, remote, used_offset, u, RPMA_F_COMPLETION_ON_ERROR, NULL));
		CHECK(rpma_flush(conn, remote, used_offset, sizeof(u), type, RPMA_F_COMPLETION_ALWAYS, FLUSH_ID));
		wait_wc(cq, &wc);
		if (wc.wr_id != (uintptr_t)FLUSH_ID)
			own("unexpected wc.wr_id value");
		if (wc.status != IBV_WC_SUCCESS)
			own("rpma_flush() failed");
	}
	disconnect_and_wait_close(conn);
	CHECK(rpma_mr_remote_delete(&remote));
	CHECK(rpma_mr_dereg(&local));
	CHECK(rpma_peer_delete(&peer));
}

/* ---- ping-pong: 08, 08srq, 12, 12scch, 13 ---- */

/* pp is one side's ping-pong state: a receive and a send buffer of n messages. */
struct pp {
	struct rpma_peer *peer;
	uint64_t *recv, *send;
	struct rpma_mr_local *recv_mr, *send_mr;
};

static struct pp pp_new(enum rpma_util_ibv_context_type type, int n)
{
	struct pp p = {.peer = peer_via(type)};
	p.recv = alloc(n * MSG_SIZE);
	p.send = alloc(n * MSG_SIZE);
	p.recv_mr = reg(p.peer, p.recv, n * MSG_SIZE, RPMA_MR_USAGE_RECV);
	p.send_mr = reg(p.peer, p.send, n * MSG_SIZE, RPMA_MR_USAGE_SEND);
	return p;
}

static void pp_delete(struct pp *p)
{
	CHECK(rpma_mr_dereg(&p->recv_mr));
	CHECK(rpma_mr_dereg(&p->send_mr));
	CHECK(rpma_peer_delete(&p->peer));
}

/* validate_wc checks one completion of a round; *send and *recv say which came. */
static void validate_wc(const struct ibv_wc *wc, void *recv_ctx, bool *send, bool *recv)
{
	if (wc->status != IBV_WC_SUCCESS) {
		fprintf(stderr, "rpma_%s() failed: %s\n", wc->opcode == IBV_WC_SEND ? "send" : "recv",
			ibv_wc_status_str(wc->status));
		own("completion failed");
	}
	if (wc->opcode == IBV_WC_SEND) {
		*send = true;
	} else if (wc->opcode == IBV_WC_RECV) {
		if (wc->wr_id != (uintptr_t)recv_ctx || wc->byte_len != MSG_SIZE)
			own("received completion is not as expected");
		*recv = true;
	}
}

/* wait_round waits on cq for a round's send (unless already *send) and receive. */
static void wait_round(struct rpma_cq *cq, void *recv_ctx, bool send)
{
	bool recv = false;
	while (!send || !recv) {
		struct ibv_wc wc[2];
		int n = 0;
		CHECK(rpma_cq_wait(cq));
		int ret = rpma_cq_get_wc(cq, 2, wc, &n);
		if (ret && ret != RPMA_E_NO_COMPLETION)
			die(ret, "rpma_cq_get_wc");
		for (int i = 0; i < n; i++)
			validate_wc(&wc[i], recv_ctx, &send, &recv);
	}
}

/* 08, 12 and 12scch: the server answers counter+1 until I_M_DONE. */
static void server_pp(int kind)
{
	fail_status = -1;
	struct pp p = pp_new(RPMA_UTIL_IBV_CONTEXT_LOCAL, 1);
	struct rpma_ep *ep = listen_ep(p.peer);
	struct rpma_conn_cfg *cfg = conn_cfg(kind ? 10 : 0, kind == 2);
	const char *who = kind ? "SERVER: " : "";
	struct rpma_conn_req *req = next_req(ep, cfg);
	CHECK(rpma_conn_req_recv(req, p.recv_mr, 0, MSG_SIZE, p.recv));
	struct rpma_conn *conn = connect_req(req, NULL, 0, true);
	struct ibv_wc wc;
	bool first = true;
	for (;;) {
		if (kind == 0)
			wait_round(conn_cq(conn), p.recv, first);
		else if (kind == 1)
			expect_wc(conn_rcq(conn), IBV_WC_RECV, &wc);
		else if (first)
			expect_conn_wc(conn, IBV_WC_RECV, &wc);
		first = false;
		uint64_t v = *p.recv;
		if (v == I_M_DONE)
			break;
		printf("%sValue received: %" PRIu64 "\n", who, v);
		*p.send = v + 1;
		CHECK(rpma_recv(conn, p.recv_mr, 0, MSG_SIZE, p.recv));
		printf("%sValue sent: %" PRIu64 "\n", who, v + 1);
		CHECK(rpma_send(conn, p.send_mr, 0, MSG_SIZE, RPMA_F_COMPLETION_ALWAYS, NULL));
		if (kind == 1)
			expect_wc(conn_cq(conn), IBV_WC_SEND, &wc);
		else if (kind == 2) /* this send and the client's next message */
			expect_conn_send_recv(conn, &wc);
	}
	disconnect_and_wait_close(conn);
	CHECK(rpma_conn_cfg_delete(&cfg));
	CHECK(rpma_ep_shutdown(&ep));
	pp_delete(&p);
}

static void server08(int argc, char **argv) { server_pp(0); }
static void server12(int argc, char **argv) { server_pp(1); }
static void server12scch(int argc, char **argv) { server_pp(2); }

/*
 * 08, 12 and 12scch: rounds-1 exchanges (C's while (--rounds)), then
 * I_M_DONE, whose send completion the client waits for before it
 * disconnects, as the Go port does (the same bytes on the wire).
 */
static void client_pp(int kind, int argc, char **argv)
{
	fail_status = -1;
	if (argc < 2)
		own("usage: client <addr> <port> <seed> <rounds>");
	uint64_t cntr = strtoul_noerror(argv[0]), rounds = strtoul_noerror(argv[1]);
	struct pp p = pp_new(RPMA_UTIL_IBV_CONTEXT_REMOTE, 1);
	struct rpma_conn_cfg *cfg = conn_cfg(kind ? 10 : 0, kind == 2);
	const char *who = kind ? "CLIENT: " : "";
	struct rpma_conn *conn = client_connect(p.peer, cfg, NULL, 0);
	struct ibv_wc wc;
	while (--rounds) {
		CHECK(rpma_recv(conn, p.recv_mr, 0, MSG_SIZE, p.recv));
		printf("%sValue sent: %" PRIu64 "\n", who, cntr);
		*p.send = cntr;
		CHECK(rpma_send(conn, p.send_mr, 0, MSG_SIZE, RPMA_F_COMPLETION_ALWAYS, NULL));
		if (kind == 0) {
			wait_round(conn_cq(conn), p.recv, false);
		} else if (kind == 1) {
			expect_wc(conn_cq(conn), IBV_WC_SEND, &wc);
			expect_wc(conn_rcq(conn), IBV_WC_RECV, &wc);
		} else {
			expect_conn_send_recv(conn, &wc);
		}
		cntr = *p.recv;
		printf("%sValue received: %" PRIu64 "\n", who, cntr);
	}
	*p.send = I_M_DONE;
	CHECK(rpma_send(conn, p.send_mr, 0, MSG_SIZE, RPMA_F_COMPLETION_ALWAYS, NULL));
	if (kind == 2)
		expect_conn_wc(conn, IBV_WC_SEND, &wc);
	else
		expect_wc(conn_cq(conn), IBV_WC_SEND, &wc);
	disconnect_and_wait_close(conn);
	CHECK(rpma_conn_cfg_delete(&cfg));
	pp_delete(&p);
}

static void client08(int argc, char **argv) { client_pp(0, argc, argv); }
static void client12(int argc, char **argv) { client_pp(1, argc, argv); }
static void client12scch(int argc, char **argv) { client_pp(2, argc, argv); }

/* 08srq and 13 clients: do-while rounds, then I_M_DONE unsignaled, and the server disconnects. */
static void client_srq(bool pid, int argc, char **argv)
{
	fail_status = -1;
	if (argc < 2)
		own("usage: client <addr> <port> <seed> <rounds>");
	uint64_t cntr = strtoul_noerror(argv[0]), rounds = strtoul_noerror(argv[1]);
	struct pp p = pp_new(RPMA_UTIL_IBV_CONTEXT_REMOTE, 1);
	struct rpma_conn *conn = client_connect(p.peer, NULL, NULL, 0);
	char who[64] = "";
	if (pid)
		snprintf(who, sizeof(who), "[client #%d] ", (int)getpid());
	do {
		CHECK(rpma_recv(conn, p.recv_mr, 0, MSG_SIZE, p.recv));
		printf("%s%s sent: %" PRIu64 "\n", who, pid ? "value" : "Value", cntr);
		*p.send = cntr;
		CHECK(rpma_send(conn, p.send_mr, 0, MSG_SIZE, RPMA_F_COMPLETION_ALWAYS, NULL));
		wait_round(conn_cq(conn), p.recv, false);
		cntr = *p.recv;
		printf("%s%s received: %" PRIu64 "\n", who, pid ? "value" : "Value", cntr);
	} while (--rounds);
	*p.send = I_M_DONE;
	CHECK(rpma_send(conn, p.send_mr, 0, MSG_SIZE, RPMA_F_COMPLETION_ON_ERROR, NULL));
	wait_close_and_disconnect(conn);
	pp_delete(&p);
}

static void client08srq(int argc, char **argv) { client_srq(false, argc, argv); }
static void client13(int argc, char **argv) { client_srq(true, argc, argv); }

static struct rpma_srq *srq_new(struct rpma_peer *peer, bool rcq)
{
	struct rpma_srq_cfg *cfg = NULL;
	struct rpma_srq *srq = NULL;
	CHECK(rpma_srq_cfg_new(&cfg));
	if (!rcq)
		CHECK(rpma_srq_cfg_set_rcq_size(cfg, 0));
	CHECK(rpma_srq_new(peer, cfg, &srq));
	CHECK(rpma_srq_cfg_delete(&cfg));
	return srq;
}

/* 08srq: receives from the SRQ's CQ (no argument), the main CQ (m) or the receive CQ (r). */
static void server08srq(int argc, char **argv)
{
	fail_status = -1;
	char mode = argc > 0 ? argv[0][0] : 's';
	struct pp p = pp_new(RPMA_UTIL_IBV_CONTEXT_LOCAL, 1);
	struct rpma_srq *srq = srq_new(p.peer, mode == 's');
	struct rpma_conn_cfg *cfg = conn_cfg(mode == 'r' ? 10 : 0, false);
	CHECK(rpma_conn_cfg_set_srq(cfg, srq));
	struct rpma_ep *ep = listen_ep(p.peer);
	CHECK(rpma_srq_recv(srq, p.recv_mr, 0, MSG_SIZE, p.recv));
	struct rpma_conn *conn = server_accept(ep, cfg, NULL, 0);
	uint32_t qp_num;
	CHECK(rpma_conn_get_qp_num(conn, &qp_num));
	struct rpma_cq *rcq = NULL;
	if (mode == 's')
		CHECK(rpma_srq_get_rcq(srq, &rcq));
	else
		rcq = mode == 'm' ? conn_cq(conn) : conn_rcq(conn);
	for (;;) {
		struct ibv_wc wc;
		bool send = true, recv = false;
		while (!recv) {
			int n = 0;
			CHECK(rpma_cq_wait(rcq));
			int ret = rpma_cq_get_wc(rcq, 1, &wc, &n);
			if (ret && ret != RPMA_E_NO_COMPLETION)
				die(ret, "rpma_cq_get_wc");
			if (n == 1)
				validate_wc(&wc, p.recv, &send, &recv);
		}
		uint64_t v = *p.recv;
		if (v == I_M_DONE)
			break;
		if (wc.qp_num != qp_num)
			own("number of QP (qp_num) in the received completion differs from the one of the connection");
		printf("Value received: %" PRIu64 "\n", v);
		*p.send = v + 1;
		CHECK(rpma_srq_recv(srq, p.recv_mr, 0, MSG_SIZE, p.recv));
		printf("Value sent: %" PRIu64 "\n", v + 1);
		CHECK(rpma_send(conn, p.send_mr, 0, MSG_SIZE, RPMA_F_COMPLETION_ON_ERROR, NULL));
	}
	CHECK(rpma_conn_disconnect(conn));
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_conn_cfg_delete(&cfg));
	CHECK(rpma_srq_delete(&srq));
	pp_delete(&p);
}

/* 13: clients connect until <timeout> seconds pass without one, then the server answers all of them. */
static void server13(int argc, char **argv)
{
	fail_status = -1;
	int timeout = argc > 0 ? atoi(argv[0]) : 5;
	if (timeout <= 0)
		own("<timeout> should be a positive number of seconds");
	struct pp p = pp_new(RPMA_UTIL_IBV_CONTEXT_LOCAL, CLIENT_MAX);
	struct rpma_srq *srq = srq_new(p.peer, true);
	struct rpma_conn_cfg *cfg = conn_cfg(0, false);
	CHECK(rpma_conn_cfg_set_srq(cfg, srq));
	struct rpma_ep *ep = listen_ep(p.peer);
	struct rpma_conn *conns[CLIENT_MAX] = {0};
	uint32_t qps[CLIENT_MAX];
	int n = 0, ep_fd;
	CHECK(rpma_ep_get_fd(ep, &ep_fd));
	for (;;) {
		struct pollfd fd = {.fd = ep_fd, .events = POLLIN};
		int ready = poll(&fd, 1, timeout * 1000);
		if (ready < 0)
			own("poll failed");
		if (ready == 0)
			break;
		if (n == CLIENT_MAX)
			own("No free slot for a new connection request.");
		struct rpma_conn_req *req = next_req(ep, cfg);
		CHECK(rpma_srq_recv(srq, p.recv_mr, n * MSG_SIZE, MSG_SIZE, &p.recv[n]));
		conns[n] = connect_req(req, NULL, 0, true);
		CHECK(rpma_conn_get_qp_num(conns[n], &qps[n]));
		n++;
		printf("The client #%d has been connected.\n", n);
	}
	printf("Server ended listening.\n");
	struct rpma_cq *rcq = NULL;
	CHECK(rpma_srq_get_rcq(srq, &rcq));
	for (int done = 0; done < n;) {
		struct ibv_wc wc[CLIENT_MAX];
		int got = 0;
		CHECK(rpma_cq_wait(rcq));
		int ret = rpma_cq_get_wc(rcq, n, wc, &got);
		if (ret && ret != RPMA_E_NO_COMPLETION)
			die(ret, "rpma_cq_get_wc");
		for (int i = 0; i < got; i++) {
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_RECV)
				own("rpma_srq_recv() failed");
			int c = 0;
			while (c < n && qps[c] != wc[i].qp_num)
				c++;
			if (c == n)
				own("Unable to find the connection");
			uint64_t *msg = (uint64_t *)(uintptr_t)wc[i].wr_id;
			if (msg < p.recv || msg >= p.recv + n)
				own("received completion of an unknown buffer");
			size_t slot = msg - p.recv;
			if (*msg == I_M_DONE) {
				done++;
				continue;
			}
			printf("[server] value received: %" PRIu64 " from the connection [qp#%u]\n", *msg, qps[c]);
			p.send[slot] = *msg + 1;
			CHECK(rpma_srq_recv(srq, p.recv_mr, slot * MSG_SIZE, MSG_SIZE, msg));
			printf("[server] value sent: %" PRIu64 " from the connection [qp#%u]\n", p.send[slot], qps[c]);
			CHECK(rpma_send(conns[c], p.send_mr, slot * MSG_SIZE, MSG_SIZE, RPMA_F_COMPLETION_ON_ERROR, NULL));
		}
	}
	for (int i = 0; i < n; i++) {
		CHECK(rpma_conn_disconnect(conns[i]));
		CHECK(rpma_conn_delete(&conns[i]));
	}
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_conn_cfg_delete(&cfg));
	CHECK(rpma_srq_delete(&srq));
	pp_delete(&p);
}

/* ---- 09-flush-to-persistent-GPSPM: flushes requested by messages ---- */

#define MSG_SIZE_MAX 512
#define SEND_OFFSET 0
#define RECV_OFFSET (SEND_OFFSET + MSG_SIZE_MAX)

/* GPSPM's protobuf messages: fixed64 fields (wire type 1), one-byte keys. */
static size_t pb_put(uint8_t *b, int field, uint64_t v)
{
	b[0] = (uint8_t)(field << 3 | 1);
	memcpy(b + 1, &v, sizeof(v)); /* little-endian */
	return 1 + sizeof(v);
}

/* pb_get reads fields 1..n (fixed64) of b into v; fields it does not know are skipped. */
static void pb_get(const uint8_t *b, size_t len, int n, uint64_t *v)
{
	bool seen[4] = {false};
	size_t at = 0;
	while (at < len) {
		int field = b[at] >> 3, wire = b[at] & 7;
		if (b[at] & 0x80 || field == 0)
			own("Cannot unpack the message (key)");
		at++;
		size_t skip;
		switch (wire) {
		case 0:
			for (skip = 0; at + skip < len && (b[at + skip] & 0x80); skip++)
				;
			skip++;
			break;
		case 1:
			skip = 8;
			break;
		case 5:
			skip = 4;
			break;
		default:
			own("Cannot unpack the message (wire type)");
		}
		if (at + skip > len)
			own("Cannot unpack the message (too short)");
		if (field <= n) {
			if (wire != 1)
				own("Cannot unpack the message (not fixed64)");
			memcpy(&v[field - 1], b + at, 8);
			seen[field] = true;
		}
		at += skip;
	}
	for (int f = 1; f <= n; f++)
		if (!seen[f])
			own("Cannot unpack the message (missing field)");
}

static void server09(bool shared, int argc, char **argv)
{
	struct mem m = mem_new(argc > 0 ? argv[0] : NULL, 0, HELLO_STR_SIZE, false);
	char *mem = m.buf + m.data;
	char *msg = alloc(HELLO_STR_SIZE);
	if (mem[0])
		printf("Old value: %s\n", mem);
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_LOCAL);
	struct rpma_ep *ep = listen_ep(peer);
	struct rpma_mr_local *mr = reg(peer, m.buf, m.len,
		RPMA_MR_USAGE_WRITE_DST |
			(m.pmem ? RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT : RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY));
	struct rpma_mr_local *msg_mr = reg(peer, msg, HELLO_STR_SIZE,
		RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
	struct common_data d = common_data_new(m.data, mr, NULL);
	struct rpma_conn_cfg *cfg = conn_cfg(1, shared);
	struct rpma_conn_req *req = next_req(ep, cfg);
	CHECK(rpma_conn_req_recv(req, msg_mr, RECV_OFFSET, MSG_SIZE_MAX, NULL));
	struct rpma_conn *conn = connect_req(req, &d, sizeof(d), true);
	struct ibv_wc wc;
	if (shared)
		expect_conn_wc(conn, IBV_WC_RECV, &wc);
	else
		expect_wc(conn_rcq(conn), IBV_WC_RECV, &wc);
	uint64_t r[3];
	pb_get((uint8_t *)msg + RECV_OFFSET, wc.byte_len < MSG_SIZE_MAX ? wc.byte_len : MSG_SIZE_MAX, 3, r);
	printf("Flush request received: {offset: 0x%" PRIX64 ", length: 0x%" PRIX64 ", op_context: 0x%" PRIX64 "}\n",
		r[0], r[1], r[2]);
	if (r[0] > m.len || r[1] > m.len - r[0])
		own("The flush request's range is outside the memory");
	persist(&m, m.buf + r[0], r[1]);
	size_t n = pb_put((uint8_t *)msg + SEND_OFFSET, 1, r[2]);
	CHECK(rpma_send(conn, msg_mr, SEND_OFFSET, n, RPMA_F_COMPLETION_ALWAYS, NULL));
	if (shared)
		expect_conn_wc(conn, IBV_WC_SEND, &wc);
	else
		expect_wc(conn_cq(conn), IBV_WC_SEND, &wc);
	wait_close_and_disconnect(conn);
	printf("New value: %s\n", mem);
	CHECK(rpma_conn_cfg_delete(&cfg));
	CHECK(rpma_mr_dereg(&msg_mr));
	CHECK(rpma_mr_dereg(&mr));
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_peer_delete(&peer));
	mem_delete(&m);
}

static void client09(bool shared, int argc, char **argv)
{
	struct mem m = client_mem(argc, argv);
	struct hello_t *h = (struct hello_t *)(m.buf + m.data);
	printf("Next value: %s\n", h->str);
	char *msg = alloc(HELLO_STR_SIZE);
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_REMOTE);
	struct rpma_conn_cfg *cfg = conn_cfg(1, shared);
	struct rpma_conn *conn = client_connect(peer, cfg, NULL, 0);
	struct rpma_mr_local *src = reg(peer, m.buf, m.len, RPMA_MR_USAGE_WRITE_SRC);
	struct rpma_mr_local *msg_mr = reg(peer, msg, HELLO_STR_SIZE, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV);
	struct common_data d = conn_data(conn);
	struct rpma_mr_remote *dst = remote_mr(&d);
	size_t size = 0;
	CHECK(rpma_mr_remote_get_size(dst, &size));
	if (size < d.data_offset || size - d.data_offset < HELLO_STR_SIZE)
		own("Size of the remote memory region is too small for writing the data of the assumed size");
	CHECK(rpma_write(conn, dst, d.data_offset, src, m.data + offsetof(struct hello_t, str), HELLO_STR_SIZE,
		RPMA_F_COMPLETION_ON_ERROR, NULL));
	CHECK(rpma_recv(conn, msg_mr, RECV_OFFSET, MSG_SIZE_MAX, NULL));
	uint8_t *req = (uint8_t *)msg + SEND_OFFSET;
	size_t n = pb_put(req, 1, d.data_offset);
	n += pb_put(req + n, 2, HELLO_STR_SIZE);
	n += pb_put(req + n, 3, (uintptr_t)FLUSH_ID);
	CHECK(rpma_send(conn, msg_mr, SEND_OFFSET, n, RPMA_F_COMPLETION_ALWAYS, NULL));
	struct ibv_wc wc;
	if (shared) {
		expect_conn_send_recv(conn, &wc);
	} else {
		expect_wc(conn_cq(conn), IBV_WC_SEND, &wc);
		expect_wc(conn_rcq(conn), IBV_WC_RECV, &wc);
	}
	uint64_t op_context;
	pb_get((uint8_t *)msg + RECV_OFFSET, wc.byte_len < MSG_SIZE_MAX ? wc.byte_len : MSG_SIZE_MAX, 1, &op_context);
	if (op_context != (uintptr_t)FLUSH_ID)
		own("unexpected flush_resp->op_context value");
	translate(h);
	persist(&m, h, sizeof(*h));
	printf("Translation: %s\n", h->str);
	disconnect_and_wait_close(conn);
	CHECK(rpma_mr_remote_delete(&dst));
	CHECK(rpma_mr_dereg(&msg_mr));
	CHECK(rpma_mr_dereg(&src));
	CHECK(rpma_conn_cfg_delete(&cfg));
	CHECK(rpma_peer_delete(&peer));
	mem_delete(&m);
}

static void server09a(int argc, char **argv) { server09(false, argc, argv); }
static void server09b(int argc, char **argv) { server09(true, argc, argv); }
static void client09a(int argc, char **argv) { client09(false, argc, argv); }
static void client09b(int argc, char **argv) { client09(true, argc, argv); }

/* ---- 10-send-with-imm: the immediate data the client will send, in its private data ---- */

static void server10(int argc, char **argv)
{
	char *recv = alloc(KILOBYTE);
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_LOCAL);
	struct rpma_mr_local *recv_mr = reg(peer, recv, KILOBYTE, RPMA_MR_USAGE_RECV);
	struct rpma_ep *ep = listen_ep(peer);
	struct rpma_conn_req *req = next_req(ep, NULL);
	CHECK(rpma_conn_req_recv(req, recv_mr, 0, KILOBYTE, NULL));
	struct rpma_conn *conn = connect_req(req, NULL, 0, true);
	struct rpma_conn_private_data pd = {0};
	CHECK(rpma_conn_get_private_data(conn, &pd));
	if (pd.ptr == NULL || pd.len < sizeof(uint32_t))
		own("Received connection's private data is too small");
	uint32_t exp_imm;
	memcpy(&exp_imm, pd.ptr, sizeof(exp_imm));
	struct ibv_wc wc;
	expect_wc(conn_cq(conn), IBV_WC_RECV, &wc);
	if (!(wc.wc_flags & IBV_WC_WITH_IMM))
		own("Received unexpected completion flag (no IBV_WC_WITH_IMM)");
	uint32_t imm = ntohl(wc.imm_data); /* librpma sends it big-endian */
	if (imm != exp_imm)
		own("Received unexpected immediate data");
	printf("Received value '%s' with immediate data '%u'\n", wc.byte_len ? recv : "", imm);
	wait_close_and_disconnect(conn);
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_mr_dereg(&recv_mr));
	CHECK(rpma_peer_delete(&peer));
}

static void client10(int argc, char **argv)
{
	if (argc < 1)
		own("usage: 10 client <addr> <port> <imm> [word]");
	uint64_t imm64 = strtoul_noerror(argv[0]);
	if (imm64 > UINT32_MAX)
		own("The provided immediate data is too big");
	uint32_t imm = (uint32_t)imm64;
	const char *word = argc > 1 ? argv[1] : NULL;
	char *send = word ? alloc(KILOBYTE) : NULL;
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_REMOTE);
	struct rpma_mr_local *send_mr = word ? reg(peer, send, KILOBYTE, RPMA_MR_USAGE_SEND) : NULL;
	struct rpma_conn *conn = client_connect(peer, NULL, &imm, sizeof(imm));
	if (word) {
		printf("Sending value '%s' with immediate data '%u'\n", word, imm);
		strncpy(send, word, KILOBYTE - 1);
	} else {
		printf("Sending immediate data '%u'\n", imm);
	}
	CHECK(rpma_send_with_imm(conn, send_mr, 0, word ? KILOBYTE : 0, RPMA_F_COMPLETION_ALWAYS, imm, NULL));
	struct ibv_wc wc;
	expect_wc(conn_cq(conn), IBV_WC_SEND, &wc);
	disconnect_and_wait_close(conn);
	if (send_mr)
		CHECK(rpma_mr_dereg(&send_mr));
	CHECK(rpma_peer_delete(&peer));
}

/* ---- 11-write-with-imm: the client writes its immediate data along with it ---- */

static void server11(int argc, char **argv)
{
	uint32_t *dst = alloc(KILOBYTE);
	char *recv = alloc(1);
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_LOCAL);
	struct rpma_mr_local *dst_mr = reg(peer, dst, KILOBYTE, RPMA_MR_USAGE_WRITE_DST);
	struct rpma_mr_local *recv_mr = reg(peer, recv, 1, RPMA_MR_USAGE_RECV);
	struct common_data d = common_data_new(0, dst_mr, NULL);
	struct rpma_ep *ep = listen_ep(peer);
	struct rpma_conn_req *req = next_req(ep, NULL);
	CHECK(rpma_conn_req_recv(req, recv_mr, 0, 1, NULL));
	struct rpma_conn *conn = connect_req(req, &d, sizeof(d), true);
	struct ibv_wc wc;
	expect_wc(conn_cq(conn), IBV_WC_RECV_RDMA_WITH_IMM, &wc);
	if (!(wc.wc_flags & IBV_WC_WITH_IMM))
		own("Received an unexpected completion flag (no IBV_WC_WITH_IMM)");
	uint32_t imm = ntohl(wc.imm_data); /* librpma sends it big-endian */
	if (imm != *dst)
		own("Received unexpected immediate data");
	printf("The value '%u' was written together with immediate data '%u'\n", *dst, imm);
	wait_close_and_disconnect(conn);
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_mr_dereg(&recv_mr));
	CHECK(rpma_mr_dereg(&dst_mr));
	CHECK(rpma_peer_delete(&peer));
}

static void client11(int argc, char **argv)
{
	if (argc < 1)
		own("usage: 11 client <addr> <port> <imm>");
	uint64_t imm64 = strtoul_noerror(argv[0]);
	if (imm64 > UINT32_MAX)
		own("The provided immediate data is too big");
	uint32_t imm = (uint32_t)imm64;
	uint32_t *src = alloc(KILOBYTE);
	struct rpma_peer *peer = peer_via(RPMA_UTIL_IBV_CONTEXT_REMOTE);
	struct rpma_mr_local *src_mr = reg(peer, src, KILOBYTE, RPMA_MR_USAGE_WRITE_SRC);
	struct rpma_conn *conn = client_connect(peer, NULL, NULL, 0);
	struct common_data d = conn_data(conn);
	struct rpma_mr_remote *dst = remote_mr(&d);
	*src = imm;
	printf("Writing value '%u' with immediate data '%u'\n", *src, imm);
	CHECK(rpma_write_with_imm(conn, dst, d.data_offset, src_mr, 0, KILOBYTE, RPMA_F_COMPLETION_ALWAYS, imm, NULL));
	struct ibv_wc wc;
	expect_wc(conn_cq(conn), IBV_WC_RDMA_WRITE, &wc);
	disconnect_and_wait_close(conn);
	CHECK(rpma_mr_remote_delete(&dst));
	CHECK(rpma_mr_dereg(&src_mr));
	CHECK(rpma_peer_delete(&peer));
}

static const struct {
	const char *name;
	void (*server)(int argc, char **argv);
	void (*client)(int argc, char **argv);
} examples[] = {
	{"01-connection", server01, client01},
	{"02-read-to-volatile", server02, client02},
	{"03-read-to-persistent", server03, client03},
	{"04-write-to-persistent", server04, client04},
	{"05-flush-to-persistent", server05, client05},
	{"06-multiple-connections", server06a, client06},
	{"06scch-multiple-connections", server06b, client06},
	{"07-atomic-write", server07, client07},
	{"08-messages-ping-pong", server08, client08},
	{"08srq-simple-messages-ping-pong-with-srq", server08srq, client08srq},
	{"09-flush-to-persistent-GPSPM", server09a, client09a},
	{"09scch-flush-to-persistent-GPSPM", server09b, client09b},
	{"10-send-with-imm", server10, client10},
	{"11-write-with-imm", server11, client11},
	{"12-receive-completion-queue", server12, client12},
	{"12scch-receive-completion-queue", server12scch, client12scch},
	{"13-messages-ping-pong-with-srq", server13, client13},
};

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 5) {
		fprintf(stderr, "usage: %s <example> server|client <addr> <port> [<args>...]\n", argv[0]);
		return 255;
	}
	alarm(120);
	addr = argv[3];
	port = argv[4];
	for (size_t i = 0; i < sizeof(examples) / sizeof(examples[0]); i++) {
		if (strcmp(argv[1], examples[i].name) != 0)
			continue;
		if (strcmp(argv[2], "server") == 0)
			examples[i].server(argc - 5, argv + 5);
		else if (strcmp(argv[2], "client") == 0)
			examples[i].client(argc - 5, argv + 5);
		else
			break;
		return 0;
	}
	fprintf(stderr, "unknown example or role: %s %s\n", argv[1], argv[2]);
	return 255;
}
