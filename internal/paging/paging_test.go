package paging

import (
	"errors"
	"slices"
	"testing"
)

func TestPages(t *testing.T) {
	items := make([]int, 25)
	for i := range items {
		items[i] = i + 1
	}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		size    int
		stopAt  int // the consumer stops after this item (0: never)
		failAt  int // fetch fails for the page after this item (-1: never)
		want    []int
		wantErr error
		fetches int
	}{
		{"pages of 10", 10, 0, -1, items, nil, 3},
		{"exact multiple", 5, 0, -1, items, nil, 6},
		{"consumer stops", 10, 12, -1, items[:12], nil, 2},
		{"error ends the stream", 10, 0, 10, items[:10], boom, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			var gotErr error
			fetches := 0
			Pages(tc.size, func(v int, err error) bool {
				if err != nil {
					gotErr = err
					return false
				}
				got = append(got, v)
				return v != tc.stopAt
			}, func(last *int) ([]int, error) {
				fetches++
				from := 0
				if last != nil {
					from = *last
				}
				if from == tc.failAt {
					return nil, boom
				}
				return items[from:min(from+tc.size, len(items))], nil
			})
			if !slices.Equal(got, tc.want) || gotErr != tc.wantErr || fetches != tc.fetches {
				t.Fatalf("got %v, %v after %d fetches; want %v, %v after %d", got, gotErr, fetches, tc.want, tc.wantErr, tc.fetches)
			}
		})
	}
}

func TestNewest(t *testing.T) {
	newestFirst := func(n int, fail bool) func(func(int, error) bool) {
		return func(yield func(int, error) bool) {
			for v := n; v > 0; v-- {
				if fail && v == n-2 {
					yield(0, errors.New("boom"))
					return
				}
				if !yield(v, nil) {
					return
				}
			}
		}
	}
	for _, tc := range []struct {
		name string
		have int
		n    int
		want []int
		err  bool
	}{
		{"last three", 10, 3, []int{8, 9, 10}, false},
		{"more than there is", 2, 5, []int{1, 2}, false},
		{"none asked", 10, 0, nil, false},
		{"empty stream", 0, 3, nil, false},
	} {
		got, err := Newest(newestFirst(tc.have, false), tc.n)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := Newest(newestFirst(10, true), 5); err == nil {
		t.Error("an error in the stream was not returned")
	}
}
