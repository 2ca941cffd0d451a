package storage

import (
	"strings"
	"testing"
)

// String groups problems that differ only in their seq, caps what it
// prints at 20 lines and counts the rest.
func TestVerifyReportString(t *testing.T) {
	same := func(n int, kind, detail string) []VerifyProblem {
		var ps []VerifyProblem
		for i := range n {
			ps = append(ps, VerifyProblem{Kind: kind, Session: "s", Seq: uint64(10 + i), Detail: detail})
		}
		return ps
	}
	distinct := func(n int) []VerifyProblem {
		var ps []VerifyProblem
		for i := range n {
			ps = append(ps, VerifyProblem{Kind: "meta", Session: "s", Detail: strings.Repeat("x", i+1)})
		}
		return ps
	}
	for _, tc := range []struct {
		name     string
		problems []VerifyProblem
		more     int
		want     []string // lines after the summary
	}{
		{"one", same(1, "record", "bad"), 0, []string{`record session "s" seq 10: bad`}},
		{"repeated", same(50, "record", "bad"), 0, []string{`record session "s" seqs 10, 11, 12, 13, 14, …: bad (50 times)`}},
		{"repeated without seqs", []VerifyProblem{{Kind: "record", Detail: "lost"}, {Kind: "record", Detail: "lost"}}, 0, []string{`record: lost (2 times)`}},
		{"groups in order", append(same(2, "record", "bad"), append(distinct(1), same(1, "record", "bad")...)...), 0,
			[]string{`record session "s" seqs 10, 11, 10: bad (3 times)`, `meta session "s": x`}},
		{"capped", distinct(30), 7, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &VerifyReport{Path: "f.db", Problems: tc.problems, MoreProblems: tc.more}
			lines := strings.Split(strings.TrimSuffix(r.String(), "\n"), "\n")[1:]
			if tc.want == nil {
				if len(lines) != 21 || lines[20] != "  ... and 17 more problems" {
					t.Fatalf("%d lines, last %q", len(lines), lines[len(lines)-1])
				}
				return
			}
			for i := range lines {
				lines[i] = strings.TrimPrefix(lines[i], "  ")
			}
			if strings.Join(lines, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
