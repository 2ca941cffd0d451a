package main

import (
	"context"
	"flag"
	"strings"

	"github.com/ctxstore/ctxstore/internal/completion"
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
				completion.Bash(a.stdout, specs)
			case "zsh":
				completion.Zsh(a.stdout, specs)
			case "fish":
				completion.Fish(a.stdout, specs)
			default:
				return usagef("no completion for shell %q: bash, zsh or fish", pos[0])
			}
			return nil
		},
	}
}

// completionSpecs asks every command for its flags without running it, and
// returns them with, first, the global flags as the "" command.
func completionSpecs(ctx context.Context, a *app) []completion.Command {
	global := []completion.Flag{{Name: "version", Usage: "print the version"}, {Name: "help", Usage: "show help"}}
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	(&app{}).globalFlags(fs)
	global = append(global, completion.FlagsOf(fs, nil)...)
	specs := []completion.Command{{Flags: global}}
	probe := &app{inspect: func(c *command, fs *flag.FlagSet) {
		spec := completion.Command{Name: c.name, Summary: c.summary, Sessions: strings.Contains(c.usage, "SESSION")}
		spec.Flags = completion.FlagsOf(fs, isGlobalFlag)
		spec.Flags = append(spec.Flags, completion.Flag{Name: "help", Usage: "show help"})
		specs = append(specs, spec)
	}}
	for _, c := range commands() {
		_ = c.run(ctx, probe, c, nil) // stops at parse with errHelp
	}
	return specs
}
