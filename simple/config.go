package simple

import "github.com/ctxstore/ctxstore"

// Config is the shared manager configuration, ctxstore.Config. The name is
// kept so that code written as simple.Config{…} still compiles.
type Config = ctxstore.Config

// DefaultMaxMessageBytes is ctxstore.DefaultMaxMessageBytes.
const DefaultMaxMessageBytes = ctxstore.DefaultMaxMessageBytes

// ErrInvalidConfig is ctxstore.ErrInvalidConfig.
var ErrInvalidConfig = ctxstore.ErrInvalidConfig

// ConfigError is ctxstore.ConfigError.
type ConfigError = ctxstore.ConfigError
