// Package bench is the measurement side of "purerdma bench": the tests it
// knows, a cycle clock for timestamps inside busy-poll loops, the
// statistics perftest reports (latency percentiles, bandwidth, message
// rate), the text and JSON results, and the messages the two sides
// exchange over TCP before and after a run.
//
// The statistics follow perftest (linux-rdma/perftest, print_report_lat
// and print_report_bw) so that a row of purerdma's output can be set next
// to a row of ib_write_lat's: the same samples are dropped, the same
// percentile indexes are taken and bandwidth is in MiB/s (perftest's
// "MB/sec" divides by 2^20).
//
// Nothing here touches a device; every function is safe for concurrent
// use, and the types are plain values.
package bench
