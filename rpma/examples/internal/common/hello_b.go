package common

import (
	"encoding/binary"
	"fmt"
	"os"
)

// The greeting the persistent examples keep (common-hello.h): struct
// hello_t, a language (a C enum, 4 bytes in host order) and a
// zero-terminated string of at most HelloStrSize bytes.
const (
	HelloStrSize   = 1024
	HelloStrOffset = 4 // offsetof(struct hello_t, str)
	HelloTSize     = HelloStrOffset + HelloStrSize
)

// Lang is enum lang_t.
type Lang uint32

// The languages.
const (
	LangEN Lang = iota
	LangES
)

var helloStr = [...]string{LangEN: "Hello world!", LangES: "¡Hola Mundo!"}

// WriteHelloStr writes the greeting of lang to the hello_t in h
// (write_hello_str).
func WriteHelloStr(h []byte, lang Lang) {
	binary.NativeEndian.PutUint32(h, uint32(lang))
	s := h[HelloStrOffset:HelloTSize]
	n := copy(s[:HelloStrSize-1], helloStr[lang])
	clear(s[n:])
}

// Translate switches the hello_t in h to the next language, saying so
// on stdout (translate).
func Translate(h []byte) {
	fmt.Printf("translating...\n")
	lang := Lang(binary.NativeEndian.Uint32(h))
	WriteHelloStr(h, Lang((uint32(lang)+1)%uint32(len(helloStr))))
}

// HelloString is the string of the hello_t in h.
func HelloString(h []byte) string { return CString(h[HelloStrOffset:HelloTSize]) }

// InitHello writes the first greeting into fresh persistent memory and
// returns how much of it to persist, or -1 when it does not fit
// (init_hello).
func InitHello(b []byte) int {
	if len(b) < HelloTSize {
		fmt.Fprintf(os.Stderr, "PMem has too small size (%d < %d)\n", len(b), HelloTSize)
		return -1
	}
	WriteHelloStr(b, LangEN)
	return HelloTSize
}
