/*
 * hostile: a misbehaving rsockets client for purerdma's rsocket tests
 * (hostile_vm_test.go). It speaks the rsockets wire protocol with
 * librdmacm and libibverbs directly (not the rsocket API), so that it
 * can break the protocol on purpose:
 *
 *   hostile SERVER_IP PORT BIND_IP MODE
 *
 * It binds to BIND_IP, connects to SERVER_IP:PORT in the TCP port space
 * with rsockets' 40-byte connect data (struct rs_conn_data, big-endian),
 * takes the server's connect data from the ESTABLISHED event and then,
 * by MODE, commits one protocol violation and waits for the server to
 * end the connection (a DISCONNECTED event, or its own QP failing).
 *
 * On an iWARP device it speaks rsockets' iWARP form (rsocket.c's
 * RS_OPT_MSG_SEND), as librdmacm does there: a message is a 4-byte
 * inline SEND of the word the immediate would carry (this host's byte
 * order), after a plain RDMA WRITE of its data when it has data; each
 * receive takes its message into a 4-byte slot; the connect request
 * asks for an initiator depth of 1.
 *
 * Modes, data path (the server must reset the connection):
 *   goodecho    behaves: DATA "hello" into the server's buffer, expects
 *               the 5 bytes back as a DATA message into its own buffer,
 *               then sends DISCONNECT and disconnects (proves the peer)
 *   overlen     DATA claiming 2 * data_buf.length + 1 bytes (more than
 *               both halves of the server's buffer); 16 bytes written,
 *               inside data_buf
 *   credits     server-credits + 1 DATA messages of 1 byte each
 *   backcredit  SGL with credit limit 64, then SGL with 10
 *   farcredit   SGL with credit limit 65: one past this side's receive
 *               queue of 64 (the server has sent nothing)
 *   opcode1, opcode2, opcode3, opcode5
 *               a message with that (unknown) opcode
 *   ctrl9       CTRL with value 9
 *   iomap       IOMAP_SGL with an index one past the server's iomap table
 *               (none, if it offers no iomap)
 *   iomapwrap   an iomap entry whose offset and length pass 2^64, written
 *               into entry 0 of the server's table with IOMAP_SGL 0
 *   noimm       a zero-length SEND without immediate data (on iWARP: a
 *               message without its 4 bytes)
 * Modes, connect data (the server must reject the connection):
 *   badversion  version 2
 *   short       20 bytes of connect data
 *   sgllen      target_sgl.length 5
 *   credits0    credits 0
 *   flags       an unknown flag, 0x80 (flags 0x82 with IOMAP)
 *   emptybuf    data_buf.length 0
 *
 * It prints one line to stdout saying what it sent, and diagnostics to
 * stderr. Exit status: 0 if the server reacted as it must (reset the
 * connection, rejected the connect data, or echoed correctly in
 * goodecho), 1 otherwise or on any failure, 2 on a bad command line.
 */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define RBUF_SIZE (128 << 10)	/* receive buffer: two halves */
#define SBUF_SIZE 4096		/* what this side writes from */
#define QSIZE 64		/* send and receive queue */
#define CREDITS QSIZE		/* what this side grants: its receive queue */
#define WR_RECV (1ULL << 63)	/* marks a receive's wr_id, as rsocket.c */
#define WAIT_MS 30000		/* longest wait for the server */
#define SLOTS_OFF 2048		/* iWARP: the receives' message slots, in sbuf */
#define MSG_SIZE 4		/* iWARP: a message's SEND */

enum { OP_DATA = 0, OP_SGL = 4, OP_IOMAP_SGL = 6, OP_CTRL = 7 };
enum { CTRL_DISCONNECT = 0 };
#define MSG(op, v) ((uint32_t)(op) << 29 | ((uint32_t)(v) & 0x1fffffff))

struct sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};

static const char *mode;

static struct rdma_event_channel *ch;
static struct rdma_cm_id *id;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_mr *rmr, *tmr, *smr;
static unsigned char *rbuf, *sbuf;
static struct sge *tsgl;	/* the target SGL the server writes into */

static struct sge peer_tsgl, peer_buf;	/* from the server's connect data */
static unsigned peer_credits;
static unsigned peer_iomap;	/* entries of the server's iomap table */

static int outstanding;		/* sends not completed */
static int qp_failed;		/* an error completion */
static enum ibv_wc_status fail_status;
static unsigned long long got_data;	/* bytes the server wrote with DATA */
static int got_disconnect;	/* CTRL DISCONNECT from the server */
static int iwarp;		/* messages are SENDs (RS_OPT_MSG_SEND) */
static unsigned rslot;		/* iWARP: the slot of the next receive */

static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "hostile %s: FAIL ", mode);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static struct sockaddr_in addr(const char *ip, int port)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1) {
		fprintf(stderr, "hostile: bad address %s\n", ip);
		exit(2);
	}
	return sin;
}

/*
 * next_event waits up to ms for an rdma_cm event and returns its type,
 * or -1 on timeout. The event's private data (up to 56 bytes) is copied
 * to pdata/plen when they are given.
 */
static int next_event(int ms, unsigned char *pdata, int *plen, int *status)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int type, r;

	r = poll(&p, 1, ms);
	if (r < 0)
		fail("poll: %s", strerror(errno));
	if (r == 0)
		return -1;
	if (rdma_get_cm_event(ch, &ev))
		fail("rdma_get_cm_event: %s", strerror(errno));
	type = ev->event;
	if (status)
		*status = ev->status;
	if (pdata && plen) {
		int n = ev->param.conn.private_data_len;

		if (n > 56)
			n = 56;
		if (ev->param.conn.private_data && n > 0)
			memcpy(pdata, ev->param.conn.private_data, n);
		else
			n = 0;
		*plen = n;
	}
	rdma_ack_cm_event(ev);
	return type;
}

static void expect_event(int want, const char *step)
{
	int status = 0, got = next_event(WAIT_MS, NULL, NULL, &status);

	if (got != want)
		fail("%s: event %s (status %d), want %s", step,
		     got < 0 ? "none (timeout)" : rdma_event_str(got), status,
		     rdma_event_str(want));
}

static void post_recv(void)
{
	struct ibv_recv_wr wr = { .wr_id = WR_RECV, .sg_list = NULL, .num_sge = 0 }, *bad;
	struct ibv_sge sge;

	if (iwarp) {
		sge.addr = (uintptr_t) sbuf + SLOTS_OFF + rslot * MSG_SIZE;
		sge.length = MSG_SIZE;
		sge.lkey = smr->lkey;
		wr.wr_id = WR_RECV | rslot;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		rslot = (rslot + 1) % QSIZE;
	}
	if (ibv_post_recv(id->qp, &wr, &bad))
		fail("ibv_post_recv: %s", strerror(errno));
}

/*
 * drain polls the CQ: receives are reposted and what they carried is
 * counted; sends are retired. An error completion sets qp_failed.
 */
static void drain(void)
{
	struct ibv_wc wc[16];
	int n, i;

	while ((n = ibv_poll_cq(cq, 16, wc)) > 0) {
		for (i = 0; i < n; i++) {
			if (!(wc[i].wr_id & WR_RECV))
				outstanding--;
			if (wc[i].status != IBV_WC_SUCCESS) {
				if (!qp_failed)
					fail_status = wc[i].status;
				qp_failed = 1;
				continue;
			}
			if (!(wc[i].wr_id & WR_RECV))
				continue;
			if ((wc[i].wc_flags & IBV_WC_WITH_IMM) ||
			    (iwarp && wc[i].byte_len == MSG_SIZE)) {
				uint32_t imm;

				if (wc[i].wc_flags & IBV_WC_WITH_IMM)
					imm = be32toh(wc[i].imm_data);
				else
					memcpy(&imm, sbuf + SLOTS_OFF +
					       (uint32_t) wc[i].wr_id * MSG_SIZE, MSG_SIZE);
				post_recv();
				if (imm >> 29 == OP_DATA)
					got_data += imm & 0x1fffffff;
				else if (imm == MSG(OP_CTRL, CTRL_DISCONNECT))
					got_disconnect = 1;
			} else {
				post_recv();
			}
		}
	}
	if (n < 0)
		fail("ibv_poll_cq");
}

/* wait_slot waits until the send queue has room. */
static void wait_slot(void)
{
	long long end = now_ms() + WAIT_MS;

	for (drain(); outstanding >= QSIZE; drain()) {
		if (qp_failed)
			return;
		if (now_ms() > end)
			fail("the send queue stayed full for %d ms", WAIT_MS);
		usleep(1000);
	}
}

/* post_send_msg sends msg as a 4-byte inline SEND (iWARP's message). */
static void post_send_msg(uint32_t msg)
{
	struct ibv_sge sge = { .addr = (uintptr_t) &msg, .length = MSG_SIZE, .lkey = 0 };
	struct ibv_send_wr wr, *bad;

	wait_slot();
	memset(&wr, 0, sizeof wr);
	wr.wr_id = msg;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	if (ibv_post_send(id->qp, &wr, &bad))
		fail("ibv_post_send: %s", strerror(errno));
	outstanding++;
}

/*
 * post posts one send: op is IBV_WR_RDMA_WRITE_WITH_IMM (to raddr/rkey
 * with imm) or IBV_WR_SEND; len bytes from sbuf at off (none if 0). On
 * iWARP a WRITE WITH IMMEDIATE is a WRITE of the data (if any) and the
 * SEND of imm.
 */
static void post(enum ibv_wr_opcode op, uint32_t imm, size_t off, uint32_t len,
		 uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t) sbuf + off, .length = len, .lkey = smr->lkey };
	struct ibv_send_wr wr, *bad;

	if (iwarp && op == IBV_WR_RDMA_WRITE_WITH_IMM) {
		if (len)
			post(IBV_WR_RDMA_WRITE, imm, off, len, raddr, rkey);
		post_send_msg(imm);
		return;
	}
	wait_slot();
	memset(&wr, 0, sizeof wr);
	wr.wr_id = imm;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (len) {
		wr.sg_list = &sge;
		wr.num_sge = 1;
	}
	if (op == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htobe32(imm);
	if (op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_RDMA_WRITE) {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (ibv_post_send(id->qp, &wr, &bad))
		fail("ibv_post_send: %s", strerror(errno));
	outstanding++;
}

/* post_msg sends a message without data, as rsocket.c's rs_post_msg. */
static void post_msg(uint32_t imm)
{
	post(IBV_WR_RDMA_WRITE_WITH_IMM, imm, 0, 0, peer_tsgl.addr, peer_tsgl.key);
}

/* put_sge writes s big-endian, as rs_conn_data carries it. */
static void put_sge(unsigned char *b, struct sge s)
{
	uint64_t a = htobe64(s.addr);
	uint32_t k = htobe32(s.key), l = htobe32(s.length);

	memcpy(b, &a, 8);
	memcpy(b + 8, &k, 4);
	memcpy(b + 12, &l, 4);
}

static struct sge get_sge(const unsigned char *b)
{
	struct sge s;
	uint64_t a;
	uint32_t k, l;

	memcpy(&a, b, 8);
	memcpy(&k, b + 8, 4);
	memcpy(&l, b + 12, 4);
	s.addr = be64toh(a);
	s.key = be32toh(k);
	s.length = be32toh(l);
	return s;
}

/*
 * wait_reaction waits for the server to end the connection: a
 * DISCONNECTED event or an error completion. It returns 1 if it did.
 */
static int wait_reaction(void)
{
	long long end = now_ms() + WAIT_MS;

	while (now_ms() < end) {
		int type;

		drain();
		if (qp_failed) {
			fprintf(stderr, "hostile %s: the QP failed: %s\n", mode,
				ibv_wc_status_str(fail_status));
			return 1;
		}
		type = next_event(10, NULL, NULL, NULL);
		if (type == RDMA_CM_EVENT_DISCONNECTED) {
			fprintf(stderr, "hostile %s: the server disconnected\n", mode);
			return 1;
		}
		if (type >= 0)
			fprintf(stderr, "hostile %s: event %s\n", mode, rdma_event_str(type));
	}
	fprintf(stderr, "hostile %s: the server did not end the connection in %d ms\n",
		mode, WAIT_MS);
	return 0;
}

static int is_connect_mode(void)
{
	static const char *const m[] = {
		"badversion", "short", "sgllen", "credits0", "flags", "emptybuf",
	};
	size_t i;

	for (i = 0; i < sizeof m / sizeof m[0]; i++)
		if (!strcmp(mode, m[i]))
			return 1;
	return 0;
}

static int goodecho(void)
{
	long long end = now_ms() + WAIT_MS;
	int status = 0;

	memcpy(sbuf, "hello", 5);
	post(IBV_WR_RDMA_WRITE_WITH_IMM, MSG(OP_DATA, 5), 0, 5, peer_buf.addr, peer_buf.key);
	printf("goodecho: sent DATA \"hello\" (imm %#x) into data_buf\n", MSG(OP_DATA, 5));
	fflush(stdout);
	while (got_data < 5) {
		drain();
		if (qp_failed)
			fail("a completion failed: %s", ibv_wc_status_str(fail_status));
		if (now_ms() > end)
			fail("no echo in %d ms", WAIT_MS);
		if (next_event(1, NULL, NULL, &status) >= 0)
			fail("an rdma_cm event before the echo");
	}
	if (got_data != 5 || memcmp(rbuf, "hello", 5))
		fail("echo: %llu bytes, %.5s", got_data, (char *) rbuf);
	/* close as rclose does: DISCONNECT once the sends are done */
	post_msg(MSG(OP_CTRL, CTRL_DISCONNECT));
	for (drain(); outstanding > 0; drain()) {
		if (qp_failed)
			fail("a completion failed: %s", ibv_wc_status_str(fail_status));
		if (now_ms() > end)
			fail("sends not completed in %d ms", WAIT_MS);
		usleep(1000);
	}
	if (rdma_disconnect(id))
		fail("rdma_disconnect: %s", strerror(errno));
	expect_event(RDMA_CM_EVENT_DISCONNECTED, "disconnect");
	fprintf(stderr, "hostile goodecho: echo received, disconnected\n");
	return 0;
}

static int misbehave(void)
{
	uint32_t imm;
	unsigned i, n;

	if (!strcmp(mode, "goodecho"))
		return goodecho();
	if (!strcmp(mode, "overlen")) {
		uint64_t claim = 2ULL * peer_buf.length + 1;

		if (claim > 0x1fffffff)
			fail("data_buf of %u bytes: no larger length fits a message", peer_buf.length);
		memset(sbuf, 'o', 16);
		imm = MSG(OP_DATA, claim);
		post(IBV_WR_RDMA_WRITE_WITH_IMM, imm, 0, 16, peer_buf.addr, peer_buf.key);
		printf("overlen: sent DATA (imm %#x) claiming %llu bytes, 16 written, into a data_buf of %u\n",
		       imm, (unsigned long long) claim, peer_buf.length);
	} else if (!strcmp(mode, "credits")) {
		n = peer_credits + 1;
		if (n > peer_buf.length)
			fail("%u credits for a data_buf of %u bytes", peer_credits, peer_buf.length);
		memset(sbuf, 'c', 1);
		printf("credits: sending %u DATA messages of 1 byte, the server granted %u\n",
		       n, peer_credits);
		fflush(stdout);
		for (i = 0; i < n && !qp_failed; i++)
			post(IBV_WR_RDMA_WRITE_WITH_IMM, MSG(OP_DATA, 1), 0, 1,
			     peer_buf.addr + i, peer_buf.key);
	} else if (!strcmp(mode, "backcredit")) {
		post_msg(MSG(OP_SGL, CREDITS));
		post_msg(MSG(OP_SGL, 10));
		printf("backcredit: sent SGL credit limit %d, then 10\n", CREDITS);
	} else if (!strcmp(mode, "farcredit")) {
		post_msg(MSG(OP_SGL, CREDITS + 1));
		printf("farcredit: sent SGL credit limit %d with a receive queue of %d\n",
		       CREDITS + 1, CREDITS);
	} else if (!strncmp(mode, "opcode", 6) && strlen(mode) == 7 &&
		   strchr("1235", mode[6])) {
		imm = MSG(mode[6] - '0', 0);
		post_msg(imm);
		printf("%s: sent a message of opcode %c (imm %#x)\n", mode, mode[6], imm);
	} else if (!strcmp(mode, "ctrl9")) {
		post_msg(MSG(OP_CTRL, 9));
		printf("ctrl9: sent CTRL 9 (imm %#x)\n", MSG(OP_CTRL, 9));
	} else if (!strcmp(mode, "iomap")) {
		post_msg(MSG(OP_IOMAP_SGL, peer_iomap));
		printf("iomap: sent IOMAP_SGL %u (imm %#x) to a table of %u\n", peer_iomap,
		       MSG(OP_IOMAP_SGL, peer_iomap), peer_iomap);
	} else if (!strcmp(mode, "iomapwrap")) {
		/* struct rs_iomap in the server's byte order (this host's) */
		uint64_t off = ~0ULL - 7, addr = (uintptr_t) rbuf;
		uint32_t key = rmr->rkey, len = 16;

		if (peer_iomap == 0)
			fail("the server offers no iomap");
		memcpy(sbuf, &off, 8);
		memcpy(sbuf + 8, &addr, 8);
		memcpy(sbuf + 16, &key, 4);
		memcpy(sbuf + 20, &len, 4);
		post(IBV_WR_RDMA_WRITE_WITH_IMM, MSG(OP_IOMAP_SGL, 0), 0, 24,
		     peer_tsgl.addr + 2 * 16, peer_tsgl.key);
		printf("iomapwrap: wrote iomap entry 0: offset %#llx length %u\n",
		       (unsigned long long) off, len);
	} else if (!strcmp(mode, "noimm")) {
		post(IBV_WR_SEND, 0, 0, 0, 0, 0);
		printf("noimm: sent a zero-length SEND without immediate data\n");
	} else {
		fprintf(stderr, "hostile: unknown mode %s\n", mode);
		exit(2);
	}
	fflush(stdout);
	return wait_reaction() ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct sockaddr_in src, dst;
	struct ibv_qp_init_attr qpa;
	struct rdma_conn_param cp;
	unsigned char cd[40], pdata[56];
	struct sge s;
	int i, type, plen = 0, status = 0, cdlen = sizeof cd;

	if (argc != 5) {
		fprintf(stderr, "usage: hostile SERVER_IP PORT BIND_IP MODE\n");
		return 2;
	}
	mode = argv[4];
	dst = addr(argv[1], atoi(argv[2]));
	src = addr(argv[3], 0);
	setvbuf(stdout, NULL, _IOLBF, 0);

	ch = rdma_create_event_channel();
	if (!ch)
		fail("rdma_create_event_channel: %s", strerror(errno));
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		fail("rdma_create_id: %s", strerror(errno));
	if (rdma_bind_addr(id, (struct sockaddr *) &src))
		fail("rdma_bind_addr %s: %s", argv[3], strerror(errno));
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *) &dst, 5000))
		fail("rdma_resolve_addr: %s", strerror(errno));
	expect_event(RDMA_CM_EVENT_ADDR_RESOLVED, "resolve address");
	if (rdma_resolve_route(id, 5000))
		fail("rdma_resolve_route: %s", strerror(errno));
	expect_event(RDMA_CM_EVENT_ROUTE_RESOLVED, "resolve route");

	iwarp = id->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
	pd = ibv_alloc_pd(id->verbs);
	if (!pd)
		fail("ibv_alloc_pd: %s", strerror(errno));
	cq = ibv_create_cq(id->verbs, 2 * QSIZE, NULL, NULL, 0);
	if (!cq)
		fail("ibv_create_cq: %s", strerror(errno));
	memset(&qpa, 0, sizeof qpa);
	qpa.send_cq = cq;
	qpa.recv_cq = cq;
	qpa.qp_type = IBV_QPT_RC;
	qpa.sq_sig_all = 1;
	qpa.cap.max_send_wr = QSIZE;
	qpa.cap.max_recv_wr = QSIZE;
	qpa.cap.max_send_sge = 2;
	qpa.cap.max_recv_sge = 1;
	qpa.cap.max_inline_data = 64;
	if (rdma_create_qp(id, pd, &qpa))
		fail("rdma_create_qp: %s", strerror(errno));

	rbuf = aligned_alloc(4096, RBUF_SIZE);
	sbuf = aligned_alloc(4096, SBUF_SIZE);
	tsgl = aligned_alloc(4096, 4096);
	if (!rbuf || !sbuf || !tsgl)
		fail("aligned_alloc");
	memset(rbuf, 0, RBUF_SIZE);
	memset(sbuf, 0, SBUF_SIZE);
	memset(tsgl, 0, 4096);
	rmr = ibv_reg_mr(pd, rbuf, RBUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	tmr = ibv_reg_mr(pd, tsgl, 2 * sizeof *tsgl, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	smr = ibv_reg_mr(pd, sbuf, SBUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (!rmr || !tmr || !smr)
		fail("ibv_reg_mr: %s", strerror(errno));
	for (i = 0; i < QSIZE; i++)
		post_recv();

	/* struct rs_conn_data, with this mode's fault */
	memset(cd, 0, sizeof cd);
	cd[0] = !strcmp(mode, "badversion") ? 2 : 1;
	cd[1] = 2;		/* RS_CONN_FLAG_IOMAP, as C always sets */
	if (__BYTE_ORDER == __BIG_ENDIAN)
		cd[1] |= 1;	/* RS_CONN_FLAG_NET */
	if (!strcmp(mode, "flags"))
		cd[1] |= 0x80;
	cd[2] = CREDITS >> 8;
	cd[3] = CREDITS & 0xff;
	if (!strcmp(mode, "credits0"))
		cd[2] = cd[3] = 0;
	s.addr = (uintptr_t) tsgl;
	s.key = tmr->rkey;
	s.length = !strcmp(mode, "sgllen") ? 5 : 2;
	put_sge(cd + 8, s);
	s.addr = (uintptr_t) rbuf;
	s.key = rmr->rkey;
	s.length = !strcmp(mode, "emptybuf") ? 0 : RBUF_SIZE / 2;
	put_sge(cd + 24, s);
	if (!strcmp(mode, "short"))
		cdlen = 20;

	memset(&cp, 0, sizeof cp);
	cp.private_data = cd;
	cp.private_data_len = cdlen;
	cp.flow_control = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (iwarp)
		cp.initiator_depth = 1;
	if (rdma_connect(id, &cp))
		fail("rdma_connect: %s", strerror(errno));
	type = next_event(WAIT_MS, pdata, &plen, &status);

	if (is_connect_mode()) {
		printf("%s: sent %d bytes of connect data: version %u flags %#x credits %u target_sgl.length %u data_buf.length %u\n",
		       mode, cdlen, cd[0], cd[1], (cd[2] << 8) | cd[3],
		       cdlen >= 24 ? get_sge(cd + 8).length : 0,
		       cdlen >= 40 ? get_sge(cd + 24).length : 0);
		if (type == RDMA_CM_EVENT_REJECTED) {
			fprintf(stderr, "hostile %s: rejected (status %d)\n", mode, status);
			return 0;
		}
		fprintf(stderr, "hostile %s: the server did not reject: event %s (status %d)\n", mode,
			type < 0 ? "none (timeout)" : rdma_event_str(type), status);
		return 1;
	}
	if (type != RDMA_CM_EVENT_ESTABLISHED)
		fail("connect: event %s (status %d), want ESTABLISHED",
		     type < 0 ? "none (timeout)" : rdma_event_str(type), status);
	if (plen < 40 || pdata[0] != 1)
		fail("the server's connect data: %d bytes, version %u", plen, plen ? pdata[0] : 0);
	peer_credits = (pdata[2] << 8) | pdata[3];
	peer_tsgl = get_sge(pdata + 8);
	peer_buf = get_sge(pdata + 24);
	peer_iomap = pdata[7] <= 128 ? pdata[7] : (pdata[7] & 0x7f) << 8;
	if (peer_tsgl.length != 2 || peer_buf.length == 0 || peer_credits == 0)
		fail("the server's connect data: credits %u, target_sgl.length %u, data_buf.length %u",
		     peer_credits, peer_tsgl.length, peer_buf.length);
	return misbehave();
}
