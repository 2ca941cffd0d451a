package tokens

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ctxstore/ctxstore"
)

func TestEstimate(t *testing.T) {
	big := strings.Repeat("A", 400_000) // base64 of a large image
	tests := []struct {
		name string
		json string
		want int
	}{
		{"text", `{"role":"user","content":"12345678"}`, 9}, // 36 bytes
		{"empty object message", `{"role":"user"}`, 4},
		{"anthropic image", `{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + big + `"}}]}`, -1},
		{"openai image_url", `{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + big + `"}}]}`, -1},
		{"audio", `{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"` + big + `","format":"wav"}}]}`, -1},
		{"document", `{"role":"user","content":[{"type":"document","source":{"type":"base64","data":"` + big + `"}}]}`, -1},
		{"unknown block with base64 source", `{"role":"user","content":[{"type":"x","source":{"type":"base64","data":"` + big + `"}}]}`, -1},
		{"image inside tool_result", `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{"type":"base64","data":"` + big + `"}}]}]}`,
			-1},
		{"two images and text", `{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","data":"` + big + `"}},{"type":"image","source":{"type":"base64","data":"` + big + `"}}]}`,
			-2},
		{"text mentioning image is text", `{"role":"user","content":[{"type":"text","text":"\"image"}]}`, 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ctxstore.MustParseMessage([]byte(tt.json))
			got := Estimator{}.Estimate(m)
			if tt.want < 0 { // -k: k media blocks plus a few tokens of JSON around them
				if rest := got + tt.want*MediaTokens; rest < 1 || rest > 40 {
					t.Errorf("Estimate = %d, want %d media blocks + a few tokens", got, -tt.want)
				}
				return
			}
			if got != tt.want {
				t.Errorf("Estimate = %d, want %d (size %d)", got, tt.want, m.Size())
			}
		})
	}
}

func TestEstimateZeroMessage(t *testing.T) {
	if got := (Estimator{}).Estimate(ctxstore.Message{}); got != 0 {
		t.Errorf("zero message = %d, want 0", got)
	}
}

func TestEstimateConcurrentDeterministic(t *testing.T) {
	m := ctxstore.MustParseMessage([]byte(`{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"base64","data":"QUJD"}}]}`))
	want := Default().Estimate(m)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if got := Default().Estimate(m); got != want {
					t.Errorf("got %d, want %d", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCalibrated(t *testing.T) {
	c := NewCalibrated(nil)
	m := ctxstore.NewMessage("user", strings.Repeat("x", 400))
	base := Default().Estimate(m)
	if got := c.Estimate(m); got != base {
		t.Fatalf("uncalibrated = %d, want %d", got, base)
	}
	for range 50 {
		c.Report(c.Estimate(m), 2*c.Estimate(m)*base/c.Estimate(m))
	}
	if r := c.Ratio(); r < 1.9 || r > 2.1 {
		t.Errorf("ratio after reports of 2x = %v, want about 2", r)
	}
	for range 100 {
		c.Report(1, 1000)
	}
	if r := c.Ratio(); r != 4 {
		t.Errorf("ratio is clamped at 4, got %v", r)
	}
	c.Report(0, 5) // ignored
	if r := c.Ratio(); r != 4 {
		t.Errorf("bad report changed ratio to %v", r)
	}
}

func BenchmarkEstimate(b *testing.B) {
	for _, size := range []int{100, 10_000} {
		m := ctxstore.NewMessage("user", strings.Repeat("y", size))
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			for b.Loop() {
				Default().Estimate(m)
			}
		})
	}
}
