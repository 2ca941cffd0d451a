package tokens

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// A minimal scanner over JSON that is already known to be valid (a
// ctxstore.Message checked it on the way in). It reads values in place
// and decodes only the strings that are counted, so counting a message
// allocates nothing but decoded strings that hold escapes.

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

// stringEnd returns the index just past the string that b starts with.
func stringEnd(b []byte) int {
	i := 1
	for {
		k := bytes.IndexByte(b[i:], '"')
		if k < 0 {
			return len(b)
		}
		i += k
		// The quote ends the string unless an odd number of
		// backslashes escapes it.
		bs := 0
		for j := i - 1; j > 0 && b[j] == '\\'; j-- {
			bs++
		}
		i++
		if bs%2 == 0 {
			return i
		}
	}
}

// valueEnd returns the length of the JSON value b starts with.
func valueEnd(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	if b[0] == '"' {
		return stringEnd(b)
	}
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i += stringEnd(b[i:]) - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth <= 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return len(b)
}

// fields calls fn with the raw key (between its quotes, escapes kept)
// and the value of every member of the object obj.
func fields(obj []byte, fn func(key, val []byte)) {
	obj = trim(obj)
	if len(obj) < 2 || obj[0] != '{' {
		return
	}
	rest := obj[1:]
	for {
		rest = trim(rest)
		if len(rest) == 0 || rest[0] != '"' {
			return
		}
		n := valueEnd(rest)
		key := rest[1 : n-1]
		rest = trim(rest[n:])
		if len(rest) == 0 || rest[0] != ':' {
			return
		}
		rest = trim(rest[1:])
		n = valueEnd(rest)
		fn(key, rest[:n])
		rest = trim(rest[n:])
		if len(rest) == 0 || rest[0] != ',' {
			return
		}
		rest = rest[1:]
	}
}

// items calls fn with every element of the array arr.
func items(arr []byte, fn func(val []byte)) {
	arr = trim(arr)
	if len(arr) < 2 || arr[0] != '[' {
		return
	}
	rest := arr[1:]
	for {
		rest = trim(rest)
		if len(rest) == 0 || rest[0] == ']' {
			return
		}
		n := valueEnd(rest)
		fn(rest[:n])
		rest = trim(rest[n:])
		if len(rest) == 0 || rest[0] != ',' {
			return
		}
		rest = rest[1:]
	}
}

// field returns the value of key in obj (nil when absent; the last one
// when repeated, as encoding/json reads it).
func field(obj []byte, key string) []byte {
	var v []byte
	fields(obj, func(k, val []byte) {
		if string(k) == key {
			v = val
		}
	})
	return v
}

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
