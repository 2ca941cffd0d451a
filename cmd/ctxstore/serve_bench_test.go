package main

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// fillSession appends n messages to session in the file at path: user
// questions, tool calls with their results, answers, as an agent's
// session holds them.
func fillSession(tb testing.TB, path, session string, n int) {
	tb.Helper()
	ctx := context.Background()
	st, err := storage.Open(ctx, path, storage.OpenOptions{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	recs := []storage.Record{{Message: ctxstore.NewMessage(ctxstore.RoleSystem, "You are a careful assistant."), Tokens: 7}}
	for i, stored := 0, 0; stored+len(recs) < n; i++ {
		id := fmt.Sprintf("call_%d", i)
		recs = append(recs,
			storage.Record{Message: ctxstore.NewMessage(ctxstore.RoleUser, fmt.Sprintf("Question %d: what do the logs of service %d say?", i, i%97)), Tokens: 14},
			storage.Record{Message: ctxstore.NewToolCallMessage("", ctxstore.ToolCall{ID: id, Name: "read_log", Arguments: []byte(`{"service":"s"}`)}), Tokens: 12},
			storage.Record{Message: ctxstore.NewToolResult(id, strings.Repeat("log line ok. ", 20)), Tokens: 60},
			storage.Record{Message: ctxstore.NewMessage(ctxstore.RoleAssistant, fmt.Sprintf("Answer %d: all fine.", i)), Tokens: 8})
		if len(recs) >= 4000 || stored+len(recs) >= n {
			if _, _, err := storage.Append(ctx, st, session, recs...); err != nil {
				tb.Fatal(err)
			}
			stored += len(recs)
			recs = recs[:0]
		}
	}
	if len(recs) > 0 {
		if _, _, err := storage.Append(ctx, st, session, recs...); err != nil {
			tb.Fatal(err)
		}
	}
}

// startServe starts 'ctxstore --db db serve' and returns where it listens.
func startServe(tb testing.TB, db string) served {
	tb.Helper()
	cmd := exec.Command(binary, "--db", db, "serve")
	cmd.Env = append(os.Environ(), "CTXSTORE_DB=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		tb.Fatalf("ctxstore serve printed no URL: %v", err)
	}
	u, err := url.Parse(strings.TrimSpace(line))
	if err != nil {
		tb.Fatal(err)
	}
	return served{base: "http://" + u.Host, token: u.Query().Get("token"), port: u.Port(), url: strings.TrimSpace(line)}
}

// BenchmarkServeFirstPaint opens the page of a 100k-message session in
// chromium, as a full page load, and reports when the history and the
// view panel were first painted, in milliseconds from the start of the
// navigation (the page's own performance.now(), read after the frame
// that shows them): history-ms and view-ms are medians over b.N loads;
// view-since-route-ms is the view panel measured from when the page
// script began showing the session, budget-change-ms the panel painted
// again after the budget input changed (its 40 ms debounce included), and
// server-view-ms what the manager took. small-history-ms is the history
// of a 4-message session loaded in the same way between them, and
// big/small the ratio of the two medians: what the session's size costs,
// whatever the machine's load.
func BenchmarkServeFirstPaint(b *testing.B) {
	chromium(b)
	const n = 100_000
	db := filepath.Join(b.TempDir(), "big.db")
	fillSession(b, db, "big", n)
	fillSession(b, db, "small", 4)
	s := startServe(b, db)
	ctx := browser(b)
	do(b, ctx, "take the token", chromedp.Navigate(s.url), chromedp.WaitVisible(chromedp.CSS(`#sessions tr.row`)))
	// load opens a session's page afresh and returns the page's marks.
	load := func(name string) map[string]float64 {
		do(b, ctx, "leave", chromedp.Navigate("about:blank"))
		do(b, ctx, "open the session", chromedp.Navigate(s.base+"/#/s/"+name))
		waitJS(b, ctx, "both panels painted", `window.__ctxstore && window.__ctxstore.history !== undefined && window.__ctxstore.view !== undefined`)
		return eval[map[string]float64](b, ctx, `Object.assign({server: page.view.millis}, window.__ctxstore)`)
	}
	var history, view, sinceAsk, server, slide, small []float64
	b.ResetTimer()
	for range b.N {
		small = append(small, load("small")["history"])
		m := load("big")
		history = append(history, m["history"])
		view = append(view, m["view"])
		sinceAsk = append(sinceAsk, m["view_since_route"])
		server = append(server, m["server"])
		// Slide the budget: the time from the input to the panel painted
		// again (a new budget: a manager opened for it).
		budget := 3000 + 1000*len(slide)
		eval[any](b, ctx, fmt.Sprintf(`(() => { window.__t0 = performance.now(); const b = document.getElementById("budget"); b.value = "%d"; b.dispatchEvent(new Event("input")); })()`, budget))
		waitJS(b, ctx, "the view at the new budget", fmt.Sprintf(`window.__ctxstore.view_painted_budget === %d`, budget))
		slide = append(slide, eval[float64](b, ctx, `window.__ctxstore.view_painted - window.__t0`))
	}
	b.StopTimer()
	median := func(xs []float64) float64 { xs = slices.Clone(xs); slices.Sort(xs); return xs[len(xs)/2] }
	b.ReportMetric(median(history), "history-ms")
	b.ReportMetric(median(small), "small-history-ms")
	b.ReportMetric(median(history)/median(small), "big/small")
	b.ReportMetric(slices.Min(history), "history-min-ms")
	b.ReportMetric(slices.Min(view), "view-min-ms")
	b.ReportMetric(median(view), "view-ms")
	b.ReportMetric(median(sinceAsk), "view-since-route-ms")
	b.ReportMetric(median(server), "server-view-ms")
	b.ReportMetric(median(slide), "budget-change-ms")
	b.ReportMetric(0, "ns/op")
	if n := eval[int](b, ctx, `document.querySelectorAll("#history article").length`); n == 0 || n > 1000 {
		b.Errorf("the page rendered %d messages: want one page, not the session", n)
	}
	b.Logf("the last load, ms from the navigation's start: %s", eval[string](b, ctx, `JSON.stringify({
		domContentLoaded: Math.round(performance.getEntriesByType("navigation")[0].domContentLoadedEventEnd),
		resources: performance.getEntriesByType("resource").map((r) => [r.name.replace(location.origin, ""), Math.round(r.startTime), Math.round(r.responseEnd)]),
		marks: window.__ctxstore})`))
	screenshot(b, ctx, "first-paint-100k")
}
