package serve

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ctxstore/ctxstore/storage"
)

// web holds the viewer's page, script and style sheet: plain files served
// as they are, no build step.
//
//go:embed web
var web embed.FS

// Viewer is the HTTP handler of ctxstore serve: the page, its JSON API and
// the event streams, over one engine opened read-only.
type Viewer struct {
	st     storage.Engine
	token  string
	port   int
	cookie string // the token's cookie, named after the port: cookies are shared by every port of a host
	mux    *http.ServeMux
	views  *viewCache
	// search answers the search box (the library's search, searchEngine);
	// without it the page shows none.
	search  func(ctx context.Context, query string) ([]Hit, error)
	version string
}

// Options say whom a Viewer serves and how it explains errors.
type Options struct {
	// Token is the secret a request must carry (NewToken makes one).
	Token string
	// Port is the port the server listens on: a request's Host must name
	// it, and the token's cookie is named after it.
	Port int
	// Version is the program's version, shown by the page.
	Version string
	// Explain turns an error about a session of st into a message that
	// names the database and says what to do; nil keeps errors as they are.
	Explain func(st storage.Engine, session string, err error) error
}

// New returns the handler serving st to those who hold opts.Token.
func New(st storage.Engine, opts Options) *Viewer {
	explain := opts.Explain
	if explain == nil {
		explain = func(_ storage.Engine, _ string, err error) error { return err }
	}
	v := &Viewer{st: st, token: opts.Token, port: opts.Port, cookie: fmt.Sprintf("ctxstore_token_%d", opts.Port),
		views: newViewCache(st, explain), search: searchEngine(st), version: opts.Version}
	static, _ := fs.Sub(web, "web")
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.HandleFunc("GET /api/config", v.handleConfig)
	mux.HandleFunc("GET /api/sessions", v.handleSessions)
	mux.HandleFunc("GET /api/session", v.handleSession)
	mux.HandleFunc("GET /api/messages", v.handleMessages)
	mux.HandleFunc("GET /api/view", v.handleView)
	mux.HandleFunc("GET /api/events", v.handleEvents)
	mux.HandleFunc("GET /api/search", v.handleSearch)
	v.mux = mux
	return v
}

// Close releases the managers the views keep open.
func (v *Viewer) Close() { v.views.close() }

// Managers is how many managers the views keep open (at most
// MaxViewManagers).
func (v *Viewer) Managers() int {
	v.views.mu.Lock()
	defer v.views.mu.Unlock()
	return len(v.views.open)
}

// contentSecurityPolicy lets the page run its own script and style sheet
// and nothing else: no inline script (a message's text can never become
// one), no other origin, images only from the page or data: URLs (so an
// image in a message never calls a server), no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// ServeHTTP checks every request before it reaches the mux: the Host
// header must name this server, the method must read, and the token must
// come with it (in the cookie, or in the URL, which sets the cookie and
// redirects to the same URL without it).
func (v *Viewer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if !hostAllowed(r.Host, v.port) {
		http.Error(w, fmt.Sprintf("ctxstore serve: refused: the Host header %q does not name this server (open it as 127.0.0.1:%d or localhost:%d)", r.Host, v.port, v.port), http.StatusMisdirectedRequest)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "ctxstore serve is read-only: "+r.Method+" refused", http.StatusMethodNotAllowed)
		return
	}
	if t := r.URL.Query().Get("token"); t != "" {
		if !v.tokenOK(t) {
			http.Error(w, "ctxstore serve: wrong token: open the URL ctxstore serve printed", http.StatusForbidden)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: v.cookie, Value: v.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		q := r.URL.Query()
		q.Del("token")
		u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
		return
	}
	if c, err := r.Cookie(v.cookie); err != nil || !v.tokenOK(c.Value) {
		http.Error(w, "ctxstore serve: missing token: open the URL ctxstore serve printed (it ends in ?token=...)", http.StatusForbidden)
		return
	}
	v.mux.ServeHTTP(w, r)
}

func (v *Viewer) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(v.token)) == 1
}

// writeJSONResponse sends body as JSON. encoding/json escapes <, > and &,
// so no message can close a script or open a tag, whatever reads it.
func writeJSONResponse(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode the response"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b)
}

// apiError answers a failed request with {"error": message}: 404 for a
// session (or epoch, or seq) that does not exist, 400 for a bad request,
// 500 otherwise.
func apiError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var bad *badRequest
	switch {
	case errors.Is(err, storage.ErrNotFound):
		status = http.StatusNotFound
	case errors.As(err, &bad):
		status = http.StatusBadRequest
	}
	writeJSONResponse(w, status, map[string]string{"error": err.Error()})
}

// uintParam reads a whole-number query parameter (0 when absent).
func uintParam(r *http.Request, name string) (uint64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 63)
	if err != nil {
		return 0, badf("parameter %s=%q: want a whole number, 0 or more", name, s)
	}
	return n, nil
}

// sessionParam reads the s parameter, the session's name.
func sessionParam(r *http.Request) (string, error) {
	name := r.URL.Query().Get("s")
	if err := storage.CheckSession(name); err != nil {
		return "", badf("parameter s: %v", err)
	}
	return name, nil
}

// badRequest is a request the API refuses as malformed (400).
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

// badf makes a badRequest.
func badf(format string, args ...any) error {
	return &badRequest{fmt.Sprintf(format, args...)}
}
