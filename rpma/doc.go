// Package rpma will be the librpma API in Go: peers, endpoints,
// connections, remote read / write / atomic write / flush, messaging and
// completions, with descriptors wire-compatible with C librpma. Nothing is
// implemented yet.
package rpma
