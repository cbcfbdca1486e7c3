/* A header with the C constructs the generator has to handle. */
#ifndef PROBE_H
#define PROBE_H

#include <linux/types.h>

#define PROBE_PLAIN 42
#define PROBE_HEX 0x80000000u
#define PROBE_SHIFT (1UL << 40)
#define PROBE_NEG (-5)
#define PROBE_MULTI \
	(PROBE_PLAIN + \
	 1)
#define PROBE_STRING "not a number"
#define PROBE_FLOAT 1.5
#define PROBE_TYPE struct probe_plain
#define PROBE_FUNC(x) ((x) + 1)
#define PROBE_EMPTY
#define PROBE_UNDEFINED_REF NO_SUCH_NAME
/* #define PROBE_IN_COMMENT 7 */
// #define PROBE_IN_LINE_COMMENT 8

enum probe_flags {
	PROBE_F_A = 1 << 0,
	PROBE_F_B = 1 << 1,
	PROBE_F_BIG = 1ULL << 63,
};

enum probe_signed {
	PROBE_S_NEG = -2,
	PROBE_S_POS = 3,
};

struct probe_plain {
	__u8 a;
	/* 3 bytes of padding */
	__u32 b;
	__aligned_u64 c;
	__be16 d;
	__u8 e[3][2];
	void *ptr;
	enum probe_signed s;
};

struct probe_bits {
	__u32 x;
	__u32 lo : 3, mid : 5;
	__u32 hi : 24;
	__u16 after;
};

struct __attribute__((packed)) probe_packed {
	__u8 a;
	__u64 b;
	__u16 c;
};

struct probe_anon {
	__u32 kind;
	union {
		struct {
			__u32 x, y;
		} pair;
		__aligned_u64 whole;
	} u;
	union {
		__u32 alias_a;
		__s32 alias_b;
	};
	__aligned_u64 tail[];
};

struct probe_flexunion {
	__u32 n;
	union {
		__DECLARE_FLEX_ARRAY(__u8, bytes);
		__DECLARE_FLEX_ARRAY(struct probe_plain, plains);
	};
};

struct probe_zero {
	__u32 n;
	__u32 data[0];
};

#endif
