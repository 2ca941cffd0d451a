package storagetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
)

// testListSessions: storage.ListSessions (through the engine's
// SessionLister, if it is one) selects by prefix and Match, orders by name,
// last change, messages and tokens (ties by name), and stops at the limit,
// agreeing with Sessions sorted by hand; names equal to a prefix, just past
// it and ending in the greatest code point are handled.
func testListSessions(t *testing.T, open Opener) {
	e, _ := open(t)
	ctx := context.Background()
	for i, name := range []string{"a", "ab", "ab/1", "ab/2", "ac", "b", "b\u007f", "b\U0010ffff", "b\U0010ffffz", "chat-1", "chat-2", "chat-3", "é"} {
		var recs []storage.Record
		for j := range (i*7)%5 + 1 {
			recs = append(recs, fixture.Text("user", strings.Repeat("w ", (i*3)%4+j+1)))
		}
		fixture.AppendOK(t, e, name, recs...)
	}
	all, err := e.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []storage.ListOptions{
		{},
		{Limit: 3},
		{Prefix: "ab"},
		{Prefix: "ab", Limit: 1},
		{Prefix: "b\U0010ffff"},
		{Prefix: "b"},
		{Prefix: "zz"},
		{Prefix: "chat-", Match: func(n string) bool { return n != "chat-2" }},
		{Order: storage.ByUpdated},
		{Order: storage.ByUpdated, Limit: 4},
		{Order: storage.ByMessages},
		{Order: storage.ByMessages, Limit: 5, Prefix: "a"},
		{Order: storage.ByTokens},
		{Order: storage.ByTokens, Limit: 2, Match: func(n string) bool { return strings.HasPrefix(n, "chat") }},
	} {
		t.Run(fmt.Sprintf("%s prefix %q limit %d match %v", tc.Order, tc.Prefix, tc.Limit, tc.Match != nil), func(t *testing.T) {
			var want []string
			sorted := slices.Clone(all)
			slices.SortStableFunc(sorted, func(a, b storage.SessionInfo) int {
				switch {
				case storage.Before(tc.Order, a, b):
					return -1
				case storage.Before(tc.Order, b, a):
					return 1
				}
				return 0
			})
			for _, si := range sorted {
				if strings.HasPrefix(si.Name, tc.Prefix) && (tc.Match == nil || tc.Match(si.Name)) && (tc.Limit == 0 || len(want) < tc.Limit) {
					want = append(want, si.Name)
				}
			}
			var got []string
			for si, err := range storage.ListSessions(ctx, e, tc) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, si.Name)
			}
			if !slices.Equal(got, want) {
				t.Errorf("listed %q\nwant   %q", got, want)
			}
		})
	}
}
