package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/ctxstore/ctxstore/internal/termio"
)

func versionCommand() *command {
	return &command{
		name:    "version",
		usage:   "[--json]",
		summary: "print ctxstore's version and the Go version it was built with",
		help: `The version is the module version recorded at build time: a release tag
for 'go install github.com/ctxstore/ctxstore/cmd/ctxstore@VERSION', a
pseudo-version for a build inside a git checkout, "(devel)" otherwise.
'ctxstore --version' prints the same.`,
		example: "ctxstore version\nctxstore --version",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			if _, err := a.parse(c, a.flags(c), args, 0, 0); err != nil {
				return err
			}
			v := buildVersion()
			if a.json {
				return termio.WriteJSON(a.stdout, map[string]string{"version": v, "go": runtime.Version(), "os": runtime.GOOS, "arch": runtime.GOARCH})
			}
			fmt.Fprintf(a.stdout, "ctxstore %s (%s %s/%s)\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// buildVersion is the main module's version from the build info, or
// "(devel)" when the build recorded none.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
