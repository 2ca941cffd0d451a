package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"time"

	"github.com/ctxstore/ctxstore/storage"
)

// RunOptions say where Run listens and where it reports.
type RunOptions struct {
	Addr    string // HOST:PORT to listen on (port 0: any free one)
	Open    bool   // open the URL in the desktop's default browser
	Remote  bool   // Addr is not a loopback address: warn that anyone may reach it
	Version string // the program's version, shown by the page
	// Explain is Options.Explain.
	Explain func(st storage.Engine, session string, err error) error
	// Stdout receives the URL, a line of its own; Stderr the notes.
	Stdout, Stderr io.Writer
}

// Run serves st (opened read-only) with a new token on opts.Addr until ctx
// ends, printing the URL that holds the token, as 'ctxstore serve' does.
func Run(ctx context.Context, st storage.Engine, opts RunOptions) error {
	token, err := NewToken()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return fmt.Errorf("serve: listen on %s: %w (pick another with --addr, or port 0 for any free one)", opts.Addr, err)
	}
	srv := New(st, Options{Token: token, Port: ln.Addr().(*net.TCPAddr).Port, Version: opts.Version, Explain: opts.Explain})
	defer srv.Close()
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	url := fmt.Sprintf("http://%s/?token=%s", ln.Addr(), token)
	if opts.Remote {
		fmt.Fprintf(opts.Stderr, "warning: serving on %s, not a loopback address: anyone who reaches it with the token reads every session\n", ln.Addr())
	}
	fmt.Fprintf(opts.Stdout, "%s\n", url)
	fmt.Fprintf(opts.Stderr, "ctxstore serve: %s read-only; open the URL above (Ctrl-C stops)\n", st.Location())
	if opts.Open {
		if err := openBrowser(url); err != nil {
			fmt.Fprintf(opts.Stderr, "warning: could not open a browser (%v); open the URL yourself\n", err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// The event streams end with ctx; give the other requests a moment.
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("serve: stop: %w", err)
	}
	return nil
}

// openBrowser opens url in the desktop's default browser.
func openBrowser(url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.Command("xdg-open", url)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait()
	return nil
}
