// SPDX-License-Identifier: MIT
/*
 * rpmabench: `purerdma bench rpma` on C librpma (Debian's 1.2.0), for
 * scripts/bench-rpma, which compiles it in the VM:
 *
 *	cc -O2 -o rpmabench rpmabench.c -lrpma -libverbs
 *	rpmabench TEST [-s SIZE] [-n ITERS] [-w WARMUP] [-t DEPTH] [-f EVERY]
 *		[-p PORT] (-b ADDR | SERVER)
 *
 * The same tests, loops, wire, statistics and output as
 * cmd/purerdma/bench_rpma*.go (read those for the why):
 *
 *   write_lat  rpma_write (completion on error) + rpma_flush (always),
 *              wait for the flush; a sample is the time from one write to
 *              the next
 *   read_lat   rpma_read, wait for it
 *   send_lat   rpma_send/rpma_recv ping-pong, every receive posted again;
 *              a sample is half a round trip
 *   write_bw   up to DEPTH writes in flight, a flush after every EVERY
 *              writes and after the last; a flush's completion completes
 *              the writes before it
 *
 * The client's request carries the test (struct hello); the server
 * accepts with struct common_data of librpma's examples: its region's
 * and its peer configuration's descriptors. Busy polling with
 * rpma_cq_get_wc, time stamps from the TSC, whose rate is measured
 * against CLOCK_MONOTONIC over the run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <librpma.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t cycles(void) { return __rdtsc(); }
#else
static inline uint64_t cycles(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#endif

enum test { WRITE_LAT = 1, READ_LAT, SEND_LAT, WRITE_BW };
static const char *test_names[] = {NULL, "write_lat", "read_lat", "send_lat", "write_bw"};
static const char *test_titles[] = {NULL, "write + flush latency", "read latency",
	"send/recv ping-pong latency", "write bandwidth, flushed"};

#define DEF_SIZE 64
#define DEF_ITERS 1000
#define DEF_LAT_WARMUP 100
#define DEF_TX_DEPTH 128
#define DEF_FLUSH_EVERY 32
#define DEF_PORT "18516"
#define MAX_DEPTH 4096
#define RX_DEPTH 64
#define LAT_TAIL 2
#define CONNECT_TIMEOUT_S 10
#define STALL_TIMEOUT_S 30
#define MIB (1 << 20)
#define MAX_PEAK_SPANS 2e7

struct cfg {
	enum test test;
	int size, iters, warmup, depth, every;
	const char *bind, *server, *port;
};

/* The request's private data, 20 bytes, little-endian (bench_rpma.go). */
#define HELLO_MAGIC "RPMB"
#define HELLO_VERSION 1
#define HELLO_SIZE 20

/* struct common_data of librpma's examples. */
#define DESCRIPTORS_MAX_SIZE 24
struct common_data {
	uint16_t data_offset;
	uint8_t mr_desc_size;
	uint8_t pcfg_desc_size;
	char descriptors[DESCRIPTORS_MAX_SIZE];
};

static void die(const char *what, int ret)
{
	fprintf(stderr, "rpmabench: %s: %s\n", what, ret < 0 && ret <= RPMA_E_UNKNOWN ? rpma_err_2str(ret) : strerror(-ret));
	exit(1);
}

#define CHECK(call)                          \
	do {                                 \
		int ret_ = (call);           \
		if (ret_)                    \
			die(#call, ret_);    \
	} while (0)

static void usage(void)
{
	fprintf(stderr, "usage: rpmabench TEST [-s SIZE] [-n ITERS] [-w WARMUP] [-t DEPTH] [-f EVERY] [-p PORT] (-b ADDR | SERVER)\n"
			"TEST: write_lat, read_lat, send_lat, write_bw\n");
	exit(2);
}

static int total(const struct cfg *c) { return c->warmup + c->iters; }

static int rx_depth(const struct cfg *c)
{
	if (c->test != SEND_LAT)
		return 0;
	return total(c) < RX_DEPTH ? total(c) : RX_DEPTH;
}

static int sq_size(const struct cfg *c)
{
	if (c->test == WRITE_BW)
		return c->depth + (c->depth + c->every - 1) / c->every + 1;
	return 2;
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* A counter reading and the clock, the tightest of 8 brackets (as
 * internal/cycles). */
static void clock_pair(double *c, double *t)
{
	uint64_t best = 0;
	for (int i = 0; i < 8; i++) {
		uint64_t a = cycles();
		double now = now_us();
		uint64_t b = cycles();
		if (b < a)
			continue;
		if (i == 0 || b - a < best) {
			best = b - a;
			*c = (double)a + (double)(b - a) / 2;
			*t = now;
		}
	}
}

/* The stall watchdog: about a million empty polls in a row start a
 * clock; STALL_TIMEOUT_S without progress ends the run. */
static uint64_t spins;
static double stall_since;

static void spin(void)
{
	if ((++spins & ((1 << 20) - 1)) != 0)
		return;
	double t = now_us();
	if (stall_since == 0)
		stall_since = t;
	else if (t - stall_since > STALL_TIMEOUT_S * 1e6) {
		fprintf(stderr, "rpmabench: no progress for %d s: is the peer still running?\n", STALL_TIMEOUT_S);
		exit(1);
	}
}

static void progress(void) { spins = 0, stall_since = 0; }

static void check_wc(const struct ibv_wc *wc)
{
	if (wc->status != IBV_WC_SUCCESS) {
		fprintf(stderr, "rpmabench: operation with op context %#" PRIx64 " failed: %s\n", (uint64_t)wc->wr_id,
			ibv_wc_status_str(wc->status));
		exit(1);
	}
}

static void wait_one(struct rpma_cq *cq)
{
	struct ibv_wc wc;
	int got, ret;
	for (;;) {
		ret = rpma_cq_get_wc(cq, 1, &wc, &got);
		if (ret == 0) {
			progress();
			check_wc(&wc);
			return;
		}
		if (ret != RPMA_E_NO_COMPLETION)
			die("rpma_cq_get_wc", ret);
		spin();
	}
}

struct side {
	struct ibv_context *dev;
	struct rpma_peer *peer;
	char *buf;
	size_t region;
	struct rpma_mr_local *mr;
};

static void open_side(struct side *s, const struct cfg *c, const char *addr, enum rpma_util_ibv_context_type type,
		      int usage)
{
	long page = sysconf(_SC_PAGESIZE);
	CHECK(rpma_utils_get_ibv_context(addr, type, &s->dev));
	CHECK(rpma_peer_new(s->dev, &s->peer));
	s->region = (c->size + page - 1) / page * page;
	s->buf = mmap(NULL, 2 * s->region, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->buf == MAP_FAILED)
		die("mmap", -errno);
	CHECK(rpma_mr_reg(s->peer, s->buf, 2 * s->region, usage, &s->mr));
}

static void close_side(struct side *s)
{
	CHECK(rpma_mr_dereg(&s->mr));
	munmap(s->buf, 2 * s->region);
	CHECK(rpma_peer_delete(&s->peer));
}

static struct rpma_conn_cfg *conn_cfg(const struct cfg *c)
{
	struct rpma_conn_cfg *cc;
	CHECK(rpma_conn_cfg_new(&cc));
	CHECK(rpma_conn_cfg_set_sq_size(cc, sq_size(c)));
	CHECK(rpma_conn_cfg_set_cq_size(cc, sq_size(c)));
	if (rx_depth(c) > 0) {
		CHECK(rpma_conn_cfg_set_rq_size(cc, rx_depth(c)));
		CHECK(rpma_conn_cfg_set_rcq_size(cc, rx_depth(c)));
	}
	return cc;
}

static void put32(unsigned char *b, uint32_t v)
{
	b[0] = v, b[1] = v >> 8, b[2] = v >> 16, b[3] = v >> 24;
}

static uint32_t get32(const unsigned char *b) { return b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24; }

struct run {
	const struct cfg *c;
	struct side *s;
	struct rpma_conn *conn;
	struct rpma_cq *cq, *rcq;
	struct rpma_mr_remote *rmr;
	size_t roff;
	bool server;
};

/* send_lat's loop, on both sides (bench_rpma_run.go's sendLat). */
static void send_lat(struct run *r, uint64_t *stamps)
{
	int n = total(r->c), rx = rx_depth(r->c), scnt = 0, rcnt = 0;
	while (scnt < n || rcnt < n) {
		if (rcnt < n && !(scnt == 0 && !r->server)) {
			wait_one(r->rcq);
			rcnt++;
			if (rcnt + rx <= n)
				CHECK(rpma_recv(r->conn, r->s->mr, r->s->region, r->c->size, NULL));
		}
		if (scnt < n) {
			if (scnt >= r->c->warmup && stamps)
				stamps[scnt - r->c->warmup] = cycles();
			scnt++;
			CHECK(rpma_send(r->conn, r->s->mr, 0, r->c->size, RPMA_F_COMPLETION_ALWAYS, NULL));
			wait_one(r->cq);
		}
	}
}

static void write_lat(struct run *r, uint64_t *stamps)
{
	for (int i = 0; i < total(r->c); i++) {
		if (i >= r->c->warmup)
			stamps[i - r->c->warmup] = cycles();
		CHECK(rpma_write(r->conn, r->rmr, r->roff, r->s->mr, 0, r->c->size, RPMA_F_COMPLETION_ON_ERROR, NULL));
		CHECK(rpma_flush(r->conn, r->rmr, r->roff, r->c->size, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS,
				 (void *)(uintptr_t)i));
		wait_one(r->cq);
	}
}

static void read_lat(struct run *r, uint64_t *stamps)
{
	for (int i = 0; i < total(r->c); i++) {
		if (i >= r->c->warmup)
			stamps[i - r->c->warmup] = cycles();
		CHECK(rpma_read(r->conn, r->s->mr, r->s->region, r->rmr, r->roff, r->c->size, RPMA_F_COMPLETION_ALWAYS,
				(void *)(uintptr_t)i));
		wait_one(r->cq);
	}
}

/* write_bw's loop (bench_rpma_run.go's streamN); posted and completed
 * are NULL for the warm-up. */
static void stream(struct run *r, int n, uint64_t *posted, uint64_t *completed)
{
	int depth = r->c->depth, every = r->c->every, scnt = 0, ccnt = 0, flushed = 0;
	struct ibv_wc wc[16];
	while (ccnt < n) {
		for (;;) {
			if (flushed < scnt && (scnt % every == 0 || scnt == n)) {
				CHECK(rpma_flush(r->conn, r->rmr, r->roff, r->c->size, RPMA_FLUSH_TYPE_VISIBILITY,
						 RPMA_F_COMPLETION_ALWAYS, (void *)(uintptr_t)scnt));
				flushed = scnt;
			}
			if (scnt == n || scnt - ccnt == depth)
				break;
			if (posted)
				posted[scnt] = cycles();
			CHECK(rpma_write(r->conn, r->rmr, r->roff, r->s->mr, 0, r->c->size, RPMA_F_COMPLETION_ON_ERROR, NULL));
			scnt++;
		}
		int k = 0;
		int ret = rpma_cq_get_wc(r->cq, 16, wc, &k);
		if (ret == RPMA_E_NO_COMPLETION) {
			spin();
			continue;
		}
		if (ret)
			die("rpma_cq_get_wc", ret);
		progress();
		for (int i = 0; i < k; i++) {
			check_wc(&wc[i]);
			int end = (int)wc[i].wr_id;
			if (end <= ccnt || end > flushed) {
				fprintf(stderr, "rpmabench: flush completion after write %d, %d writes flushed and %d complete\n",
					end, flushed, ccnt);
				exit(1);
			}
			if (completed) {
				uint64_t t = cycles();
				for (int j = ccnt; j < end; j++)
					completed[j] = t;
			}
			ccnt = end;
		}
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* perftest's print_report_lat, as internal/bench's SummarizeLatency. */
static void print_lat(const struct cfg *c, const uint64_t *stamps, double rate, int rtt)
{
	int m = c->iters - 1;
	double *d = malloc(sizeof(double) * m);
	for (int i = 0; i < m; i++)
		d[i] = (double)(stamps[i + 1] - stamps[i]) / (rate * rtt);
	qsort(d, m, sizeof(double), cmp_double);
	int n = m - LAT_TAIL;
	if (n < 1) {
		fprintf(stderr, "rpmabench: too few samples\n");
		exit(1);
	}
	double sum = 0, sq = 0;
	for (int i = 0; i < n; i++)
		sum += d[i];
	double avg = sum / n;
	for (int i = 0; i < n; i++)
		sq += (d[i] - avg) * (d[i] - avg);
	double median = n % 2 ? d[n / 2] : (d[n / 2] + d[n / 2 - 1]) / 2;
	int i99 = (int)ceil(n * 0.99), i999 = (int)ceil(n * 0.999);
	i99 = i99 < n ? i99 : n;
	i999 = i999 < n ? i999 : n;
	printf(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec] \n");
	printf(" %-7d %-10d     %-7.2f        %-7.2f      %-7.2f        %-7.2f        %-7.2f        %-7.2f                %-7.2f\n",
	       c->size, c->iters, d[0], d[n], median, avg, sqrt(sq / n), d[i99], d[i999]);
	free(d);
}

/* perftest's print_report_bw, as internal/bench's SummarizeBandwidth. */
static void print_bw(const struct cfg *c, const uint64_t *posted, const uint64_t *completed, double rate)
{
	int n = c->iters, mod = c->every;
	double per_sec = rate * 1e6;
	double secs = (double)(completed[n - 1] - posted[0]) / per_sec;
	double peak = 0;
	if ((double)n * n / mod <= MAX_PEAK_SPANS) {
		double best = INFINITY;
		for (int i = 0; i < n; i++) {
			for (int j = (i + 1 + mod - 1) / mod * mod - 1; j < n; j += mod)
				if (completed[j] > posted[i] && (double)(completed[j] - posted[i]) / (j - i + 1) < best)
					best = (double)(completed[j] - posted[i]) / (j - i + 1);
			if (n % mod && completed[n - 1] > posted[i] && (double)(completed[n - 1] - posted[i]) / (n - i) < best)
				best = (double)(completed[n - 1] - posted[i]) / (n - i);
		}
		if (best < INFINITY)
			peak = c->size / (best / per_sec) / MIB;
	}
	printf(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
	printf(" %-7d    %-10d       %-7.2f            %-7.2f             %-7.6f\n", c->size, n, peak,
	       (double)c->size * n / secs / MIB, n / secs / 1e6);
}

#define LINE "---------------------------------------------------------------------------------------\n"

static void client_run(struct run *r)
{
	const struct cfg *c = r->c;
	uint64_t *a = calloc(c->iters, sizeof(uint64_t)), *b = calloc(c->iters, sizeof(uint64_t));
	double c0, t0, c1, t1;
	clock_pair(&c0, &t0);
	switch (c->test) {
	case WRITE_LAT:
		write_lat(r, a);
		break;
	case READ_LAT:
		read_lat(r, a);
		break;
	case SEND_LAT:
		send_lat(r, a);
		break;
	case WRITE_BW:
		if (c->warmup > 0)
			stream(r, c->warmup, NULL, NULL);
		stream(r, c->iters, a, b);
		break;
	}
	/* The rate over at least 100 ms, as internal/cycles. */
	double d = now_us() - t0;
	if (d < 100000)
		usleep((useconds_t)(100000 - d));
	clock_pair(&c1, &t1);
	double rate = (c1 - c0) / (t1 - t0);
	if (!(rate > 0)) {
		fprintf(stderr, "rpmabench: the cycle counter did not advance\n");
		exit(1);
	}
	bool flushes = c->test == WRITE_LAT || c->test == WRITE_BW;
	printf(LINE);
	printf("                    bench rpma %s: %s (client, librpma)\n", test_names[c->test], test_titles[c->test]);
	/* librpma 1.2 has no native flush: always the read after the writes. */
	printf(" Library        : librpma\t\tFlush          : %s\n", flushes ? "emulated" : "none");
	printf(" TX depth       : %d\t\tFlush every    : %d\n", c->depth, c->every);
	printf(" Warm-up iters  : %d\t\tCycles/usec    : %.2f\n", c->warmup, rate);
	printf(LINE);
	if (c->test == WRITE_BW)
		print_bw(c, a, b, rate);
	else
		print_lat(c, a, rate, c->test == SEND_LAT ? 2 : 1);
	printf(LINE);
	free(a);
	free(b);
}

static void serve(const struct cfg *c)
{
	struct side s = {0};
	open_side(&s, c, c->bind, RPMA_UTIL_IBV_CONTEXT_LOCAL,
		  RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
			  RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV);
	struct rpma_peer_cfg *pcfg;
	CHECK(rpma_peer_cfg_new(&pcfg));
	struct common_data data = {0};
	size_t mr_size, pcfg_size;
	CHECK(rpma_mr_get_descriptor_size(s.mr, &mr_size));
	CHECK(rpma_peer_cfg_get_descriptor_size(pcfg, &pcfg_size));
	if (mr_size + pcfg_size > DESCRIPTORS_MAX_SIZE) {
		fprintf(stderr, "rpmabench: descriptors of %zu bytes\n", mr_size + pcfg_size);
		exit(1);
	}
	CHECK(rpma_mr_get_descriptor(s.mr, data.descriptors));
	CHECK(rpma_peer_cfg_get_descriptor(pcfg, data.descriptors + mr_size));
	data.mr_desc_size = mr_size, data.pcfg_desc_size = pcfg_size;

	struct rpma_conn_cfg *cc = conn_cfg(c);
	struct rpma_ep *ep;
	CHECK(rpma_ep_listen(s.peer, c->bind, c->port, &ep));
	struct rpma_conn_req *req;
	CHECK(rpma_ep_next_conn_req(ep, cc, &req));
	struct rpma_conn_private_data pd;
	CHECK(rpma_conn_req_get_private_data(req, &pd));
	const unsigned char *h = pd.ptr;
	if (pd.len < HELLO_SIZE || memcmp(h, HELLO_MAGIC, 4) || h[4] != HELLO_VERSION) {
		fprintf(stderr, "rpmabench: the request is not a bench rpma client's\n");
		rpma_conn_req_delete(&req);
		exit(1);
	}
	if (h[5] != c->test || get32(h + 8) != (uint32_t)c->size ||
	    (c->test == SEND_LAT && (get32(h + 12) != (uint32_t)c->iters || get32(h + 16) != (uint32_t)c->warmup))) {
		fprintf(stderr, "rpmabench: the client asks for another run: test %d -s %u -n %u -w %u, this side %s -s %d -n %d -w %d\n",
			h[5], get32(h + 8), get32(h + 12), get32(h + 16), test_names[c->test], c->size, c->iters, c->warmup);
		rpma_conn_req_delete(&req); /* rejects it */
		exit(1);
	}
	for (int i = 0; i < rx_depth(c); i++)
		CHECK(rpma_conn_req_recv(req, s.mr, s.region, c->size, NULL));
	struct rpma_conn_private_data out = {&data, sizeof(data)};
	struct rpma_conn *conn;
	CHECK(rpma_conn_req_connect(&req, &out, &conn));
	enum rpma_conn_event ev;
	CHECK(rpma_conn_next_event(conn, &ev));
	if (ev != RPMA_CONN_ESTABLISHED) {
		fprintf(stderr, "rpmabench: %s\n", rpma_utils_conn_event_2str(ev));
		exit(1);
	}
	CHECK(rpma_ep_shutdown(&ep));
	if (c->test == SEND_LAT) {
		struct run r = {.c = c, .s = &s, .conn = conn, .server = true};
		CHECK(rpma_conn_get_cq(conn, &r.cq));
		CHECK(rpma_conn_get_rcq(conn, &r.rcq));
		send_lat(&r, NULL);
	}
	/* The client disconnects when it is through. */
	CHECK(rpma_conn_next_event(conn, &ev));
	if (ev != RPMA_CONN_CLOSED)
		fprintf(stderr, "rpmabench: %s, want closed\n", rpma_utils_conn_event_2str(ev));
	CHECK(rpma_conn_disconnect(conn));
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_conn_cfg_delete(&cc));
	CHECK(rpma_peer_cfg_delete(&pcfg));
	close_side(&s);
}

static void client(const struct cfg *c)
{
	struct side s = {0};
	open_side(&s, c, c->server, RPMA_UTIL_IBV_CONTEXT_REMOTE,
		  RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV);
	struct rpma_conn_cfg *cc = conn_cfg(c);
	unsigned char hello[HELLO_SIZE] = {0};
	memcpy(hello, HELLO_MAGIC, 4);
	hello[4] = HELLO_VERSION, hello[5] = c->test;
	put32(hello + 8, c->size), put32(hello + 12, c->iters), put32(hello + 16, c->warmup);
	struct rpma_conn_private_data pd = {hello, sizeof(hello)};

	/* The server may not listen yet: retry while it rejects. */
	double deadline = now_us() + CONNECT_TIMEOUT_S * 1e6;
	struct rpma_conn *conn;
	enum rpma_conn_event ev;
	for (;;) {
		struct rpma_conn_req *req;
		CHECK(rpma_conn_req_new(s.peer, c->server, c->port, cc, &req));
		for (int i = 0; i < rx_depth(c); i++)
			CHECK(rpma_conn_req_recv(req, s.mr, s.region, c->size, NULL));
		CHECK(rpma_conn_req_connect(&req, &pd, &conn));
		CHECK(rpma_conn_next_event(conn, &ev));
		if (ev == RPMA_CONN_ESTABLISHED)
			break;
		CHECK(rpma_conn_delete(&conn));
		if ((ev != RPMA_CONN_REJECTED && ev != RPMA_CONN_UNREACHABLE) || now_us() > deadline) {
			fprintf(stderr, "rpmabench: connecting to %s port %s: %s\n", c->server, c->port,
				rpma_utils_conn_event_2str(ev));
			exit(1);
		}
		usleep(100000);
	}

	struct rpma_conn_private_data in;
	CHECK(rpma_conn_get_private_data(conn, &in));
	struct common_data data;
	if (in.len < sizeof(data)) {
		fprintf(stderr, "rpmabench: %d bytes of private data\n", in.len);
		exit(1);
	}
	memcpy(&data, in.ptr, sizeof(data));
	if (data.mr_desc_size + data.pcfg_desc_size > DESCRIPTORS_MAX_SIZE) {
		fprintf(stderr, "rpmabench: descriptor sizes %d + %d\n", data.mr_desc_size, data.pcfg_desc_size);
		exit(1);
	}
	struct run r = {.c = c, .s = &s, .conn = conn, .roff = data.data_offset};
	CHECK(rpma_mr_remote_from_descriptor(data.descriptors, data.mr_desc_size, &r.rmr));
	struct rpma_peer_cfg *pcfg;
	CHECK(rpma_peer_cfg_from_descriptor(data.descriptors + data.mr_desc_size, data.pcfg_desc_size, &pcfg));
	CHECK(rpma_conn_apply_remote_peer_cfg(conn, pcfg));
	size_t rsize;
	CHECK(rpma_mr_remote_get_size(r.rmr, &rsize));
	if (rsize < r.roff + c->size) {
		fprintf(stderr, "rpmabench: the server's region has %zu bytes\n", rsize);
		exit(1);
	}
	CHECK(rpma_conn_get_cq(conn, &r.cq));
	CHECK(rpma_conn_get_rcq(conn, &r.rcq));

	client_run(&r);

	CHECK(rpma_conn_disconnect(conn));
	CHECK(rpma_conn_next_event(conn, &ev));
	if (ev != RPMA_CONN_CLOSED)
		fprintf(stderr, "rpmabench: %s, want closed\n", rpma_utils_conn_event_2str(ev));
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_mr_remote_delete(&r.rmr));
	CHECK(rpma_peer_cfg_delete(&pcfg));
	CHECK(rpma_conn_cfg_delete(&cc));
	close_side(&s);
}

static int number(const char *s, int lo, int hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi) {
		fprintf(stderr, "rpmabench: %s: want %d to %d\n", s, lo, hi);
		exit(2);
	}
	return (int)v;
}

int main(int argc, char *argv[])
{
	struct cfg c = {.size = DEF_SIZE, .iters = DEF_ITERS, .warmup = -1, .depth = -1, .every = -1, .port = DEF_PORT};
	if (argc < 2)
		usage();
	for (int t = WRITE_LAT; t <= WRITE_BW; t++)
		if (!strcmp(argv[1], test_names[t]))
			c.test = t;
	if (!c.test)
		usage();
	argv++, argc--;
	int opt;
	while ((opt = getopt(argc, argv, "s:n:w:t:f:p:b:")) != -1) {
		switch (opt) {
		case 's': c.size = number(optarg, 1, 1 << 30); break;
		case 'n': c.iters = number(optarg, 5, 1 << 26); break;
		case 'w': c.warmup = number(optarg, 0, 1 << 26); break;
		case 't': c.depth = number(optarg, 1, MAX_DEPTH); break;
		case 'f': c.every = number(optarg, 1, MAX_DEPTH); break;
		case 'p': c.port = optarg; break;
		case 'b': c.bind = optarg; break;
		default: usage();
		}
	}
	if (optind < argc)
		c.server = argv[optind++];
	if (optind < argc || !c.bind == !c.server)
		usage();
	if (c.test == WRITE_BW) {
		if (c.depth < 0)
			c.depth = DEF_TX_DEPTH;
		if (c.every < 0)
			c.every = c.depth < DEF_FLUSH_EVERY ? c.depth : DEF_FLUSH_EVERY;
		if (c.every > c.depth)
			usage();
	} else {
		if (c.depth >= 0 || c.every >= 0)
			usage();
		c.depth = 1;
		c.every = c.test == WRITE_LAT ? 1 : 0;
	}
	if (c.warmup < 0)
		c.warmup = c.test == WRITE_BW ? c.depth : DEF_LAT_WARMUP;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (c.bind)
		serve(&c);
	else
		client(&c);
	return 0;
}
