package common

import (
	"bytes"
	"testing"
)

// TestCRand: the first outputs of glibc's rand after srand(seed), as
// glibc 2.36 gives them (seeds as the examples reduce them modulo
// UINT_MAX).
func TestCRand(t *testing.T) {
	for _, tc := range []struct {
		seed uint32
		want [3]int32
	}{
		{0, [3]int32{1804289383, 846930886, 1681692777}},
		{1, [3]int32{1804289383, 846930886, 1681692777}},
		{8, [3]int32{757547896, 1695630744, 1945246242}},
		{9, [3]int32{444454915, 1502197874, 436864165}},
		{11, [3]int32{1989311423, 1130649494, 665249397}},
		{12, [3]int32{1687063760, 945274514, 247215794}},
		{1 << 31, [3]int32{1336741213, 1210407648, 1447044896}},
		{1<<32 - 2, [3]int32{553879721, 313352468, 1857133612}},
	} {
		c := NewCRand(tc.seed)
		if got := [3]int32{c.Rand(), c.Rand(), c.Rand()}; got != tc.want {
			t.Errorf("srand(%d): rand() = %v, want %v", tc.seed, got, tc.want)
		}
	}
	// Past the first 34 outputs the ring wraps around.
	c := NewCRand(1)
	var last int32
	for range 100 {
		last = c.Rand()
	}
	if last != 1956297539 {
		t.Errorf("srand(1): the 100th rand() = %d, want 1956297539", last)
	}
}

func TestStrtoul(t *testing.T) {
	for _, tc := range []struct {
		in       string
		want     uint64
		overflow bool
	}{
		{"1024", 1024, false},
		{"  +12abc", 12, false},
		{"abc", 0, false},
		{"", 0, false},
		{"-1", 1<<64 - 1, false},
		{"18446744073709551615", 1<<64 - 1, false},
		{"18446744073709551616", 1<<64 - 1, true},
	} {
		got, overflow := Strtoul(tc.in)
		if got != tc.want || overflow != tc.overflow {
			t.Errorf("Strtoul(%q) = %d, %v, want %d, %v", tc.in, got, overflow, tc.want, tc.overflow)
		}
	}
}

// TestHello: struct hello_t's layout, and translating back and forth.
func TestHello(t *testing.T) {
	b := bytes.Repeat([]byte{0xff}, HelloTSize)
	if n := InitHello(b); n != HelloTSize {
		t.Fatalf("InitHello = %d, want %d", n, HelloTSize)
	}
	want := append([]byte{0, 0, 0, 0}, "Hello world!"...)
	want = append(want, make([]byte, HelloTSize-len(want))...)
	if !bytes.Equal(b, want) {
		t.Errorf("InitHello wrote %q, want %q", b, want)
	}
	Translate(b)
	if HelloLang(b) != LangES || HelloStr(b) != "¡Hola Mundo!" || b[HelloStrOffset+len("¡Hola Mundo!")] != 0 {
		t.Errorf("translated: language %d, %q", HelloLang(b), HelloStr(b))
	}
	Translate(b)
	if !bytes.Equal(b, want) {
		t.Errorf("translated twice: %q, want %q", b, want)
	}
	if n := InitHello(make([]byte, HelloTSize-1)); n != -1 {
		t.Errorf("InitHello of too little memory = %d, want -1", n)
	}
}
