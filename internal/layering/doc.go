// Package layering holds the test that keeps the package layering
// visible: which project packages may import which, that only a few
// internal packages touch unsafe and raw syscalls, that no library
// package uses cgo, and that third-party modules stay on the allow-list.
// See docs/architecture.md.
package layering
