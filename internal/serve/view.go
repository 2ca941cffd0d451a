package serve

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/internal/viewreport"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage"
)

// viewCache keeps a read-only manager per session, budget and strategy,
// as an agent keeps one: its first view is the one 'ctxstore view' shows
// (saved decisions applied, new ones kept in memory), and each later view
// of the same budget says how much of the previous one it keeps as it was
// (the stable prefix a provider's cache serves again). Managers of one
// budget never see requests of another.
type viewCache struct {
	st      storage.Engine
	explain func(st storage.Engine, session string, err error) error

	mu     sync.Mutex
	open   map[viewKey]*viewEntry
	closed bool
}

// viewKey is what a view's manager is kept for.
type viewKey struct {
	session, strategy string
	req               string // the budget, as "budget=N" or "window=W,out=M"
}

type viewEntry struct {
	mu    sync.Mutex // one request at a time: the events are this request's
	mgr   *persistent.Manager
	log   *viewreport.EventLog
	used  time.Time // guarded by the cache's mu, as users is
	users int       // requests holding it: it is not closed under them
}

// MaxViewManagers bounds the managers the cache keeps; the least recently
// used one is closed first.
const MaxViewManagers = 16

func newViewCache(st storage.Engine, explain func(storage.Engine, string, error) error) *viewCache {
	// The default counter loads its vocabulary on first use, about a tenth
	// of a second: while the first page loads, not inside its first view.
	go func() {
		if l, ok := view.DefaultEstimator(nil).(interface{ Load() }); ok {
			l.Load()
		}
	}()
	return &viewCache{st: st, explain: explain, open: map[viewKey]*viewEntry{}}
}

// get returns the entry for k, opening its manager if needed; the caller
// gives it back with put.
func (c *viewCache) get(k viewKey) (*viewEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("serve: stopping")
	}
	if e, ok := c.open[k]; ok {
		e.used = time.Now()
		e.users++
		return e, nil
	}
	if len(c.open) >= MaxViewManagers {
		c.evictLocked()
	}
	log := &viewreport.EventLog{}
	mgr, err := persistent.OpenEngine(c.st, k.session, persistent.Config{Config: ctxstore.Config{Strategy: k.strategy, Hooks: log.Hook}, ReadOnly: true})
	if err != nil {
		return nil, c.explain(c.st, k.session, err)
	}
	e := &viewEntry{mgr: mgr, log: log, used: time.Now(), users: 1}
	c.open[k] = e
	return e, nil
}

// put gives back an entry get returned.
func (c *viewCache) put(e *viewEntry) {
	c.mu.Lock()
	e.users--
	c.mu.Unlock()
}

// evictLocked closes the least recently used manager no request holds.
func (c *viewCache) evictLocked() {
	var oldest *viewEntry
	var key viewKey
	for k, e := range c.open {
		if e.users == 0 && (oldest == nil || e.used.Before(oldest.used)) {
			oldest, key = e, k
		}
	}
	if oldest != nil {
		oldest.mgr.Close()
		delete(c.open, key)
	}
}

func (c *viewCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for k, e := range c.open {
		e.mgr.Close()
		delete(c.open, k)
	}
}

// ViewJSON is the typed explanation of one view for the page: what
// 'ctxstore view --json' prints, and the facts of ctxstore.View it
// leaves out.
type ViewJSON struct {
	viewreport.Report
	FirstSeq    uint64   `json:"first_seq"`
	LastSeq     uint64   `json:"last_seq"`
	Capped      bool     `json:"capped"`
	ExtraTokens int      `json:"extra_tokens"`
	UsageRatio  float64  `json:"usage_ratio"`
	Tripped     bool     `json:"tripped"`
	Warnings    []string `json:"warnings"`
	Text        string   `json:"report"` // View.Report, as 'ctxstore view' prints it
	Millis      float64  `json:"millis"` // how long the manager took
}

// viewRequest reads the budget of a view request: budget=N, or window=W
// and out=M (a model's context window and output reserve), and the
// strategy.
func viewRequest(r *http.Request) (ctxstore.Request, string, string, error) {
	var p [3]uint64
	for i, name := range []string{"budget", "window", "out"} {
		var err error
		if p[i], err = uintParam(r, name); err != nil {
			return ctxstore.Request{}, "", "", err
		}
	}
	strategy := r.URL.Query().Get("strategy")
	switch strategy {
	case "", view.StrategyProgressive, view.StrategyTruncate:
	default:
		return ctxstore.Request{}, "", "", badf("strategy %q: want progressive or truncate", strategy)
	}
	budget, window, out := p[0], p[1], p[2]
	switch {
	case budget > 0 && window == 0 && out == 0:
		return ctxstore.Request{TokenBudget: int(min(budget, view.MaxBudget))}, fmt.Sprintf("budget=%d", budget), strategy, nil
	case budget == 0 && window > 0 && out > 0:
		m := &ctxstore.ModelInfo{ContextWindow: int(min(window, view.MaxBudget)), MaxOutputTokens: int(min(out, view.MaxBudget))}
		return ctxstore.Request{Model: m}, fmt.Sprintf("window=%d,out=%d", window, out), strategy, nil
	}
	return ctxstore.Request{}, "", "", badf("give budget=N, or window=N and out=N")
}

func (v *Viewer) handleView(w http.ResponseWriter, r *http.Request) {
	name, err := sessionParam(r)
	if err != nil {
		apiError(w, err)
		return
	}
	if _, err := v.session(r); err != nil {
		apiError(w, err)
		return
	}
	req, spec, strategy, err := viewRequest(r)
	if err != nil {
		apiError(w, err)
		return
	}
	e, err := v.views.get(viewKey{session: name, strategy: strategy, req: spec})
	if err != nil {
		apiError(w, err)
		return
	}
	e.mu.Lock()
	start := time.Now()
	rep, err := viewreport.Of(r.Context(), e.mgr, e.log, req)
	took := time.Since(start)
	e.mu.Unlock()
	v.views.put(e)
	if err != nil {
		apiError(w, v.views.explain(v.st, name, err))
		return
	}
	out := ViewJSON{Report: rep, FirstSeq: rep.Explained.FirstSeq, LastSeq: rep.Explained.LastSeq, Capped: rep.Explained.Capped,
		ExtraTokens: rep.Explained.ExtraTokens, UsageRatio: rep.Explained.UsageRatio, Tripped: rep.Explained.Tripped,
		Warnings: []string{}, Millis: float64(took.Microseconds()) / 1000}
	for _, ev := range rep.Events {
		if ev.Name == ctxstore.EventWarning {
			out.Warnings = append(out.Warnings, fmt.Sprint(ev.Data["message"]))
		}
	}
	out.Text = rep.Explained.Report(ctxstore.ReportOptions{Warnings: out.Warnings})
	writeJSONResponse(w, http.StatusOK, out)
}
