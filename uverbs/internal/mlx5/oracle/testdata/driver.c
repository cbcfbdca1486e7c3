// driver.c: runs a scenario (see the package doc of oracle) through
// unmodified libibverbs and libmlx5, under shim.c, printing what the
// verbs return. The Go side runs the same scenario through uverbs.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define MAXOBJ 16
#define MAXWR 64

static void (*snap)(const char *);
static int (*step)(const char *);

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mrs[MAXOBJ];
static char *bufs[MAXOBJ];
static struct ibv_cq *cqs[MAXOBJ];
static struct ibv_qp *qps[MAXOBJ];
static struct ibv_srq *srqs[MAXOBJ];
static struct ibv_ah *ahs[MAXOBJ];
static int nmr, ncq, nqp, nsrq, nah;

static struct ibv_send_wr swr[MAXWR];
static struct ibv_sge ssge[MAXWR][8];
static int nswr;
static struct ibv_recv_wr rwr[MAXWR];
static struct ibv_sge rsge[MAXWR][8];
static int nrwr;

// The measured calls of the bench command, one function per kind of
// request so that callgrind counts each apart (scripts/bench-mlx5).
#define POST(name)                                                                      \
	__attribute__((noinline)) static int post_##name(struct ibv_qp *qp, struct ibv_send_wr *wr) \
	{                                                                               \
		struct ibv_send_wr *bad;                                                \
		return ibv_post_send(qp, wr, &bad);                                     \
	}
POST(send)
POST(send_inline)
POST(send_imm)
POST(write)
POST(write_inline)
POST(send_inline_nokey)
POST(write_inline_nokey)
POST(read)
POST(cas)
POST(faa)

static const struct {
	const char *name;
	int (*fn)(struct ibv_qp *, struct ibv_send_wr *);
} posts[] = {
	{"send", post_send}, {"send_inline", post_send_inline}, {"send_imm", post_send_imm},
	{"write", post_write}, {"write_inline", post_write_inline}, {"read", post_read},
	{"cas", post_cas}, {"faa", post_faa},
	{"send_inline_nokey", post_send_inline_nokey}, {"write_inline_nokey", post_write_inline_nokey},
};

__attribute__((noinline)) static int poll_hit(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, 1, wc);
}

__attribute__((noinline)) static int poll_empty(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, 1, wc);
}

// num parses a number in C's notations (0x..., decimal).
static unsigned long num(const char *s)
{
	return strtoul(s, NULL, 0);
}

static void fail(const char *what)
{
	fprintf(stderr, "driver: %s: %s\n", what, strerror(errno));
	exit(2);
}

static int sges(char *s, struct ibv_sge *out)
{
	int n = 0;
	if (strcmp(s, "-") == 0)
		return 0;
	for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
		int mr, k;
		unsigned off, len, key;
		/* mr:off:len, or mr:off:len:key with a key of its own */
		k = sscanf(tok, "%d:%u:%u:%u", &mr, &off, &len, &key);
		if (k != 3 && k != 4)
			fail("bad sge");
		out[n].addr = (uintptr_t)bufs[mr] + off;
		out[n].length = len;
		out[n].lkey = k == 4 ? key : mrs[mr]->lkey;
		n++;
	}
	return n;
}

static enum ibv_wr_opcode opcode(const char *s)
{
	static const struct { const char *n; enum ibv_wr_opcode op; } t[] = {
		{"send", IBV_WR_SEND}, {"send_imm", IBV_WR_SEND_WITH_IMM},
		{"send_inv", IBV_WR_SEND_WITH_INV}, {"write", IBV_WR_RDMA_WRITE},
		{"write_imm", IBV_WR_RDMA_WRITE_WITH_IMM}, {"read", IBV_WR_RDMA_READ},
		{"cas", IBV_WR_ATOMIC_CMP_AND_SWP}, {"faa", IBV_WR_ATOMIC_FETCH_AND_ADD},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strcmp(s, t[i].n) == 0)
			return t[i].op;
	fail("bad opcode");
	return 0;
}

static void modify(struct ibv_qp *qp, int type)
{
	struct ibv_qp_attr a = {0};
	int mask;

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.pkey_index = 0;
	mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (type == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		if (type == IBV_QPT_UC)
			a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (ibv_modify_qp(qp, &a, mask))
		fail("modify INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (type != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = 0x99;
		a.rq_psn = 0;
		a.ah_attr.dlid = 7;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 12;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	if (ibv_modify_qp(qp, &a, mask))
		fail("modify RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (type == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (ibv_modify_qp(qp, &a, mask))
		fail("modify RTS");
}

static void line(char *l)
{
	char *argv[32];
	int argc = 0;
	char copy[512];

	snprintf(copy, sizeof(copy), "%s", l);
	copy[strcspn(copy, "\n")] = 0;
	for (char *tok = strtok(l, " \t\n"); tok && argc < 32; tok = strtok(NULL, " \t\n"))
		argv[argc++] = tok;
	if (argc == 0 || argv[0][0] == '#')
		return;
	const char *cmd = argv[0];

	if (strcmp(cmd, "roce") == 0) {
		// the device's port is RoCE (the test's sysfs and device)
	} else if (strcmp(cmd, "open") == 0) {
		int n;
		struct ibv_device **l = ibv_get_device_list(&n);
		if (!l || n < 1)
			fail("no device");
		ctx = ibv_open_device(l[0]);
		if (!ctx)
			fail("ibv_open_device");
		ibv_free_device_list(l);
		printf("open %s\n", ibv_get_device_name(ctx->device));
	} else if (strcmp(cmd, "pd") == 0) {
		if (!(pd = ibv_alloc_pd(ctx)))
			fail("ibv_alloc_pd");
	} else if (strcmp(cmd, "mr") == 0) {
		size_t len = strtoul(argv[1], 0, 0);
		if (posix_memalign((void **)&bufs[nmr], 4096, len))
			fail("posix_memalign");
		for (size_t i = 0; i < len; i++)
			bufs[nmr][i] = (char)(i * 7 + nmr);
		mrs[nmr] = ibv_reg_mr(pd, bufs[nmr], len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
		if (!mrs[nmr])
			fail("ibv_reg_mr");
		nmr++;
	} else if (strcmp(cmd, "cq") == 0) {
		struct ibv_cq *cq = ibv_create_cq(ctx, atoi(argv[1]), NULL, NULL, 0);
		if (!cq)
			fail("ibv_create_cq");
		printf("cq %d cqe=%d\n", ncq, cq->cqe);
		cqs[ncq++] = cq;
	} else if (strcmp(cmd, "srq") == 0) {
		struct ibv_srq_init_attr a = {0};
		a.attr.max_wr = atoi(argv[1]);
		a.attr.max_sge = atoi(argv[2]);
		struct ibv_srq *s = ibv_create_srq(pd, &a);
		if (!s)
			fail("ibv_create_srq");
		printf("srq %d max_wr=%u max_sge=%u\n", nsrq, a.attr.max_wr, a.attr.max_sge);
		srqs[nsrq++] = s;
	} else if (strcmp(cmd, "qp") == 0) {
		struct ibv_qp_init_attr_ex a = {0};
		const char *t = argv[1];
		a.qp_type = strcmp(t, "RC") == 0 ? IBV_QPT_RC : strcmp(t, "UC") == 0 ? IBV_QPT_UC : IBV_QPT_UD;
		a.send_cq = cqs[atoi(argv[2])];
		a.recv_cq = cqs[atoi(argv[3])];
		if (strcmp(argv[4], "-") != 0)
			a.srq = srqs[atoi(argv[4])];
		a.cap.max_send_wr = atoi(argv[5]);
		a.cap.max_recv_wr = atoi(argv[6]);
		a.cap.max_send_sge = atoi(argv[7]);
		a.cap.max_recv_sge = atoi(argv[8]);
		a.cap.max_inline_data = atoi(argv[9]);
		a.sq_sig_all = atoi(argv[10]);
		a.pd = pd;
		a.comp_mask = IBV_QP_INIT_ATTR_PD;
		// The opcodes uverbs' mlx5 provider posts, so that libmlx5
		// sizes send WQEs for them (docs/providers.md): without a
		// send_ops_flags it leaves room for a memory-window bind.
		if (getenv("ORACLE_DEFAULT_SEND_OPS")) {
			// libmlx5's default sizing (room for a memory-window
			// bind): the oracle's own test that it catches a sizing
			// difference.
		} else if (a.qp_type == IBV_QPT_UC) {
			a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
					   IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
		} else if (a.qp_type == IBV_QPT_RC) {
			a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
					   IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_RDMA_WRITE |
					   IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
					   IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
		} else {
			a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
		}
		struct ibv_qp *qp = ibv_create_qp_ex(ctx, &a);
		if (!qp)
			fail("ibv_create_qp_ex");
		printf("qp %d send_wr=%u recv_wr=%u send_sge=%u recv_sge=%u inline=%u\n", nqp,
		       a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge, a.cap.max_recv_sge,
		       a.cap.max_inline_data);
		qps[nqp++] = qp;
	} else if (strcmp(cmd, "rts") == 0) {
		struct ibv_qp *qp = qps[atoi(argv[1])];
		modify(qp, qp->qp_type);
	} else if (strcmp(cmd, "reset") == 0) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};
		if (ibv_modify_qp(qps[atoi(argv[1])], &a, IBV_QP_STATE))
			fail("modify RESET");
	} else if (strcmp(cmd, "ah") == 0) {
		struct ibv_ah_attr a = {0};
		a.dlid = num(argv[1]);
		a.sl = num(argv[2]);
		a.port_num = 1;
		if (argc > 3) { // ah DLID SL SGIDX FLOW TCLASS HOP PATHBITS RATE: with a GRH
			a.is_global = 1;
			a.grh.sgid_index = num(argv[3]);
			a.grh.flow_label = strtoul(argv[4], 0, 0);
			a.grh.traffic_class = num(argv[5]);
			a.grh.hop_limit = num(argv[6]);
			a.src_path_bits = num(argv[7]);
			a.static_rate = num(argv[8]);
			for (int i = 0; i < 16; i++)
				a.grh.dgid.raw[i] = (uint8_t)(0xfe - i * 3);
		}
		if (!(ahs[nah++] = ibv_create_ah(pd, &a)))
			fail("ibv_create_ah");
	} else if (strcmp(cmd, "wr") == 0) {
		struct ibv_send_wr *w = &swr[nswr];
		memset(w, 0, sizeof(*w));
		w->opcode = opcode(argv[1]);
		w->wr_id = strtoull(argv[2], 0, 0);
		if (strstr(argv[3], "signaled"))
			w->send_flags |= IBV_SEND_SIGNALED;
		if (strstr(argv[3], "fence"))
			w->send_flags |= IBV_SEND_FENCE;
		if (strstr(argv[3], "solicited"))
			w->send_flags |= IBV_SEND_SOLICITED;
		if (strstr(argv[3], "inline"))
			w->send_flags |= IBV_SEND_INLINE;
		w->sg_list = ssge[nswr];
		w->num_sge = sges(argv[4], ssge[nswr]);
		uint64_t raddr = 0, cmp = 0, swap = 0;
		uint32_t rkey = 0;
		for (int i = 5; i < argc; i++) {
			char *k = argv[i], *v = strchr(k, '=');
			if (!v)
				fail("bad key=value");
			*v++ = 0;
			uint64_t n = strtoull(v, 0, 0);
			if (strcmp(k, "raddr") == 0) {
				int mr;
				unsigned off;
				sscanf(v, "%d:%u", &mr, &off);
				raddr = (uintptr_t)bufs[mr] + off;
				rkey = mrs[mr]->rkey;
			} else if (strcmp(k, "imm") == 0) {
				w->imm_data = htobe32((uint32_t)n);
			} else if (strcmp(k, "inv") == 0) {
				w->invalidate_rkey = (uint32_t)n;
			} else if (strcmp(k, "cmp") == 0 || strcmp(k, "add") == 0) {
				cmp = n;
			} else if (strcmp(k, "swap") == 0) {
				swap = n;
			} else if (strcmp(k, "ah") == 0) {
				w->wr.ud.ah = ahs[n];
			} else if (strcmp(k, "rqpn") == 0) {
				w->wr.ud.remote_qpn = (uint32_t)n;
			} else if (strcmp(k, "qkey") == 0) {
				w->wr.ud.remote_qkey = (uint32_t)n;
			} else {
				fail("unknown key");
			}
		}
		if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			w->wr.atomic.remote_addr = raddr;
			w->wr.atomic.rkey = rkey;
			w->wr.atomic.compare_add = cmp;
			w->wr.atomic.swap = swap;
		} else if (raddr) {
			w->wr.rdma.remote_addr = raddr;
			w->wr.rdma.rkey = rkey;
		}
		if (nswr > 0)
			swr[nswr - 1].next = w;
		nswr++;
	} else if (strcmp(cmd, "postsend") == 0) {
		struct ibv_send_wr *bad = NULL;
		int q = atoi(argv[1]);
		int r = ibv_post_send(qps[q], &swr[0], &bad);
		printf("postsend %d %s", q, r ? "fail" : "ok");
		if (r)
			printf(" bad=%d", (int)(bad - swr));
		printf("\n");
		nswr = 0;
		snap(copy);
	} else if (strcmp(cmd, "rwr") == 0) {
		struct ibv_recv_wr *w = &rwr[nrwr];
		memset(w, 0, sizeof(*w));
		w->wr_id = strtoull(argv[1], 0, 0);
		w->sg_list = rsge[nrwr];
		w->num_sge = sges(argv[2], rsge[nrwr]);
		if (nrwr > 0)
			rwr[nrwr - 1].next = w;
		nrwr++;
	} else if (strcmp(cmd, "postrecv") == 0 || strcmp(cmd, "postsrq") == 0) {
		struct ibv_recv_wr *bad = NULL;
		int q = atoi(argv[1]), r;
		if (cmd[4] == 'r')
			r = ibv_post_recv(qps[q], &rwr[0], &bad);
		else
			r = ibv_post_srq_recv(srqs[q], &rwr[0], &bad);
		printf("%s %d %s", cmd, q, r ? "fail" : "ok");
		if (r)
			printf(" bad=%d", (int)(bad - rwr));
		printf("\n");
		nrwr = 0;
		snap(copy);
	} else if (strcmp(cmd, "dev") == 0) {
		if (step(copy) < 0)
			fail("device step");
	} else if (strcmp(cmd, "poll") == 0) {
		struct ibv_wc wc[64];
		int q = atoi(argv[1]);
		memset(wc, 0, sizeof(wc));
		int n = ibv_poll_cq(cqs[q], atoi(argv[2]), wc);
		printf("poll %d n=%d\n", q, n);
		for (int i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS) // only these fields are valid
				printf("wc wr_id=%" PRIu64 " status=%d vendor_err=%#x qp_num=%#x\n", wc[i].wr_id,
				       wc[i].status, wc[i].vendor_err, wc[i].qp_num);
			else
			printf("wc wr_id=%" PRIu64 " status=%d opcode=%d vendor_err=%#x byte_len=%u imm=%#x qp_num=%#x src_qp=%#x "
			       "flags=%#x pkey_index=%u slid=%u sl=%u dlid_path_bits=%u\n",
			       wc[i].wr_id, wc[i].status, wc[i].opcode, wc[i].vendor_err, wc[i].byte_len,
			       be32toh(wc[i].imm_data), wc[i].qp_num, wc[i].src_qp, wc[i].wc_flags, wc[i].pkey_index,
			       wc[i].slid, wc[i].sl, wc[i].dlid_path_bits);
		snap(copy);
	} else if (strcmp(cmd, "bench") == 0) {
		// bench QP CQ N NAME: post the pending request N times, each
		// completed by the device and polled (a hit), then polled
		// again (empty).
		struct ibv_qp *qp = qps[atoi(argv[1])];
		struct ibv_cq *cq = cqs[atoi(argv[2])];
		int n = atoi(argv[3]);
		int (*fn)(struct ibv_qp *, struct ibv_send_wr *) = NULL;
		struct ibv_wc wc;
		char st[128];
		for (size_t i = 0; i < sizeof(posts) / sizeof(posts[0]); i++)
			if (strcmp(posts[i].name, argv[4]) == 0)
				fn = posts[i].fn;
		if (!fn)
			fail("bench: unknown request kind");
		for (int i = 0; i < n; i++) {
			if ((errno = fn(qp, &swr[0])))
				fail("bench: post");
			snprintf(st, sizeof(st), "dev cqe cq=%s qp=%s op=req wqe=last", argv[2], argv[1]);
			if (step(st) < 0)
				fail("bench: device step");
			if (poll_hit(cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
				fail("bench: poll");
			if (poll_empty(cq, &wc) != 0)
				fail("bench: empty poll");
		}
		nswr = 0;
		printf("bench %s %d\n", argv[4], n);
	} else if (strcmp(cmd, "resize") == 0) {
		struct ibv_cq *cq = cqs[atoi(argv[1])];
		int r = ibv_resize_cq(cq, atoi(argv[2]));
		printf("resize %s %s cqe=%d\n", argv[1], r ? "fail" : "ok", cq->cqe);
		snap(copy);
	} else if (strcmp(cmd, "arm") == 0) {
		if (ibv_req_notify_cq(cqs[atoi(argv[1])], atoi(argv[2])))
			fail("ibv_req_notify_cq");
		snap(copy);
	} else {
		fprintf(stderr, "driver: unknown command %s\n", cmd);
		exit(2);
	}
	fflush(stdout);
}

int main(int argc, char **argv)
{
	char l[512];
	FILE *f;

	if (argc != 2 || !(f = fopen(argv[1], "r"))) {
		fprintf(stderr, "usage: driver SCENARIO\n");
		return 2;
	}
	snap = (void (*)(const char *))dlsym(RTLD_DEFAULT, "oracle_snap");
	step = (int (*)(const char *))dlsym(RTLD_DEFAULT, "oracle_step");
	if (!snap || !step) {
		fprintf(stderr, "driver: run it with shim.so preloaded\n");
		return 2;
	}
	while (fgets(l, sizeof(l), f))
		line(l);
	return 0;
}
