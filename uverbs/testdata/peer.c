/*
 * peer: a libibverbs peer for purerdma's interoperability tests
 * (uverbs/interop_vm_test.go), built during the test with
 *
 *     gcc -O2 -Wall -Werror -o peer peer.c -libverbs
 *
 * Usage: peer DEVICE GID_INDEX rc|ud
 *
 * It opens DEVICE, creates a PD, a CQ, a QP of the given type and a
 * 64 KiB memory region with local write and remote read, write and atomic
 * access, and prints one line:
 *
 *     INFO <qpn> <gid: 32 hex digits> <mr addr> <mr rkey>
 *
 * Then it reads commands from stdin, one per line, and answers each with
 * one line, "OK ..." or "ERR <reason>". Numbers are decimal, offsets are
 * into its own region, byte strings are hex; "-" means no immediate data.
 *
 *     CONNECT <qpn> <gid>                  to RTS towards the Go QP (UD: an AH)
 *     FILL <off> <hex>                     write bytes into the region
 *     DUMP <off> <len>                     -> OK <hex>
 *     RECV <wrid> <off> <len>              post a receive
 *     SEND <wrid> <off> <len> <imm|->      send (UD: to the connected QP)
 *     WRITE <wrid> <off> <len> <raddr> <rkey> <imm|->
 *     READ <wrid> <off> <len> <raddr> <rkey>
 *     CAS <wrid> <off> <raddr> <rkey> <compare> <swap>
 *     FADD <wrid> <off> <raddr> <rkey> <add>
 *     POLL                                 wait up to 5 s for a completion ->
 *         OK <wrid> <status> <opcode> <byte_len> <wc_flags> <imm> <src_qp> <qp_num>
 *     QUIT
 *
 * Every work request is signaled. The Go side uses the same PSNs (7), path
 * MTU (1024), Q_Key (0x11111111) and port (1).
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define REGION (64 * 1024)
#define QKEY 0x11111111
#define PSN 7

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mr;
static struct ibv_ah *ah;
static unsigned char *buf;
static enum ibv_qp_type qp_type;
static uint32_t remote_qpn;
static int gid_index;

static void fatal(const char *what, int err)
{
	printf("ERR %s: %s\n", what, strerror(err));
	fflush(stdout);
	exit(1);
}

static int parse_gid(const char *s, union ibv_gid *gid)
{
	if (strlen(s) != 32)
		return -1;
	for (int i = 0; i < 16; i++) {
		unsigned int v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		gid->raw[i] = v;
	}
	return 0;
}

static int in_region(uint64_t off, uint64_t len)
{
	return off <= REGION && len <= REGION - off;
}

static void setup(const char *dev_name, const char *type)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list)
		fatal("ibv_get_device_list", errno);
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev_name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx)
		fatal("ibv_open_device", ENODEV);
	qp_type = !strcmp(type, "ud") ? IBV_QPT_UD : IBV_QPT_RC;
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		fatal("ibv_alloc_pd", errno);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!cq)
		fatal("ibv_create_cq", errno);
	struct ibv_qp_init_attr init = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = qp_type,
		.sq_sig_all = 0,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 },
	};
	qp = ibv_create_qp(pd, &init);
	if (!qp)
		fatal("ibv_create_qp", errno);
	buf = aligned_alloc(4096, REGION);
	if (!buf)
		fatal("aligned_alloc", errno);
	memset(buf, 0, REGION);
	mr = ibv_reg_mr(pd, buf, REGION, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr)
		fatal("ibv_reg_mr", errno);
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, gid_index, &gid))
		fatal("ibv_query_gid", errno);
	printf("INFO %u ", qp->qp_num);
	for (int i = 0; i < 16; i++)
		printf("%02x", gid.raw[i]);
	printf(" %" PRIu64 " %u\n", (uint64_t)(uintptr_t)buf, mr->rkey);
	fflush(stdout);
}

static int connect_qp(uint32_t qpn, union ibv_gid *gid)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .pkey_index = 0 };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	struct ibv_ah_attr av = {
		.is_global = 1,
		.port_num = 1,
		.grh = { .dgid = *gid, .sgid_index = gid_index, .hop_limit = 64 },
	};
	remote_qpn = qpn;
	if (qp_type == IBV_QPT_UD) {
		a.qkey = QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (ibv_modify_qp(qp, &a, mask))
		return errno;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (qp_type == IBV_QPT_RC) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = qpn;
		a.rq_psn = PSN;
		a.max_dest_rd_atomic = 4;
		a.min_rnr_timer = 1;
		a.ah_attr = av;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	if (ibv_modify_qp(qp, &a, mask))
		return errno;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = PSN;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (qp_type == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 4;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (ibv_modify_qp(qp, &a, mask))
		return errno;
	if (qp_type == IBV_QPT_UD) {
		ah = ibv_create_ah(pd, &av);
		if (!ah)
			return errno;
	}
	return 0;
}

static int post_send(struct ibv_send_wr *wr, uint64_t off, uint64_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf + off, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr *bad;
	if (!in_region(off, len))
		return EINVAL;
	wr->sg_list = &sge;
	wr->num_sge = 1;
	wr->send_flags |= IBV_SEND_SIGNALED;
	if (qp_type == IBV_QPT_UD) {
		wr->wr.ud.ah = ah;
		wr->wr.ud.remote_qpn = remote_qpn;
		wr->wr.ud.remote_qkey = QKEY;
	}
	return ibv_post_send(qp, wr, &bad);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void reply(int err)
{
	if (err)
		printf("ERR %s\n", strerror(err));
	else
		printf("OK\n");
}

static void command(char *line)
{
	static char a1[8192];
	char op[16];
	uint64_t wrid, off, len, raddr, x, y;
	unsigned int rkey, imm;
	struct ibv_send_wr wr = { 0 };

	if (sscanf(line, "%15s", op) != 1) {
		printf("ERR empty command\n");
		return;
	}
	if (!strcmp(op, "CONNECT")) {
		union ibv_gid gid;
		unsigned int qpn;
		if (sscanf(line, "%*s %u %8191s", &qpn, a1) != 2 || parse_gid(a1, &gid)) {
			printf("ERR usage: CONNECT qpn gid\n");
			return;
		}
		reply(connect_qp(qpn, &gid));
	} else if (!strcmp(op, "FILL")) {
		if (sscanf(line, "%*s %" SCNu64 " %8191s", &off, a1) != 2 || !in_region(off, strlen(a1) / 2)) {
			printf("ERR usage: FILL off hex\n");
			return;
		}
		for (size_t i = 0; 2 * i < strlen(a1); i++) {
			unsigned int v;
			sscanf(a1 + 2 * i, "%2x", &v);
			buf[off + i] = v;
		}
		reply(0);
	} else if (!strcmp(op, "DUMP")) {
		if (sscanf(line, "%*s %" SCNu64 " %" SCNu64, &off, &len) != 2 || !in_region(off, len)) {
			printf("ERR usage: DUMP off len\n");
			return;
		}
		printf("OK ");
		for (uint64_t i = 0; i < len; i++)
			printf("%02x", buf[off + i]);
		printf("\n");
	} else if (!strcmp(op, "RECV")) {
		if (sscanf(line, "%*s %" SCNu64 " %" SCNu64 " %" SCNu64, &wrid, &off, &len) != 3 ||
		    !in_region(off, len)) {
			printf("ERR usage: RECV wrid off len\n");
			return;
		}
		struct ibv_sge sge = { .addr = (uintptr_t)buf + off, .length = len, .lkey = mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = wrid, .sg_list = &sge, .num_sge = 1 }, *bad;
		reply(ibv_post_recv(qp, &rwr, &bad));
	} else if (!strcmp(op, "SEND")) {
		if (sscanf(line, "%*s %" SCNu64 " %" SCNu64 " %" SCNu64 " %8191s", &wrid, &off, &len, a1) != 4) {
			printf("ERR usage: SEND wrid off len imm|-\n");
			return;
		}
		wr.wr_id = wrid;
		wr.opcode = IBV_WR_SEND;
		if (strcmp(a1, "-") && sscanf(a1, "%u", &imm) == 1) {
			wr.opcode = IBV_WR_SEND_WITH_IMM;
			wr.imm_data = htobe32(imm);
		}
		reply(post_send(&wr, off, len));
	} else if (!strcmp(op, "WRITE")) {
		if (sscanf(line, "%*s %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %u %8191s", &wrid, &off,
			   &len, &raddr, &rkey, a1) != 6) {
			printf("ERR usage: WRITE wrid off len raddr rkey imm|-\n");
			return;
		}
		wr.wr_id = wrid;
		wr.opcode = IBV_WR_RDMA_WRITE;
		if (strcmp(a1, "-") && sscanf(a1, "%u", &imm) == 1) {
			wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
			wr.imm_data = htobe32(imm);
		}
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
		reply(post_send(&wr, off, len));
	} else if (!strcmp(op, "READ")) {
		if (sscanf(line, "%*s %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %u", &wrid, &off, &len,
			   &raddr, &rkey) != 5) {
			printf("ERR usage: READ wrid off len raddr rkey\n");
			return;
		}
		wr.wr_id = wrid;
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
		reply(post_send(&wr, off, len));
	} else if (!strcmp(op, "CAS") || !strcmp(op, "FADD")) {
		int cas = !strcmp(op, "CAS");
		int n = sscanf(line, "%*s %" SCNu64 " %" SCNu64 " %" SCNu64 " %u %" SCNu64 " %" SCNu64, &wrid,
			       &off, &raddr, &rkey, &x, &y);
		if (n != (cas ? 6 : 5)) {
			printf("ERR usage: CAS wrid off raddr rkey compare swap | FADD wrid off raddr rkey add\n");
			return;
		}
		wr.wr_id = wrid;
		wr.opcode = cas ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = x;
		wr.wr.atomic.swap = cas ? y : 0;
		reply(post_send(&wr, off, 8));
	} else if (!strcmp(op, "POLL")) {
		struct ibv_wc wc;
		double deadline = now() + 5;
		int n;
		while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && now() < deadline) {
			struct timespec ts = { 0, 20000 };
			nanosleep(&ts, NULL);
		}
		if (n < 0) {
			printf("ERR ibv_poll_cq failed\n");
			return;
		}
		if (n == 0) {
			printf("ERR no completion within 5s\n");
			return;
		}
		printf("OK %" PRIu64 " %d %d %u %u %u %u %u\n", wc.wr_id, wc.status, wc.opcode, wc.byte_len,
		       wc.wc_flags, be32toh(wc.imm_data), wc.src_qp, wc.qp_num);
	} else if (!strcmp(op, "QUIT")) {
		printf("OK\n");
		fflush(stdout);
		if (ah)
			ibv_destroy_ah(ah);
		ibv_destroy_qp(qp);
		ibv_dereg_mr(mr);
		ibv_destroy_cq(cq);
		ibv_dealloc_pd(pd);
		ibv_close_device(ctx);
		free(buf);
		exit(0);
	} else {
		printf("ERR unknown command %s\n", op);
	}
}

int main(int argc, char **argv)
{
	static char line[16384];

	if (argc != 4) {
		fprintf(stderr, "usage: peer DEVICE GID_INDEX rc|ud\n");
		return 2;
	}
	gid_index = atoi(argv[2]);
	setup(argv[1], argv[3]);
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		command(line);
		fflush(stdout);
	}
	return 0;
}
