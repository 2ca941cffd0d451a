// Package completion writes ctxstore's shell completion scripts (bash, zsh,
// fish) from the commands and flags the CLI describes: commands, their
// flags, file names after the flags that take one, and session names,
// asked of 'ctxstore ls --names', where a command takes a SESSION.
package completion

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ctxstore/ctxstore/internal/cliflag"
)

// Flag is one flag as completion offers it.
type Flag struct {
	Name  string // without dashes
	Usage string
	Value bool // takes a value
	File  bool // the value is a file name
}

// dashed is the flag as typed.
func (f Flag) dashed() string { return cliflag.Dashed(f.Name) }

// FlagsOf returns the flags of fs as completion offers them, but those
// skip says (nil: none). A flag whose value is named FILE or OUT in its
// usage completes file names.
func FlagsOf(fs *flag.FlagSet, skip func(name string) bool) []Flag {
	var flags []Flag
	fs.VisitAll(func(f *flag.Flag) {
		if skip != nil && skip(f.Name) {
			return
		}
		arg, usage := flag.UnquoteUsage(f)
		b, isBool := f.Value.(interface{ IsBoolFlag() bool })
		flags = append(flags, Flag{Name: f.Name, Usage: usage, Value: !isBool || !b.IsBoolFlag(), File: arg == "FILE" || arg == "OUT"})
	})
	return flags
}

// Command is one command and its flags; the first of a list, named "", holds
// the global flags.
type Command struct {
	Name, Summary string
	Flags         []Flag
	Sessions      bool // its arguments are session names
}

// valueFlags lists the flags (of every command) whose value is the next
// word, in shell case-pattern form: --db|-o|...
func valueFlags(specs []Command, file bool) string {
	seen := map[string]bool{}
	var out []string
	for _, s := range specs {
		for _, f := range s.Flags {
			if f.Value && (!file || f.File) && !seen[f.Name] {
				seen[f.Name] = true
				out = append(out, f.dashed())
			}
		}
	}
	return strings.Join(out, "|")
}

func flagWords(flags []Flag) string {
	var w []string
	for _, f := range flags {
		w = append(w, f.dashed())
	}
	return strings.Join(w, " ")
}

// Bash writes the bash completion script of specs.
func Bash(w io.Writer, specs []Command) {
	var names []string
	for _, s := range specs[1:] {
		names = append(names, s.Name)
	}
	fmt.Fprintf(w, `# bash completion for ctxstore. Load with: source <(ctxstore completion bash)
_ctxstore() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd="" i
    case $prev in
        %s) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        %s) COMPREPLY=(); return ;;
    esac
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            %s) ((i++)) ;;
            -*) ;;
            *) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done
    local words sessions=""
    case $cmd in
        "") words="%s %s" ;;
`, valueFlags(specs, true), valueFlags(specs, false), valueFlags(specs[:1], false), strings.Join(names, " "), flagWords(specs[0].Flags))
	for _, s := range specs[1:] {
		more := ""
		if s.Sessions {
			more = " sessions=1"
		}
		fmt.Fprintf(w, "        %s) words=%q%s ;;\n", s.Name, flagWords(append(s.Flags, specs[0].Flags[2:]...)), more)
	}
	fmt.Fprint(w, `    esac
    if [[ -n $sessions && $cur != -* ]]; then
        local db=() IFS=$'\n'
        for ((i = 1; i < COMP_CWORD; i++)); do
            [[ ${COMP_WORDS[i]} == --db ]] && db=(--db "${COMP_WORDS[i+1]}")
        done
        COMPREPLY=($(compgen -W "$(ctxstore "${db[@]}" ls --names 2>/dev/null)" -- "$cur"))
        return
    fi
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _ctxstore ctxstore
`)
}

// zshQuote quotes s for zsh in single quotes.
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Zsh writes the zsh completion script of specs.
func Zsh(w io.Writer, specs []Command) {
	fmt.Fprintf(w, `#compdef ctxstore
# zsh completion for ctxstore. Install with:
#   ctxstore completion zsh > "${fpath[1]}/_ctxstore"
_ctxstore() {
    local cmd="" i
    case $words[CURRENT-1] in
        %s) _files; return ;;
        %s) return ;;
    esac
    for (( i = 2; i < CURRENT; i++ )); do
        case $words[i] in
            %s) (( i++ )) ;;
            -*) ;;
            *) cmd=$words[i]; break ;;
        esac
    done
    local -a flags
    local sessions=""
    if [[ -z $cmd ]]; then
        if [[ $PREFIX != -* ]]; then
            local -a cmds
            cmds=(
`, valueFlags(specs, true), valueFlags(specs, false), valueFlags(specs[:1], false))
	for _, s := range specs[1:] {
		fmt.Fprintf(w, "                %s\n", zshQuote(s.Name+":"+strings.ReplaceAll(s.Summary, ":", `\:`)))
	}
	fmt.Fprintf(w, `            )
            _describe command cmds
            return
        fi
        flags=(%s)
    else
        case $cmd in
`, flagWords(specs[0].Flags))
	for _, s := range specs[1:] {
		more := ""
		if s.Sessions {
			more = "; sessions=1"
		}
		fmt.Fprintf(w, "            %s) flags=(%s)%s ;;\n", s.Name, flagWords(append(s.Flags, specs[0].Flags[2:]...)), more)
	}
	fmt.Fprint(w, `        esac
        if [[ $PREFIX != -* && -n $sessions ]]; then
            local -a db names
            for (( i = 2; i < CURRENT; i++ )); do
                [[ $words[i] == --db ]] && db=(--db $words[i+1])
            done
            names=(${(f)"$(ctxstore $db ls --names 2>/dev/null)"})
            compadd -- $names
            return
        fi
        if [[ $PREFIX != -* ]]; then
            _files
            return
        fi
    fi
    compadd -- $flags
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _ctxstore "$@"
else
    compdef _ctxstore ctxstore
fi
`)
}

// fishQuote quotes s for fish in single quotes.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// Fish writes the fish completion script of specs.
func Fish(w io.Writer, specs []Command) {
	fmt.Fprintf(w, `# fish completion for ctxstore. Install with:
#   ctxstore completion fish > ~/.config/fish/completions/ctxstore.fish

# __ctxstore_cmd prints the command name typed so far, skipping global
# flags and their values.
function __ctxstore_cmd
    set -l words (commandline -opc)
    set -e words[1]
    while set -q words[1]
        switch $words[1]
            case %s
                set -e words[1]
            case '-*'
            case '*'
                echo $words[1]
                return 0
        end
        set -e words[1]
    end
    return 1
end

function __ctxstore_using
    set -l cmd (__ctxstore_cmd)
    test "$cmd" = "$argv[1]"
end

# __ctxstore_sessions prints the session names of the database the line
# names with --db, else the default one.
function __ctxstore_sessions
    set -l words (commandline -opc)
    set -l db
    if set -l i (contains -i -- --db $words)
        set db --db $words[(math $i + 1)]
    end
    ctxstore $db ls --names 2>/dev/null
end

complete -c ctxstore -f
`, strings.ReplaceAll(valueFlags(specs[:1], false), "|", " "))
	fishFlags := func(cond string, flags []Flag) {
		for _, f := range flags {
			opt := "-l " + f.Name
			if len(f.Name) == 1 {
				opt = "-o " + f.Name
			}
			switch {
			case f.File:
				opt += " -r -F"
			case f.Value:
				opt += " -x"
			}
			fmt.Fprintf(w, "complete -c ctxstore%s %s -d %s\n", cond, opt, fishQuote(f.Usage))
		}
	}
	fishFlags("", specs[0].Flags[2:]) // --db, --json, --lock-timeout: anywhere
	fishFlags(" -n 'not __ctxstore_cmd'", specs[0].Flags[:2])
	for _, s := range specs[1:] {
		fmt.Fprintf(w, "complete -c ctxstore -n 'not __ctxstore_cmd' -a %s -d %s\n", s.Name, fishQuote(s.Summary))
		fishFlags(" -n "+fishQuote("__ctxstore_using "+s.Name), s.Flags)
		if s.Sessions {
			fmt.Fprintf(w, "complete -c ctxstore -n %s -a '(__ctxstore_sessions)'\n", fishQuote("__ctxstore_using "+s.Name))
		}
	}
}
