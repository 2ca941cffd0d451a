package ctxstore

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxstore/ctxstore/internal/textsafe"
)

// ReportOptions tunes View.Report.
type ReportOptions struct {
	// Full prints every message's whole text under its row instead of one
	// line each.
	Full bool
	// Warnings are printed after the summary, one "warning: " line each:
	// the messages of the EventWarning events the request emitted, which
	// a host collects with Config.Hooks.
	Warnings []string
}

// Report returns the explanation of v for a person, as `ctxstore view`
// prints it: the history and the budget, how many messages and tokens the
// view holds, what compaction did, the stored messages not sent as stored,
// then one row per message of the view with its seq ("-" for one the view
// added), form, role, tokens and text. Text from messages is escaped so
// that printing the report on a terminal is safe.
func (v View) Report(opt ReportOptions) string {
	var b strings.Builder
	v.writeSummary(&b, opt.Warnings)
	b.WriteByte('\n')
	for i, m := range v.Messages {
		var o Origin
		if i < len(v.Origins) {
			o = v.Origins[i]
		}
		seq := "-"
		if o.Seq > 0 {
			seq = fmt.Sprintf("#%d", o.Seq)
		}
		if opt.Full {
			fmt.Fprintf(&b, "%-7s %-9s %-9s %6d tok\n", seq, o.Form, m.Role(), o.Tokens)
			for _, l := range strings.Split(textsafe.Escape(m.Text(), true), "\n") {
				if l != "" {
					l = "    " + l
				}
				b.WriteString(l + "\n")
			}
			continue
		}
		fmt.Fprintf(&b, "%-7s %-9s %-9s %6d tok  %s\n", seq, o.Form, m.Role(), o.Tokens, messageLine(m, 90))
	}
	return b.String()
}

// writeSummary writes the report's lines before the message rows.
func (v View) writeSummary(w io.Writer, warnings []string) {
	name := ""
	if v.Session != "" {
		name = fmt.Sprintf("session %q, epoch %d: ", v.Session, v.Epoch)
	}
	fmt.Fprintf(w, "%sfull history %d messages, %d tokens (%s)\n", name, v.HistoryMessages, v.HistoryTokens, v.Counter)
	if l := v.Lineage; l != nil && l.ForkedFrom != "" {
		fmt.Fprintf(w, "forked from session %s at seq %d\n", textsafe.Escape(strconv.Quote(l.ForkedFrom), false), l.ForkSeq)
	}
	if l := v.Lineage; l != nil && l.RewoundFrom != 0 {
		fmt.Fprintf(w, "rewound: this epoch starts with epoch %d up to seq %d\n", l.RewoundFrom, l.RewindSeq)
	}
	fmt.Fprintf(w, "budget %d tokens (%s): view %d messages, %d tokens", v.Budget, v.BudgetSource, len(v.Messages), v.Tokens)
	switch {
	case v.OverBudget:
		fmt.Fprintf(w, ": OVER BUDGET, the floor alone does not fit (system messages, last user message, trailing tool group)\n")
	case v.Level == 0:
		fmt.Fprintf(w, " (fits: nothing compacted)\n")
	default:
		fmt.Fprintln(w)
	}
	if v.Level != 0 {
		fmt.Fprintf(w, "compaction level %d (%s): removed %d, truncated %d, stubbed %d, summarized %d\n",
			v.Level, levelName(v.Level), v.Removed, v.Truncated, v.Stubbed, v.Summarized)
	}
	switch {
	case v.Escalated:
		fmt.Fprintf(w, "this request escalated: it compacted further than the requests before it\n")
	case v.Reused:
		fmt.Fprintf(w, "saved compaction decisions reused\n")
	}
	for _, msg := range warnings {
		fmt.Fprintf(w, "warning: %s\n", textsafe.Escape(msg, false))
	}
	if ranges := v.NotSent(); len(ranges) > 0 {
		var parts []string
		n := uint64(0)
		for _, r := range ranges {
			n += r[1] - r[0] + 1
			if len(parts) < 12 {
				if r[0] == r[1] {
					parts = append(parts, fmt.Sprintf("#%d", r[0]))
				} else {
					parts = append(parts, fmt.Sprintf("#%d-#%d", r[0], r[1]))
				}
			}
		}
		more := ""
		if len(ranges) > len(parts) {
			more = ", ..."
		}
		fmt.Fprintf(w, "not sent as stored (removed, truncated, stubbed or summarized): %d messages: %s%s\n", n, strings.Join(parts, ", "), more)
	}
}

// NotSent returns the seq ranges [first, last] of the history's stored
// messages that the view does not carry as they are stored: removed,
// truncated, stubbed or summarized. It is nil when every one is sent as
// stored, or when nothing is stored yet.
func (v View) NotSent() [][2]uint64 {
	if v.LastSeq == 0 {
		return nil
	}
	var sent []uint64
	for _, o := range v.Origins {
		if o.Seq > 0 && (o.Form == FormWhole || o.Form == FormMemory) {
			sent = append(sent, o.Seq)
		}
	}
	slices.Sort(sent)
	var out [][2]uint64
	next := v.FirstSeq
	for _, k := range append(sent, v.LastSeq+1) {
		if k > next {
			out = append(out, [2]uint64{next, k - 1})
		}
		next = max(next, k+1)
	}
	return out
}

// levelName says what a compaction level does.
func levelName(level int) string {
	switch level {
	case 0:
		return "none"
	case 1:
		return "old tool results truncated"
	case 2:
		return "old messages removed"
	case 3:
		return "long user messages stubbed"
	case 4:
		return "protected messages cut to fit, last resort"
	}
	return "?"
}

// messageLine is m on one line for the report's rows.
func messageLine(m Message, max int) string {
	var calls []textsafe.Call
	for _, c := range m.calls {
		calls = append(calls, textsafe.Call{Name: c.Name, Args: c.Arguments})
	}
	return textsafe.Line(m.Text(), calls, max)
}
