package rsocket

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadConfig: the files of C's configuration directory, as
// librdmacm reads them, with C's adjustments.
func TestReadConfig(t *testing.T) {
	dir := t.TempDir()
	put := func(name, v string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := readConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{SendQueue: 384, RecvQueue: 384, SendBuffer: 128 << 10, RecvBuffer: 128 << 10, Inline: 64,
		PollTime: 10 * time.Microsecond}
	if c != want {
		t.Errorf("no files: %+v, want %+v", c, want)
	}
	put("sqsize_default", "100\n")
	put("iomap_size", "300")
	put("polling_time", "0")
	put("wmem_default", "100") // below RS_SNDLOWAT: C doubles the low water mark
	if c, err = readConfig(dir); err != nil {
		t.Fatal(err)
	}
	if c.SendQueue != 100 || c.IOMapSize != 300 || c.PollTime >= 0 || c.SendBuffer != 4096 {
		t.Errorf("files: %+v", c)
	}
	if r, err := c.resolved(); err != nil || r.IOMapSize != 256 {
		t.Errorf("resolved: %+v, %v; want IOMapSize 300 rounded down to 256", r, err)
	}
	put("polling_time", "25")
	if c, _ = readConfig(dir); c.PollTime != 25*time.Microsecond {
		t.Errorf("polling_time 25: PollTime %v", c.PollTime)
	}
	put("rqsize_default", "many")
	if _, err := readConfig(dir); err == nil || !strings.Contains(err.Error(), "rqsize_default") {
		t.Errorf("a file that is no number: %v", err)
	}
}

func TestResolvedIOMap(t *testing.T) {
	for _, tt := range []struct{ in, want int }{{-1, 0}, {1, 1}, {128, 128}, {129, 128}, {511, 256}, {maxIOMap, maxIOMap}} {
		c := Config{SendQueue: 16, RecvQueue: 16, SendBuffer: 4096, RecvBuffer: 4096, Inline: 1, IOMapSize: tt.in, PollTime: 1}
		r, err := c.resolved()
		if err != nil || r.IOMapSize != tt.want {
			t.Errorf("IOMapSize %d: %d, %v; want %d", tt.in, r.IOMapSize, err, tt.want)
		}
	}
	c := Config{IOMapSize: maxIOMap + 1}
	if _, err := c.resolved(); err == nil {
		t.Error("IOMapSize past 32512 accepted")
	}
}
