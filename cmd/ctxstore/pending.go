package main

import (
	"context"
	"errors"
	"github.com/ctxstore/ctxstore/store"
)

type changeStub struct{}

func watchStub(ctx context.Context, st *store.Store, name string) (<-chan changeStub, error) {
	return nil, errors.New("watch not yet available")
}

func pendingCommand(name string) *command {
	return &command{name: name, summary: "(pending)", run: func(ctx context.Context, a *app, c *command, args []string) error {
		return errors.New("not yet")
	}}
}

// watchAvailable is false until store.Watch lands; tail -f needs it.
const watchAvailable = false
