package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
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
}

// command is one subcommand. run receives the arguments after the command
// name; it parses them with a.parse, which also accepts the global flags.
type command struct {
	name    string
	usage   string // arguments, e.g. "SESSION [--epoch N]"
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
		viewCommand(),
		addCommand(),
		tailCommand(),
		exportCommand(),
		importCommand(),
		verifyCommand(),
		doctorCommand(),
		clearCommand(),
		purgeCommand(),
		compactFileCommand(),
		statsCommand(),
	}
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

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
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printOverview(a.stdout, cmds)
			return 0
		}
		fmt.Fprintf(a.stderr, "ctxstore: %v\nrun 'ctxstore help' for usage\n", err)
		return 2
	}
	rest := global.Args()
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
		if c.name == name {
			cmd = c
		}
	}
	if cmd == nil {
		fmt.Fprintf(a.stderr, "ctxstore: unknown command %q\nrun 'ctxstore help' for the list of commands\n", name)
		return 2
	}
	err := cmd.run(ctx, a, cmd, rest)
	var ue *usageError
	var ee *exitError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(a.stderr, "ctxstore %s: %s\nusage: ctxstore %s %s\nrun 'ctxstore %s --help' for details\n",
			cmd.name, ue.msg, cmd.name, cmd.usage, cmd.name)
		return 2
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintf(a.stderr, "ctxstore: %v\n", err)
		return 1
	}
}

func (a *app) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&a.db, "db", a.db, "database `FILE` (default $CTXSTORE_DB, else $XDG_DATA_HOME/ctxstore/ctxstore.db)")
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
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printCommandHelp(a.stdout, c, fs)
				return nil, errHelp
			}
			return nil, usagef("%v", err)
		}
		consumed := len(args) - fs.NArg()
		if consumed > 0 && args[consumed-1] == "--" {
			// Everything after "--" is positional.
			pos = append(pos, fs.Args()...)
			break
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	switch {
	case len(pos) < min:
		return nil, usagef("missing argument")
	case max >= 0 && len(pos) > max:
		return nil, usagef("unexpected argument %q", pos[max])
	}
	return pos, nil
}

func printOverview(w io.Writer, cmds []*command) {
	fmt.Fprint(w, `ctxstore keeps LLM agents' conversations in a bbolt file; this command
inspects and maintains such files.

usage: ctxstore [--db FILE] [--json] COMMAND [ARGS]

commands:
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
global flags (before or after the command):
  --db FILE          the database (default $CTXSTORE_DB, else $XDG_DATA_HOME/ctxstore/ctxstore.db,
                     XDG_DATA_HOME defaulting to ~/.local/share)
  --json             machine-readable output
  --lock-timeout D   wait at most D for another process holding the file (default 5s)

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
	// Like fs.PrintDefaults, but with the "--" users type.
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if len(f.Name) == 1 {
			name = "-" + f.Name
		}
		if arg != "" {
			name += " " + arg
		}
		global := f.Name == "db" || f.Name == "json" || f.Name == "lock-timeout" // their defaults are in the text
		if def := f.DefValue; !global && def != "" && def != "0" && def != "false" {
			usage += fmt.Sprintf(" (default %s)", def)
		}
		fmt.Fprintf(w, "  %-20s %s\n", name, usage)
	})
	fmt.Fprintf(w, "\nexample:\n%s\n", indent(strings.TrimSpace(c.example), "  "))
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
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
