// Package sys is the one place where uverbs and rdma_cm commands reach
// the kernel: the command file descriptor, the RDMA_VERBS_IOCTL method
// call, write() commands, mmap, and errors that keep the errno and name
// the operation. Every op string given to this package (NewMethod,
// Command, InUse, Error.Op) follows the library's error shape, which the
// Error type's documentation defines: "uverbs CreateQP: QP_CREATE".
package sys
