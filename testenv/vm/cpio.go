package vm

import (
	"fmt"
	"io"
)

// cpioWriter writes an initramfs in the "newc" cpio format the kernel
// unpacks (see the kernel's Documentation/driver-api/early-userspace).
type cpioWriter struct {
	w   io.Writer
	ino uint32
	off int64
	err error
}

const (
	modeDir  = 0o040000
	modeFile = 0o100000
	modeLink = 0o120000
	modeChar = 0o020000
)

func (c *cpioWriter) write(p []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(p)
	c.off += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if r := c.off % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

func (c *cpioWriter) entry(name string, mode uint32, data []byte) {
	c.entryDev(name, mode, data, 0, 0)
}

func (c *cpioWriter) entryDev(name string, mode uint32, data []byte, major, minor uint32) {
	c.ino++
	nlink := 1
	if mode&0o170000 == modeDir {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, major, minor, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write(append([]byte(name), 0))
	c.pad()
	c.write(data)
	c.pad()
}

// Dir adds a directory (parents must be added first).
func (c *cpioWriter) Dir(name string) { c.entry(name, modeDir|0o755, nil) }

// File adds a regular file.
func (c *cpioWriter) File(name string, perm uint32, data []byte) {
	c.entry(name, modeFile|perm, data)
}

// Symlink adds a symbolic link name -> target.
func (c *cpioWriter) Symlink(name, target string) {
	c.entry(name, modeLink|0o777, []byte(target))
}

// CharDev adds a character device node.
func (c *cpioWriter) CharDev(name string, perm, major, minor uint32) {
	c.entryDev(name, modeChar|perm, nil, major, minor)
}

// Close writes the trailer and reports the first write error.
func (c *cpioWriter) Close() error {
	c.ino = 0
	c.entry("TRAILER!!!", 0, nil)
	return c.err
}
