package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/export"
	"github.com/ctxstore/ctxstore/storage/search"
)

// modelPreset is a model's window for the view panel: the budget is the
// window minus the output reserve minus the manager's safety margin, as
// for 'ctxstore view --context-window N --max-output N'.
type modelPreset struct {
	Name          string `json:"name"`
	ContextWindow int    `json:"context_window"`
	MaxOutput     int    `json:"max_output"`
}

// modelPresets are common models' published context windows and output
// limits.
func modelPresets() []modelPreset {
	return []modelPreset{
		{"Claude Sonnet 4.5 (200k)", 200_000, 64_000},
		{"Claude Opus 4.1 (200k)", 200_000, 32_000},
		{"Claude Haiku 4.5 (200k)", 200_000, 64_000},
		{"GPT-5 (400k)", 400_000, 128_000},
		{"GPT-4.1 (1M)", 1_047_576, 32_768},
		{"GPT-4o (128k)", 128_000, 16_384},
		{"o3 (200k)", 200_000, 100_000},
		{"Gemini 2.5 Pro (1M)", 1_048_576, 65_536},
		{"Llama 3.1 (128k)", 131_072, 4_096},
		{"Small model (8k)", 8_192, 1_024},
	}
}

func (v *Viewer) handleConfig(w http.ResponseWriter, r *http.Request) {
	writeJSONResponse(w, http.StatusOK, map[string]any{
		"location":  v.st.Location(),
		"read_only": true,
		"search":    v.search != nil,
		"presets":   modelPresets(),
		"version":   v.version,
	})
}

// SessionRow is one session of the list.
type SessionRow struct {
	Name          string    `json:"name"`
	Messages      int       `json:"messages"`
	TotalMessages int       `json:"total_messages"`
	Tokens        int       `json:"tokens"`
	Counter       string    `json:"counter"`
	MixedCounters bool      `json:"mixed_counters"` // tokens adds counts of several counters
	Epoch         uint64    `json:"epoch"`
	Created       time.Time `json:"created"`
	Updated       time.Time `json:"updated"`
	Title         string    `json:"title"`
	Importing     bool      `json:"importing"`
}

func toSessionRow(info storage.SessionInfo) SessionRow {
	_, counter, ok := info.TokenTotal()
	return SessionRow{
		Name: info.Name, Messages: info.Messages, TotalMessages: info.TotalMessages, Tokens: info.Tokens,
		Counter: counter, MixedCounters: !ok, Epoch: info.Epoch, Created: info.Created, Updated: info.Updated,
		Title: info.Title, Importing: info.Importing,
	}
}

func (v *Viewer) handleSessions(w http.ResponseWriter, r *http.Request) {
	infos, err := v.st.Sessions(r.Context())
	if err != nil {
		apiError(w, err)
		return
	}
	rows := make([]SessionRow, 0, len(infos))
	for _, info := range infos {
		rows = append(rows, toSessionRow(info))
	}
	writeJSONResponse(w, http.StatusOK, map[string]any{"sessions": rows})
}

// sessionDetail is one session with its epochs.
type sessionDetail struct {
	SessionRow
	LastSeq       uint64               `json:"last_seq"`
	EpochStartSeq uint64               `json:"epoch_start_seq"`
	Epochs        []export.EpochRecord `json:"epochs"`
}

func (v *Viewer) session(r *http.Request) (storage.SessionInfo, error) {
	name, err := sessionParam(r)
	if err != nil {
		return storage.SessionInfo{}, err
	}
	info, err := v.st.Session(r.Context(), name)
	if errors.Is(err, storage.ErrNotFound) {
		return info, fmt.Errorf("session %q not found in %s: %w", name, v.st.Location(), storage.ErrNotFound)
	}
	return info, err
}

func (v *Viewer) handleSession(w http.ResponseWriter, r *http.Request) {
	info, err := v.session(r)
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSONResponse(w, http.StatusOK, sessionDetail{SessionRow: toSessionRow(info), LastSeq: info.LastSeq, EpochStartSeq: info.EpochStartSeq, Epochs: export.EpochRecords(info.Epochs)})
}

// MessageJSON is one stored message for the page: what the store recorded,
// what the library parsed out of it, and the raw JSON, as stored.
type MessageJSON struct {
	Seq       uint64          `json:"seq"`
	Epoch     uint64          `json:"epoch"`
	Time      time.Time       `json:"time"`
	Role      string          `json:"role"`
	Tokens    int             `json:"tokens"`
	Counter   string          `json:"counter,omitempty"`
	Text      string          `json:"text"`
	Calls     []callJSON      `json:"calls,omitempty"`
	ResultIDs []string        `json:"result_ids,omitempty"`
	Raw       json.RawMessage `json:"raw,omitempty"`
	RawText   string          `json:"raw_text,omitempty"` // a record whose bytes are not JSON (damaged), as text
}

type callJSON struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func toMessageJSON(e storage.Entry) MessageJSON {
	m := MessageJSON{Seq: e.Seq, Epoch: e.Epoch, Time: e.Time, Role: e.Role, Tokens: e.Tokens, Counter: e.Counter, ResultIDs: e.ResultIDs}
	msg, err := e.Message()
	if err != nil || !json.Valid(e.Raw) {
		m.RawText = string(e.Raw)
		return m
	}
	m.Raw = e.Raw
	m.Text = msg.Text()
	for _, c := range msg.ToolCalls() {
		m.Calls = append(m.Calls, callJSON{ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)})
	}
	return m
}

// Page sizes of /api/messages.
const (
	defaultPage = 200
	maxPage     = 2000
)

// handleMessages returns one page of an epoch's messages, oldest first:
// the limit messages before seq "before" (0: the newest), or those after
// seq "after". A 100k-message session is read a page at a time.
func (v *Viewer) handleMessages(w http.ResponseWriter, r *http.Request) {
	info, err := v.session(r)
	if err != nil {
		apiError(w, err)
		return
	}
	var p [4]uint64 // epoch, before, after, limit
	for i, name := range []string{"epoch", "before", "after", "limit"} {
		if p[i], err = uintParam(r, name); err != nil {
			apiError(w, err)
			return
		}
	}
	epoch, before, after, limit := p[0], p[1], p[2], int(p[3])
	if limit == 0 {
		limit = defaultPage
	}
	limit = min(limit, maxPage)
	if epoch == 0 {
		epoch = info.Epoch
	}
	var ep *storage.EpochInfo
	for i := range info.Epochs {
		if info.Epochs[i].Epoch == epoch {
			ep = &info.Epochs[i]
		}
	}
	if ep == nil {
		apiError(w, fmt.Errorf("session %q has no epoch %d: %w", info.Name, epoch, storage.ErrNotFound))
		return
	}
	from, to := pageRange(*ep, before, after, limit)
	out := []MessageJSON{}
	if from <= to && !ep.Purged {
		for e, err := range v.st.EpochMessages(r.Context(), info.Name, epoch, from) {
			if err != nil {
				apiError(w, err)
				return
			}
			if e.Seq > to || len(out) == limit {
				break
			}
			out = append(out, toMessageJSON(e))
		}
	}
	writeJSONResponse(w, http.StatusOK, map[string]any{
		"session": info.Name, "epoch": epoch, "current": epoch == info.Epoch, "purged": ep.Purged,
		"first_seq": ep.FirstSeq, "last_seq": ep.LastSeq, "messages": out,
	})
}

// pageRange is the seqs [from, to] of a page of ep: the limit before seq
// before (0: the end), or from seq after+1 on.
func pageRange(ep storage.EpochInfo, before, after uint64, limit int) (from, to uint64) {
	if after > 0 {
		return max(after+1, ep.FirstSeq), ep.LastSeq
	}
	to = ep.LastSeq
	if before > 0 && before-1 < to {
		to = before - 1
	}
	from = ep.FirstSeq
	if to >= from+uint64(limit) {
		from = to - uint64(limit) + 1
	}
	return from, to
}

// handleEvents streams Server-Sent Events: one "change" event, holding the
// storage.Change as JSON, for each change the engine's Watch reports for
// session s (every session when s is absent), in this process or any
// other. The stream ends when the client leaves or the server stops.
func (v *Viewer) handleEvents(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("s")
	if name != "" {
		if err := storage.CheckSession(name); err != nil {
			apiError(w, badf("parameter s: %v", err))
			return
		}
	}
	ch, err := storage.Watch(r.Context(), v.st, name)
	if errors.Is(err, errors.ErrUnsupported) {
		writeJSONResponse(w, http.StatusNotImplemented, map[string]string{"error": err.Error()})
		return
	}
	if err != nil {
		apiError(w, err)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 1000\n: watching\n\n")
	if rc.Flush() != nil {
		return
	}
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case c, ok := <-ch:
			if !ok {
				return
			}
			b, _ := json.Marshal(map[string]any{"session": c.Session, "last_seq": c.LastSeq, "epoch": c.Epoch})
			fmt.Fprintf(w, "event: change\ndata: %s\n\n", b)
		case <-keepAlive.C:
			fmt.Fprint(w, ": still watching\n\n")
		case <-r.Context().Done():
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// Hit is one search hit as JSON: a line of `ctxstore search --json`, and
// one of the viewer's search answers.
type Hit struct {
	Session string    `json:"session"`
	Seq     uint64    `json:"seq"`
	Epoch   uint64    `json:"epoch"`
	Role    string    `json:"role"`
	Time    time.Time `json:"time"`
	Score   float64   `json:"score"`
	Snippet string    `json:"snippet"`
}

// HitOf is h as JSON, with snippet as its snippet.
func HitOf(h storage.Hit, snippet string) Hit {
	return Hit{Session: h.Session, Seq: h.Seq, Epoch: h.Epoch, Role: h.Role, Time: h.Time, Score: h.Score, Snippet: snippet}
}

// searchEngine is the viewer's search: the library's, over st, the best
// hits first (at most 50), each snippet as plain text.
func searchEngine(st storage.Engine) func(ctx context.Context, query string) ([]Hit, error) {
	return func(ctx context.Context, query string) ([]Hit, error) {
		res, err := search.Search(ctx, st, storage.SearchRequest{Query: query, Limit: 50})
		if errors.Is(err, storage.ErrBadQuery) {
			return nil, badf("%v", err)
		}
		if err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		hits := make([]Hit, 0, len(res.Hits))
		for _, h := range res.Hits {
			hits = append(hits, HitOf(h, h.Snippet))
		}
		return hits, nil
	}
}

// handleSearch answers the search box through the search hook; without
// one it says that this build has no search.
func (v *Viewer) handleSearch(w http.ResponseWriter, r *http.Request) {
	if v.search == nil {
		writeJSONResponse(w, http.StatusNotImplemented, map[string]string{"error": "this ctxstore has no search"})
		return
	}
	q := r.URL.Query().Get("q")
	if q == "" {
		apiError(w, badf("parameter q: empty query"))
		return
	}
	hits, err := v.search(r.Context(), q)
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSONResponse(w, http.StatusOK, map[string]any{"hits": append([]Hit{}, hits...)})
}
