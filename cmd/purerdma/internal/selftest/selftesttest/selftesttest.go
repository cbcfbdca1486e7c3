// Package selftesttest is what the tests of purerdma selftest (package
// selftest's, and cmd/purerdma's that run the built command, as
// scripts/hwcheck does) expect of its report on the test VM's fabrics.
package selftesttest

// RowNames are the rows selftest must print, in order: a row dropped or
// renamed fails the tests.
var RowNames = []string{
	"rc send/recv", "rc send with imm", "rc rdma write", "rc rdma write with imm", "rc rdma read",
	"rc compare-and-swap", "rc fetch-and-add", "rc inline send", "rc fence", "rc unsignaled",
	"rc post list", "rc ring wrap", "cq resize", "uc send/recv", "uc rdma write", "ud send", "srq",
	"completion channel", "error completion", "send queue full",
}

// IWARPNA are the rows that are n/a on iWARP (siw), each with a word its
// reason must have: a row that turns n/a silently, or stops being n/a,
// fails the tests.
var IWARPNA = map[string]string{
	"rc send with imm":       "immediate data",
	"rc rdma write with imm": "immediate data",
	"rc compare-and-swap":    "atomics",
	"rc fetch-and-add":       "atomics",
	"cq resize":              "cannot be resized",
	"uc send/recv":           "no UC",
	"uc rdma write":          "no UC",
	"ud send":                "no UD",
	"error completion":       "TERMINATE",
	"send queue full":        "receiver-not-ready",
}
