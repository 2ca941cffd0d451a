package resume

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// File names inside an Amplifier session directory.
const (
	// JSONLName is the transcript the reference context-persistent module
	// appends to; resume imports it once and never writes it.
	JSONLName = "context-messages.jsonl"
	// DBName is the store file resume uses when Options.DBPath is empty:
	// one file per session, beside the JSONL, so a session directory stays
	// self-contained the way the reference's is.
	DBName = "ctxstore.db"
)

// ErrNoSession is matched (errors.Is) when no session matches: the root has
// no sessions, the project is unknown, or the id is not found.
var ErrNoSession = errors.New("resume: no such session")

// SessionDir is one Amplifier session directory,
// <root>/projects/<Project>/sessions/<ID>/.
type SessionDir struct {
	Project string // project slug, e.g. "webapp-3f2a9c1d"
	ID      string // session id (the directory name); also the store's session name
	Dir     string // the session directory
	// JSONL is the path of context-messages.jsonl when it exists, else "".
	JSONL string
	// DB is the path of ctxstore.db in the directory when it exists, else "".
	DB string
	// ModTime is when the session last changed: the newest modification
	// time of its JSONL and ctxstore.db, or of the directory when it holds
	// neither. Appends do not touch a directory's mtime, so the files are
	// the better clock.
	ModTime time.Time
}

// DefaultRoot is the Amplifier home, ~/.amplifier.
func DefaultRoot() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the Amplifier home: %w", err)
	}
	return filepath.Join(home, ".amplifier"), nil
}

// ProjectSlug is the project slug Amplifier uses for a working directory:
// its base name, a dash and the first 8 hex digits of the SHA-256 of the
// path, as the reference module computes it for the current directory.
func ProjectSlug(dir string) string {
	name := filepath.Base(dir)
	if name == "" || name == "." || name == string(filepath.Separator) {
		name = "root"
	}
	sum := sha256.Sum256([]byte(dir))
	return name + "-" + hex.EncodeToString(sum[:])[:8]
}

// Find lists the sessions under root (the Amplifier home; "" means
// DefaultRoot), newest first (ties broken by project and id, so the order is
// stable). project restricts the search to one project slug; "" searches all
// projects. A root without a projects directory holds no sessions and is not
// an error; an unknown project is ErrNoSession.
func Find(root, project string) ([]SessionDir, error) {
	root, err := rootDir(root)
	if err != nil {
		return nil, err
	}
	projectsDir := filepath.Join(root, "projects")
	var projects []string
	if project != "" {
		if !validName(project) {
			return nil, fmt.Errorf("find sessions: project %q is not a directory name", project)
		}
		if _, err := os.Stat(filepath.Join(projectsDir, project)); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("find sessions: project %q under %s: %w", project, projectsDir, ErrNoSession)
		}
		projects = []string{project}
	} else {
		ents, err := os.ReadDir(projectsDir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("find sessions under %s: %w", root, err)
		}
		for _, e := range ents {
			if e.IsDir() {
				projects = append(projects, e.Name())
			}
		}
	}
	var out []SessionDir
	for _, p := range projects {
		sessionsDir := filepath.Join(projectsDir, p, "sessions")
		ents, err := os.ReadDir(sessionsDir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("find sessions of project %s: %w", p, err)
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			sd, err := statSession(p, filepath.Join(sessionsDir, e.Name()))
			if err != nil {
				return nil, err
			}
			out = append(out, sd)
		}
	}
	slices.SortFunc(out, func(a, b SessionDir) int {
		if c := b.ModTime.Compare(a.ModTime); c != 0 {
			return c
		}
		if c := strings.Compare(a.Project, b.Project); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// rootDir is root, or DefaultRoot when root is "": errors name the
// directory searched, never an empty one.
func rootDir(root string) (string, error) {
	if root != "" {
		return root, nil
	}
	return DefaultRoot()
}

// Latest is the most recently modified session under root (see Find).
func Latest(root, project string) (SessionDir, error) {
	root, err := rootDir(root)
	if err != nil {
		return SessionDir{}, err
	}
	all, err := Find(root, project)
	if err != nil {
		return SessionDir{}, err
	}
	if len(all) == 0 {
		where := root
		if project != "" {
			where += " (project " + project + ")"
		}
		return SessionDir{}, fmt.Errorf("latest session under %s: %w", where, ErrNoSession)
	}
	return all[0], nil
}

// Lookup finds the session with the given id under root, in project or in
// any project when project is "". An id present in two projects is an error
// naming both, rather than a silent pick.
func Lookup(root, project, id string) (SessionDir, error) {
	if !validName(id) {
		return SessionDir{}, fmt.Errorf("look up session %q: not a directory name", id)
	}
	root, err := rootDir(root)
	if err != nil {
		return SessionDir{}, err
	}
	all, err := Find(root, project)
	if err != nil {
		return SessionDir{}, err
	}
	var found []SessionDir
	for _, s := range all {
		if s.ID == id {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 0:
		return SessionDir{}, fmt.Errorf("look up session %s under %s: %w", id, root, ErrNoSession)
	case 1:
		return found[0], nil
	default:
		return SessionDir{}, fmt.Errorf("look up session %s: found in projects %s and %s; name the project",
			id, found[0].Project, found[1].Project)
	}
}

// FromDir describes an explicit session directory, which need not follow
// the Amplifier layout; its ID is the directory's base name.
func FromDir(dir string) (SessionDir, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return SessionDir{}, fmt.Errorf("session directory: %w", err)
	}
	if !fi.IsDir() {
		return SessionDir{}, fmt.Errorf("session directory %s: not a directory", dir)
	}
	project := ""
	if parent := filepath.Dir(dir); filepath.Base(parent) == "sessions" {
		project = filepath.Base(filepath.Dir(parent))
	}
	return statSession(project, dir)
}

func statSession(project, dir string) (SessionDir, error) {
	sd := SessionDir{Project: project, ID: filepath.Base(dir), Dir: dir}
	for _, f := range []struct {
		name string
		dst  *string
	}{{JSONLName, &sd.JSONL}, {DBName, &sd.DB}} {
		p := filepath.Join(dir, f.name)
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return sd, fmt.Errorf("session %s: %w", dir, err)
		}
		*f.dst = p
		if fi.ModTime().After(sd.ModTime) {
			sd.ModTime = fi.ModTime()
		}
	}
	if sd.JSONL == "" && sd.DB == "" {
		fi, err := os.Stat(dir)
		if err != nil {
			return sd, fmt.Errorf("session %s: %w", dir, err)
		}
		sd.ModTime = fi.ModTime()
	}
	return sd, nil
}

// validName rejects ids and slugs that would escape their parent directory.
func validName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, `/\`)
}
