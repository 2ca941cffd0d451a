// Package pgdsn reads PostgreSQL connection strings (postgres:// URLs and
// keyword/value strings) without trusting them to parse: Redact hides the
// password whatever characters it holds, Cut takes out a parameter of the
// program's own (the command's schema=) without decoding the rest, and Is
// tells a connection string from a file name. The engine and the command
// share them, so both hide a password the same way.
package pgdsn

import (
	"net/url"
	"strings"
)

// Hidden replaces a password in the strings Redact returns.
const Hidden = "xxxxx"

// Redact is dsn with its password (and the sslpassword of the client's TLS
// key) replaced by Hidden, whatever characters the password holds, even
// where they break the string's syntax. In a URL, password= and
// sslpassword= parameters are hidden first, each up to the next "&NAME=";
// then the user information runs to the last '@' left (the password from
// its first ':'), so a password holding '@', '/', '#', '?', ':', '%' or
// spaces is hidden whole. (A user-information password holding the text
// "?password=" itself would be read as a parameter: only its start shows.)
// In keyword/value form a password's value is hidden up to the next
// keyword=, quoted or not.
func Redact(dsn string) string { return redact(dsn, true) }

// RedactPassword is Redact leaving an sslpassword as it is: for a string
// the driver is still to parse (it decrypts the TLS key with the
// sslpassword as it parses), never for a message.
func RedactPassword(dsn string) string { return redact(dsn, false) }

// RedactURL is Redact for a URL of any scheme (a target no engine took:
// a mistyped postgres://, say), which is read as a postgres:// URL is.
func RedactURL(target string) string {
	if !strings.Contains(target, "://") {
		return target
	}
	return redactURL(target, true)
}

// redact is Redact, hiding an sslpassword too if ssl.
func redact(dsn string, ssl bool) string {
	if !IsURL(dsn) {
		return redactKeywords(dsn, ssl)
	}
	return redactURL(dsn, ssl)
}

// redactURL is redact for a URL.
func redactURL(dsn string, ssl bool) string {
	scheme, rest, _ := strings.Cut(dsn, "://")
	// The query's passwords first, so that a '@' in one is not taken for
	// the end of the user information.
	rest = redactParams(rest, ssl)
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if user, _, ok := strings.Cut(rest[:at], ":"); ok {
			rest = user + ":" + Hidden + rest[at:]
		}
	}
	return scheme + "://" + rest
}

// redactParams hides the value of each password= (and if ssl,
// sslpassword=) parameter of s (after a '?' or '&'): up to the next
// "&NAME=", whatever it holds.
func redactParams(s string, ssl bool) string {
	const key = "password="
	lower := strings.ToLower(s)
	var b strings.Builder
	for i := 0; ; {
		j := strings.Index(lower[i:], key)
		if j < 0 {
			b.WriteString(s[i:])
			return b.String()
		}
		j += i
		v := j + len(key)
		if ssl && strings.HasSuffix(lower[:j], "ssl") {
			j -= len("ssl") // sslpassword=: as secret
		}
		if j == 0 || (s[j-1] != '?' && s[j-1] != '&') {
			b.WriteString(s[i:v])
			i = v
			continue
		}
		b.WriteString(s[i:v] + Hidden)
		for i = v; i < len(s) && !isParamStart(s, i); i++ {
		}
	}
}

// isParamStart reports whether "&NAME=" starts at s[i].
func isParamStart(s string, i int) bool {
	if s[i] != '&' {
		return false
	}
	j := i + 1
	for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
		j++
	}
	return j > i+1 && j < len(s) && s[j] == '='
}

// redactKeywords is redact for a keyword/value string.
func redactKeywords(dsn string, ssl bool) string {
	var b strings.Builder
	i := 0
	for i < len(dsn) {
		k, v, end := keywordValue(dsn, i)
		if k == "" {
			b.WriteString(dsn[i:])
			break
		}
		if k != "password" && (!ssl || k != "sslpassword") {
			b.WriteString(dsn[i:end])
			i = end
			continue
		}
		b.WriteString(dsn[i:v] + Hidden)
		// Words without '=' after an unquoted password are part of it
		// (a space it should have quoted).
		for i = end; ; {
			for i < len(dsn) && isSpace(dsn[i]) {
				i++
			}
			if i == len(dsn) {
				break
			}
			if nk, _, _ := keywordValue(dsn, i); nk != "" {
				break
			}
			for i < len(dsn) && !isSpace(dsn[i]) {
				i++
			}
		}
		if i < len(dsn) {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// keywordValue scans "keyword = value" at dsn[i:] (leading spaces first):
// it returns the keyword, where the value starts and where it ends (a
// quoted value at its closing quote, or the end of dsn when there is none;
// an unquoted one at the next space). k is "" when no keyword= follows.
func keywordValue(dsn string, i int) (k string, v, end int) {
	for i < len(dsn) && isSpace(dsn[i]) {
		i++
	}
	start := i
	for i < len(dsn) && (dsn[i] == '_' || dsn[i] >= 'a' && dsn[i] <= 'z' || dsn[i] >= 'A' && dsn[i] <= 'Z' || dsn[i] >= '0' && dsn[i] <= '9') {
		i++
	}
	k = dsn[start:i]
	for i < len(dsn) && (dsn[i] == ' ' || dsn[i] == '\t') {
		i++
	}
	if k == "" || i >= len(dsn) || dsn[i] != '=' {
		return "", 0, 0
	}
	i++
	for i < len(dsn) && (dsn[i] == ' ' || dsn[i] == '\t') {
		i++
	}
	v = i
	quoted := i < len(dsn) && dsn[i] == '\''
	if quoted {
		i++
	}
	for i < len(dsn) {
		switch c := dsn[i]; {
		case c == '\\':
			i += 2
			continue
		case quoted && c == '\'':
			return k, v, i + 1
		case !quoted && isSpace(c):
			return k, v, i
		}
		i++
	}
	return k, v, len(dsn)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// IsURL reports whether dsn is a postgres:// or postgresql:// URL.
func IsURL(dsn string) bool {
	l := strings.ToLower(dsn)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// libpqKeywords are the keywords that make a keyword=value string a
// connection string rather than a file name holding '='.
var libpqKeywords = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true, "password": true,
	"passfile": true, "service": true, "sslmode": true, "connect_timeout": true, "application_name": true,
}

// Is reports whether s is a PostgreSQL connection string: a postgres:// or
// postgresql:// URL, or a keyword/value string whose first keyword is
// libpq's (host=, dbname=, user=, ...). The rest need not parse: the
// driver says what is wrong with it.
func Is(s string) bool {
	if IsURL(s) {
		return true
	}
	k, _, _ := keywordValue(s, 0)
	return libpqKeywords[k]
}

// Cut takes every parameter name (a URL's query parameter, or a
// keyword=value pair) out of dsn and returns the rest, the last value
// given, and whether there was one. Only the query (or the pair) is
// decoded: the user name and password are left as written. It fails only
// on a URL parameter that is not validly percent-encoded.
func Cut(dsn, name string) (rest, value string, found bool, err error) {
	if !IsURL(dsn) {
		rest, value, found = cutKeyword(dsn, name)
		return rest, value, found, nil
	}
	scheme, after, _ := strings.Cut(dsn, "://")
	start := strings.LastIndex(after, "@") + 1 // the query follows the user information
	q := strings.Index(after[start:], "?")
	if q < 0 {
		return dsn, "", false, nil
	}
	q += start
	var kept []string
	for _, p := range strings.Split(after[q+1:], "&") {
		k, v, _ := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); err != nil || uk != name {
			kept = append(kept, p)
			continue
		}
		if value, err = url.QueryUnescape(v); err != nil {
			return "", "", false, err
		}
		found = true
	}
	rest = scheme + "://" + after[:q]
	if len(kept) > 0 {
		rest += "?" + strings.Join(kept, "&")
	}
	return rest, value, found, nil
}

// cutKeyword is Cut for a keyword/value string.
func cutKeyword(dsn, name string) (rest, value string, found bool) {
	var b strings.Builder
	i := 0
	for i < len(dsn) {
		k, v, end := keywordValue(dsn, i)
		if k == "" {
			b.WriteString(dsn[i:])
			break
		}
		if k == name {
			value, found = unquote(dsn[v:end]), true
		} else {
			b.WriteString(dsn[i:end])
		}
		i = end
	}
	return strings.TrimSpace(b.String()), value, found
}

// unquote is a keyword/value string's value as libpq reads it: without
// its quotes, backslash escapes undone.
func unquote(v string) string {
	v = strings.TrimPrefix(v, "'")
	v = strings.TrimSuffix(v, "'")
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// Shareable is dsn for a command line shown to its user to paste: without
// its password (hidden reports one was left out), which PGPASSWORD or
// ~/.pgpass supplies when the command runs, nor the sslpassword of its TLS
// key (sslHidden). A string that does not parse is Redact's.
func Shareable(dsn string) (s string, hidden, sslHidden bool) {
	s, _, sslHidden, err := Cut(dsn, "sslpassword")
	if err != nil {
		return Redact(dsn), true, true
	}
	noSSL := s
	s, _, hidden, err = Cut(noSSL, "password")
	if err != nil {
		return Redact(noSSL), true, sslHidden
	}
	if !IsURL(s) {
		return s, hidden, sslHidden
	}
	u, err := url.Parse(s)
	if err != nil {
		return Redact(noSSL), strings.Contains(noSSL, "@"), sslHidden
	}
	if _, ok := u.User.Password(); ok {
		u.User, hidden = url.User(u.User.Username()), true
		s = u.String()
	}
	return s, hidden, sslHidden
}
