package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

func completionCommand() *command {
	return &command{
		name:    "completion",
		usage:   "SHELL (bash, zsh or fish)",
		summary: "print a shell completion script for commands, flags and session names",
		help: `Prints a script that completes ctxstore's commands, their flags, file
names after --db, -o and --salvage, and the session names of the database
(the --db on the line, else the default) where a command takes a SESSION,
asking 'ctxstore ls --names'. Load it in the shell's startup file.`,
		example: `ctxstore completion bash > ~/.local/share/bash-completion/completions/ctxstore
ctxstore completion zsh > "${fpath[1]}/_ctxstore"   # then start a new zsh
ctxstore completion fish > ~/.config/fish/completions/ctxstore.fish
source <(ctxstore completion bash)                   # this bash only`,
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			pos, err := a.parse(c, a.flags(c), args, 1, 1)
			if err != nil {
				return err
			}
			specs := completionSpecs(ctx, a)
			switch pos[0] {
			case "bash":
				writeBashCompletion(a.stdout, specs)
			case "zsh":
				writeZshCompletion(a.stdout, specs)
			case "fish":
				writeFishCompletion(a.stdout, specs)
			default:
				return usagef("no completion for shell %q: bash, zsh or fish", pos[0])
			}
			return nil
		},
	}
}

// flagSpec is one flag as completion offers it.
type flagSpec struct {
	name  string // without dashes
	usage string
	value bool // takes a value
	file  bool // the value is a file name
}

// dashed is the flag as typed.
func (f flagSpec) dashed() string { return dashed(f.name) }

// cmdSpec is one command and its flags (the global ones excluded).
type cmdSpec struct {
	name, summary string
	flags         []flagSpec
	sessions      bool // its arguments are session names
}

// completionSpecs asks every command for its flags without running it, and
// returns them with, first, the global flags as the "" command.
func completionSpecs(ctx context.Context, a *app) []cmdSpec {
	global := []flagSpec{{name: "version", usage: "print the version"}, {name: "help", usage: "show help"}}
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	(&app{}).globalFlags(fs)
	fs.VisitAll(func(f *flag.Flag) { global = append(global, toFlagSpec(f)) })
	specs := []cmdSpec{{flags: global}}
	probe := &app{inspect: func(c *command, fs *flag.FlagSet) {
		spec := cmdSpec{name: c.name, summary: c.summary, sessions: strings.Contains(c.usage, "SESSION")}
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name != "db" && f.Name != "json" && f.Name != "lock-timeout" {
				spec.flags = append(spec.flags, toFlagSpec(f))
			}
		})
		spec.flags = append(spec.flags, flagSpec{name: "help", usage: "show help"})
		specs = append(specs, spec)
	}}
	for _, c := range commands() {
		_ = c.run(ctx, probe, c, nil) // stops at parse with errHelp
	}
	return specs
}

func toFlagSpec(f *flag.Flag) flagSpec {
	arg, usage := flag.UnquoteUsage(f)
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	return flagSpec{
		name:  f.Name,
		usage: usage,
		value: !isBool || !b.IsBoolFlag(),
		file:  arg == "FILE" || arg == "OUT",
	}
}

// valueFlags lists the flags (of every command) whose value is the next
// word, in shell case-pattern form: --db|-o|...
func valueFlags(specs []cmdSpec, file bool) string {
	seen := map[string]bool{}
	var out []string
	for _, s := range specs {
		for _, f := range s.flags {
			if f.value && (!file || f.file) && !seen[f.name] {
				seen[f.name] = true
				out = append(out, f.dashed())
			}
		}
	}
	return strings.Join(out, "|")
}

func flagWords(flags []flagSpec) string {
	var w []string
	for _, f := range flags {
		w = append(w, f.dashed())
	}
	return strings.Join(w, " ")
}

func writeBashCompletion(w io.Writer, specs []cmdSpec) {
	var names []string
	for _, s := range specs[1:] {
		names = append(names, s.name)
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
`, valueFlags(specs, true), valueFlags(specs, false), valueFlags(specs[:1], false), strings.Join(names, " "), flagWords(specs[0].flags))
	for _, s := range specs[1:] {
		more := ""
		if s.sessions {
			more = " sessions=1"
		}
		fmt.Fprintf(w, "        %s) words=%q%s ;;\n", s.name, flagWords(append(s.flags, specs[0].flags[2:]...)), more)
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

func writeZshCompletion(w io.Writer, specs []cmdSpec) {
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
		fmt.Fprintf(w, "                %s\n", zshQuote(s.name+":"+strings.ReplaceAll(s.summary, ":", `\:`)))
	}
	fmt.Fprintf(w, `            )
            _describe command cmds
            return
        fi
        flags=(%s)
    else
        case $cmd in
`, flagWords(specs[0].flags))
	for _, s := range specs[1:] {
		more := ""
		if s.sessions {
			more = "; sessions=1"
		}
		fmt.Fprintf(w, "            %s) flags=(%s)%s ;;\n", s.name, flagWords(append(s.flags, specs[0].flags[2:]...)), more)
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

func writeFishCompletion(w io.Writer, specs []cmdSpec) {
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
	fishFlags := func(cond string, flags []flagSpec) {
		for _, f := range flags {
			opt := "-l " + f.name
			if len(f.name) == 1 {
				opt = "-o " + f.name
			}
			switch {
			case f.file:
				opt += " -r -F"
			case f.value:
				opt += " -x"
			}
			fmt.Fprintf(w, "complete -c ctxstore%s %s -d %s\n", cond, opt, fishQuote(f.usage))
		}
	}
	fishFlags("", specs[0].flags[2:]) // --db, --json, --lock-timeout: anywhere
	fishFlags(" -n 'not __ctxstore_cmd'", specs[0].flags[:2])
	for _, s := range specs[1:] {
		fmt.Fprintf(w, "complete -c ctxstore -n 'not __ctxstore_cmd' -a %s -d %s\n", s.name, fishQuote(s.summary))
		fishFlags(" -n "+fishQuote("__ctxstore_using "+s.name), s.flags)
		if s.sessions {
			fmt.Fprintf(w, "complete -c ctxstore -n %s -a '(__ctxstore_sessions)'\n", fishQuote("__ctxstore_using "+s.name))
		}
	}
}
