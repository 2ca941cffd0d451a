package amplifier

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore"
	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
)

// Version is the module version GetModuleInfo reports.
const Version = "0.1.0"

// configKey is one key of a Mount's config map.
type configKey struct {
	doc  string // for the config schema
	kind string // JSON Schema type of the value as written
	set  func(c *SessionConfig, v string) error
}

func intKey(doc string, field func(c *SessionConfig) *int) configKey {
	return configKey{doc, "integer", func(c *SessionConfig, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("want an integer, got %q", v)
		}
		*field(c) = n
		return nil
	}}
}

func floatKey(doc string, field func(c *SessionConfig) *float64) configKey {
	return configKey{doc, "number", func(c *SessionConfig, v string) error {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return fmt.Errorf("want a number, got %q", v)
		}
		*field(c) = f
		return nil
	}}
}

func boolKey(doc string, field func(c *SessionConfig) *bool) configKey {
	return configKey{doc, "boolean", func(c *SessionConfig, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		*field(c) = b
		return nil
	}}
}

func stringKey(doc string, field func(c *SessionConfig) *string) configKey {
	return configKey{doc, "string", func(c *SessionConfig, v string) error { *field(c) = v; return nil }}
}

// configKeys are the keys a Mount's config may hold; everything else is
// refused.
var configKeys = map[string]configKey{
	"db":         stringKey("the store file; default $CTXSTORE_DB, else $XDG_DATA_HOME/ctxstore/ctxstore.db", func(c *SessionConfig) *string { return &c.DB }),
	"session":    stringKey("the session to serve; default a new one, whose name the module reports", func(c *SessionConfig) *string { return &c.Session }),
	"counter":    stringKey("token counter: o200k_base (default), cl100k_base or heuristic", func(c *SessionConfig) *string { return &c.Counter }),
	"strategy":   stringKey("compaction strategy: progressive (default) or truncate", func(c *SessionConfig) *string { return &c.Persistent.Strategy }),
	"max_tokens": intKey("cap on every budget; 0 = none", func(c *SessionConfig) *int { return &c.Persistent.MaxTokens }),
	"fallback_tokens": intKey("budget of a request that gives none; default 200000",
		func(c *SessionConfig) *int { return &c.Persistent.FallbackTokens }),
	"safety_margin":          intKey("tokens kept free below a model's window; default 1000", func(c *SessionConfig) *int { return &c.Persistent.SafetyMargin }),
	"compact_threshold":      floatKey("compaction starts at this fraction of the budget; default 0.92", func(c *SessionConfig) *float64 { return &c.Persistent.CompactThreshold }),
	"target_usage":           floatKey("compaction aims for this fraction of the budget; default 0.50", func(c *SessionConfig) *float64 { return &c.Persistent.TargetUsage }),
	"protected_recent":       floatKey("newest fraction of messages that removal spares; default 0.30", func(c *SessionConfig) *float64 { return &c.Persistent.ProtectedRecent }),
	"protected_tool_results": intKey("newest tool results kept whole; default 5", func(c *SessionConfig) *int { return &c.Persistent.ProtectedToolResults }),
	"truncate_chars":         intKey("characters a truncated tool result keeps; default 250", func(c *SessionConfig) *int { return &c.Persistent.TruncateChars }),
	"keep_recent":            intKey("messages the truncate strategy keeps; default 10", func(c *SessionConfig) *int { return &c.Persistent.KeepRecent }),
	"max_message_bytes":      intKey("larger messages are refused; default 8 MiB", func(c *SessionConfig) *int { return &c.Persistent.MaxMessageBytes }),
	"disable_notice":         boolKey("no note to the model about what was compacted", func(c *SessionConfig) *bool { return &c.Persistent.DisableNotice }),
	"annotations":            boolKey("mark the messages a view adds or rewrites with metadata.source", func(c *SessionConfig) *bool { return &c.Persistent.Annotations }),
	"watch_memory":           boolKey("append a new version of an edited memory file", func(c *SessionConfig) *bool { return &c.Persistent.WatchMemory }),
	"memory_files": {"files a fresh session starts with: a JSON array of paths, or paths separated by commas", "string", func(c *SessionConfig, v string) error {
		var err error
		c.Persistent.MemoryFiles, err = listValue(v)
		return err
	}},
	"lock_timeout": {"how long to wait for another process's lock on the file, e.g. 5s", "string", func(c *SessionConfig, v string) error {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("want a duration such as 5s, got %q", v)
		}
		c.Persistent.LockTimeout = d
		return nil
	}},
	"provider_counters": {"counters by provider name, as provider=counter pairs separated by commas or a JSON object", "string", func(c *SessionConfig, v string) error {
		var err error
		c.ProviderCounters, err = pairsValue(v)
		return err
	}},
}

// listValue reads a JSON array of strings, or strings separated by commas.
func listValue(v string) ([]string, error) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "[") {
		var out []string
		if err := json.Unmarshal([]byte(v), &out); err != nil {
			return nil, fmt.Errorf("not a JSON array of strings: %v", err)
		}
		return out, nil
	}
	var out []string
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// pairsValue reads a JSON object of strings, or key=value pairs separated
// by commas.
func pairsValue(v string) (map[string]string, error) {
	v = strings.TrimSpace(v)
	out := map[string]string{}
	if strings.HasPrefix(v, "{") {
		if err := json.Unmarshal([]byte(v), &out); err != nil {
			return nil, fmt.Errorf("not a JSON object of strings: %v", err)
		}
		return out, nil
	}
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		k, val, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not provider=counter", p)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	return out, nil
}

// ParseConfig reads a Mount's config map into a SessionConfig. An unknown
// key, or a value that does not parse, fails with an error matching
// ctxstore.ErrInvalidConfig that names the key (and, for an unknown one,
// lists the known keys). Values are checked further when the session
// opens.
func ParseConfig(config map[string]string) (SessionConfig, error) {
	var c SessionConfig
	for _, k := range slices.Sorted(maps.Keys(config)) {
		key, ok := configKeys[k]
		if !ok {
			return c, &ctxstore.ConfigError{Field: k, Reason: "unknown key; the keys are " + strings.Join(slices.Sorted(maps.Keys(configKeys)), ", ")}
		}
		if err := key.set(&c, config[k]); err != nil {
			return c, &ctxstore.ConfigError{Field: k, Reason: err.Error()}
		}
	}
	return c, nil
}

// DefaultInfo is the ModuleInfo a Server reports unless told otherwise:
// a context module (the protocol's module types have no "context"; MEMORY
// is the nearest, and the mount point says "context"), with the JSON
// Schema of its config.
func DefaultInfo() *pb.ModuleInfo {
	props := map[string]any{}
	for k, v := range configKeys {
		props[k] = map[string]string{"type": "string", "description": v.doc + " (written as a " + v.kind + ")"}
	}
	schema, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "additionalProperties": false})
	return &pb.ModuleInfo{
		Id:               "context-ctxstore",
		Name:             "ctxstore",
		Version:          Version,
		ModuleType:       pb.ModuleType_MODULE_TYPE_MEMORY,
		MountPoint:       "context",
		Description:      "Durable conversation memory: every message appended to a log never rewritten; views compacted to the request's token budget.",
		ConfigSchemaJson: string(schema),
		Capabilities:     []string{"context", "persistent", "compaction", "resume"},
		Author:           "ctxstore",
	}
}
