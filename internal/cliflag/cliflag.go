// Package cliflag is the command line's own flag parser over a
// flag.FlagSet: flags and arguments in any order, "--" ending the flags,
// typed problems (an unknown flag, a missing or bad value, bad syntax)
// instead of the flag package's messages, the names closest to a mistyped
// one, and the flags listed as users type them.
package cliflag

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// ProblemKind says what is wrong with a flag.
type ProblemKind int

const (
	Unknown  ProblemKind = iota // no such flag
	NoValue                     // the flag takes a value, and none followed
	BadValue                    // the flag's Set refused the value
	Syntax                      // not a flag's syntax ("---x", "-=x")
)

// Problem is Parse's error for a flag it cannot take.
type Problem struct {
	Kind  ProblemKind
	Name  string // the flag's name, without dashes
	Value string // the value given (BadValue), or the argument (Syntax)
	Err   error  // Set's error (BadValue)
}

// Error says what is wrong, in a generic way.
func (p *Problem) Error() string {
	switch p.Kind {
	case Unknown:
		return "unknown flag " + Dashed(p.Name)
	case NoValue:
		return Dashed(p.Name) + " needs a value"
	case Syntax:
		return "bad flag syntax: " + p.Value
	}
	return fmt.Sprintf("invalid value %q for %s: %v", p.Value, Dashed(p.Name), p.Err)
}

// Parse sets the flags of fs that args give (-name, --name,
// -name=value, --name value; a boolean flag takes no separate value) and
// returns the other arguments. With stopAtArg it stops at the first
// argument that is not a flag, which is returned with everything after it
// (the global flags before a command's name); otherwise flags and
// arguments come in any order ("show work --json" and "show --json work"
// are the same). "--" ends the flags. -h or --help, unless fs defines them,
// is flag.ErrHelp; anything else wrong is a *Problem.
func Parse(fs *flag.FlagSet, args []string, stopAtArg bool) ([]string, error) {
	var pos []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			return append(pos, args[i+1:]...), nil
		}
		if len(arg) < 2 || arg[0] != '-' {
			if stopAtArg {
				return append(pos, args[i:]...), nil
			}
			pos = append(pos, arg)
			continue
		}
		name := strings.TrimPrefix(arg[1:], "-")
		if name == "" || name[0] == '-' || name[0] == '=' {
			return nil, &Problem{Kind: Syntax, Value: arg}
		}
		name, value, hasValue := strings.Cut(name, "=")
		f := fs.Lookup(name)
		if f == nil {
			if name == "help" || name == "h" {
				return nil, flag.ErrHelp
			}
			return nil, &Problem{Kind: Unknown, Name: name}
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			if !hasValue {
				value = "true"
			}
		} else if !hasValue {
			if i+1 == len(args) {
				return nil, &Problem{Kind: NoValue, Name: name}
			}
			i++
			value = args[i]
		}
		if err := fs.Set(name, value); err != nil {
			return nil, &Problem{Kind: BadValue, Name: name, Value: value, Err: err}
		}
	}
	return pos, nil
}

// Dashed is a flag name as users type it: "-n", "--epoch".
func Dashed(name string) string {
	name = strings.TrimLeft(name, "-")
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// Suggest names the candidates closest to a mistyped name (within two
// edits, or of which it is a prefix), each as show writes it, as
// "; did you mean X or Y?"; "" when none is close.
func Suggest(name string, candidates []string, show func(string) string) string {
	var close []string
	for _, c := range candidates {
		if d := editDistance(name, c); d <= 2 && d < len(c) || len(name) >= 2 && strings.HasPrefix(c, name) {
			close = append(close, show(c))
		}
	}
	if len(close) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(close, " or ") + "?"
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Want says what the flag name of fs takes, for a message about a bad
// value: "a whole number", "a duration such as 500ms, 30s or 2m"..., ""
// for a flag of another type. A duration given as a bare number is told
// it needs a unit (unit).
func Want(fs *flag.FlagSet, name, value string) (want string, unit bool) {
	g, ok := fs.Lookup(name).Value.(flag.Getter)
	if !ok {
		return "", false
	}
	switch g.Get().(type) {
	case time.Duration:
		if _, err := strconv.ParseFloat(value, 64); err == nil {
			return "", true
		}
		return "a duration such as 500ms, 30s or 2m", false
	case int, int64:
		return "a whole number", false
	case uint, uint64:
		return "a whole number, 0 or more", false
	case float64:
		return "a number", false
	case bool:
		return "true or false", false
	}
	return "", false
}

// PrintFlags lists the flags of fs on w as fs.PrintDefaults does, but with
// the dashes users type ("-n", "--epoch"); the defaults of the flags hide
// says are left out.
func PrintFlags(w io.Writer, fs *flag.FlagSet, hide func(name string) bool) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		name := Dashed(f.Name)
		if arg != "" {
			name += " " + arg
		}
		if def := f.DefValue; !hide(f.Name) && def != "" && def != "0" && def != "false" {
			usage += fmt.Sprintf(" (default %s)", def)
		}
		fmt.Fprintf(w, "  %-20s %s\n", name, usage)
	})
}
