/*
 * rcpeer: one side of an RC connection over rdma_cm, written against
 * librdmacm and libibverbs, for rdmacm's TestCPeerRC (rcpeer_vm_test.go),
 * which runs the other side in Go.
 *
 *   rcpeer server ADDR          listens on ADDR (a port the kernel picks),
 *                               prints "LISTENING PORT", takes one connection
 *   rcpeer client SRC DST PORT  connects from SRC to DST:PORT
 *
 * Each side registers one region (see the offsets below) and sends its
 * address, rkey and length in the connection's private data (16 bytes,
 * big-endian: u64 address, u32 rkey, u32 length). Then, with C for the
 * connecting side and S for the accepting one:
 *
 *   C sends "ping", S answers "pong";
 *   C writes pattern(0x11) into S's WRITE_DST, sends "wrote"; S checks it;
 *   C reads S's READ_SRC (pattern(0x22)) into its READ_DST, checks it, sends "read";
 *   S writes pattern(0x33) into C's WRITE_DST, sends "wrote"; C checks it;
 *   S reads C's READ_SRC (pattern(0x44)) into its READ_DST, checks it, sends "done";
 *   both disconnect (each waits for its DISCONNECTED) and print "OK".
 *
 * pattern(seed) is byte i = seed + i (mod 256). Each side posts its
 * receives before it connects or accepts: iWARP has no RNR retry.
 *
 * Out of band, for siw: the server prints "ACCEPTED" once rdma_accept
 * has returned, and the client reads a line from stdin before its
 * "ping". siw sends its MPA reply before it hands the socket to the QP
 * (siw_accept, then siw_qp_socket_assoc: Linux 6.1 and 6.12), so a
 * message that arrives in between stays unread; the test tells the
 * client to go once the accepting side has returned from its accept.
 * Exit status 0 on success, 1 with a message on stderr otherwise.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

enum {
	BLOCK = 4096,
	WRITE_DST = 0,          /* the peer writes here */
	READ_SRC = 1 * BLOCK,   /* the peer reads from here */
	READ_DST = 2 * BLOCK,   /* this side's reads land here */
	WRITE_SRC = 3 * BLOCK,  /* this side's writes come from here */
	MSG_SEND = 4 * BLOCK,   /* the message this side sends */
	MSG_RECV = 4 * BLOCK + 64, /* NRECV receive slots of MSG bytes */
	MSG = 64,
	NRECV = 4,
	REGION = MSG_RECV + NRECV * MSG,
	PDATA = 16,
};

static struct rdma_cm_id *id;
static struct ibv_mr *mr;
static unsigned char *mem;
static uint64_t peer_addr;
static uint32_t peer_rkey, peer_len;

static void die(const char *what)
{
	fprintf(stderr, "rcpeer: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void fail(const char *what)
{
	fprintf(stderr, "rcpeer: %s\n", what);
	exit(1);
}

static void fill(unsigned char *p, unsigned char seed)
{
	for (int i = 0; i < BLOCK; i++)
		p[i] = (unsigned char)(seed + i);
}

static void check(const unsigned char *p, unsigned char seed, const char *what)
{
	for (int i = 0; i < BLOCK; i++) {
		if (p[i] != (unsigned char)(seed + i)) {
			fprintf(stderr, "rcpeer: %s: byte %d is 0x%02x, want 0x%02x\n",
				what, i, p[i], (unsigned char)(seed + i));
			exit(1);
		}
	}
}

static void pack(unsigned char *pd)
{
	uint64_t a = htobe64((uintptr_t)mem);
	uint32_t k = htobe32(mr->rkey), n = htobe32(REGION);

	memcpy(pd, &a, 8);
	memcpy(pd + 8, &k, 4);
	memcpy(pd + 12, &n, 4);
}

static void unpack(const void *data, uint8_t len)
{
	uint64_t a;
	uint32_t k, n;

	if (!data || len < PDATA)
		fail("the peer's private data is missing or short");
	memcpy(&a, data, 8);
	memcpy(&k, (const char *)data + 8, 4);
	memcpy(&n, (const char *)data + 12, 4);
	peer_addr = be64toh(a);
	peer_rkey = be32toh(k);
	peer_len = be32toh(n);
	if (peer_len < 2 * BLOCK)
		fail("the peer's region is too small");
}

static void setup(void)
{
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	if (rdma_create_qp(id, NULL, &attr))
		die("rdma_create_qp");
	if (posix_memalign((void **)&mem, 4096, REGION))
		fail("out of memory");
	memset(mem, 0, REGION);
	/* A read's destination needs REMOTE_WRITE on iWARP. */
	mr = ibv_reg_mr(id->pd, mem, REGION, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		die("ibv_reg_mr");
	for (int i = 0; i < NRECV; i++)
		if (rdma_post_recv(id, (void *)(uintptr_t)i, mem + MSG_RECV + i * MSG, MSG, mr))
			die("rdma_post_recv");
}

static void send_comp(const char *what)
{
	struct ibv_wc wc;

	if (rdma_get_send_comp(id, &wc) <= 0)
		die(what);
	if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "rcpeer: %s: %s\n", what, ibv_wc_status_str(wc.status));
		exit(1);
	}
}

static void send_msg(const char *msg)
{
	size_t n = strlen(msg);

	memcpy(mem + MSG_SEND, msg, n);
	if (rdma_post_send(id, NULL, mem + MSG_SEND, n, mr, IBV_SEND_SIGNALED))
		die("rdma_post_send");
	send_comp("send");
}

static void expect(const char *msg)
{
	struct ibv_wc wc;
	size_t n = strlen(msg);

	if (rdma_get_recv_comp(id, &wc) <= 0)
		die("rdma_get_recv_comp");
	if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "rcpeer: receive of %s: %s\n", msg, ibv_wc_status_str(wc.status));
		exit(1);
	}
	if (wc.byte_len != n || memcmp(mem + MSG_RECV + wc.wr_id * MSG, msg, n) != 0) {
		fprintf(stderr, "rcpeer: received %.*s, want %s\n", (int)wc.byte_len,
			mem + MSG_RECV + wc.wr_id * MSG, msg);
		exit(1);
	}
}

/* act is one side's turn: write, say so, read back the peer's source. */
static void act(unsigned char write_seed, unsigned char peer_src_seed, const char *notice)
{
	fill(mem + WRITE_SRC, write_seed);
	if (rdma_post_write(id, NULL, mem + WRITE_SRC, BLOCK, mr, IBV_SEND_SIGNALED,
			    peer_addr + WRITE_DST, peer_rkey))
		die("rdma_post_write");
	send_comp("RDMA WRITE");
	send_msg("wrote");
	if (rdma_post_read(id, NULL, mem + READ_DST, BLOCK, mr, IBV_SEND_SIGNALED,
			   peer_addr + READ_SRC, peer_rkey))
		die("rdma_post_read");
	send_comp("RDMA READ");
	check(mem + READ_DST, peer_src_seed, "RDMA READ of the peer's source");
	send_msg(notice);
}

static void addr_of(const char *s, uint16_t port, struct sockaddr_in *sin)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(port);
	if (inet_pton(AF_INET, s, &sin->sin_addr) != 1)
		fail("bad IPv4 address");
}

int main(int argc, char **argv)
{
	unsigned char pd[PDATA];
	struct rdma_conn_param param = {
		.private_data = pd, .private_data_len = PDATA,
		.responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7,
	};
	struct sockaddr_in src, dst;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 3 && strcmp(argv[1], "server") == 0) {
		struct rdma_cm_id *listen_id;

		addr_of(argv[2], 0, &src);
		if (rdma_create_id(NULL, &listen_id, NULL, RDMA_PS_TCP))
			die("rdma_create_id");
		if (rdma_bind_addr(listen_id, (struct sockaddr *)&src))
			die("rdma_bind_addr");
		if (rdma_listen(listen_id, 1))
			die("rdma_listen");
		printf("LISTENING %u\n", ntohs(rdma_get_src_port(listen_id)));
		if (rdma_get_request(listen_id, &id))
			die("rdma_get_request");
		unpack(id->event->param.conn.private_data, id->event->param.conn.private_data_len);
		setup();
		fill(mem + READ_SRC, 0x22);
		pack(pd);
		if (rdma_accept(id, &param))
			die("rdma_accept");
		printf("ACCEPTED\n");
		expect("ping");
		send_msg("pong");
		expect("wrote");
		check(mem + WRITE_DST, 0x11, "the client's RDMA WRITE");
		expect("read");
		act(0x33, 0x44, "done");
		if (rdma_disconnect(id))
			die("rdma_disconnect");
		rdma_destroy_qp(id);
		ibv_dereg_mr(mr);
		rdma_destroy_id(id);
		rdma_destroy_id(listen_id);
	} else if (argc == 5 && strcmp(argv[1], "client") == 0) {
		addr_of(argv[2], 0, &src);
		addr_of(argv[3], (uint16_t)atoi(argv[4]), &dst);
		if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
			die("rdma_create_id");
		if (rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dst, 5000))
			die("rdma_resolve_addr");
		if (rdma_resolve_route(id, 5000))
			die("rdma_resolve_route");
		setup();
		fill(mem + READ_SRC, 0x44);
		pack(pd);
		if (rdma_connect(id, &param))
			die("rdma_connect");
		unpack(id->event->param.conn.private_data, id->event->param.conn.private_data_len);
		{
			char go[16];

			if (!fgets(go, sizeof go, stdin))
				fail("no go-ahead on stdin");
		}
		send_msg("ping");
		expect("pong");
		act(0x11, 0x22, "read");
		expect("wrote");
		check(mem + WRITE_DST, 0x33, "the server's RDMA WRITE");
		expect("done");
		if (rdma_disconnect(id))
			die("rdma_disconnect");
		rdma_destroy_qp(id);
		ibv_dereg_mr(mr);
		rdma_destroy_id(id);
	} else {
		fprintf(stderr, "usage: rcpeer server ADDR | rcpeer client SRC DST PORT\n");
		return 2;
	}
	free(mem);
	printf("OK\n");
	return 0;
}
