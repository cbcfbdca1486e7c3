// shim.c: preloaded into a program that runs unmodified libibverbs and
// libmlx5, it stands in for /dev/infiniband/uverbs0. It answers nothing
// itself: every open, ioctl, write, mmap and munmap of the fake command
// fd goes to the scripted device (the Go test) over the socket named by
// the file descriptor in $ORACLE_FD, and the device reads and writes this
// process's memory through the same socket while it works. RDMA netlink
// is refused so that libibverbs finds the device through $SYSFS_PATH.
//
// Protocol (little-endian 64-bit words): the shim sends a call of five
// words {op, a, b, c, d}; the device answers with requests {kind, addr, n}:
// READ (the shim sends n bytes from addr), WRITE (n bytes follow; the shim
// stores them at addr), NEWFD (the shim sends the number of a new eventfd)
// and DONE (addr is the call's result, a negative errno on failure).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

enum { CALL_OPEN, CALL_IOCTL, CALL_WRITE, CALL_MMAP, CALL_MUNMAP, CALL_SNAP, CALL_STEP, CALL_CLOSE };
enum { REQ_READ, REQ_WRITE, REQ_NEWFD, REQ_DONE };

#define DEVNODE "/dev/infiniband/uverbs0"

static int sock = -1;
static int cmd_fd = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int (*real_open)(const char *, int, ...);
static int (*real_close)(int);
static int (*real_ioctl)(int, unsigned long, ...);
static ssize_t (*real_write)(int, const void *, size_t);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static int (*real_munmap)(void *, size_t);
static int (*real_socket)(int, int, int);
static int (*real_stat)(const char *, struct stat *);
static int (*real_fstat)(int, struct stat *);

static void init(void)
{
	if (real_open)
		return;
	real_open = dlsym(RTLD_NEXT, "open");
	real_close = dlsym(RTLD_NEXT, "close");
	real_ioctl = dlsym(RTLD_NEXT, "ioctl");
	real_write = dlsym(RTLD_NEXT, "write");
	real_mmap = dlsym(RTLD_NEXT, "mmap");
	real_munmap = dlsym(RTLD_NEXT, "munmap");
	real_socket = dlsym(RTLD_NEXT, "socket");
	real_stat = dlsym(RTLD_NEXT, "stat");
	real_fstat = dlsym(RTLD_NEXT, "fstat");
	const char *s = getenv("ORACLE_FD");
	if (s)
		sock = atoi(s);
}

static void die(const char *what)
{
	fprintf(stderr, "oracle shim: %s: %s\n", what, strerror(errno));
	_exit(3);
}

static void full_write(const void *b, size_t n)
{
	const char *p = b;
	while (n > 0) {
		ssize_t r = real_write(sock, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("write to device");
		p += r;
		n -= r;
	}
}

static void full_read(void *b, size_t n)
{
	char *p = b;
	while (n > 0) {
		ssize_t r = read(sock, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("read from device");
		p += r;
		n -= r;
	}
}

// call sends one call and serves the device's requests until DONE.
static int64_t call(uint64_t op, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	uint64_t msg[5] = {op, a, b, c, d};
	int64_t ret;

	init();
	if (sock < 0) {
		fprintf(stderr, "oracle shim: no ORACLE_FD\n");
		_exit(3);
	}
	pthread_mutex_lock(&lock);
	full_write(msg, sizeof(msg));
	for (;;) {
		uint64_t req[3];
		full_read(req, sizeof(req));
		if (req[0] == REQ_READ) {
			full_write((void *)(uintptr_t)req[1], req[2]);
		} else if (req[0] == REQ_WRITE) {
			full_read((void *)(uintptr_t)req[1], req[2]);
		} else if (req[0] == REQ_NEWFD) {
			uint64_t fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
			full_write(&fd, sizeof(fd));
		} else if (req[0] == REQ_DONE) {
			ret = (int64_t)req[1];
			break;
		} else {
			fprintf(stderr, "oracle shim: bad request %llu\n", (unsigned long long)req[0]);
			_exit(3);
		}
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

static int result(int64_t r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return (int)r;
}

int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	init();
	va_start(ap, flags);
	if (flags & (O_CREAT | O_TMPFILE))
		mode = va_arg(ap, mode_t);
	va_end(ap);
	if (strcmp(path, DEVNODE) != 0)
		return real_open(path, flags, mode);
	int fd = real_open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return fd;
	int64_t r = call(CALL_OPEN, fd, 0, 0, 0);
	if (r < 0) {
		real_close(fd);
		return result(r);
	}
	cmd_fd = fd;
	return fd;
}

int open64(const char *path, int flags, ...) __attribute__((alias("open")));

int close(int fd)
{
	init();
	if (fd >= 0 && fd == cmd_fd) {
		call(CALL_CLOSE, fd, 0, 0, 0);
		cmd_fd = -1;
	}
	return real_close(fd);
}

static void devstat(struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFCHR | 0666;
	st->st_rdev = makedev(231, 192); // sysfs' uverbs0/dev
}

int stat(const char *path, struct stat *st)
{
	init();
	if (strcmp(path, DEVNODE) == 0) {
		devstat(st);
		return 0;
	}
	return real_stat(path, st);
}

int fstat(int fd, struct stat *st)
{
	init();
	if (fd >= 0 && fd == cmd_fd) {
		devstat(st);
		return 0;
	}
	return real_fstat(fd, st);
}

int socket(int domain, int type, int protocol)
{
	init();
	if (domain == AF_NETLINK && protocol == 20 /* NETLINK_RDMA */) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	return real_socket(domain, type, protocol);
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	init();
	if (fd >= 0 && fd == cmd_fd)
		return result(call(CALL_IOCTL, fd, req, (uintptr_t)arg, 0));
	return real_ioctl(fd, req, arg);
}

ssize_t write(int fd, const void *b, size_t n)
{
	init();
	if (fd >= 0 && fd == cmd_fd)
		return result(call(CALL_WRITE, fd, (uintptr_t)b, n, 0));
	return real_write(fd, b, n);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	init();
	if (fd < 0 || fd != cmd_fd)
		return real_mmap(addr, len, prot, flags, fd, off);
	// The device's pages are plain memory here.
	void *p = real_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return p;
	int64_t r = call(CALL_MMAP, fd, (uintptr_t)p, len, (uint64_t)off);
	if (r < 0) {
		real_munmap(p, len);
		errno = (int)-r;
		return MAP_FAILED;
	}
	return p;
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) __attribute__((alias("mmap")));

int munmap(void *addr, size_t len)
{
	init();
	if (sock >= 0)
		call(CALL_MUNMAP, (uintptr_t)addr, len, 0, 0);
	return real_munmap(addr, len);
}

// oracle_snap asks the device to record what the provider has written
// since the last snapshot; label names the verb that wrote it.
void oracle_snap(const char *label)
{
	call(CALL_SNAP, (uintptr_t)label, strlen(label), 0, 0);
}

// oracle_step asks the device to act: line is a device step of the
// scenario (a completion to write).
int oracle_step(const char *line)
{
	return result(call(CALL_STEP, (uintptr_t)line, strlen(line), 0, 0));
}
