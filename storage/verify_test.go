package storage

import (
	"strings"
	"testing"
)

// String groups problems that differ only in their seq, caps what it
// prints at 20 lines and counts the rest.
func TestVerifyReportString(t *testing.T) {
	same := func(n int, kind ProblemKind, detail string) []VerifyProblem {
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

// TestEpochAuditList: NewEpochAudit reports nothing for consistent lists
// (an empty session, a session recreated after Purge, empty and purged
// epochs, gaps) and one problem naming the session for each inconsistent
// one, including those no engine's metadata can hold (epoch 0, the
// current epoch unlisted). Messages are not fed: the list alone is checked.
func TestEpochAuditList(t *testing.T) {
	ep := func(epoch, first, last uint64, n int, purged bool) EpochInfo {
		return EpochInfo{Epoch: epoch, FirstSeq: first, LastSeq: last, Messages: n, Purged: purged}
	}
	for _, tc := range []struct {
		name string
		info SessionInfo
		want string // "" for none
	}{
		{"empty session", SessionInfo{Epoch: 1, EpochStartSeq: 1, Epochs: []EpochInfo{ep(1, 1, 0, 0, false)}}, ""},
		{"recreated after purge", SessionInfo{Epoch: 4, EpochStartSeq: 8, LastSeq: 7, Epochs: []EpochInfo{ep(4, 8, 7, 0, false)}}, ""},
		{"empty, purged and gaps", SessionInfo{Epoch: 5, EpochStartSeq: 9, LastSeq: 12,
			Epochs: []EpochInfo{ep(1, 1, 3, 0, true), ep(2, 4, 3, 0, false), ep(4, 6, 8, 1, false), ep(5, 9, 12, 2, false)}}, ""},
		{"epoch 0", SessionInfo{Epoch: 0, Epochs: []EpochInfo{ep(1, 1, 0, 0, false)}}, "current epoch 0"},
		{"current unlisted", SessionInfo{Epoch: 2, EpochStartSeq: 4, LastSeq: 3, Epochs: []EpochInfo{ep(1, 1, 3, 3, false)}},
			"the current epoch 2 is not in the epoch list"},
		{"empty session past its last seq", SessionInfo{Epoch: 1, EpochStartSeq: 1, Epochs: []EpochInfo{ep(1, 1, 2, 0, false)}},
			"epoch 1: last seq 2 after the session's last seq 0"},
		{"current purged", SessionInfo{Epoch: 1, EpochStartSeq: 1, LastSeq: 2, Epochs: []EpochInfo{ep(1, 1, 2, 0, true)}},
			"epoch 1, the current one, is marked purged"},
		{"earlier epoch past the current start", SessionInfo{Epoch: 2, EpochStartSeq: 3, LastSeq: 4,
			Epochs: []EpochInfo{ep(1, 1, 3, 3, false), ep(2, 3, 4, 2, false)}}, "epoch 2 starts at seq 3, inside epoch 1 (up to 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.info.Name = "s"
			var r VerifyReport
			NewEpochAudit(&r, tc.info)
			found := false
			for _, p := range r.Problems {
				if p.Kind != "meta" || p.Session != "s" || p.Seq != 0 {
					t.Errorf("not a meta problem of session s: %s", p)
				}
				found = found || tc.want != "" && strings.Contains(p.Detail, tc.want)
			}
			switch {
			case tc.want == "" && len(r.Problems) > 0:
				t.Fatalf("consistent list reported:\n%s", &r)
			case tc.want != "" && !found:
				t.Fatalf("want a problem with %q, got:\n%s", tc.want, &r)
			}
		})
	}
}
