package pgdsn

import (
	"strings"
	"testing"
)

// secretWords are the words of the passwords below: none may show in what
// Redact returns, however the password breaks the string's syntax.
var secretWords = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://u:alpha@h:5432/db", "postgres://u:xxxxx@h:5432/db"},
		{"postgres://u:alpha/bravo#charlie?delta@h/db?sslmode=disable", "postgres://u:xxxxx@h/db?sslmode=disable"},
		{"postgres://u:alpha@bravo@h/db", "postgres://u:xxxxx@h/db"},
		{"postgresql://u:alpha:bravo%charlie delta@h/db", "postgresql://u:xxxxx@h/db"},
		{"POSTGRES://u:alpha@h/db", "POSTGRES://u:xxxxx@h/db"},
		{"postgres://u@h/db?password=alpha&schema=s", "postgres://u@h/db?password=xxxxx&schema=s"},
		{"postgres://h/db?Password=alpha", "postgres://h/db?Password=xxxxx"},
		{"postgres://h/db?password=alpha/bravo#charlie?delta@echo&sslmode=disable", "postgres://h/db?password=xxxxx&sslmode=disable"},
		{"postgres://u:alpha@h/db?password=bravo@charlie&foxtrot&password=delta@echo&x=1", "postgres://u:xxxxx@h/db?password=xxxxx&password=xxxxx&x=1"},
		{"postgres://h/db", "postgres://h/db"},
		{"host=h password=alpha dbname=db", "host=h password=xxxxx dbname=db"},
		{"host=h password = 'alpha bravo\\' charlie' dbname=db", "host=h password = xxxxx dbname=db"},
		{"host=h password=alpha bravo charlie dbname=db", "host=h password=xxxxx dbname=db"},
		{"host=h password='alpha bravo dbname=db", "host=h password=xxxxx"},
		{"host=h password=alpha", "host=h password=xxxxx"},
		{"host=h dbname=db", "host=h dbname=db"},
		// sslpassword unlocks the client's TLS key: as secret.
		{"postgres://u@h/db?sslkey=k&sslpassword=alpha/bravo#charlie&sslmode=require", "postgres://u@h/db?sslkey=k&sslpassword=xxxxx&sslmode=require"},
		{"postgres://u:alpha@h/db?SSLPassword=bravo@charlie", "postgres://u:xxxxx@h/db?SSLPassword=xxxxx"},
		{"host=h sslpassword='alpha bravo' sslkey=k", "host=h sslpassword=xxxxx sslkey=k"},
		{"host=h sslpassword=alpha password=bravo", "host=h sslpassword=xxxxx password=xxxxx"},
	} {
		got := Redact(tc.dsn)
		if got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
		for _, w := range secretWords {
			if strings.Contains(got, w) {
				t.Errorf("Redact(%q) = %q shows %q", tc.dsn, got, w)
			}
		}
	}
}

func TestIs(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"postgres://h/db", true},
		{"postgresql://h/db", true},
		{"host=h dbname=d", true},
		{"dbname=d", true},
		{"  user=u password=p q", true}, // the rest is the driver's to refuse
		{"agent.db", false},
		{"/tmp/x=y.db", false},
		{"mode=fast.db", false}, // not a libpq keyword
		{"", false},
	} {
		if got := Is(tc.s); got != tc.want {
			t.Errorf("Is(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		dsn, rest, value string
		found, fails     bool
	}{
		{dsn: "postgres://h/db?schema=s&sslmode=disable", rest: "postgres://h/db?sslmode=disable", value: "s", found: true},
		{dsn: "postgres://h/db?schema=a%20b", rest: "postgres://h/db", value: "a b", found: true},
		{dsn: "postgres://h/db?schema=a&schema=b", rest: "postgres://h/db", value: "b", found: true},
		{dsn: "postgres://h/db", rest: "postgres://h/db"},
		// The password is left as written, '?' and all.
		{dsn: "postgres://u:al?pha@h/db?schema=s", rest: "postgres://u:al?pha@h/db", value: "s", found: true},
		{dsn: "postgres://u:al?schema=x@h/db", rest: "postgres://u:al?schema=x@h/db"},
		{dsn: "postgres://h/db?schema=%zz", fails: true},
		{dsn: "host=h schema='my s\\'chema' dbname=db", rest: "host=h dbname=db", value: "my s'chema", found: true},
		{dsn: "host=h dbname=db", rest: "host=h dbname=db"},
	} {
		rest, value, found, err := Cut(tc.dsn, "schema")
		if (err != nil) != tc.fails {
			t.Errorf("Cut(%q): error %v, want failure %v", tc.dsn, err, tc.fails)
			continue
		}
		if !tc.fails && (rest != tc.rest || value != tc.value || found != tc.found) {
			t.Errorf("Cut(%q) = %q, %q, %v; want %q, %q, %v", tc.dsn, rest, value, found, tc.rest, tc.value, tc.found)
		}
	}
}

// RedactPassword leaves the sslpassword for the driver to decrypt the TLS
// key with, and hides the password as Redact does.
func TestRedactPassword(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://u:alpha@h/db?sslpassword=k&password=bravo", "postgres://u:xxxxx@h/db?sslpassword=k&password=xxxxx"},
		{"host=h password=alpha sslpassword=k", "host=h password=xxxxx sslpassword=k"},
	} {
		if got := RedactPassword(tc.dsn); got != tc.want {
			t.Errorf("RedactPassword(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
	}
}

func TestShareable(t *testing.T) {
	for _, tc := range []struct {
		in, want          string
		hidden, sslHidden bool
	}{
		{"postgres://u:p%40ss@h/db?schema=x", "postgres://u@h/db?schema=x", true, false},
		{"postgres://u@h/db", "postgres://u@h/db", false, false},
		{"postgres://u@h/db?password=p&sslpassword=k&sslmode=require", "postgres://u@h/db?sslmode=require", true, true},
		{"host=h dbname=d password=secret", "host=h dbname=d", true, false},
		{"host=h dbname=d", "host=h dbname=d", false, false},
	} {
		got, hidden, ssl := Shareable(tc.in)
		if got != tc.want || hidden != tc.hidden || ssl != tc.sslHidden {
			t.Errorf("Shareable(%q) = %q, %v, %v; want %q, %v, %v", tc.in, got, hidden, ssl, tc.want, tc.hidden, tc.sslHidden)
		}
	}
}
