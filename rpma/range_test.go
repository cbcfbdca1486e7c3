package rpma

import (
	"errors"
	"testing"
)

// TestRangeErrors: the range checks, which build their message only
// when it is read, fail with ErrInvalid and say what was out of range.
func TestRangeErrors(t *testing.T) {
	m := &MR{buf: make([]byte, 64)}
	r := &RemoteMR{Len: 4096}
	for _, tc := range []struct {
		err  error
		want string // "" for no error
	}{
		{m.checkRange("write", 0, 64), ""},
		{m.checkRange("write", 64, 0), ""},
		{m.checkRange("write", 60, 8), "rpma: write: invalid argument: range [60, 60+8) outside the 64-byte region"},
		{m.checkRange("read", -1, 8), "rpma: read: invalid argument: range [-1, -1+8) outside the 64-byte region"},
		{m.checkRange("send", 0, -2), "rpma: send: invalid argument: range [0, 0+-2) outside the 64-byte region"},
		{r.checkRange("flush", 4088, 8), ""},
		{r.checkRange("flush", 4090, 8), "rpma: flush: invalid argument: remote range [4090, 4090+8) outside the 4096-byte region"},
		{r.checkRange("write", 5000, 0), "rpma: write: invalid argument: remote range [5000, 5000+0) outside the 4096-byte region"},
		{r.checkRange("write", 8, 1<<64-1), "rpma: write: invalid argument: remote range [8, 8+18446744073709551615) outside the 4096-byte region"},
	} {
		if tc.want == "" {
			if tc.err != nil {
				t.Errorf("in range: %v", tc.err)
			}
			continue
		}
		if tc.err == nil || tc.err.Error() != tc.want || !errors.Is(tc.err, ErrInvalid) {
			t.Errorf("error %v, want %q matching ErrInvalid", tc.err, tc.want)
		}
	}
}
