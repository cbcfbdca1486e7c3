// Package sys is the one place where uverbs and rdma_cm commands reach
// the kernel: the command file descriptor, the RDMA_VERBS_IOCTL method
// call, write() commands, mmap, and errors that keep the errno and name
// the operation.
package sys
