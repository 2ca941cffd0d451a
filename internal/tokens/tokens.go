// Package tokens holds ctxstore's default token estimator [V8].
//
// The estimate is about one token per four bytes of the message's JSON, the
// rule of thumb the reference uses, except that media payloads (images,
// audio, documents, files, and any block carrying base64 "source" data)
// count as a flat MediaTokens each: providers bill them by size in pixels
// or seconds, never by the length of their base64 text, and counting the
// base64 would make one screenshot look like a whole conversation.
//
// Estimates are deterministic and the estimator is stateless, so it is safe
// for concurrent use. Managers estimate each message once, when it is
// appended, and keep the number.
package tokens

import (
	"bytes"
	"encoding/json"
	"math"
	"sync/atomic"

	"github.com/ctxstore/ctxstore"
)

const (
	// CharsPerToken is the divisor applied to JSON bytes.
	CharsPerToken = 4
	// MediaTokens is the flat cost of one image, audio clip, document or
	// file block.
	MediaTokens = 1600
)

// Estimator is the default estimator. The zero value is ready to use.
type Estimator struct{}

// Default returns the default estimator.
func Default() ctxstore.Estimator { return Estimator{} }

// Estimate returns ⌈(JSON bytes − media bytes) / CharsPerToken⌉ +
// MediaTokens per media block; at least 1 for a non-empty message.
func (Estimator) Estimate(m ctxstore.Message) int {
	n := m.Size()
	if n == 0 {
		return 0
	}
	media, mediaBytes := 0, 0
	if c := m.Content(); len(c) > 0 && c[0] == '[' && mayHoldMedia(c) {
		media, mediaBytes = scanMedia(c)
	}
	chars := n - mediaBytes
	if chars < 0 {
		chars = 0
	}
	t := (chars+CharsPerToken-1)/CharsPerToken + media*MediaTokens
	if t < 1 {
		t = 1
	}
	return t
}

// mayHoldMedia is a cheap pre-check so that plain text blocks are not
// decoded at all.
func mayHoldMedia(c []byte) bool {
	for _, k := range mediaHints {
		if bytes.Contains(c, k) {
			return true
		}
	}
	return false
}

var mediaHints = [][]byte{
	[]byte(`"image`), []byte(`"audio`), []byte(`"input_audio`), []byte(`"document`),
	[]byte(`"file`), []byte(`"source`), []byte(`"tool_result`),
}

// mediaTypes are the content-block types counted as media.
func isMediaType(t string) bool {
	switch t {
	case "image", "image_url", "input_image", "input_audio", "audio", "document", "file", "input_file":
		return true
	}
	return false
}

// scanMedia counts media blocks in a content array (descending into
// tool_result blocks, whose content may hold images) and the bytes they
// occupy in the JSON.
func scanMedia(content []byte) (count, size int) {
	var blocks []json.RawMessage
	if json.Unmarshal(content, &blocks) != nil {
		return 0, 0
	}
	for _, b := range blocks {
		var blk struct {
			Type    string          `json:"type"`
			Source  json.RawMessage `json:"source"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(b, &blk) != nil {
			continue
		}
		switch {
		case isMediaType(blk.Type) || hasBase64Source(blk.Source):
			count++
			size += len(b)
		case blk.Type == "tool_result" && len(blk.Content) > 0 && blk.Content[0] == '[':
			c, s := scanMedia(blk.Content)
			count += c
			size += s
		}
	}
	return count, size
}

func hasBase64Source(src json.RawMessage) bool {
	if len(src) == 0 || src[0] != '{' {
		return false
	}
	var s struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(src, &s) != nil {
		return false
	}
	return s.Type == "base64" || len(s.Data) > 0
}

// Calibrated scales a base estimator by the ratio of real to estimated
// tokens the host reports after responses. It is safe for concurrent use.
// Managers keep each message's estimate from the time it was appended, so
// a new ratio affects messages appended afterwards; calibrate early (or
// rebuild the manager) for a consistent history.
type Calibrated struct {
	base  ctxstore.Estimator
	ratio atomic.Uint64 // float64 bits; 0 means 1.0
}

// NewCalibrated wraps base (nil = Default) with a ratio of 1.
func NewCalibrated(base ctxstore.Estimator) *Calibrated {
	if base == nil {
		base = Default()
	}
	return &Calibrated{base: base}
}

// Report records that a request estimated at estimated tokens actually
// used actual tokens (the provider's usage). The ratio moves a quarter of
// the way towards actual/estimated and stays within [0.25, 4], so one odd
// response cannot wreck the estimates.
func (c *Calibrated) Report(estimated, actual int) {
	if estimated <= 0 || actual <= 0 {
		return
	}
	obs := float64(actual) / float64(estimated)
	for {
		old := c.ratio.Load()
		r := 1.0 // the ratio old stands for, read once so the CAS below guards it
		if old != 0 {
			r = math.Float64frombits(old)
		}
		r += (obs*r - r) / 4
		r = math.Min(4, math.Max(0.25, r))
		if c.ratio.CompareAndSwap(old, math.Float64bits(r)) {
			return
		}
	}
}

// Ratio is the current real/estimated ratio (1 until Report is called).
func (c *Calibrated) Ratio() float64 {
	b := c.ratio.Load()
	if b == 0 {
		return 1
	}
	return math.Float64frombits(b)
}

// Estimate is the base estimate scaled by Ratio, rounded up.
func (c *Calibrated) Estimate(m ctxstore.Message) int {
	return int(math.Ceil(float64(c.base.Estimate(m)) * c.Ratio()))
}
