package resume

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/hooklog"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage"
	_ "github.com/ctxstore/ctxstore/storage/boltstore" // the file engine, the default

	"github.com/ctxstore/ctxstore/internal/pgdsn"
)

// LatestSession is the Options.Session value that picks the most recently
// modified session (as does "").
const LatestSession = "latest"

// Options says which session to bring back and how to open it.
type Options struct {
	// Root is the Amplifier home; "" means ~/.amplifier.
	Root string
	// Project restricts the search to one project slug; "" searches all.
	Project string
	// Session is the session id, or "" or "latest" for the most recently
	// modified session.
	Session string
	// Path, when set, is an explicit session directory or JSONL file and
	// replaces the search under Root. The session id is Session when set,
	// else the name of the directory (of the file's directory for a file).
	Path string
	// DBPath is the store file, or any target storage.Open accepts (a
	// postgres:// URL in a program that imports storage/pgstore). "" means
	// ctxstore.db in the session directory. With a DBPath, a session id
	// found only in the store (not under Root) is opened too, and "latest"
	// (without a Project) also considers the store's sessions by their last
	// update.
	DBPath string
	// Config configures the manager, as for persistent.Open.
	Config persistent.Config
}

// Report says what Open did, for logs and for the person resuming.
type Report struct {
	Session string `json:"session"`           // the session id, also its name in the store
	Project string `json:"project,omitempty"` // the Amplifier project slug, when known
	DBPath  string `json:"db"`                // the store file, or URL without its password
	Source  string `json:"source,omitempty"`  // the legacy JSONL considered for import ("" when none)
	// Resumed is true when the session held messages once opened (from an
	// earlier run or this import): its history is authoritative and the
	// host's SetMessages will be ignored.
	Resumed bool `json:"resumed"`
	// Messages is the number of messages in the session's current epoch.
	Messages int `json:"messages"`
	// Migrated is the number of messages imported from Source by this call.
	Migrated int `json:"migrated"`
	// Malformed lists the JSONL lines that were skipped and why.
	Malformed []LineError `json:"malformed,omitempty"`
	// Repaired lists the tool-call ids of an interrupted tail that views
	// now answer with a synthetic "[interrupted: no result was recorded]".
	Repaired []string `json:"repaired,omitempty"`
	// Notes are other things a person should know, e.g. why the JSONL was
	// not imported.
	Notes []string `json:"notes,omitempty"`
	// Import is the full ingest report (nil when there was no JSONL).
	Import *IngestReport `json:"import,omitempty"`
}

// String is a short human account, one fact per line.
func (r *Report) String() string {
	var b strings.Builder
	verb := "opened new"
	switch {
	case r.Migrated > 0:
		verb = "imported"
	case r.Resumed:
		verb = "resumed"
	}
	fmt.Fprintf(&b, "%s session %s", verb, r.Session)
	if r.Project != "" {
		fmt.Fprintf(&b, " (project %s)", r.Project)
	}
	fmt.Fprintf(&b, ": %d messages in %s\n", r.Messages, r.DBPath)
	if r.Migrated > 0 {
		fmt.Fprintf(&b, "  migrated %d messages from %s\n", r.Migrated, r.Source)
	}
	if n := len(r.Malformed); n > 0 {
		fmt.Fprintf(&b, "  skipped %d malformed line(s):\n", n)
		for _, e := range r.Malformed {
			fmt.Fprintf(&b, "    %s\n", e)
		}
	}
	if len(r.Repaired) > 0 {
		fmt.Fprintf(&b, "  repaired an interrupted tail: calls %s get %q in views\n",
			strings.Join(r.Repaired, ", "), persistent.InterruptedText)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}

// target is the session Open resolved.
type target struct {
	id, project, dir, jsonl, db string
}

// Open brings a session back: it finds it (Options), ingests its legacy
// context-messages.jsonl into the store if the session is new to the store,
// opens it with persistent.Open and repairs an interrupted tool-call tail.
// The JSONL is never written. The caller closes the Manager.
//
// The import happens before the manager opens, so the manager sees an
// imported session as resumed and ignores the host's (filtered) SetMessages,
// as the contract requires of file-based managers.
//
// When the session is resumed, Config.Hooks gets one context:resume event
// once the repair is done, with session, messages, migrated (bool),
// repaired (calls answered synthetically), ignored_set_messages (false),
// and migrated_messages, malformed_lines and source (the JSONL) besides.
// Malformed lines also raise a context:warning (reason
// "malformed_jsonl_lines").
func Open(ctx context.Context, opts Options) (*persistent.Manager, *Report, error) {
	t, err := resolve(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	rep := &Report{Session: t.id, Project: t.project, DBPath: pgdsn.RedactURL(t.db), Source: t.jsonl}
	// A read-only resume inspects what is stored: no import, no repair.
	if t.jsonl != "" && !opts.Config.ReadOnly {
		ir, err := importInto(ctx, t, opts.Config)
		// A conflict leaves the session usable: what it holds is
		// authoritative, and ir.Skipped (a note below) says what happened.
		if err != nil && !errors.Is(err, ErrIngestConflict) {
			return nil, rep, err
		}
		rep.Import = &ir
		rep.Migrated, rep.Malformed = ir.Imported, ir.Malformed
		if ir.Skipped != "" {
			rep.Notes = append(rep.Notes, ir.Skipped)
		}
		if ir.Continued > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("continued an interrupted import: %d messages were already stored", ir.Continued))
		}
	}
	// persistent.Open announces a resumed session before the repair and
	// without knowing about the import; resume holds that event back and
	// sends one with the whole story once it is known. Later events
	// (an ignored SetMessages among them) pass through untouched.
	cfg := opts.Config
	var opening atomic.Bool
	opening.Store(true)
	if host := cfg.Hooks; host != nil {
		cfg.Hooks = func(ctx context.Context, event string, data map[string]any) {
			if event == ctxstore.EventResume && opening.Load() {
				return
			}
			host(ctx, event, data)
		}
	}
	m, err := persistent.Open(t.db, t.id, cfg)
	opening.Store(false)
	if err != nil {
		return nil, rep, fmt.Errorf("resume session %s: %w", t.id, err)
	}
	fail := func(err error) (*persistent.Manager, *Report, error) {
		_ = m.Close()
		return nil, rep, fmt.Errorf("resume session %s: %w", t.id, err)
	}
	if !opts.Config.ReadOnly {
		if rep.Repaired, err = m.RepairInterruptedTail(ctx); err != nil {
			return fail(err)
		}
	}
	info, err := m.Info(ctx)
	if err != nil {
		return fail(err)
	}
	rep.Messages, rep.Resumed = info.Messages, info.Resumed
	log := cmp.Or(opts.Config.Logger, opts.Config.Config.Logger) // as persistent.Open picks it
	if rep.Resumed {
		hooklog.Emit(ctx, opts.Config.Hooks, log, ctxstore.EventResume, map[string]any{
			"session": t.id, "messages": info.Messages, "migrated": rep.Migrated > 0,
			"repaired": info.Repairs, "ignored_set_messages": false,
			"migrated_messages": rep.Migrated, "malformed_lines": len(rep.Malformed), "source": t.jsonl,
		})
	}
	if len(rep.Malformed) > 0 {
		hooklog.Emit(ctx, opts.Config.Hooks, log, ctxstore.EventWarning, map[string]any{
			"reason":  "malformed_jsonl_lines",
			"message": fmt.Sprintf("skipped %d malformed line(s) of %s (first: %s)", len(rep.Malformed), t.jsonl, rep.Malformed[0]),
			"source":  t.jsonl,
			"lines":   len(rep.Malformed),
		})
	}
	return m, rep, nil
}

// importInto imports t's JSONL with the estimator and size limit the
// manager will use, so stored token estimates match the manager's own.
func importInto(ctx context.Context, t target, cfg persistent.Config) (IngestReport, error) {
	sc, err := cfg.Config.WithDefaults()
	if err != nil {
		return IngestReport{}, fmt.Errorf("resume session %s: %w", t.id, err)
	}
	if storage.Scheme(t.db) == storage.FileScheme {
		if err := os.MkdirAll(filepath.Dir(t.db), 0o700); err != nil {
			return IngestReport{}, fmt.Errorf("resume session %s: %w", t.id, err)
		}
	}
	st, err := storage.Open(ctx, t.db, storage.OpenOptions{LockTimeout: cfg.LockTimeout})
	if err != nil {
		return IngestReport{}, fmt.Errorf("resume session %s: %w", t.id, err)
	}
	defer st.Close()
	ir, err := IngestFile(ctx, st, t.id, t.jsonl, IngestOptions{
		MaxMessageBytes: cmp.Or(sc.MessageLimit(), -1), // 0 there is "no limit"
		Estimator:       sc.Estimator,
	})
	if err != nil {
		return ir, fmt.Errorf("resume session %s: %w", t.id, err)
	}
	return ir, nil
}

// resolve turns Options into one session: explicit path, id, or latest.
func resolve(ctx context.Context, opts Options) (target, error) {
	var t target
	latest := opts.Session == "" || opts.Session == LatestSession
	switch {
	case opts.Path != "":
		fi, err := os.Stat(opts.Path)
		if err != nil {
			return t, fmt.Errorf("resume %s: %w", opts.Path, err)
		}
		dir := opts.Path
		if !fi.IsDir() {
			dir = filepath.Dir(opts.Path)
		}
		sd, err := FromDir(dir)
		if err != nil {
			return t, fmt.Errorf("resume %s: %w", opts.Path, err)
		}
		t = fromSessionDir(sd)
		if !fi.IsDir() {
			t.jsonl = opts.Path
		}
		if !latest {
			t.id = opts.Session
		}
	case latest:
		sd, err := latestSession(ctx, opts)
		if err != nil {
			return t, err
		}
		t = sd
	default:
		sd, err := Lookup(opts.Root, opts.Project, opts.Session)
		switch {
		case err == nil:
			t = fromSessionDir(sd)
		case errors.Is(err, ErrNoSession) && opts.DBPath != "":
			// Not an Amplifier session: it may live in the store alone.
			ok, serr := storeHas(ctx, opts, opts.Session)
			if serr != nil {
				return t, errors.Join(err, serr)
			}
			if !ok {
				return t, fmt.Errorf("%w; nor is it in %s", err, pgdsn.RedactURL(opts.DBPath))
			}
			t.id = opts.Session
		default:
			return t, err
		}
	}
	if opts.DBPath != "" {
		t.db = opts.DBPath
	}
	if t.db == "" {
		t.db = filepath.Join(t.dir, DBName)
	}
	return t, nil
}

func fromSessionDir(sd SessionDir) target {
	return target{id: sd.ID, project: sd.Project, dir: sd.Dir, jsonl: sd.JSONL}
}

// latestSession picks the newest session under Root and, with a DBPath,
// among the store's sessions by their last update, so a session that has
// lived only in the store since its import still counts as recent.
func latestSession(ctx context.Context, opts Options) (target, error) {
	all, err := Find(opts.Root, opts.Project)
	if err != nil {
		return target{}, err
	}
	var best target
	var bestTime time.Time
	for _, sd := range all {
		if sd.ModTime.After(bestTime) || best.id == "" {
			best, bestTime = fromSessionDir(sd), sd.ModTime
		}
	}
	if opts.DBPath != "" && opts.Project == "" {
		infos, err := storeSessions(ctx, opts)
		if err != nil {
			return target{}, err
		}
		for _, in := range infos {
			if in.Updated.After(bestTime) {
				best, bestTime = target{id: in.Name}, in.Updated
				for _, sd := range all {
					if sd.ID == in.Name {
						best = fromSessionDir(sd)
					}
				}
			}
		}
	}
	if best.id == "" {
		where, err := rootDir(opts.Root)
		if err != nil {
			return target{}, err
		}
		if opts.DBPath != "" && opts.Project == "" {
			where += " or in " + pgdsn.RedactURL(opts.DBPath)
		}
		return target{}, fmt.Errorf("resume the latest session under %s: %w", where, ErrNoSession)
	}
	return best, nil
}

// storeSessions lists the sessions of opts.DBPath; a missing file has none.
func storeSessions(ctx context.Context, opts Options) ([]storage.SessionInfo, error) {
	if storage.Scheme(opts.DBPath) == storage.FileScheme {
		if _, err := os.Stat(opts.DBPath); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	}
	st, err := storage.Open(ctx, opts.DBPath, storage.OpenOptions{LockTimeout: opts.Config.LockTimeout, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("list sessions of %s: %w", pgdsn.RedactURL(opts.DBPath), err)
	}
	defer st.Close()
	infos, err := st.Sessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sessions of %s: %w", pgdsn.RedactURL(opts.DBPath), err)
	}
	return infos, nil
}

func storeHas(ctx context.Context, opts Options, id string) (bool, error) {
	infos, err := storeSessions(ctx, opts)
	if err != nil {
		return false, err
	}
	for _, in := range infos {
		if in.Name == id {
			return true, nil
		}
	}
	return false, nil
}
