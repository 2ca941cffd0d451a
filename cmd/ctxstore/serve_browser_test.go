package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The browser tests drive Debian's chromium, headless, through the
// DevTools protocol (chromedp): what a person sees and clicks, in a real
// browser with the page's Content-Security-Policy in force. They skip,
// with one line, where no chromium is installed (.ci/run installs it).

// chromium returns the browser's path, or skips the test.
func chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH: browser tests skipped (apt-get install chromium)")
	return ""
}

// browser starts a headless chromium for the test and returns a context
// of one tab in it. Names in hosts resolve to 127.0.0.1.
func browser(t testing.TB, hosts ...string) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	}
	var rules []string
	for _, h := range hosts {
		rules = append(rules, "MAP "+h+" 127.0.0.1")
	}
	if len(rules) > 0 {
		opts = append(opts, chromedp.Flag("host-resolver-rules", strings.Join(rules, ",")))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// screenshotDir is where the browser tests leave their screenshots for a
// reviewer: $CTXSTORE_SCREENSHOTS, else ctxstore-screenshots in the
// temporary directory.
func screenshotDir(t testing.TB) string {
	dir := os.Getenv("CTXSTORE_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "ctxstore-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot saves the page as NAME.png in screenshotDir.
func screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(screenshotDir(t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// do runs browser actions, failing the test with what was being done.
func do(t testing.TB, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text returns the text a selector's first element shows.
func text(t testing.TB, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

// waitJS polls expr in the page until it is true, failing the test after
// 20 s.
func waitJS(t testing.TB, ctx context.Context, what, expr string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(wctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

const hostileMessage = `<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">`

// TestServeBrowser: a person opens the printed URL, picks a session from
// the list, reads its history, slides the budget and sees the view's
// explanation change; a message holding a script shows as text and never
// runs; what another process appends appears while they look, on a file
// and on PostgreSQL.
func TestServeBrowser(t *testing.T) {
	for _, engine := range []string{"file", "PostgreSQL"} {
		t.Run(engine, func(t *testing.T) {
			chromium(t)
			e := newEngineEnv(t, engine)
			e.ok(longConversation(40), "add", "work")
			e.ok(fmt.Sprintf(`{"role":"user","content":%q}`, hostileMessage)+"\n", "add", "hostile")
			s := e.serve()
			ctx := browser(t)
			shot := func(name string) { screenshot(t, ctx, engine+"-"+name) }

			do(t, ctx, "open the printed URL", chromedp.Navigate(s.url), chromedp.WaitVisible(chromedp.CSS(`#sessions tr.row`)))
			loc := eval[string](t, ctx, `location.href`)
			if strings.Contains(loc, "token=") {
				t.Errorf("the token stays in the address bar: %s", loc)
			}
			if got := text(t, ctx, "#sessions tbody"); !strings.Contains(got, "work") || !strings.Contains(got, "hostile") {
				t.Fatalf("session list shows %q", got)
			}
			shot("1-list")

			do(t, ctx, "open session work", chromedp.Click(chromedp.CSS(`tr[data-session="work"] a`)),
				chromedp.WaitVisible(chromedp.CSS(`#history article`)), chromedp.WaitVisible(chromedp.CSS(`#viewfacts`)))
			if got := text(t, ctx, "#history"); !strings.Contains(got, "Answer 39: all fine.") || !strings.Contains(got, "read_log") {
				t.Errorf("history lacks the last answer or the tool call: %.300q", got)
			}
			removedBefore := text(t, ctx, `[data-fact="removed"]`)
			shot("2-session")

			// Slide the budget down: the view compacts, and the panel says so.
			eval[any](t, ctx, `(() => { const b = document.getElementById("budget"); b.value = "1500"; b.dispatchEvent(new Event("input")); })()`)
			waitJS(t, ctx, "the view at 1500 tokens", `document.querySelector('[data-fact="budget"]').textContent.startsWith("1,500 tokens")`)
			removedAfter := text(t, ctx, `[data-fact="removed"]`)
			if removedAfter == removedBefore || removedAfter == "0" {
				t.Errorf("removed %q at the first budget, %q at 1500 tokens: want the explanation to change", removedBefore, removedAfter)
			}
			if notice := eval[string](t, ctx, `(document.getElementById("notice") || {}).textContent || ""`); notice == "" {
				t.Errorf("no notice shown for a compacted view")
			}
			if n := eval[int](t, ctx, `document.querySelectorAll("#history .badge.removed").length`); n == 0 {
				t.Errorf("no history message marked removed at 1500 tokens")
			}
			shot("3-budget-1500")

			// Another process appends; the message appears on the open page.
			start := time.Now()
			e.ok(`{"role":"user","content":"appended by another process"}`, "add", "work")
			waitJS(t, ctx, "the message appended elsewhere", `document.getElementById("history").textContent.includes("appended by another process")`)
			t.Logf("%s: an append by another process appeared on the page %v after 'ctxstore add' was started (the command's own run included)", engine, time.Since(start).Round(time.Millisecond))
			shot("4-live")

			// A message holding markup shows as text and runs nothing.
			do(t, ctx, "open session hostile", chromedp.Navigate(s.base+"/#/s/hostile"), chromedp.WaitVisible(chromedp.CSS(`#history[data-session="hostile"] article`)))
			if got := text(t, ctx, "#history .text"); got != hostileMessage {
				t.Errorf("the hostile message shows as %q, want its text as stored", got)
			}
			do(t, ctx, "let a script run, if one could", chromedp.Sleep(200*time.Millisecond))
			if pwned := eval[any](t, ctx, `window.pwned === undefined ? null : window.pwned`); pwned != nil {
				t.Errorf("a message's script ran: window.pwned = %v", pwned)
			}
			if imgs := eval[int](t, ctx, `document.querySelectorAll("#history img").length`); imgs != 0 {
				t.Errorf("the hostile message made %d <img> elements", imgs)
			}
			shot("5-hostile")
		})
	}
}

// TestServeBrowserRefuses: a browser without the token, or reaching the
// server by another name (DNS rebinding), gets nothing.
func TestServeBrowserRefuses(t *testing.T) {
	chromium(t)
	e := newEnv(t)
	e.ok(conversation, "add", "secret-session")
	s := e.serve()
	ctx := browser(t, "rebind.example")
	cases := []struct{ name, url, want string }{
		{"missing token", s.base + "/", "missing token"},
		{"missing token, API", s.base + "/api/sessions", "missing token"},
		{"foreign Host", "http://rebind.example:" + s.port + "/?token=" + s.token, "does not name this server"},
	}
	for _, c := range cases {
		do(t, ctx, c.name, chromedp.Navigate(c.url))
		body := text(t, ctx, "body")
		if !strings.Contains(body, c.want) || strings.Contains(body, "secret-session") {
			t.Errorf("%s: the page shows %q, want %q and no session", c.name, body, c.want)
		}
	}
	screenshot(t, ctx, "refused-foreign-host")
}

// TestServeBrowserMessages: Anthropic-style blocks render for people: an
// image carried as data is shown, a tool_use shows its tool_result inside
// it, and the raw JSON opens on demand.
func TestServeBrowserMessages(t *testing.T) {
	chromium(t)
	e := newEnv(t)
	const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	e.ok(`{"role":"user","content":[{"type":"text","text":"What is in this picture and in /a?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+png+`"}},{"type":"image","source":{"type":"url","url":"https://example.com/tracker.png"}}]}
{"role":"assistant","content":[{"type":"text","text":"Reading it."},{"type":"tool_use","id":"tu1","name":"read_file","input":{"path":"/a"}}]}
{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":"the body of /a"}]}
{"role":"assistant","content":"A dot, and the body of /a."}
`, "add", "blocks")
	s := e.serve()
	ctx := browser(t)
	do(t, ctx, "open the session", chromedp.Navigate(s.url), chromedp.WaitVisible(chromedp.CSS(`#sessions tr.row`)),
		chromedp.Navigate(s.base+"/#/s/blocks"), chromedp.WaitVisible(chromedp.CSS(`#history[data-session="blocks"] article`)))
	if n := eval[int](t, ctx, `document.querySelectorAll('#history img.msgimg[src^="data:image/png;base64,"]').length`); n != 1 {
		t.Errorf("%d data images shown, want 1", n)
	}
	if got := text(t, ctx, "#history"); !strings.Contains(got, "[image: https://example.com/tracker.png]") {
		t.Errorf("an image at a URL is not named: %.400q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('[data-call="tu1"] .slot').textContent`); !strings.Contains(got, "#3the body of /a") {
		t.Errorf("the call's result slot holds %q, want the result of #3", got)
	}
	if got := eval[string](t, ctx, `document.querySelector("#m2 .body").textContent`); strings.Contains(got, "null") {
		t.Errorf("#2 shows %q", got)
	}
	do(t, ctx, "open the call and the raw JSON", chromedp.Click(chromedp.CSS(`[data-call="tu1"] > summary`)), chromedp.Click(chromedp.CSS(`#m2 details.raw > summary`)))
	if got := text(t, ctx, "#m2 details.raw pre"); !strings.Contains(got, `"tool_use"`) || !strings.Contains(got, `"path": "/a"`) {
		t.Errorf("raw JSON of #2: %q", got)
	}
	screenshot(t, ctx, "blocks")

	// The search box finds a message; its hit opens the session there.
	eval[any](t, ctx, `(() => { document.getElementById("search-q").value = "picture"; document.getElementById("search").requestSubmit(); })()`)
	do(t, ctx, "open the hit", chromedp.WaitVisible(chromedp.CSS(`a[href^="#/s/blocks?"]`)), chromedp.Click(chromedp.CSS(`a[href^="#/s/blocks?"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#history[data-session="blocks"] article.hl`)))
	if seq := eval[string](t, ctx, `document.querySelector("#history article.hl").dataset.seq`); seq != "1" {
		t.Errorf("the hit opened the session at #%s, want #1", seq)
	}
	screenshot(t, ctx, "search-hit")
}

// TestServeBrowserAgent: an agent appends as fast as it can while the
// page is open; the page shows every message once, in order.
func TestServeBrowserAgent(t *testing.T) {
	chromium(t)
	e := newEnv(t)
	e.ok(`{"role":"user","content":"start"}`, "add", "loop")
	s := e.serve()
	ctx := browser(t)
	do(t, ctx, "open the session", chromedp.Navigate(s.url), chromedp.WaitVisible(chromedp.CSS(`#sessions tr.row`)),
		chromedp.Navigate(s.base+"/#/s/loop"), chromedp.WaitVisible(chromedp.CSS(`#history[data-session="loop"] article`)))
	stop := e.appendLoop(e.db) // the role appends "loop N" to session loop
	time.Sleep(time.Second)
	acked := stop()
	last := acked + 1
	waitJS(t, ctx, "the agent's last message", fmt.Sprintf(`document.querySelector('#history article[data-seq="%d"]') !== null`, last))
	do(t, ctx, "let late events land", chromedp.Sleep(300*time.Millisecond))
	seqs := eval[[]int](t, ctx, `[...document.querySelectorAll("#history article")].map((a) => Number(a.dataset.seq))`)
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("after %d appends the page shows seqs %v...: want each once, in order", acked, seqs[max(0, i-3):min(len(seqs), i+3)])
		}
	}
	if seqs[len(seqs)-1] != last {
		t.Errorf("the page ends at #%d, want #%d", seqs[len(seqs)-1], last)
	}
	t.Logf("%d appends in about a second, all shown once", acked)
}
