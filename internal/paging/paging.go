// Package paging holds the reading loops both engines share: a stream read
// in pages of a bounded size (so that a long read never holds a
// transaction, a connection or the file for long), and the newest n
// entries of a stream that runs newest first.
package paging

import (
	"iter"
	"slices"
)

// Pages yields, in order, the items of the pages fetch returns, until a
// page shorter than size. fetch is given the last item of the page before
// (nil for the first page) and says where to go on from it. An error from
// fetch is yielded as it is, and ends the stream.
func Pages[T any](size int, yield func(T, error) bool, fetch func(last *T) ([]T, error)) {
	var last *T
	for {
		page, err := fetch(last)
		if err != nil {
			var zero T
			yield(zero, err)
			return
		}
		for _, item := range page {
			if !yield(item, nil) {
				return
			}
		}
		if len(page) < size {
			return
		}
		last = &page[len(page)-1]
	}
}

// Newest returns the first n items of newestFirst, a stream that runs
// newest first, in the opposite order: oldest first. It reads no more of
// the stream than it returns. n <= 0 returns none.
func Newest[T any](newestFirst iter.Seq2[T, error], n int) ([]T, error) {
	if n <= 0 {
		return nil, nil
	}
	var out []T
	for item, err := range newestFirst {
		if err != nil {
			return nil, err
		}
		out = append(out, item)
		if len(out) == n {
			break
		}
	}
	slices.Reverse(out)
	return out, nil
}
