package bpe

// mergeLarge gives the same result as mergeSmall in O(n log n) for long
// pieces: the parts form a linked list, and candidate pairs wait in a
// min-heap keyed by rank then position, so the leftmost lowest pair comes
// first. A candidate whose pair has changed since it was pushed is stale
// and skipped.
func (e *Encoding) mergeLarge(p string) int {
	n := len(p)
	next := make([]int32, n+1) // next[k]: start of the part after the one at k; n ends
	prev := make([]int32, n+1)
	alive := make([]bool, n+1)
	cur := make([]uint32, n+1) // cur[k]: rank of the pair starting at part k
	for k := range n + 1 {
		next[k], prev[k], alive[k] = int32(k+1), int32(k-1), true
	}
	pairRank := func(k int32) uint32 {
		j := next[k]
		if int(j) >= n {
			return noRank
		}
		return e.v.rank(p[k:next[j]])
	}
	h := make(candHeap, 0, n)
	for k := range int32(n) {
		cur[k] = pairRank(k)
		if cur[k] != noRank {
			h = append(h, cand(cur[k], k))
		}
	}
	h.init()
	parts := n
	for len(h) > 0 {
		c := h.pop()
		r, k := uint32(c>>32), int32(uint32(c))
		if !alive[k] || cur[k] != r {
			continue
		}
		j := next[k] // part j joins part k
		alive[j] = false
		next[k] = next[j]
		if int(next[j]) <= n {
			prev[next[j]] = k
		}
		parts--
		cur[k] = pairRank(k)
		if cur[k] != noRank {
			h.push(cand(cur[k], k))
		}
		if q := prev[k]; q >= 0 {
			cur[q] = pairRank(q)
			if cur[q] != noRank {
				h.push(cand(cur[q], q))
			}
		}
	}
	return parts
}

// cand packs a rank and a position so that plain integer order is the
// merge order.
func cand(rank uint32, pos int32) uint64 { return uint64(rank)<<32 | uint64(uint32(pos)) }

type candHeap []uint64

func (h candHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *candHeap) push(c uint64) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		up := (i - 1) / 2
		if s[up] <= s[i] {
			break
		}
		s[up], s[i] = s[i], s[up]
		i = up
	}
}

func (h *candHeap) pop() uint64 {
	s := *h
	top := s[0]
	s[0] = s[len(s)-1]
	*h = s[:len(s)-1]
	h.down(0)
	return top
}

func (h candHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		if r := l + 1; r < len(h) && h[r] < h[l] {
			l = r
		}
		if h[i] <= h[l] {
			return
		}
		h[i], h[l] = h[l], h[i]
		i = l
	}
}
