// Package rdmacm will be the connection manager over the kernel's ucma ABI
// on /dev/infiniband/rdma_cm, the Go equivalent of librdmacm. Nothing is
// implemented yet (issue 5).
package rdmacm
