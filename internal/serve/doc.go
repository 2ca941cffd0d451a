// Package serve is ctxstore's web viewer: an http.Handler (Viewer) over
// any storage.Engine, opened read-only, serving a plain page (HTML, CSS and
// JavaScript embedded from web/, no build step), its JSON API (sessions, a
// session's history by epoch a page at a time, the view at a budget or a
// model's window as `ctxstore view --json` explains it, search) and a
// stream of Server-Sent Events fed by the engine's Watch.
//
// A request must carry the run's token (NewToken; then a cookie) and name
// this server in its Host header; responses carry a strict
// Content-Security-Policy. `ctxstore serve` listens, prints the URL and
// hands requests to a Viewer; docs/serve.md describes the page.
package serve
