// Command ctxstore inspects and maintains ctxstore databases: the bbolt files
// in which ctxstore keeps LLM agents' conversations, or a PostgreSQL
// database several hosts share.
//
// Run "ctxstore help" for the command list and "ctxstore COMMAND --help" for
// each command's flags and an example. The database is --db, else
// $CTXSTORE_DB, else $XDG_DATA_HOME/ctxstore/ctxstore.db (XDG_DATA_HOME
// defaults to ~/.local/share). A postgres:// or postgresql:// URL, or a
// keyword/value connection string ("host=H dbname=D"), with an optional
// schema=NAME parameter (default "ctxstore"), names a PostgreSQL database
// instead of a file.
//
// Exit status: 0 success, 1 an error (including "verify found problems"),
// 2 a usage error (unknown command or flag, missing argument).
//
// docs/operations.md walks through operating it: backups and restores, a
// lost or damaged log, erasing for real, upgrading a file, fork and retention.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// Every command sees SIGINT/SIGTERM as a cancelled context: "tail -f"
	// ends cleanly with status 0, a long import or export stops between
	// messages instead of dying mid-write.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &app{
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
	})
	stop()
	os.Exit(code)
}
