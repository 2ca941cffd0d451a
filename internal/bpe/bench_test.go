package bpe

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// benchTexts are kinds of text an agent's context holds, about 2 KiB each.
func benchTexts() map[string]string {
	r := rand.New(rand.NewPCG(3, 4))
	fill := func(gen func(b *strings.Builder)) string {
		var b strings.Builder
		for b.Len() < 2048 {
			gen(&b)
		}
		return b.String()
	}
	words := strings.Fields("the model reads a file and answers with context budget tokens while the agent waits for its tools to finish running")
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	return map[string]string{
		"prose": fill(func(b *strings.Builder) { b.WriteString(words[r.IntN(len(words))] + " ") }),
		"code": fill(func(b *strings.Builder) {
			b.WriteString("\tif err := s.store.Append(ctx, session, rec); err != nil {\n\t\treturn fmt.Errorf(\"append %d: %w\", i, err)\n\t}\n")
		}),
		"logs": fill(func(b *strings.Builder) {
			b.WriteString("2026-11-23T16:27:22.123Z INFO  request id=3f2a9c1e-8b7d-4e6f-a5c4-1d2e3f4a5b6c status=200 dur=12.5ms\n")
		}),
		"json": fill(func(b *strings.Builder) {
			b.WriteString(`{"name":"cpu","value":0.7342,"ts":"2026-11-23T16:27:22Z","tags":{"host":"web-1"}},`)
		}),
		"base64": fill(func(b *strings.Builder) { b.WriteByte(b64[r.IntN(64)]) }),
		"cjk": fill(func(b *strings.Builder) {
			b.WriteString("上下文窗口的令牌预算，代理在等待工具完成。日本語の文章も含まれます。")
		}),
	}
}

func BenchmarkCount(b *testing.B) {
	texts := benchTexts()
	for _, e := range encodings() {
		for _, kind := range []string{"prose", "code", "logs", "json", "base64", "cjk"} {
			s := texts[kind]
			b.Run(e.Name()+"/"+kind, func(b *testing.B) {
				b.SetBytes(int64(len(s)))
				for b.Loop() {
					e.Count(s)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(s))*1024, "ns/KiB")
			})
		}
	}
}
