package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ctxstore/ctxstore/internal/cliflag"
	"github.com/ctxstore/ctxstore/internal/termio"
	"github.com/ctxstore/ctxstore/storage"
)

// app is one invocation of the command: its streams, environment and the
// global flags. Commands never touch os.Stdout or os.Getenv directly, so
// the whole CLI runs in-process in tests too.
type app struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string

	db          string        // --db; "" means the default (see dbPath)
	json        bool          // --json: machine-readable output where a command has it
	lockTimeout time.Duration // --lock-timeout; 0 means the store's default

	// file is the database's file engine once open has opened one (nil
	// for a server), for commands that report on its files.
	file storage.FileEngine

	// inspect, when set, receives each command's FlagSet instead of the
	// command running: completion uses it to learn the flags.
	inspect func(*command, *flag.FlagSet)
}

// command is one subcommand. run receives the arguments after the command
// name; it parses them with a.parse, which also accepts the global flags.
type command struct {
	name    string
	aliases []string // former names, still run, never listed
	usage   string   // arguments, e.g. "SESSION [--epoch N]"
	summary string
	help    string // longer explanation; may be empty
	example string
	run     func(ctx context.Context, a *app, c *command, args []string) error
}

// commands lists the subcommands in the order "ctxstore help" shows them.
func commands() []*command {
	return []*command{
		demoCommand(),
		lsCommand(),
		showCommand(),
		searchCommand(),
		viewCommand(),
		addCommand(),
		tailCommand(),
		serveCommand(),
		exportCommand(),
		importCommand(),
		ingestCommand(),
		verifyCommand(),
		doctorCommand(),
		clearCommand(),
		eraseCommand(),
		scrubCommand(),
		purgeCommand(),
		forkCommand(),
		rewindCommand(),
		gcCommand(),
		shrinkCommand(),
		backupCommand(),
		restoreCommand(),
		statsCommand(),
		versionCommand(),
		completionCommand(),
	}
}

// usageError is a mistake in the command line: exit status 2. code is
// its --json error code ("" means "usage").
type usageError struct{ code, msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exitError ends the command with a status and no further message: the
// command already printed what went wrong (verify's report, for one).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// errHelp means --help was asked for and printed: exit 0.
var errHelp = errors.New("help requested")

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, a *app) int {
	cmds := commands()
	// Global flags may come before the command name.
	global := flag.NewFlagSet("ctxstore", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	a.globalFlags(global)
	version := global.Bool("version", false, "print the version")
	rest, err := cliflag.Parse(global, args, true)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printOverview(a.stdout, cmds)
			return 0
		}
		err = flagError(nil, global, err)
		if wantsJSON(args) {
			return a.jsonError("", err)
		}
		fmt.Fprintf(a.stderr, "ctxstore: %v\n", err)
		return 2
	}
	if *version {
		rest = []string{"version"}
	}
	if len(rest) == 0 {
		printOverview(a.stderr, cmds)
		return 2
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		if len(rest) == 0 {
			printOverview(a.stdout, cmds)
			return 0
		}
		name, rest = rest[0], []string{"--help"}
	}
	var cmd *command
	for _, c := range cmds {
		if c.name == name || slices.Contains(c.aliases, name) {
			cmd = c
		}
	}
	if cmd == nil {
		if a.json || wantsJSON(rest) {
			return a.jsonError("", &usageError{code: "unknown_command", msg: fmt.Sprintf("unknown command %q%s", name, didYouMean(name, cmds))})
		}
		fmt.Fprintf(a.stderr, "ctxstore: unknown command %q%s\nrun 'ctxstore help' for the list of commands\n", name, didYouMean(name, cmds))
		return 2
	}
	err = cmd.run(ctx, a, cmd, rest)
	var ue *usageError
	var ee *exitError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.Is(err, syscall.EPIPE):
		return 128 + int(syscall.SIGPIPE) // the reader went away: as a shell reports a process SIGPIPE ended
	case (a.json || wantsJSON(rest)) && !errors.As(err, &ee):
		return a.jsonError(cmd.name, err)
	case errors.As(err, &ue):
		fmt.Fprintf(a.stderr, "ctxstore %s: %s\nusage: ctxstore %s %s\n", cmd.name, ue.msg, cmd.name, cmd.usage)
		if !strings.Contains(ue.msg, "--help") {
			fmt.Fprintf(a.stderr, "run 'ctxstore %s --help' for details\n", cmd.name)
		}
		return 2
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintf(a.stderr, "ctxstore: %v\n", err)
		return 1
	}
}

// didYouMean suggests the commands closest to a mistyped name, as
// "; did you mean 'show'?".
func didYouMean(name string, cmds []*command) string {
	var names []string
	for _, c := range cmds {
		names = append(names, c.name)
	}
	return cliflag.Suggest(name, names, func(n string) string { return "'" + n + "'" })
}

// isGlobalFlag reports whether name is one of the flags every command
// takes (globalFlags).
func isGlobalFlag(name string) bool { return name == "db" || name == "json" || name == "lock-timeout" }

func (a *app) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&a.db, "db", a.db, "database `FILE` or postgres:// URL (default $CTXSTORE_DB, else $XDG_DATA_HOME/ctxstore/ctxstore.db)")
	fs.BoolVar(&a.json, "json", a.json, "machine-readable JSON output")
	fs.DurationVar(&a.lockTimeout, "lock-timeout", a.lockTimeout, "wait at most `D` (e.g. 30s) for another process holding the file (default 5s)")
}

// flags returns a FlagSet for c that also knows the global flags, so they
// may follow the command name.
func (a *app) flags(c *command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.globalFlags(fs)
	return fs
}

// parse parses args with fs, allowing flags and positional arguments in any
// order ("show work --json" and "show --json work" are the same), and checks
// the number of positional arguments is within [min, max] (max < 0: no limit).
func (a *app) parse(c *command, fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	if a.inspect != nil {
		a.inspect(c, fs)
		return nil, errHelp
	}
	pos, err := cliflag.Parse(fs, args, false)
	if errors.Is(err, flag.ErrHelp) {
		printCommandHelp(a.stdout, c, fs)
		return nil, errHelp
	}
	if err != nil {
		return nil, flagError(c, fs, err)
	}
	switch {
	case len(pos) < min:
		if names := c.required(); len(pos) < len(names) {
			return nil, usagef("missing %s", names[len(pos)])
		}
		return nil, usagef("missing argument")
	case max >= 0 && len(pos) > max:
		return nil, usagef("unexpected argument %q", pos[max])
	}
	return pos, nil
}

// required names c's required arguments, read from its usage line: the
// upper-case words outside brackets, before any "<" (stdin).
func (c *command) required() []string {
	var names []string
	depth := 0
	for _, w := range strings.Fields(c.usage) {
		if w == "<" {
			break
		}
		opening := strings.Count(w, "[") + strings.Count(w, "(")
		if depth == 0 && opening == 0 && w != "" && w[0] >= 'A' && w[0] <= 'Z' {
			names = append(names, w)
		}
		depth += opening - strings.Count(w, "]") - strings.Count(w, ")")
	}
	return names
}

// flagError says what is wrong with a flag (a *cliflag.Problem) in the
// words of this command, with the fix.
func flagError(c *command, fs *flag.FlagSet, err error) error {
	where, help := "", "'ctxstore help'"
	if c != nil {
		where, help = fmt.Sprintf(" for 'ctxstore %s'", c.name), fmt.Sprintf("'ctxstore %s --help'", c.name)
	}
	p, ok := errors.AsType[*cliflag.Problem](err)
	if !ok {
		return usagef("%v; see %s", err, help)
	}
	name := cliflag.Dashed(p.Name)
	switch p.Kind {
	case cliflag.Unknown:
		var flags []string
		fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) })
		if hint := cliflag.Suggest(p.Name, flags, cliflag.Dashed); hint != "" {
			return usagef("unknown flag %s%s%s (see %s)", name, where, hint, help)
		}
		return usagef("unknown flag %s%s; see %s", name, where, help)
	case cliflag.NoValue:
		return usagef("%s needs a value; see %s", name, help)
	case cliflag.Syntax:
		return usagef("bad flag syntax: %s; see %s", p.Value, help)
	}
	want, unit := cliflag.Want(fs, p.Name, p.Value)
	switch {
	case unit:
		return usagef("%s %s needs a unit, e.g. %ss", name, p.Value, p.Value)
	case want == "":
		return usagef("invalid value %q for %s: %v; see %s", p.Value, name, p.Err, help)
	}
	return usagef("invalid value %q for %s: want %s", p.Value, name, want)
}

func printOverview(w io.Writer, cmds []*command) {
	fmt.Fprint(w, `ctxstore keeps LLM agents' conversations in a bbolt file, or in a
PostgreSQL database that several hosts share; this command inspects and
maintains them.

usage: ctxstore [--db FILE|URL] [--json] COMMAND [ARGS]

commands:
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
global flags (before or after the command):
  --db FILE          the database (default $CTXSTORE_DB, else $XDG_DATA_HOME/ctxstore/ctxstore.db,
                     XDG_DATA_HOME defaulting to ~/.local/share)
  --db URL           a PostgreSQL database instead of a file:
                     postgres://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE[?schema=NAME]
                     (postgresql:// too; the tables live in schema NAME, default
                     "ctxstore", created on first use; other parameters such as
                     sslmode go to the driver; percent-encode / # ? @ : % and
                     spaces in the password, or give it with PGPASSWORD). A
                     keyword/value string works too: "host=H dbname=D schema=NAME".
                     Every command works on it except shrink and
                     doctor --salvage, which work on a file.
  --json             machine-readable output; an error is one JSON object on
                     stderr: {"error":CODE,"message":...,"exit":N}
  --lock-timeout D   wait at most D for another process holding the file (default 5s)
  --version          print the version (as 'ctxstore version')

Exit status: 0 ok, 1 error, 2 usage. Run 'ctxstore COMMAND --help' for a command's
flags and an example. Start with: ctxstore demo
`)
}

func printCommandHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: ctxstore %s %s\n\n%s\n", c.name, c.usage, c.summary)
	if c.help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.help))
	}
	fmt.Fprintln(w, "\nflags:")
	cliflag.PrintFlags(w, fs, isGlobalFlag) // the global flags' defaults are in the text
	fmt.Fprintf(w, "\nexample:\n%s\n", termio.Indent(strings.TrimSpace(c.example), "  "))
}

// dbPath resolves the database path: --db, $CTXSTORE_DB, then the XDG data
// directory.
func (a *app) dbPath() (string, error) {
	if a.db != "" {
		return a.db, nil
	}
	if p := a.getenv("CTXSTORE_DB"); p != "" {
		return p, nil
	}
	dir := a.getenv("XDG_DATA_HOME")
	if dir == "" || !filepath.IsAbs(dir) { // the XDG spec says to ignore relative paths
		home := a.getenv("HOME")
		if home == "" {
			h, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("no database given and no home directory to default to: use --db FILE or set CTXSTORE_DB (%w)", err)
			}
			home = h
		}
		dir = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(dir, "ctxstore", "ctxstore.db"), nil
}
