package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/internal/serve"
	"github.com/ctxstore/ctxstore/storage"
)

// served is a running 'ctxstore serve' child process.
type served struct {
	base  string // http://127.0.0.1:PORT
	token string
	port  string
	url   string // as printed, token included
}

// serve starts 'ctxstore serve' with args in e and returns where it
// listens; the process is killed when the test ends.
func (e *env) serve(args ...string) served {
	e.t.Helper()
	_, lines, stderr := e.start(append([]string{"serve"}, args...)...)
	var line string
	select {
	case l, ok := <-lines:
		if !ok {
			e.t.Fatalf("ctxstore serve ended before printing its URL; stderr: %s", stderr.String())
		}
		line = l
	case <-time.After(30 * time.Second):
		e.t.Fatalf("ctxstore serve printed no URL in 30 s; stderr: %s", stderr.String())
	}
	u, err := url.Parse(line)
	if err != nil || u.Query().Get("token") == "" {
		e.t.Fatalf("ctxstore serve printed %q, want its URL with ?token=", line)
	}
	return served{base: "http://" + u.Host, token: u.Query().Get("token"), port: u.Port(), url: line}
}

// get requests path with the token's cookie (unless noCookie) and the
// given Host header ("" for the server's own), following no redirect.
func (s served) get(t *testing.T, path, host string, noCookie bool) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if !noCookie {
		req.AddCookie(&http.Cookie{Name: "ctxstore_token_" + s.port, Value: s.token})
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// getJSON requests path and decodes its JSON body into v, checking the status.
func (s served) getJSON(t *testing.T, path string, status int, v any) {
	t.Helper()
	resp := s.get(t, path, "", false)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("GET %s: status %d, want %d: %s", path, resp.StatusCode, status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// TestServeRefuses: what a local web tool must refuse, request by request.
func TestServeRefuses(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	s := e.serve()
	if !strings.HasPrefix(s.url, "http://127.0.0.1:") {
		t.Errorf("serve listens on %s, want the loopback address by default", s.url)
	}
	cases := []struct {
		name, path, host string
		noCookie         bool
		status           int
		body             string
	}{
		{"no token", "/api/sessions", "", true, http.StatusForbidden, "missing token"},
		{"no token, page", "/", "", true, http.StatusForbidden, "missing token"},
		{"wrong token", "/?token=0123", "", true, http.StatusForbidden, "wrong token"},
		{"foreign Host (DNS rebinding)", "/api/sessions", "attacker.example:" + s.port, false, http.StatusMisdirectedRequest, "does not name this server"},
		{"foreign Host with the token in the URL", "/?token=" + s.token, "attacker.example:" + s.port, true, http.StatusMisdirectedRequest, "does not name this server"},
		{"another port", "/api/sessions", "127.0.0.1:1", false, http.StatusMisdirectedRequest, "does not name this server"},
		{"localhost", "/api/sessions", "localhost:" + s.port, false, http.StatusOK, `"name":"s"`},
		{"the cookie", "/api/sessions", "", false, http.StatusOK, `"name":"s"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := s.get(t, c.path, c.host, c.noCookie)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.status || !strings.Contains(string(body), c.body) {
				t.Errorf("status %d, body %q; want %d and %q", resp.StatusCode, body, c.status, c.body)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if acao := resp.Header.Get("Access-Control-Allow-Origin"); acao != "" {
				t.Errorf("Access-Control-Allow-Origin %q: want no CORS", acao)
			}
		})
	}
	t.Run("the token in the URL sets the cookie and leaves the URL", func(t *testing.T) {
		resp := s.get(t, "/?token="+s.token, "", true)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
			t.Fatalf("status %d, Location %q; want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
		}
		c := resp.Cookies()
		if len(c) != 1 || c[0].Value != s.token || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode {
			t.Errorf("cookies %v: want the token, HttpOnly, SameSite=Strict", c)
		}
	})
	t.Run("read-only", func(t *testing.T) {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
			req, _ := http.NewRequest(method, s.base+"/api/sessions", strings.NewReader("{}"))
			req.AddCookie(&http.Cookie{Name: "ctxstore_token_" + s.port, Value: s.token})
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("%s: status %d, want 405", method, resp.StatusCode)
			}
		}
	})
}

// TestServeAddr: a non-loopback address needs --remote, and warns.
func TestServeAddr(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	e.fail(2, "", []string{"serve", "--addr", "0.0.0.0:0"}, "not a loopback address", "--remote")
	e.fail(2, "", []string{"serve", "--addr", "nonsense"}, "want HOST:PORT")
	cmd := exec.Command(binary, "serve", "--addr", "0.0.0.0:0", "--remote")
	cmd.Env = e.vars
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if line, _ := bufio.NewReader(stderr).ReadString('\n'); !strings.HasPrefix(line, "warning: serving on") || !strings.Contains(line, "not a loopback address") {
		t.Errorf("serve --remote on 0.0.0.0 began its stderr with %q, want a warning", line)
	}
	e.fail(1, "", []string{"serve", "--db", e.dir + "/missing.db"}, "no database at")
}

// TestServeEscapes: a message holding markup reaches the page as JSON in
// which no tag can open; the page itself holds no stored text.
func TestServeEscapes(t *testing.T) {
	e := newEnv(t)
	e.ok(`{"role":"user","content":"</script><script>alert(1)</script><img src=x onerror=alert(2)>"}`+"\n", "add", "<b>name</b>")
	s := e.serve()
	for _, path := range []string{"/api/sessions", "/api/messages?s=" + url.QueryEscape("<b>name</b>"), "/api/view?budget=100&s=" + url.QueryEscape("<b>name</b>")} {
		resp := s.get(t, path, "", false)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		if strings.ContainsAny(string(body), "<>") {
			t.Errorf("GET %s: a raw < or > in %s", path, body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", path, ct)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no X-Content-Type-Options: nosniff", path)
		}
	}
}

// TestServeAPI: the session list, pages of messages and the view at a
// budget, with their errors.
func TestServeAPI(t *testing.T) {
	e := newEnv(t)
	e.ok(longConversation(300), "add", "long")
	s := e.serve()
	var list struct{ Sessions []serve.SessionRow }
	s.getJSON(t, "/api/sessions", http.StatusOK, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].Name != "long" || list.Sessions[0].Messages == 0 || list.Sessions[0].Title == "" {
		t.Fatalf("sessions %+v", list.Sessions)
	}
	n := uint64(list.Sessions[0].Messages)
	type pageJSON struct {
		FirstSeq uint64 `json:"first_seq"`
		LastSeq  uint64 `json:"last_seq"`
		Messages []serve.MessageJSON
	}
	seqs := func(p pageJSON) (uint64, uint64, int) {
		if len(p.Messages) == 0 {
			return 0, 0, 0
		}
		return p.Messages[0].Seq, p.Messages[len(p.Messages)-1].Seq, len(p.Messages)
	}
	pages := []struct {
		query       string
		first, last uint64
		count       int
	}{
		{"", n - 199, n, 200},
		{"&limit=10", n - 9, n, 10},
		{fmt.Sprintf("&before=%d&limit=50", n-9), n - 59, n - 10, 50},
		{"&before=3&limit=50", 1, 2, 2},
		{fmt.Sprintf("&after=%d", n-3), n - 2, n, 3},
		{fmt.Sprintf("&after=%d", n), 0, 0, 0},
	}
	for _, p := range pages {
		var got pageJSON
		s.getJSON(t, "/api/messages?s=long"+p.query, http.StatusOK, &got)
		if f, l, c := seqs(got); f != p.first || l != p.last || c != p.count {
			t.Errorf("messages%s: seqs %d-%d (%d), want %d-%d (%d)", p.query, f, l, c, p.first, p.last, p.count)
		}
	}
	var small, large serve.ViewJSON
	s.getJSON(t, "/api/view?s=long&budget=500", http.StatusOK, &small)
	s.getJSON(t, "/api/view?s=long&budget=1000000", http.StatusOK, &large)
	if small.Level == 0 || small.Removed == 0 || len(small.NotSent) == 0 || !strings.Contains(small.Text, "budget 500 tokens") {
		t.Errorf("view at 500 tokens compacted nothing: %+v", small.Report)
	}
	if large.Level != 0 || large.Removed != 0 || large.View.Messages != int(n) {
		t.Errorf("view at 1M tokens: level %d, removed %d, %d messages", large.Level, large.Removed, large.View.Messages)
	}
	var again serve.ViewJSON
	s.getJSON(t, "/api/view?s=long&budget=500", http.StatusOK, &again)
	if again.StablePrefix != len(small.Messages) {
		t.Errorf("the same view again: stable prefix %d, want all %d messages", again.StablePrefix, len(small.Messages))
	}
	var window serve.ViewJSON
	s.getJSON(t, "/api/view?s=long&window=8192&out=1024", http.StatusOK, &window)
	if window.BudgetSource != "model" {
		t.Errorf("view of a model's window: budget source %q", window.BudgetSource)
	}
	// A cleared session: the earlier epoch stays readable, page by page.
	e.ok("", "clear", "long")
	e.ok(`{"role":"user","content":"a new epoch"}`, "add", "long")
	var cur, old pageJSON
	s.getJSON(t, "/api/messages?s=long", http.StatusOK, &cur)
	s.getJSON(t, "/api/messages?s=long&epoch=1&limit=5", http.StatusOK, &old)
	if len(cur.Messages) != 1 || cur.Messages[0].Text != "a new epoch" || cur.Messages[0].Epoch != 2 {
		t.Errorf("current epoch after clear: %+v", cur.Messages)
	}
	if f, l, c := seqs(old); f != n-4 || l != n || c != 5 || old.Messages[0].Epoch != 1 {
		t.Errorf("epoch 1 after clear: seqs %d-%d (%d)", f, l, c)
	}
	errs := []struct {
		path   string
		status int
	}{
		{"/api/session?s=nope", http.StatusNotFound},
		{"/api/messages?s=nope", http.StatusNotFound},
		{"/api/messages?s=long&epoch=9", http.StatusNotFound},
		{"/api/messages?s=long&limit=x", http.StatusBadRequest},
		{"/api/messages?s=", http.StatusBadRequest},
		{"/api/view?s=long", http.StatusBadRequest},
		{"/api/view?s=long&budget=10&window=10&out=1", http.StatusBadRequest},
		{"/api/view?s=long&budget=10&strategy=summarize", http.StatusBadRequest},
		{"/api/view?s=nope&budget=10", http.StatusNotFound},
	}
	for _, c := range errs {
		var body map[string]string
		s.getJSON(t, c.path, c.status, &body)
		if body["error"] == "" {
			t.Errorf("GET %s: no error message", c.path)
		}
	}
}

// TestServeEvents: a message appended by another process is announced on
// the event stream, on a file and on PostgreSQL, while serve keeps the
// database open.
func TestServeEvents(t *testing.T) {
	for _, engine := range []string{"file", "PostgreSQL"} {
		t.Run(engine, func(t *testing.T) {
			e := newEngineEnv(t, engine)
			e.ok(conversation, "add", "s")
			s := e.serve()
			resp := s.get(t, "/api/events?s=s", "", false)
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Fatalf("Content-Type %q", ct)
			}
			events := make(chan string, 10)
			go func() {
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
						events <- d
					}
				}
				close(events)
			}()
			e.ok(`{"role":"user","content":"from another process"}`, "add", "s")
			select {
			case d := <-events:
				var c struct {
					Session string
					LastSeq uint64 `json:"last_seq"`
				}
				if err := json.Unmarshal([]byte(d), &c); err != nil || c.Session != "s" || c.LastSeq != 6 {
					t.Errorf("event %s: want session s at seq 6", d)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("no event in 20 s after another process appended")
			}
		})
	}
}

// TestServeViewerConcurrent runs the handler in this process (so -race
// sees it): views at more budgets than the server keeps managers for,
// asked for at once, with pages and an event stream, while messages are
// appended.
func TestServeViewerConcurrent(t *testing.T) {
	e := newEnv(t)
	e.ok(longConversation(50), "add", "s")
	ctx := context.Background()
	v, ts, get := inProcess(t, e.db)
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel) // before the server's Close, which waits for the stream
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, ts.URL+"/api/events", nil)
	req.AddCookie(&http.Cookie{Name: "ctxstore_token_" + ts.URL[strings.LastIndex(ts.URL, ":")+1:], Value: "tok"})
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for i := range 40 {
		wg.Go(func() {
			path := fmt.Sprintf("/api/view?s=s&budget=%d", 500+100*(i%20))
			if i%4 == 0 {
				path = fmt.Sprintf("/api/messages?s=s&limit=%d", 1+i)
			}
			if code, body := get(path); code != http.StatusOK {
				errs <- fmt.Sprintf("GET %s: %d %s", path, code, body)
			}
		})
	}
	for i := range 3 {
		e.ok(fmt.Sprintf(`{"role":"user","content":"more %d"}`, i), "add", "s")
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	line, _ := bufio.NewReader(stream.Body).ReadString('\n')
	if !strings.HasPrefix(line, "retry:") {
		t.Errorf("event stream began %q", line)
	}
	cancel()
	stream.Body.Close()
	if n := v.Managers(); n > serve.MaxViewManagers {
		t.Errorf("%d managers kept, want at most %d", n, serve.MaxViewManagers)
	}
}

// inProcess serves the database at db in this process and returns the
// handler, its server and a GET with the token's cookie.
func inProcess(t *testing.T, db string) (*serve.Viewer, *httptest.Server, func(string) (int, string)) {
	st, err := storage.Open(context.Background(), db, storage.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var h http.Handler
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(ts.Close)
	port, _ := strconv.Atoi(ts.URL[strings.LastIndex(ts.URL, ":")+1:])
	v := serve.New(st, serve.Options{Token: "tok", Port: port, Explain: explainIn})
	t.Cleanup(v.Close)
	h = v
	get := func(path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		req.AddCookie(&http.Cookie{Name: fmt.Sprintf("ctxstore_token_%d", port), Value: "tok"})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	return v, ts, get
}

// TestServeSearch: the search box finds messages through the library's
// search, and /api/search answers with the hits, escaped; a query with
// nothing to find is refused.
func TestServeSearch(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	e.ok(`{"role":"user","content":"where is the <b>quokka</b>?"}`, "add", "other")
	_, _, get := inProcess(t, e.db)
	if code, body := get("/api/config"); code != http.StatusOK || !strings.Contains(body, `"search":true`) {
		t.Errorf("config: %d %s", code, body)
	}
	code, body := get("/api/search?q=quokka")
	if code != http.StatusOK || !strings.Contains(body, `"session":"other"`) || !strings.Contains(body, `"seq":1`) || strings.ContainsAny(body, "<>") {
		t.Errorf("search quokka: %d %s", code, body)
	}
	if code, body := get("/api/search?q=motd"); code != http.StatusOK || !strings.Contains(body, `"session":"s"`) {
		t.Errorf("search motd: %d %s", code, body)
	}
	for _, q := range []string{"", "-motd"} {
		if code, body := get("/api/search?q=" + url.QueryEscape(q)); code != http.StatusBadRequest {
			t.Errorf("query %q: %d %s, want 400", q, code, body)
		}
	}
}
