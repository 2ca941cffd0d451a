package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/tokens"
)

// ErasedText is the content an erased message keeps in place of what it
// said: its text, each tool result's content.
const ErasedText = "[erased]"

// ErasedArguments is the arguments every tool call of an erased message
// keeps: a JSON object, as every provider wants a call's arguments to be,
// that says they were erased rather than pretending the call had none
// ("{}" would read as a call made without arguments).
const ErasedArguments = `{"erased":true}`

// EraseResult says what an erase did.
type EraseResult struct {
	// Erased are the seqs whose content was replaced, in order.
	Erased []uint64 `json:"erased"`
	// Already are the seqs asked for that were erased before.
	Already []uint64 `json:"already,omitempty"`
	// DroppedDerived counts the derived records dropped.
	DroppedDerived int `json:"dropped_derived"`
	// Scrub is what the scrub after the erase did, when the engine has one
	// (Scrubber).
	Scrub *ScrubReport `json:"scrub,omitempty"`
}

// Eraser is implemented by engines that erase messages in place: each
// message keeps its seq, epoch, time, role, counter name and tool pairing
// (a result its tool_call_id, a call its id and name), its content
// becomes ErasedMessage's marker and its token count that of the marker
// (ErasedTokens), all in one transaction. Erase uses it.
type Eraser interface {
	// EraseMessages erases the messages of session with the given seqs
	// (any epoch not purged), recomputes the session's title and, when a
	// seq is of the current epoch, its token totals (SessionInfo.Tokens
	// and Counters move by the difference between the old count and the
	// erased message's), and drops the session's derived records of the
	// kinds in dropDerived. A seq
	// not stored fails the whole call with ErrNotFound, erasing nothing.
	// The erased bytes may remain in places the engine cleans separately
	// (Scrubber).
	EraseMessages(ctx context.Context, session string, seqs []uint64, dropDerived []string) (EraseResult, error)
}

// ScrubReport says what a Scrubber's Scrub did.
type ScrubReport struct {
	// Pages and PageBytes count the unused pages overwritten with zeros.
	Pages     int   `json:"pages"`
	PageBytes int64 `json:"page_bytes"`
	// LogBytes counts the bytes of write-ahead log removed.
	LogBytes int64 `json:"log_bytes"`
	// Index says the search index was rewritten without what is gone.
	Index bool `json:"index"`
	// Took is how long the scrub ran.
	Took time.Duration `json:"took_ns"`
}

// Scrubber is implemented by engines that keep bytes of deleted data
// beyond the records that held them: free pages of a file, a write-ahead
// log, an index. Scrub removes them.
type Scrubber interface {
	// Scrub removes from every place the engine keeps them the bytes of
	// messages erased and of sessions and epochs purged. It is idempotent
	// and safe while other handles and processes use the store; an
	// engine that was killed during an erase's scrub finishes it when it
	// next opens the store for writing.
	Scrub(ctx context.Context) (ScrubReport, error)
}

// ErasedTokens returns the token count an erased message e is stored with
// in place of its original's, which the counter named counter made (the
// Record.Counter stored with it): e's count by that counter when this
// build knows its name (tokens.ForName), the count a manager counting
// with it makes. For another name (a program's own counter, or "" for
// counts stored without one) it is the estimate of tokens.Heuristic: an
// erased message holds only the marker, roles, tool ids and names, which
// any counter counts within a few tokens of it. Neither 0 (which would
// let a view take the erased message for free) nor the old count (which
// would keep counting text that is gone) would be honest.
func ErasedTokens(e ctxstore.Message, counter string) int {
	c, ok := tokens.ForName(counter)
	if !ok {
		c = tokens.Heuristic()
	}
	return min(c.Estimate(e), MaxTokens)
}

// Erase erases the messages of session with the given seqs (see Eraser),
// dropping the session's derived records of the kinds in drop, then scrubs
// the engine (Scrubber) so that the erased bytes leave every place it
// keeps them.
//
// drop names the kinds of derived records built from the messages' content
// (a summary, a recount): they would keep what the erase removes, so they go
// with it, and their program makes them again from what remains. Derived
// kinds belong to the program that stores them; package persistent gives
// its own as persistent.EraseDrops, and a program with records of its own
// appends their kinds. An empty drop is refused before anything is erased:
// an engine cannot list a session's kinds, so an erase told none would keep
// every summary of the erased text. KindLineage in drop is ignored: a
// fork's or rewind's record holds no message's content. A kind named twice
// is dropped once.
//
// An engine that cannot erase fails with an error matching
// errors.ErrUnsupported.
func Erase(ctx context.Context, e Engine, session string, drop []string, seqs ...uint64) (EraseResult, error) {
	er, ok := e.(Eraser)
	if !ok {
		return EraseResult{}, fmt.Errorf("%s: erase: %w by its engine", e.Location(), errors.ErrUnsupported)
	}
	if len(seqs) == 0 {
		return EraseResult{}, fmt.Errorf("store %s: session %q: erase: no seq given", e.Location(), session)
	}
	kinds := slices.Compact(slices.Sorted(slices.Values(drop)))
	kinds = slices.DeleteFunc(kinds, func(k string) bool { return k == "" || k == KindLineage })
	if len(kinds) == 0 {
		return EraseResult{}, fmt.Errorf("store %s: session %q: erase: no kind of derived record to drop given (persistent.EraseDrops names persistent's): nothing was erased", e.Location(), session)
	}
	res, err := er.EraseMessages(ctx, session, seqs, kinds)
	if err != nil {
		return res, err
	}
	rep, err := Scrub(ctx, e)
	if err != nil {
		return res, fmt.Errorf("store %s: session %q: erased seqs %v, but the scrub failed (run it again: ctxstore scrub): %w", e.Location(), session, res.Erased, err)
	}
	res.Scrub = rep
	return res, nil
}

// Scrub runs the engine's Scrub, if it has one (Scrubber); an engine
// without one keeps no bytes beyond its records, and nil comes back.
func Scrub(ctx context.Context, e Engine) (*ScrubReport, error) {
	s, ok := e.(Scrubber)
	if !ok {
		return nil, nil
	}
	rep, err := s.Scrub(ctx)
	if err != nil {
		return nil, err
	}
	return &rep, nil
}

// MatchSeqs returns the seqs of the messages of session (every epoch not
// purged) in which text appears, exactly (case matters), in what an
// erase removes: text, tool arguments and results, metadata; not in what
// every erased message keeps (its role, the JSON keys, tool ids and
// names). Messages already erased are left out.
func MatchSeqs(ctx context.Context, e Engine, session, text string) ([]uint64, error) {
	if text == "" {
		return nil, fmt.Errorf("store %s: session %q: empty text to match", e.Location(), session)
	}
	info, err := e.Session(ctx, session)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, ep := range info.Epochs {
		if ep.Purged || ep.Messages == 0 {
			continue
		}
		for ent, err := range e.EpochMessages(ctx, session, ep.Epoch, ep.FirstSeq) {
			if errors.Is(err, ErrNotFound) {
				break // purged since the listing
			}
			if err != nil {
				return nil, err
			}
			if !messageContains(ent.Raw, text) {
				continue
			}
			m, err := ent.Message()
			if err != nil {
				return nil, err
			}
			if !IsErased(m) {
				seqs = append(seqs, ent.Seq)
			}
		}
	}
	return seqs, nil
}

// messageContains reports whether text appears in what erasing the
// message raw would remove: its strings (keys and values, as decoded, so
// escapes hide nothing; a call's arguments decoded again) and numbers,
// less those its erased form keeps (the keys, the role, tool ids and
// names, the marker). Text found only in what stays, such as "user" or
// "role", matches nothing: an erase of it would remove nothing.
func messageContains(raw []byte, text string) bool {
	if !bytes.Contains(raw, []byte(text)) && !bytes.ContainsRune(raw, '\\') {
		return false // without escapes, the bytes are the strings'
	}
	m, err := ctxstore.ParseMessage(raw)
	if err != nil {
		return false
	}
	e, err := ErasedMessage(m)
	if err != nil {
		return bytes.Contains(raw, []byte(text))
	}
	kept := map[string]int{}
	for _, s := range jsonStrings(e.Bytes()) {
		kept[s]++
	}
	for _, s := range jsonStrings(raw) {
		if kept[s] > 0 {
			kept[s]--
			continue
		}
		if strings.Contains(s, text) {
			return true
		}
	}
	return false
}

// jsonStrings returns every key, string and number of the JSON value raw,
// depth first; a string that is itself JSON (a call's arguments) adds its
// own strings after it.
func jsonStrings(raw []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
			if t := strings.TrimSpace(v); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
				out = append(out, jsonStrings([]byte(t))...)
			}
		case json.Number:
			out = append(out, v.String())
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			for k, x := range v {
				out = append(out, k)
				walk(x)
			}
		}
	}
	walk(v)
	return out
}

// IsErased reports whether m is an erased message: what ErasedMessage
// makes of it is m itself.
func IsErased(m ctxstore.Message) bool {
	e, err := ErasedMessage(m)
	return err == nil && e.Equal(m)
}

// TitleOf returns the title a session takes from m (Title of its text),
// and whether m may give one: a user message that is not a tool result and
// was not erased.
func TitleOf(m ctxstore.Message) (string, bool) {
	if m.Role() != ctxstore.RoleUser || m.IsToolResult() || IsErased(m) {
		return "", false
	}
	return Title(m.Text()), true
}

// ErasedMessage returns m erased: the same role, tool_call_id and (for
// tool and function messages) name; content ErasedText where it had text
// (a string, or the text blocks of an array, which become one text block);
// every tool call keeps its id and name with ErasedArguments for
// arguments, and every tool result block its id with ErasedText for
// content. Every other field (metadata included) goes. The result is
// valid wherever m was, pairs as m did, and erasing it again changes
// nothing.
func ErasedMessage(m ctxstore.Message) (ctxstore.Message, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(m.Bytes(), &top); err != nil {
		return ctxstore.Message{}, fmt.Errorf("%w: erase: %v", ctxstore.ErrInvalidMessage, err)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	field := func(k string, v []byte) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(jsonString(k))
		b.WriteByte(':')
		b.Write(v)
	}
	field("role", jsonString(m.Role()))
	if id := m.ToolCallID(); id != "" {
		field("tool_call_id", jsonString(id))
	}
	if name, ok := top["name"]; ok && (m.Role() == ctxstore.RoleTool || m.Role() == ctxstore.RoleFunction) {
		field("name", compact(name))
	}
	if c, ok := top["content"]; ok {
		field("content", erasedContent(c))
	}
	if calls, ok := top["tool_calls"]; ok && string(bytes.TrimSpace(calls)) != "null" {
		field("tool_calls", erasedCalls(calls))
	}
	b.WriteByte('}')
	e, err := ctxstore.ParseMessage(b.Bytes())
	if err != nil {
		return ctxstore.Message{}, fmt.Errorf("erase: %w", err)
	}
	if !slices.Equal(e.CallIDs(), m.CallIDs()) || !slices.Equal(e.ResultIDs(), m.ResultIDs()) {
		return ctxstore.Message{}, fmt.Errorf("%w: erase: the message's tool pairing could not be kept (calls %v, results %v)", ctxstore.ErrInvalidMessage, m.CallIDs(), m.ResultIDs())
	}
	return e, nil
}

func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func compact(raw []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return []byte("null")
	}
	return b.Bytes()
}

// erasedContent is the content of an erased message: a string becomes
// ErasedText, an array keeps its tool blocks (erased) and one text block
// where its first other block was; null stays null.
func erasedContent(c json.RawMessage) []byte {
	c = bytes.TrimSpace(c)
	switch {
	case len(c) == 0 || string(c) == "null":
		return []byte("null")
	case c[0] != '[':
		return jsonString(ErasedText)
	}
	var blocks []map[string]json.RawMessage
	if json.Unmarshal(c, &blocks) != nil {
		return jsonString(ErasedText)
	}
	var out [][]byte
	text := false
	for _, blk := range blocks {
		var typ string
		_ = json.Unmarshal(blk["type"], &typ)
		switch typ {
		case "tool_use", "tool_call":
			var id, name string
			_ = json.Unmarshal(blk["id"], &id)
			_ = json.Unmarshal(blk["name"], &name)
			if id != "" {
				out = append(out, object("type", jsonString(typ), "id", jsonString(id), "name", jsonString(name), "input", []byte(ErasedArguments)))
				continue
			}
		case "tool_result":
			var id string
			key := "tool_use_id"
			if json.Unmarshal(blk[key], &id) != nil || id == "" {
				key = "tool_call_id"
				_ = json.Unmarshal(blk[key], &id)
			}
			if id != "" {
				out = append(out, object("type", jsonString(typ), key, jsonString(id), "content", jsonString(ErasedText)))
				continue
			}
		}
		if !text {
			text = true
			out = append(out, object("type", jsonString("text"), "text", jsonString(ErasedText)))
		}
	}
	return append(append([]byte{'['}, bytes.Join(out, []byte{','})...), ']')
}

// erasedCalls is a tool_calls array with each call's id, type and name
// kept and its arguments erased.
func erasedCalls(raw json.RawMessage) []byte {
	var calls []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	_ = json.Unmarshal(raw, &calls)
	out := make([][]byte, len(calls))
	for i, c := range calls {
		typ := c.Type
		if typ == "" {
			typ = "function"
		}
		fn := object("name", jsonString(c.Function.Name), "arguments", jsonString(ErasedArguments))
		out[i] = object("id", jsonString(c.ID), "type", jsonString(typ), "function", fn)
	}
	return append(append([]byte{'['}, bytes.Join(out, []byte{','})...), ']')
}

// object writes a JSON object of key, value pairs in order.
func object(kv ...any) []byte {
	b := []byte{'{'}
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, jsonString(kv[i].(string))...)
		b = append(b, ':')
		b = append(b, kv[i+1].([]byte)...)
	}
	return append(b, '}')
}
