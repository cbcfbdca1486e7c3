/*
 * rsecho: a C rsockets peer (librdmacm's rsocket API) for purerdma's
 * rsocket interop tests.
 *
 *   rsecho server BIND_IP PORT
 *       listen, print "LISTENING", accept one connection, echo every
 *       byte until the peer's shutdown (EOF), shut down the writing
 *       side, wait for the peer's close, exit 0.
 *   rsecho client SERVER_IP PORT BIND_IP
 *       connect and, for each size of a fixed list, send that many
 *       bytes of a running pattern (32 KiB at a time) and read them
 *       back, checking each;
 *       then shut down the writing side and expect EOF; print
 *       "OK <bytes>" and exit 0.
 *
 * Any failure prints a line naming the call and exits 1.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <rdma/rsocket.h>

static void die(const char *what)
{
	printf("FAIL %s: %s\n", what, strerror(errno));
	fflush(stdout);
	exit(1);
}

static struct sockaddr_in addr(const char *ip, int port)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1) {
		printf("FAIL bad address %s\n", ip);
		exit(1);
	}
	return sin;
}

static void send_all(int rs, const unsigned char *b, size_t n)
{
	while (n) {
		ssize_t r = rsend(rs, b, n, 0);
		if (r <= 0)
			die("rsend");
		b += r;
		n -= r;
	}
}

static void recv_all(int rs, unsigned char *b, size_t n)
{
	while (n) {
		ssize_t r = rrecv(rs, b, n, 0);
		if (r == 0) {
			printf("FAIL rrecv: EOF with %zu bytes to come\n", n);
			exit(1);
		}
		if (r < 0)
			die("rrecv");
		b += r;
		n -= r;
	}
}

static int server(const char *ip, int port)
{
	struct sockaddr_in sin = addr(ip, port);
	static unsigned char buf[1 << 16];
	int lrs, rs, val = 1;
	long long total = 0;

	lrs = rsocket(AF_INET, SOCK_STREAM, 0);
	if (lrs < 0)
		die("rsocket");
	rsetsockopt(lrs, SOL_SOCKET, SO_REUSEADDR, &val, sizeof val);
	if (rbind(lrs, (struct sockaddr *) &sin, sizeof sin))
		die("rbind");
	if (rlisten(lrs, 1))
		die("rlisten");
	printf("LISTENING\n");
	fflush(stdout);
	rs = raccept(lrs, NULL, NULL);
	if (rs < 0)
		die("raccept");
	for (;;) {
		ssize_t r = rrecv(rs, buf, sizeof buf, 0);
		if (r == 0)
			break;
		if (r < 0)
			die("rrecv");
		send_all(rs, buf, r);
		total += r;
	}
	if (rshutdown(rs, SHUT_WR))
		die("rshutdown");
	/* the peer's close ends the connection: wait for it */
	while (rrecv(rs, buf, sizeof buf, 0) > 0)
		;
	rclose(rs);
	rclose(lrs);
	printf("OK %lld\n", total);
	return 0;
}

static const size_t sizes[] = { 1, 63, 64, 65, 2048, 4097, 65536, 131072, 300001, 1 << 20 };

static int client(const char *ip, int port, const char *bind_ip)
{
	struct sockaddr_in dst = addr(ip, port), src = addr(bind_ip, 0);
	unsigned char *out, *in, c = 0;
	size_t i, j, max = 1 << 20;
	long long total = 0;
	int rs;

	out = malloc(max);
	in = malloc(max);
	if (!out || !in)
		die("malloc");
	rs = rsocket(AF_INET, SOCK_STREAM, 0);
	if (rs < 0)
		die("rsocket");
	if (rbind(rs, (struct sockaddr *) &src, sizeof src))
		die("rbind");
	if (rconnect(rs, (struct sockaddr *) &dst, sizeof dst))
		die("rconnect");
	for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t n = sizes[i];

		for (j = 0; j < n; j++)
			out[j] = c++;
		/* At most 32 KiB before reading its echo back: a peer that
		 * sends without reading fills both sides' buffers and waits
		 * for ever, over rsockets as over TCP. */
		for (j = 0; j < n; j += 32768) {
			size_t k = n - j < 32768 ? n - j : 32768;

			send_all(rs, out + j, k);
			recv_all(rs, in + j, k);
		}
		if (memcmp(in, out, n)) {
			printf("FAIL echo of %zu bytes differs\n", n);
			return 1;
		}
		total += n;
	}
	if (rshutdown(rs, SHUT_WR))
		die("rshutdown");
	if (rrecv(rs, in, 1, 0) != 0) {
		printf("FAIL no EOF after the shutdown\n");
		return 1;
	}
	rclose(rs);
	printf("OK %lld\n", total);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "server"))
		return server(argv[2], atoi(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), argv[4]);
	fprintf(stderr, "usage: rsecho server BIND_IP PORT | client SERVER_IP PORT BIND_IP\n");
	return 2;
}
