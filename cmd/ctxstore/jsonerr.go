package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"strings"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// jsonErrorOut is an error as --json writes it on stderr: one JSON object
// on one line. Error is a code scripts branch on; its values are stable:
//
//	usage            a mistake in the command line (exit 2)
//	unknown_command  no such command (exit 2)
//	not_found        no such session, epoch or database
//	locked           another process holds the file
//	corrupt          the file is damaged
//	invalid_message  a message was refused; nothing was stored
//	invalid_import   an export was refused; nothing of its session was stored
//	conflict         another writer changed the session in between
//	outcome_unknown  a write failed after it may have reached the disk
//	read_only        a write to a read-only database
//	no_schema        no (current) ctxstore tables in the PostgreSQL schema
//	permission       the operating system refused access
//	interrupted      stopped by a signal
//	skipped_lines    a transcript import skipped malformed lines (without --skip-bad)
//	error            anything else
type jsonErrorOut struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Command string `json:"command,omitempty"`
	Usage   string `json:"usage,omitempty"` // for a usage error, the command's usage line
	Exit    int    `json:"exit"`
}

// jsonError writes err as one JSON object on stderr and returns the exit
// status: 2 for a usage error, else 1.
func (a *app) jsonError(cmdName string, err error) int {
	out := jsonErrorOut{Error: errorCode(err), Message: err.Error(), Command: cmdName, Exit: 1}
	if _, ok := errors.AsType[*usageError](err); ok {
		out.Exit = 2
		for _, c := range commands() {
			if c.name == cmdName {
				out.Usage = "ctxstore " + c.name + " " + c.usage
			}
		}
	}
	b, _ := json.Marshal(out) // strings only: always encodes
	a.stderr.Write(append(b, '\n'))
	return out.Exit
}

// errorCode is the --json code of err (see jsonErrorOut).
func errorCode(err error) string {
	if ue, ok := errors.AsType[*usageError](err); ok {
		if ue.code != "" {
			return ue.code
		}
		return "usage"
	}
	for _, c := range []struct {
		target error
		code   string
	}{
		{storage.ErrNotFound, "not_found"},
		{storage.ErrLocked, "locked"},
		{storage.ErrCorrupt, "corrupt"},
		{ctxstore.ErrInvalidMessage, "invalid_message"},
		{storage.ErrInvalidImport, "invalid_import"},
		{storage.ErrConflict, "conflict"},
		{storage.ErrOutcomeUnknown, "outcome_unknown"},
		{storage.ErrReadOnly, "read_only"},
		{storage.ErrNoSchema, "no_schema"},
		{fs.ErrPermission, "permission"},
		{fs.ErrNotExist, "not_found"},
		{context.Canceled, "interrupted"},
		{errSkippedLines, "skipped_lines"},
	} {
		if errors.Is(err, c.target) {
			return c.code
		}
	}
	return "error"
}

// wantsJSON reports whether args ask for --json, for errors met before the
// flags are parsed (an unknown command, a bad global flag).
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if v, ok := strings.CutPrefix(strings.TrimLeft(a, "-"), "json"); ok && strings.HasPrefix(a, "-") && (v == "" || v == "=true" || v == "=1") {
			return true
		}
	}
	return false
}

// codedError keeps a sentinel error (for errors.Is and --json codes)
// under a message written for people that does not quote it.
type codedError struct {
	msg      string
	sentinel error
}

func (e *codedError) Error() string { return e.msg }
func (e *codedError) Unwrap() error { return e.sentinel }

// withSentinel returns err with sentinel among what it unwraps to, its
// message unchanged.
func withSentinel(err, sentinel error) error {
	return &codedError{msg: err.Error(), sentinel: sentinel}
}
