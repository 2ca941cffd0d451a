package persistent

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
)

// Config configures a persistent Manager. The embedded ctxstore.Config
// holds the settings both managers share (compaction, token counting,
// hooks), with the same defaults and validation as simple.New.
type Config struct {
	ctxstore.Config

	// MemoryFiles are files whose content every fresh session starts with,
	// one system message per file ("[Context from NAME]\n\n<content>").
	// A leading ~ is the home directory. Missing or blank files are skipped
	// with a context:warning event.
	MemoryFiles []string
	// WatchMemory appends a new version of a memory file when it is edited
	// (fsnotify, debounced by MemoryDebounce); views show only the newest
	// version of each file.
	WatchMemory bool
	// LockTimeout bounds every wait for another process's lock on the store
	// file Open opens (boltstore.Options.LockTimeout; 0 = the store's default
	// of 5 s). The managers of a process that Open one file share its
	// store, so they must give the same LockTimeout (an Open asking for
	// another fails with boltstore.ErrOptionsConflict). An engine given to
	// OpenEngine was configured by its opener.
	LockTimeout time.Duration
	// MemoryDebounce is how long the watcher waits after the last change
	// of a memory file before reading it: editors write files in several
	// steps. 0 means 200 ms.
	MemoryDebounce time.Duration
	// ReadOnly opens the file without write access (with OpenEngine: never
	// writes through the engine), for inspecting a session: views are
	// computed (compaction decisions are kept in memory only) and every
	// method that would write fails with ErrReadOnly. The file must exist.
	// WatchMemory is not allowed with it.
	ReadOnly bool

	// noSync opens the store without fsync (boltstore.Options.NoSync). Tests
	// of this package that check behaviour, not durability, set it to
	// stay fast; hosts cannot.
	noSync bool
}

const defaultMemoryDebounce = 200 * time.Millisecond

// normalize validates cfg, fills in defaults and resolves the compaction
// settings. Compaction settings are checked by simple's validation, so both
// managers accept and reject the same configs, naming the same fields
// (errors match simple.ErrInvalidConfig).
func (cfg Config) normalize() (Config, view.Config, error) {
	sc, vcfg, err := view.Configure(cfg.Config)
	if err != nil {
		return cfg, vcfg, fmt.Errorf("persistent config: %w", err)
	}
	cfg.Config = sc
	if cfg.LockTimeout < 0 {
		return cfg, vcfg, fmt.Errorf("persistent config: %w", &ctxstore.ConfigError{Field: "LockTimeout", Reason: fmt.Sprintf("negative (%v)", cfg.LockTimeout)})
	}
	if cfg.MemoryDebounce < 0 {
		return cfg, vcfg, fmt.Errorf("persistent config: %w", &ctxstore.ConfigError{Field: "MemoryDebounce", Reason: fmt.Sprintf("negative (%v)", cfg.MemoryDebounce)})
	}
	if cfg.ReadOnly && cfg.WatchMemory {
		return cfg, vcfg, fmt.Errorf("persistent config: %w", &ctxstore.ConfigError{Field: "WatchMemory", Reason: "a read-only manager cannot store new memory-file versions"})
	}
	if cfg.MemoryDebounce == 0 {
		cfg.MemoryDebounce = defaultMemoryDebounce
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	return cfg, vcfg, nil
}
