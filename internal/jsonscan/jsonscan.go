// Package jsonscan walks JSON without decoding it: it finds the byte
// ranges of members, elements and values, so that a message's fields can be
// read (or one member replaced) several times cheaper than with
// encoding/json, and values are decoded only where they are needed. It is
// the one JSON scanner of the module: the message parser, the view's
// rewrites and the token counters use it.
//
// Every function is safe on malformed input: it reports failure (ok false,
// or stops walking) instead of reading past the slice.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// IsSpace reports whether c is JSON whitespace.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Space returns the index of the first non-space byte of b at or after i.
func Space(b []byte, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

// String returns the index just past the string that starts at b[i] (a
// quote). It jumps from quote to quote; a quote preceded by an odd number
// of backslashes is escaped. ok is false for an unterminated string.
func String(b []byte, i int) (end int, ok bool) {
	for i++; i < len(b); i++ {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return 0, false
		}
		i += q
		bs := 0
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			bs++
		}
		if bs%2 == 0 {
			return i + 1, true
		}
	}
	return 0, false
}

// Value returns the index just past the value that starts at b[i]. ok is
// false when the value is cut short.
func Value(b []byte, i int) (end int, ok bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return String(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				e, ok := String(b, i)
				if !ok {
					return 0, false
				}
				i = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	}
	s := i // number, true, false, null
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && !IsSpace(b[i]) {
		i++
	}
	return i, i > s
}

// EachMember calls fn with every member of the object obj (leading blanks
// allowed): the key, decoded, and the value's start and end within obj.
// It stops early when fn returns false, and at anything malformed.
func EachMember(obj []byte, fn func(key string, start, end int) bool) {
	i := Space(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = Space(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return // '}' or malformed
		}
		ke, ok := String(obj, i)
		if !ok {
			return
		}
		key := Unquote(obj[i:ke])
		i = Space(obj, ke)
		if i < len(obj) && obj[i] == ':' {
			i++
		}
		vs := Space(obj, i)
		ve, ok := Value(obj, vs)
		if !ok || !fn(key, vs, ve) {
			return
		}
		i = Space(obj, ve)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

// EachElement calls fn with the start and end of every element of the
// array arr. It stops early when fn returns false, and at anything
// malformed.
func EachElement(arr []byte, fn func(start, end int) bool) {
	i := Space(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i++
	for {
		i = Space(arr, i)
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		ve, ok := Value(arr, i)
		if !ok || !fn(i, ve) {
			return
		}
		i = Space(arr, ve)
		if i >= len(arr) || arr[i] != ',' {
			return
		}
		i++
	}
}

// Unquote decodes a JSON string literal; it returns "" for anything else.
// Invalid UTF-8 becomes U+FFFD, as encoding/json (and so a provider) reads
// it.
func Unquote(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

// Member returns the value of key in obj (nil when absent). With duplicate
// keys the last wins, as in encoding/json.
func Member(obj []byte, key string) []byte {
	var v []byte
	EachMember(obj, func(k string, s, e int) bool {
		if k == key {
			v = obj[s:e]
		}
		return true
	})
	return v
}

// StringMember is Member(obj, key) when it is a string, else "".
func StringMember(obj []byte, key string) string {
	return Unquote(Member(obj, key))
}
