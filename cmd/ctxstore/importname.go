package main

import (
	"errors"
	"flag"
	"fmt"
	"unicode/utf8"

	"github.com/ctxstore/ctxstore/resume"
	"github.com/ctxstore/ctxstore/storage/export"
)

// importFlags are import's flags.
type importFlags struct {
	session      string // --session: a transcript's session (--as's older name)
	as           string // --as: the one session of an export, or a transcript's
	prefix       string // --prefix: before every imported session's name
	skipExisting bool
	skipBad      bool
	// transcript: the command is ingest, which reads transcripts only.
	transcript bool
}

// define defines the flags of import and ingest on fs.
func (o *importFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&o.session, "session", "", "session `NAME` for a transcript (as --as)")
	fs.StringVar(&o.as, "as", "", "import into session `NAME`: an export's one session, or a transcript")
	fs.StringVar(&o.prefix, "prefix", "", "put `P` before the name of every imported session")
	fs.BoolVar(&o.skipExisting, "skip-existing", false, "leave sessions that already exist alone")
	fs.BoolVar(&o.skipBad, "skip-bad", false, "succeed although malformed transcript lines were skipped")
}

// errSkippedLines means a transcript import skipped malformed lines
// without --skip-bad: the rest was imported.
var errSkippedLines = errors.New("malformed lines skipped")

// transcriptName checks the naming flags and returns the session a
// transcript goes into ("" to derive it from the file name).
func (o importFlags) transcriptName() (string, bool, error) {
	switch {
	case o.session != "" && o.as != "" && o.session != o.as:
		return "", false, usagef("--session %q and --as %q name two sessions: give one", o.session, o.as)
	case o.as != "" && o.prefix != "":
		return "", false, usagef("--as names the session itself; --prefix is for importing several: give one")
	case !utf8.ValidString(o.as + o.session + o.prefix):
		return "", false, usagef("session names must be valid UTF-8")
	}
	name := o.as
	if name == "" && o.session != "" {
		name = o.prefix + o.session
	}
	return name, o.skipExisting, nil
}

// exportRename returns how export.Read names the sessions of the export
// whose header is first: nil keeps their names. --as takes an export of
// exactly one session (the header says how many).
func (o importFlags) exportRename(h export.Header, label string) (func(string) (string, error), error) {
	if o.session != "" && o.as == "" {
		return nil, usagef("--session is for transcripts; %s is a ctxstore export, which names its sessions: rename its one session with --as NAME, or every session with --prefix P", label)
	}
	switch {
	case o.as != "":
		if h.Sessions != 1 {
			return nil, usagef("--as names one session, and %s holds %d: import them under new names with --prefix P instead", label, h.Sessions)
		}
		used := false
		return func(name string) (string, error) {
			if used {
				return "", fmt.Errorf("a second session (%q) in an export whose header announced one: nothing of it was imported under --as %q", name, o.as)
			}
			used = true
			return o.as, nil
		}, nil
	case o.prefix != "":
		return func(name string) (string, error) { return o.prefix + name, nil }, nil
	}
	return nil, nil
}

// checkSkipped fails a transcript import that skipped malformed lines,
// unless --skip-bad: the lines are listed in the report, the rest is
// imported, and a script must not take the import for complete.
func (o importFlags) checkSkipped(label string, rep resume.IngestReport) error {
	if len(rep.Malformed) == 0 || o.skipBad {
		return nil
	}
	return withSentinel(fmt.Errorf("import %s into session %q: %d malformed line(s) skipped (listed on stdout); the other messages were imported, and importing the file again adds nothing; --skip-bad makes skipped lines no failure",
		label, rep.Session, len(rep.Malformed)), errSkippedLines)
}
