package persistent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// InterruptedText is the content of the synthetic tool results a repaired
// tail gets in views.
const InterruptedText = "[interrupted: no result was recorded]"

// RepairSource is the metadata.source of synthetic tool results, so a host
// (or a test) can tell them from real ones.
const RepairSource = ctxstore.SourceRepair

// KindRepair is the derived-record kind of repair records; the key is the
// assistant message's seq (20 zero-padded digits, so keys sort by seq).
const KindRepair = "repair"

// repairRecord is what RepairInterruptedTail saves: the assistant message
// whose calls never got results, and which calls. Views answer those calls
// with synthetic results; the log itself is never rewritten.
type repairRecord struct {
	Epoch        uint64   `json:"epoch"`
	AssistantSeq uint64   `json:"assistant_seq"`
	CallIDs      []string `json:"call_ids"`
	Text         string   `json:"text"`
}

func repairKey(seq uint64) string { return fmt.Sprintf("%020d", seq) }

// unansweredTail finds an interrupted tail in the last messages of an epoch
// (oldest first): an assistant message with tool calls followed only by
// results to some of them. It returns the index of the assistant message and
// the ids without a result, or -1 when the tail is not interrupted.
func unansweredTail(tail []ctxstore.Message) (int, []string) {
	answered := map[string]bool{}
	for i := len(tail) - 1; i >= 0; i-- {
		m := tail[i]
		if m.IsToolResult() && !m.HasToolCalls() {
			for _, id := range m.ResultIDs() {
				answered[id] = true
			}
			continue
		}
		if m.Role() != ctxstore.RoleAssistant || !m.HasToolCalls() {
			return -1, nil
		}
		var missing []string
		for _, id := range m.CallIDs() {
			if !answered[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			return -1, nil
		}
		return i, missing
	}
	return -1, nil
}

// syntheticResults builds the results a repaired assistant message gets in
// views: a role "tool" message per OpenAI-style call, and one user message of
// tool_result blocks for Anthropic-style tool_use blocks, matching the shape
// the provider expects for that call.
func syntheticResults(assistant ctxstore.Message, ids []string, text string, annotate bool) ([]ctxstore.Message, error) {
	blocks := toolUseIDs(assistant)
	var out []ctxstore.Message
	var anthropic []map[string]any
	for _, id := range ids {
		if blocks[id] {
			anthropic = append(anthropic, map[string]any{
				"type": "tool_result", "tool_use_id": id, "content": text, "is_error": true,
			})
			continue
		}
		fields := []kv{{"role", ctxstore.RoleTool}, {"tool_call_id", id}, {"content", text}}
		if annotate {
			fields = append(fields, kv{"metadata", map[string]any{"source": RepairSource}})
		}
		m, err := encodeMessage(fields...)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if len(anthropic) > 0 {
		fields := []kv{{"role", ctxstore.RoleUser}, {"content", anthropic}}
		if annotate {
			fields = append(fields, kv{"metadata", map[string]any{"source": RepairSource}})
		}
		m, err := encodeMessage(fields...)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// toolUseIDs returns the ids of the Anthropic-style tool_use content blocks
// of m (as opposed to OpenAI-style tool_calls entries).
func toolUseIDs(m ctxstore.Message) map[string]bool {
	var blocks []struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	}
	c := bytes.TrimSpace(m.Content())
	if len(c) == 0 || c[0] != '[' || json.Unmarshal(c, &blocks) != nil {
		return nil
	}
	ids := map[string]bool{}
	for _, b := range blocks {
		if b.Type == "tool_use" && b.ID != "" {
			ids[b.ID] = true
		}
	}
	return ids
}

// kv is one key of a message built in a fixed key order.
type kv struct {
	k string
	v any
}

// encodeMessage marshals keys in order (a map would sort them) without HTML
// escaping, and parses the result into a Message.
func encodeMessage(fields ...kv) (ctxstore.Message, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i, f := range fields {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := enc.Encode(f.k); err != nil {
			return ctxstore.Message{}, fmt.Errorf("encode %s: %w", f.k, err)
		}
		buf.Truncate(buf.Len() - 1) // Encode appends a newline
		buf.WriteByte(':')
		if err := enc.Encode(f.v); err != nil {
			return ctxstore.Message{}, fmt.Errorf("encode %s: %w", f.k, err)
		}
		buf.Truncate(buf.Len() - 1)
	}
	buf.WriteByte('}')
	m, err := ctxstore.ParseMessage(buf.Bytes())
	if err != nil {
		return ctxstore.Message{}, fmt.Errorf("build message: %w", err)
	}
	return m, nil
}

// stillMissing drops the ids answered by real results that arrived after the
// repair (a host that retried the call), so a call never gets two results.
func stillMissing(ids []string, answered map[string]bool) []string {
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return answered[id] })
}

// RepairedCall is a tool call that an interrupted run left without a
// result and that a repair record answers in views.
type RepairedCall struct {
	Session      string `json:"session"`
	Epoch        uint64 `json:"epoch"`
	AssistantSeq uint64 `json:"assistant_seq"`
	CallID       string `json:"call_id"`
}

// RepairedCalls lists the repaired calls of session in st, in every epoch.
// Tools that audit the log (ctxstore verify) use it to tell a call that
// views answer with InterruptedText from one that is really unanswered.
func RepairedCalls(ctx context.Context, st storage.Engine, session string) ([]RepairedCall, error) {
	var out []RepairedCall
	for d, err := range st.ListDerived(ctx, session, KindRepair) {
		if errors.Is(err, storage.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("session %q: read repair records: %w", session, err)
		}
		var r repairRecord
		if err := json.Unmarshal(d.Value, &r); err != nil {
			return nil, fmt.Errorf("session %q: repair record %s: %w", session, d.Key, err)
		}
		for _, id := range r.CallIDs {
			out = append(out, RepairedCall{Session: session, Epoch: r.Epoch, AssistantSeq: r.AssistantSeq, CallID: id})
		}
	}
	return out, nil
}
