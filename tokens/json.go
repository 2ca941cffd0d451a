package tokens

import (
	"bytes"
	"github.com/ctxstore/ctxstore/internal/jsonscan"
	"unicode/utf16"
	"unicode/utf8"
)

// Reading a message's JSON in place: the module's scanner
// (internal/jsonscan) finds members and elements, and the strings that are
// counted are decoded here without a copy when they hold no escapes.

func blank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func trim(b []byte) []byte {
	for len(b) > 0 && blank(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && blank(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// fields calls fn with the key (decoded) and the value of every member of
// the object obj.
func fields(obj []byte, fn func(key string, val []byte)) {
	jsonscan.EachMember(obj, func(k string, s, e int) bool {
		fn(k, obj[s:e])
		return true
	})
}

// items calls fn with every element of the array arr.
func items(arr []byte, fn func(val []byte)) {
	jsonscan.EachElement(arr, func(s, e int) bool {
		fn(arr[s:e])
		return true
	})
}

// field returns the value of key in obj (nil when absent; the last one
// when repeated, as encoding/json reads it).
func field(obj []byte, key string) []byte { return jsonscan.Member(obj, key) }

func isString(v []byte) bool { return len(v) >= 2 && v[0] == '"' }

// text decodes the JSON string v. Without escapes it returns the bytes
// between the quotes as they are (invalid UTF-8 counts the way a decoder
// reads it, one U+FFFD per byte, in the counters); otherwise it decodes
// into a new slice. Anything but a string gives nil.
func text(v []byte) []byte {
	if !isString(v) {
		return nil
	}
	in := v[1 : len(v)-1]
	esc := bytes.IndexByte(in, '\\')
	if esc < 0 {
		return in
	}
	out := make([]byte, esc, len(in))
	copy(out, in[:esc])
	for i := esc; i < len(in); i++ {
		if in[i] != '\\' || i+1 >= len(in) {
			// Copy up to the next escape at once.
			k := bytes.IndexByte(in[i:], '\\')
			if k < 0 {
				k = len(in) - i
			}
			if k == 0 {
				k = 1
			}
			out = append(out, in[i:i+k]...)
			i += k - 1
			continue
		}
		i++
		switch in[i] {
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case 'r':
			out = append(out, '\r')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'u':
			r, n := hex4(in[i+1:])
			i += n
			if utf16.IsSurrogate(r) {
				r2, n2 := rune(-1), 0
				if i+2 < len(in) && in[i+1] == '\\' && in[i+2] == 'u' {
					r2, n2 = hex4(in[i+3:])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 2 + n2
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default: // \" \\ \/
			out = append(out, in[i])
		}
	}
	return out
}

func hex4(b []byte) (rune, int) {
	if len(b) < 4 {
		return utf8.RuneError, len(b)
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c|0x20 >= 'a' && c|0x20 <= 'f':
			c = c | 0x20 - 'a' + 10
		default:
			return utf8.RuneError, 4
		}
		r = r<<4 | rune(c)
	}
	return r, 4
}

// number returns the non-negative integer part of the JSON number v, or
// 0.
func number(v []byte) int {
	n := 0
	for _, c := range trim(v) {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
		if n > 1<<30 {
			return 1 << 30
		}
	}
	return n
}
