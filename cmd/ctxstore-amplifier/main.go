// Command ctxstore-amplifier is ctxstore as an Amplifier context module:
// a gRPC server of Amplifier's ContextService and ModuleLifecycle that
// keeps one session in a ctxstore database.
//
// Usage:
//
//	ctxstore-amplifier --port N      # the host's sidecar handshake
//	ctxstore-amplifier --listen ADDR # a server started by hand (host:port)
//
// With --port it listens on 127.0.0.1:N (0 picks a free port) and, once
// it accepts connections, prints READY:<port> on standard output, which an
// Amplifier host spawning the module waits for. With --listen it does the
// same on ADDR. Everything else it says goes to standard error.
//
// The host's Mount call configures the session. Its config keys: db (the
// store file or a postgres:// URL; default $CTXSTORE_DB, else
// $XDG_DATA_HOME/ctxstore/ctxstore.db), session (default: a new session,
// whose name is printed on standard error and reported by HealthCheck),
// and the compaction settings (strategy, max_tokens, memory_files,
// counter, provider_counters…; GetModuleInfo lists them all). An unknown
// key fails the Mount with INVALID_ARGUMENT.
//
// Cleanup closes the session; SIGTERM or SIGINT stop the server, let
// calls in flight finish, close the session and exit 0.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

const usage = `usage: ctxstore-amplifier --port N | --listen ADDR

  --port N       listen on 127.0.0.1:N and print READY:<port> on standard output
                 (how an Amplifier host spawns a module; 0 picks a free port)
  --listen ADDR  listen on ADDR (host:port) and print READY:<port>

The host's Mount call names the database and session (config keys db, session,
strategy, max_tokens, memory_files, counter...; GetModuleInfo lists them).
`

// stopGrace bounds how long a stop waits for calls in flight.
const stopGrace = 10 * time.Second

// maxRequest is the largest request the server reads: gRPC's default of
// 4 MiB would refuse a message ctxstore accepts (up to 8 MiB by default),
// and SetMessages carries a whole transcript.
const maxRequest = 64 << 20

func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("ctxstore-amplifier", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", -1, "")
	listen := fs.String("listen", "", "")
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	addr, err := address(*port, *listen, fs.NArg())
	if err != nil {
		fmt.Fprintf(stderr, "ctxstore-amplifier: %v\n", err)
		fs.Usage()
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "ctxstore-amplifier: %v\n", err)
		return 1
	}
	srv := newServer(logger, getenv)
	g := grpc.NewServer(append(srv.ServerOptions(), grpc.MaxRecvMsgSize(maxRequest))...)
	srv.Register(g)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	fmt.Fprintf(stdout, "READY:%d\n", lis.Addr().(*net.TCPAddr).Port)

	code := 0
	select {
	case sig := <-stop:
		logger.Info("stopping", "signal", sig.String())
		gracefulStop(g)
	case err := <-served:
		logger.Error("server failed", "err", err)
		code = 1
	}
	if err := srv.Close(); err != nil {
		logger.Error("closing the session", "err", err)
		code = 1
	}
	return code
}

// address resolves the flags to the address to listen on.
func address(port int, listen string, extra int) (string, error) {
	switch {
	case extra > 0:
		return "", errors.New("no arguments expected beside the flags")
	case port >= 0 && listen != "":
		return "", errors.New("give --port or --listen, not both")
	case listen != "":
		return listen, nil
	case port > 65535:
		return "", fmt.Errorf("--port %d is not a port", port)
	case port >= 0:
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
	}
	return "", errors.New("give --port N (spawned by an Amplifier host) or --listen ADDR")
}

// gracefulStop lets calls in flight finish, for stopGrace at most.
func gracefulStop(g *grpc.Server) {
	done := make(chan struct{})
	go func() { g.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopGrace):
		g.Stop()
	}
}
