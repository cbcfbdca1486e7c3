package common

import (
	"fmt"
	"os"
)

// Kilobyte is KILOBYTE.
const Kilobyte = 1024

// struct hello_t of common-hello.h: a language (a C enum, 4 bytes in
// host order) and a string of HelloStrSize bytes.
const (
	HelloStrSize   = 1024                          // HELLO_STR_SIZE
	HelloStrOffset = 4                             // offsetof(struct hello_t, str)
	HelloTSize     = HelloStrOffset + HelloStrSize // sizeof(struct hello_t)
)

// The languages of hello_t (enum lang_t) and their greetings.
const (
	LangEN = 0
	LangES = 1
)

var helloStr = [...]string{LangEN: "Hello world!", LangES: "¡Hola Mundo!"}

// WriteHelloStr fills the hello_t in b with the greeting of lang
// (write_hello_str): strncpy pads the string area with zeros.
func WriteHelloStr(b []byte, lang uint32) {
	b[0], b[1], b[2], b[3] = byte(lang), byte(lang>>8), byte(lang>>16), byte(lang>>24)
	s := b[HelloStrOffset:HelloTSize]
	n := copy(s[:HelloStrSize-1], helloStr[lang%uint32(len(helloStr))])
	clear(s[n:])
}

// HelloLang is the hello_t's language.
func HelloLang(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// HelloStr is the hello_t's string.
func HelloStr(b []byte) string { return CString(b[HelloStrOffset:HelloTSize]) }

// Translate switches the hello_t in b to the next language (translate),
// saying so on standard output.
func Translate(b []byte) {
	fmt.Printf("translating...\n")
	WriteHelloStr(b, (HelloLang(b)+1)%uint32(len(helloStr)))
}

// InitHello initializes a hello_t in English at the start of b and
// returns its size (init_hello), or -1 when b is too small.
func InitHello(b []byte) int {
	if len(b) < HelloTSize {
		fmt.Fprintf(os.Stderr, "PMem has too small size (%d < %d)\n", len(b), HelloTSize)
		return -1
	}
	WriteHelloStr(b, LangEN)
	return HelloTSize
}
