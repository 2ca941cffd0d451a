package ctxstore

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// The scanners below walk JSON that is already known to be valid (checked
// by json.Valid, or stored after such a check). They find the byte ranges
// of members and elements without decoding values, which makes parsing a
// message several times cheaper than encoding/json's Decoder; values are
// decoded only where a field is actually needed.

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	i++
	for i < len(b) {
		switch b[i] {
		case '\\':
			i += 2
			continue
		case '"':
			return i + 1
		}
		i++
	}
	return len(b)
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	default: // number, true, false, null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return len(b)
	}
}

// eachMember calls fn with every member of the object obj (leading blanks
// allowed): the key, decoded, and the value's start and end within obj.
// It stops early when fn returns false. obj must be a valid JSON object.
func eachMember(obj []byte, fn func(key string, start, end int) bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return // '}' or malformed
		}
		ke := skipString(obj, i)
		key := unquote(obj[i:ke])
		i = skipSpace(obj, ke)
		if i < len(obj) && obj[i] == ':' {
			i++
		}
		vs := skipSpace(obj, i)
		ve := skipValue(obj, vs)
		if !fn(key, vs, ve) {
			return
		}
		i = skipSpace(obj, ve)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

// eachElement calls fn with the start and end of every element of the
// array arr. arr must be a valid JSON array.
func eachElement(arr []byte, fn func(start, end int) bool) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i++
	for {
		i = skipSpace(arr, i)
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		ve := skipValue(arr, i)
		if !fn(i, ve) {
			return
		}
		i = skipSpace(arr, ve)
		if i >= len(arr) || arr[i] != ',' {
			return
		}
		i++
	}
}

// unquote decodes a JSON string literal; it returns "" for anything else.
func unquote(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	inner := v[1 : len(v)-1]
	// The fast path only for plain valid UTF-8: encoding/json (and so a
	// provider) reads invalid bytes as U+FFFD, and ids must compare the
	// way the provider will compare them.
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

// member returns the value of key in obj (nil when absent). With duplicate
// keys the last wins, as in encoding/json.
func member(obj []byte, key string) []byte {
	var v []byte
	eachMember(obj, func(k string, s, e int) bool {
		if k == key {
			v = obj[s:e]
		}
		return true
	})
	return v
}

// stringMember is member(obj, key) when it is a string, else "".
func stringMember(obj []byte, key string) string {
	return unquote(member(obj, key))
}
