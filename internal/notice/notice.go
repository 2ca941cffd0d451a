// Package notice holds the text of the compaction notice a view may end
// with: how it is written (Text) and how a copy of it is recognised (Is),
// in one place, so a host that stores a view's notice back into its
// history does not have it taken for a person's message, while a person's
// message that merely begins like a notice is still theirs.
package notice

import (
	"strconv"
	"strings"
)

// Prefix begins every notice (ctxstore.NoticePrefix).
const Prefix = "[Context compaction: "

const (
	head = Prefix + "to fit the context window, "
	tail = ". The full history is kept; call tools again if you need details that are missing.]"
	// With a recall tool, the tail names it between these two.
	recallHead = ". The full history is kept: call the "
	recallTail = " tool with words you remember to get back any detail that was omitted.]"
	nothing    = "nothing was changed"
)

// Kinds of change a notice counts, in the order it names them.
const (
	summarized = iota
	removed
	truncated
	stubbed
	kinds
)

// phrase follows the count of kind k: singular when n is 1.
func phrase(k, n int) string {
	one := n == 1
	switch k {
	case summarized:
		return pick(one, " earlier message was summarized", " earlier messages were summarized")
	case removed:
		return pick(one, " earlier message was omitted", " earlier messages were omitted")
	case truncated:
		return pick(one, " tool result was truncated", " tool results were truncated")
	default:
		return pick(one, " user message was shortened", " user messages were shortened")
	}
}

func pick(one bool, a, b string) string {
	if one {
		return a
	}
	return b
}

// Text tells the model what compaction did; counts <= 0 are left out.
func Text(removedN, truncatedN, stubbedN, summarizedN int, recallTool ...string) string {
	var b strings.Builder
	b.WriteString(head)
	parts := 0
	for k, n := range [kinds]int{summarizedN, removedN, truncatedN, stubbedN} {
		if n <= 0 {
			continue
		}
		if parts > 0 {
			b.WriteString(", ")
		}
		parts++
		b.WriteString(strconv.Itoa(n))
		b.WriteString(phrase(k, n))
	}
	if parts == 0 {
		b.WriteString(nothing)
	}
	if len(recallTool) > 0 && recallTool[0] != "" {
		b.WriteString(recallHead + recallTool[0] + recallTail)
		return b.String()
	}
	b.WriteString(tail)
	return b.String()
}

// Is reports whether s is, word for word, a text Text returns: only a
// notice a view made, not a message that begins like one.
func Is(s string) bool {
	body, ok := strings.CutPrefix(s, head)
	if !ok {
		return false
	}
	if body, ok = cutTail(body); !ok {
		return false
	}
	if body == nothing {
		return true
	}
	next := 0
	for part := range strings.SplitSeq(body, ", ") {
		digits := len(part) - len(strings.TrimLeft(part, "0123456789"))
		n, err := strconv.Atoi(part[:digits])
		if err != nil || n <= 0 || strconv.Itoa(n) != part[:digits] {
			return false
		}
		k := next
		for k < kinds && part[digits:] != phrase(k, n) {
			k++
		}
		if k == kinds {
			return false
		}
		next = k + 1
	}
	return true
}

// cutTail takes the notice's closing sentence off body: the plain one, or
// the one naming a recall tool (a name without spaces or brackets).
func cutTail(body string) (string, bool) {
	if rest, ok := strings.CutSuffix(body, tail); ok {
		return rest, true
	}
	rest, ok := strings.CutSuffix(body, recallTail)
	if !ok {
		return body, false
	}
	i := strings.LastIndex(rest, recallHead)
	if i < 0 {
		return body, false
	}
	tool := rest[i+len(recallHead):]
	if tool == "" || strings.ContainsAny(tool, " []\n") {
		return body, false
	}
	return rest[:i], true
}
