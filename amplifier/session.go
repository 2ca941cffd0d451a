package amplifier

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/tokens"
)

// Counter names accepted by SessionConfig.Counter and ProviderCounters.
var counters = map[string]*tokens.Counter{
	"o200k_base":  tokens.O200k(),
	"cl100k_base": tokens.CL100k(),
	"heuristic":   tokens.Heuristic(),
}

// defaultProviderCounters are the providers whose tokenizer ctxstore has:
// their requests are counted exactly whatever SessionConfig.Counter says.
var defaultProviderCounters = map[string]string{
	"openai":       "o200k_base",
	"azure-openai": "o200k_base",
}

// SessionConfig says which session a Session serves and how.
type SessionConfig struct {
	// DB is the store file (persistent.Open). Ignored when Engine is set.
	DB string
	// Engine, when set, is a store opened by the caller (a PostgreSQL
	// database, say): the Session does not close it.
	Engine storage.Engine
	// Session names the session; required.
	Session string
	// Persistent configures the manager (compaction, memory files…). Its
	// Estimator is set by Counter and the request's provider.
	Persistent persistent.Config
	// Counter is the token counter the session opens with, and the one
	// of providers neither ProviderCounters nor the built-in table lists:
	// "o200k_base" (default), "cl100k_base" or "heuristic". A request
	// naming no provider keeps the counter in use.
	Counter string
	// ProviderCounters maps provider names (as a request's provider_name
	// gives them) to counter names, over the built-in "openai" and
	// "azure-openai" → "o200k_base".
	ProviderCounters map[string]string
}

// Session is a persistent ctxstore session served to Amplifier: a
// ctxstore.Manager that also selects its token counter by provider
// (ProviderSelector), reports its store's health (HealthChecker) and
// closes (io.Closer).
type Session struct {
	cfg SessionConfig

	mu      sync.RWMutex
	m       *persistent.Manager
	counter string // name of the counter m counts with
}

var (
	_ ctxstore.Manager = (*Session)(nil)
	_ ProviderSelector = (*Session)(nil)
	_ HealthChecker    = (*Session)(nil)
)

// OpenSession opens the session cfg names, counting with cfg.Counter.
func OpenSession(cfg SessionConfig) (*Session, error) {
	if cfg.Session == "" {
		return nil, &ctxstore.ConfigError{Field: "session", Reason: "empty"}
	}
	if cfg.Counter == "" {
		cfg.Counter = "o200k_base"
	}
	for _, name := range append([]string{cfg.Counter}, values(cfg.ProviderCounters)...) {
		if counters[name] == nil {
			return nil, &ctxstore.ConfigError{Field: "counter", Reason: fmt.Sprintf("unknown token counter %q (want o200k_base, cl100k_base or heuristic)", name)}
		}
	}
	s := &Session{cfg: cfg}
	m, err := s.open(cfg.Counter)
	if err != nil {
		return nil, err
	}
	s.m, s.counter = m, cfg.Counter
	return s, nil
}

func values(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func (s *Session) open(counter string) (*persistent.Manager, error) {
	pc := s.cfg.Persistent
	pc.Estimator = counters[counter]
	if s.cfg.Engine != nil {
		return persistent.OpenEngine(s.cfg.Engine, s.cfg.Session, pc)
	}
	return persistent.Open(s.cfg.DB, s.cfg.Session, pc)
}

// CounterFor returns the name of the counter requests of provider are
// counted with.
func (s *Session) CounterFor(provider string) string {
	if c, ok := s.cfg.ProviderCounters[provider]; ok {
		return c
	}
	if c, ok := defaultProviderCounters[provider]; ok {
		return c
	}
	return s.cfg.Counter
}

// Counter returns the name of the counter the session counts with now.
func (s *Session) Counter() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.counter
}

// UseProvider switches to the counter of provider, reopening the session
// with it when it is another one (the store keeps the counts of each
// counter it has counted with, so switching back costs no recount).
func (s *Session) UseProvider(ctx context.Context, provider string) error {
	want := s.CounterFor(provider)
	if s.Counter() == want {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		return persistent.ErrClosed
	}
	if s.counter == want {
		return nil
	}
	m, err := s.open(want) // before closing the old one: the store file stays open
	if err != nil {
		return err
	}
	old := s.m
	s.m, s.counter = m, want
	return old.Close()
}

// with runs f on the open manager, holding off a counter switch (which
// closes it) until f returns; it fails with persistent.ErrClosed after
// Close.
func (s *Session) with(f func(m *persistent.Manager) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.m == nil {
		return persistent.ErrClosed
	}
	return f(s.m)
}

// Name returns the session's name.
func (s *Session) Name() string { return s.cfg.Session }

// Resumed reports whether the session held messages when it was opened
// (a restart): SetMessages is then ignored.
func (s *Session) Resumed() bool {
	resumed := false
	_ = s.with(func(m *persistent.Manager) error { resumed = m.Resumed(); return nil })
	return resumed
}

// Health reports whether the session's store answers.
func (s *Session) Health(ctx context.Context) error {
	return s.with(func(m *persistent.Manager) error {
		_, err := m.Store().Session(ctx, s.cfg.Session)
		if err != nil && !errors.Is(err, storage.ErrNotFound) { // not found: a fresh session
			return fmt.Errorf("store %s: %w", m.Store().Location(), err)
		}
		return nil
	})
}

// AddMessage implements ctxstore.Manager.
func (s *Session) AddMessage(ctx context.Context, msg ctxstore.Message) error {
	return s.with(func(m *persistent.Manager) error { return m.AddMessage(ctx, msg) })
}

// GetMessagesForRequest implements ctxstore.Manager.
func (s *Session) GetMessagesForRequest(ctx context.Context, r ctxstore.Request) (ms []ctxstore.Message, err error) {
	err = s.with(func(m *persistent.Manager) error { ms, err = m.GetMessagesForRequest(ctx, r); return err })
	return ms, err
}

// GetMessages implements ctxstore.Manager.
func (s *Session) GetMessages(ctx context.Context) (ms []ctxstore.Message, err error) {
	err = s.with(func(m *persistent.Manager) error { ms, err = m.GetMessages(ctx); return err })
	return ms, err
}

// SetMessages implements ctxstore.Manager.
func (s *Session) SetMessages(ctx context.Context, ms []ctxstore.Message) error {
	return s.with(func(m *persistent.Manager) error { return m.SetMessages(ctx, ms) })
}

// Clear implements ctxstore.Manager.
func (s *Session) Clear(ctx context.Context) error {
	return s.with(func(m *persistent.Manager) error { return m.Clear(ctx) })
}

// Close closes the session; it is idempotent.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		return nil
	}
	err := s.m.Close()
	s.m = nil
	return err
}
