package termio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/ctxstore/ctxstore"
)

// ReadMessages reads messages from r: a single JSON object (it may span
// lines), a JSON array of objects, or JSON Lines. Every message is validated;
// if any fails, the error lists each bad line and no message is returned.
func ReadMessages(r io.Reader, name string, maxBytes int) ([]ctxstore.Message, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, nil
	}
	if trimmed[0] == '[' && json.Valid(trimmed) {
		var items []json.RawMessage
		if err := json.Unmarshal(trimmed, &items); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		var msgs []ctxstore.Message
		var problems []string
		for i, it := range items {
			m, err := checkMessage(it, maxBytes)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: element %d: %v", name, i, err))
				continue
			}
			msgs = append(msgs, m)
		}
		return msgs, problemsError(problems)
	}
	if trimmed[0] == '{' && json.Valid(trimmed) {
		// One object, maybe pretty-printed over several lines.
		m, err := checkMessage(trimmed, maxBytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w; nothing was added", name, err)
		}
		return []ctxstore.Message{m}, nil
	}
	var msgs []ctxstore.Message
	var problems []string
	for no, line := range bytes.Split(data, []byte{'\n'}) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		m, err := checkMessage(line, maxBytes)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s line %d: %v", name, no+1, err))
			continue
		}
		msgs = append(msgs, m)
	}
	return msgs, problemsError(problems)
}

// checkMessage parses and validates one message.
func checkMessage(b []byte, maxBytes int) (ctxstore.Message, error) {
	m, err := ctxstore.ParseMessage(b)
	if err != nil {
		return m, err
	}
	return m, m.ValidateSize(maxBytes)
}

// problemsError is the error of problems: nil for none.
func problemsError(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return &InvalidMessages{Problems: problems}
}

// InvalidMessages is ReadMessages's error for input holding invalid
// messages: each problem names its line (or array element). It matches
// ctxstore.ErrInvalidMessage.
type InvalidMessages struct {
	Problems []string
}

// Error lists the first 20 problems.
func (e *InvalidMessages) Error() string {
	const show = 20
	msg := strings.Join(e.Problems[:min(len(e.Problems), show)], "\n  ")
	if len(e.Problems) > show {
		msg += fmt.Sprintf("\n  ... and %d more", len(e.Problems)-show)
	}
	return fmt.Sprintf("%d invalid message(s); nothing was added:\n  %s", len(e.Problems), msg)
}

// Unwrap is ctxstore.ErrInvalidMessage.
func (e *InvalidMessages) Unwrap() error { return ctxstore.ErrInvalidMessage }
