package salvage

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Report says what Salvage copied and what it could not.
type Report struct {
	Source string `json:"source"`
	Dest   string `json:"dest"`
	// Meta is the meta page the walk started from, or why none could be used.
	Meta string `json:"meta"`
	// Recovered counts messages written to Dest; Skipped those found but not
	// written (SkipReasons says why); Missing those the file's own evidence
	// (the sessions' metadata, higher seqs found) says existed but that were
	// not found at all. When MissingUnknown is set, Missing is only a lower
	// bound: a session's metadata was lost, or pages were cut off the file,
	// so messages after the last one found cannot be counted.
	Recovered      int            `json:"recovered"`
	Skipped        int            `json:"skipped"`
	Missing        int            `json:"missing"`
	MissingUnknown bool           `json:"missing_unknown,omitempty"`
	SkipReasons    map[string]int `json:"skip_reasons,omitempty"`
	// Orphans counts recovered messages found by scanning pages the tree no
	// longer reaches (their parent pages are damaged). Their envelopes name
	// their session (layout.Envelope version 2 on); Unattributed counts those that
	// do not (version 1) and could not be tied to their session otherwise:
	// they are in sessions named "salvaged-orphans-N".
	Orphans      int `json:"orphans"`
	Unattributed int `json:"unattributed"`
	// Derived counts derived records (compaction decisions, summaries) copied.
	Derived int `json:"derived"`
	// Log is the write-ahead log read beside the file (PATH-wal), if there
	// was one; FromLog counts the messages recovered from it that the file
	// did not hold (acknowledged appends not yet applied to the file),
	// included in Recovered.
	Log      string            `json:"log,omitempty"`
	FromLog  int               `json:"from_log"`
	Sessions []Session         `json:"sessions"`
	Damage   []string          `json:"damage,omitempty"` // first storage.MaxReported problems stepped around
	Damaged  int               `json:"damaged"`          // how many problems in all
	Notes    []string          `json:"notes,omitempty"`
	byReason map[string]string // reason -> first example, for String
}

// Session is the part of a Report about one session.
type Session struct {
	Name      string `json:"name"`
	Recovered int    `json:"recovered"`
	Skipped   int    `json:"skipped"`
	Missing   int    `json:"missing"`
	// MissingUnknown reports that Missing is a lower bound: the session's
	// metadata was lost, so messages after the last one found cannot be
	// counted.
	MissingUnknown bool `json:"missing_unknown,omitempty"`
	// MetaOK reports that the session's stored metadata (epochs, title, times)
	// was readable; otherwise it was rebuilt from the messages. A session
	// found only in the log has none to lose: MetaOK is set.
	MetaOK bool `json:"meta_ok"`
	// FromLog counts the session's messages recovered from the log,
	// included in Recovered.
	FromLog int `json:"from_log,omitempty"`
	// Error is why the session could not be written to Dest, if it could not.
	Error string `json:"error,omitempty"`
}

// OK reports that every message the source holds was copied.
func (r *Report) OK() bool {
	return r.Skipped == 0 && r.Missing == 0 && !r.MissingUnknown && r.Damaged == 0
}

// missingText is "N missing", or "at least N missing" when unknown is set.
func missingText(n int, unknown bool) string {
	switch {
	case unknown && n == 0:
		return "an unknown number missing"
	case unknown:
		return fmt.Sprintf("at least %d missing", n)
	}
	return fmt.Sprintf("%d missing", n)
}

// String is a human summary, one finding a line.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "salvage %s -> %s: %d messages recovered in %d sessions, %d skipped, %s\n",
		r.Source, r.Dest, r.Recovered, len(r.Sessions), r.Skipped, missingText(r.Missing, r.MissingUnknown))
	fmt.Fprintf(&b, "  started from: %s\n", r.Meta)
	if r.Orphans > 0 {
		fmt.Fprintf(&b, "  %d messages found on pages the tree no longer reaches (%d of them in salvaged-orphans-N sessions)\n", r.Orphans, r.Unattributed)
	}
	if r.Derived > 0 {
		fmt.Fprintf(&b, "  %d derived records copied\n", r.Derived)
	}
	if r.FromLog > 0 {
		fmt.Fprintf(&b, "  %d messages recovered from the log %s (appends not yet applied to the file)\n", r.FromLog, r.Log)
	}
	for _, reason := range slices.Sorted(maps.Keys(r.SkipReasons)) {
		fmt.Fprintf(&b, "  skipped %d: %s\n", r.SkipReasons[reason], reason)
		if ex := r.byReason[reason]; ex != "" {
			fmt.Fprintf(&b, "    e.g. %s\n", ex)
		}
	}
	for _, s := range r.Sessions {
		fmt.Fprintf(&b, "  session %q: %d recovered, %d skipped, %s", s.Name, s.Recovered, s.Skipped, missingText(s.Missing, s.MissingUnknown))
		if s.FromLog > 0 {
			fmt.Fprintf(&b, " (%d of them from the log)", s.FromLog)
		}
		if !s.MetaOK {
			b.WriteString(", metadata lost and rebuilt")
		}
		if s.Error != "" {
			fmt.Fprintf(&b, ", NOT WRITTEN: %s", s.Error)
		}
		b.WriteByte('\n')
	}
	for _, d := range r.Damage {
		fmt.Fprintf(&b, "  damage: %s\n", d)
	}
	if r.Damaged > len(r.Damage) {
		fmt.Fprintf(&b, "  ... and %d more\n", r.Damaged-len(r.Damage))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}
