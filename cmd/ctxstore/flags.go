package main

import (
	"flag"
	"fmt"
	"strings"
)

// flagProblemKind says what is wrong with a flag.
type flagProblemKind int

const (
	flagUnknown  flagProblemKind = iota // no such flag
	flagNoValue                         // the flag takes a value, and none followed
	flagBadValue                        // the flag's Set refused the value
	flagSyntax                          // not a flag's syntax ("---x", "-=x")
)

// flagProblem is parseFlags's error for a flag it cannot take.
type flagProblem struct {
	kind  flagProblemKind
	name  string // the flag's name, without dashes
	value string // the value given (flagBadValue), or the argument (flagSyntax)
	err   error  // Set's error (flagBadValue)
}

func (p *flagProblem) Error() string {
	switch p.kind {
	case flagUnknown:
		return "unknown flag " + dashed(p.name)
	case flagNoValue:
		return dashed(p.name) + " needs a value"
	case flagSyntax:
		return "bad flag syntax: " + p.value
	}
	return fmt.Sprintf("invalid value %q for %s: %v", p.value, dashed(p.name), p.err)
}

// parseFlags sets the flags of fs that args give (-name, --name,
// -name=value, --name value; a boolean flag takes no separate value) and
// returns the other arguments. With stopAtArg it stops at the first
// argument that is not a flag, which is returned with everything after it
// (the global flags before a command's name); otherwise flags and
// arguments come in any order ("show work --json" and "show --json work"
// are the same). "--" ends the flags. -h or --help, unless fs defines them,
// is flag.ErrHelp; anything else wrong is a *flagProblem.
func parseFlags(fs *flag.FlagSet, args []string, stopAtArg bool) ([]string, error) {
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
			return nil, &flagProblem{kind: flagSyntax, value: arg}
		}
		name, value, hasValue := strings.Cut(name, "=")
		f := fs.Lookup(name)
		if f == nil {
			if name == "help" || name == "h" {
				return nil, flag.ErrHelp
			}
			return nil, &flagProblem{kind: flagUnknown, name: name}
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			if !hasValue {
				value = "true"
			}
		} else if !hasValue {
			if i+1 == len(args) {
				return nil, &flagProblem{kind: flagNoValue, name: name}
			}
			i++
			value = args[i]
		}
		if err := fs.Set(name, value); err != nil {
			return nil, &flagProblem{kind: flagBadValue, name: name, value: value, err: err}
		}
	}
	return pos, nil
}
