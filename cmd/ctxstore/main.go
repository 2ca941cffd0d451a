// Command ctxstore inspects and maintains ctxstore files.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "demo" {
		fmt.Println("ctxstore demo: coming soon")
		return
	}
	fmt.Fprintln(os.Stderr, "usage: ctxstore demo")
	os.Exit(2)
}
