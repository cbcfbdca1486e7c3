// Package rdmaout prints records the way iproute2's rdma tool does: one
// line of "key value" pairs per record, or with -j (-json here) one JSON
// array of objects whose keys and values are rdma's.
package rdmaout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Field is one key of a record.
type Field struct {
	Key      string
	JSON     any    // the value in JSON: a number, string or bool
	Text     string // the value in the text line
	JSONOnly bool   // the text shows it in the record's prefix instead
}

// Record is one line of rdma's output.
type Record struct {
	Prefix string // the text line's start: "link rxe0/1 ", "dev rxe0 ", "0: rxe0: "
	Fields []Field
}

// Uint adds a number.
func (r *Record) Uint(key string, v uint64) {
	r.Fields = append(r.Fields, Field{Key: key, JSON: v, Text: strconv.FormatUint(v, 10)})
}

// Hex adds a key (rdma's print_key): a hex string without 0x in JSON,
// 0x-prefixed in text.
func (r *Record) Hex(key string, v uint64) {
	r.Fields = append(r.Fields, Field{Key: key, JSON: strconv.FormatUint(v, 16), Text: "0x" + strconv.FormatUint(v, 16)})
}

// String adds a string.
func (r *Record) String(key, v string) {
	r.Fields = append(r.Fields, Field{Key: key, JSON: v, Text: v})
}

// Bool adds a flag: true or false in JSON, on or off in text.
func (r *Record) Bool(key string, v bool) {
	t := "off"
	if v {
		t = "on"
	}
	r.Fields = append(r.Fields, Field{Key: key, JSON: v, Text: t})
}

// Comm adds the owner's name: in brackets in text for a kernel module.
func (r *Record) Comm(comm string, kernel bool) {
	t := comm
	if kernel {
		t = "[" + comm + "]"
	}
	r.Fields = append(r.Fields, Field{Key: "comm", JSON: comm, Text: t})
}

// JSONOnly adds fields that the text shows in the prefix.
func (r *Record) JSONOnly(key string, v any) {
	r.Fields = append(r.Fields, Field{Key: key, JSON: v, JSONOnly: true})
}

// WriteText writes the records as rdma's text lines (each field followed
// by a space, as rdma prints them).
func WriteText(w io.Writer, recs []Record) error {
	var b bytes.Buffer
	for _, r := range recs {
		b.WriteString(r.Prefix)
		for _, f := range r.Fields {
			if !f.JSONOnly {
				fmt.Fprintf(&b, "%s %s ", f.Key, f.Text)
			}
		}
		b.WriteString("\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteJSON writes the records as rdma -j does: one JSON array of
// objects, keys in the order of the text, on one line.
func WriteJSON(w io.Writer, recs []Record) error {
	var b bytes.Buffer
	b.WriteString("[")
	for i, r := range recs {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("{")
		for j, f := range r.Fields {
			if j > 0 {
				b.WriteString(",")
			}
			if err := encode(&b, f.Key); err != nil {
				return err
			}
			b.WriteString(":")
			if err := encode(&b, f.JSON); err != nil {
				return err
			}
		}
		b.WriteString("}")
	}
	b.WriteString("]\n")
	_, err := w.Write(b.Bytes())
	return err
}

func encode(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}
