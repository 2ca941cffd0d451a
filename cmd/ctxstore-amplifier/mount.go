package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/amplifier"
	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
	"github.com/ctxstore/ctxstore/internal/pgdsn"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/pgstore"
)

// serverOpenTimeout bounds connecting to a PostgreSQL server at Mount.
const serverOpenTimeout = 30 * time.Second

func newServer(logger *slog.Logger, getenv func(string) string) *amplifier.Server {
	mount := func(ctx context.Context, req *pb.MountRequest) (ctxstore.Manager, error) {
		return mountSession(ctx, req, logger, getenv)
	}
	return amplifier.NewServer(mount, amplifier.Options{Logger: logger})
}

// mountSession opens the session a Mount's config names.
func mountSession(ctx context.Context, req *pb.MountRequest, logger *slog.Logger, getenv func(string) string) (ctxstore.Manager, error) {
	cfg, err := amplifier.ParseConfig(req.GetConfig())
	if err != nil {
		return nil, err
	}
	if cfg.DB, err = dbPath(cfg.DB, getenv); err != nil {
		return nil, err
	}
	if cfg.Session == "" {
		cfg.Session = newSessionName()
		logger.Info("new session", "session", cfg.Session, "db", pgdsn.Redact(cfg.DB))
	}
	cfg.Persistent.Logger = logger
	var eng storage.Engine
	if pgdsn.Is(cfg.DB) {
		if eng, err = openServer(ctx, cfg.DB); err != nil {
			return nil, err
		}
		cfg.Engine = eng
	} else if err := os.MkdirAll(filepath.Dir(cfg.DB), 0o700); err != nil {
		return nil, fmt.Errorf("database directory: %w", err)
	}
	s, err := amplifier.OpenSession(cfg)
	if err != nil {
		if eng != nil {
			_ = eng.Close()
		}
		return nil, err
	}
	logger.Info("mounted", "session", s.Name(), "db", pgdsn.Redact(cfg.DB), "module_id", req.GetModuleId(), "resumed", s.Resumed())
	return &session{Session: s, eng: eng}, nil
}

// session is the mounted session and the PostgreSQL engine it was opened
// on, if any, which it closes after itself.
type session struct {
	*amplifier.Session
	eng storage.Engine
}

func (s *session) Close() error {
	err := s.Session.Close()
	if s.eng != nil {
		err = errors.Join(err, s.eng.Close())
	}
	return err
}

// dbPath resolves the database: the config's db, $CTXSTORE_DB, then the
// XDG data directory (as the ctxstore command does).
func dbPath(db string, getenv func(string) string) (string, error) {
	if db != "" {
		return db, nil
	}
	if p := getenv("CTXSTORE_DB"); p != "" {
		return p, nil
	}
	dir := getenv("XDG_DATA_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home := getenv("HOME")
		if home == "" {
			return "", &ctxstore.ConfigError{Field: "db", Reason: "not given, $CTXSTORE_DB is not set and there is no home directory to default to"}
		}
		dir = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(dir, "ctxstore", "ctxstore.db"), nil
}

// openServer opens the PostgreSQL database a URL names; its "schema"
// parameter picks the schema (default pgstore.DefaultSchema).
func openServer(ctx context.Context, dsn string) (storage.Engine, error) {
	conn, schema, found, err := pgdsn.Cut(dsn, "schema")
	if err != nil {
		return nil, &ctxstore.ConfigError{Field: "db", Reason: fmt.Sprintf("the parameters of %s are not validly percent-encoded: %v", pgdsn.Redact(dsn), err)}
	}
	switch {
	case !found:
		conn, schema = dsn, pgstore.DefaultSchema
	case schema == "":
		return nil, &ctxstore.ConfigError{Field: "db", Reason: fmt.Sprintf("the schema= parameter of %s is empty: name a schema, or leave it out for %q", pgdsn.Redact(dsn), pgstore.DefaultSchema)}
	}
	ctx, cancel := context.WithTimeout(ctx, serverOpenTimeout)
	defer cancel()
	st, err := pgstore.Open(ctx, conn, pgstore.Options{Schema: schema})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", pgdsn.Redact(dsn), err)
	}
	return st, nil
}

// newSessionName names a session no other has: the time and 6 random
// bytes, sortable by start.
func newSessionName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "amplifier-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}
