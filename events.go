package ctxstore

// The events Hooks receives carry their data as a map, keyed as the Event
// constants document. The types below read the data of the events a host
// most often acts on, so that it names no key: WarningOf, IncludeOf and
// ResumeOf return them, typed, for their event and report false for any
// other.

// Warning is the data of an EventWarning event.
type Warning struct {
	// Message says what happened, for people.
	Message string
	// Reason is a code for programs ("infeasible_target", ...).
	Reason string
	// Session names the session, when the event is about one.
	Session string
}

// WarningOf reads an EventWarning event's data.
func WarningOf(event string, data map[string]any) (Warning, bool) {
	if event != EventWarning {
		return Warning{}, false
	}
	return Warning{Message: str(data, "message"), Reason: str(data, "reason"), Session: str(data, "session")}, true
}

// Include is the data of an EventInclude event: a memory file became a
// system message.
type Include struct {
	// Source is the memory file's path.
	Source string
	// Content is what it contributed.
	Content string
}

// IncludeOf reads an EventInclude event's data.
func IncludeOf(event string, data map[string]any) (Include, bool) {
	if event != EventInclude {
		return Include{}, false
	}
	return Include{Source: str(data, "source"), Content: str(data, "content")}, true
}

// Resume is the data of an EventResume event: a persistent session was
// opened.
type Resume struct {
	Session string
	// Messages is how many messages the session held.
	Messages int
	// Repaired counts tool calls an interrupted run left unanswered that
	// views now answer.
	Repaired int
	// Migrated says the session was imported from another form (a
	// transcript) when opened.
	Migrated bool
	// IgnoredSetMessages says a SetMessages was ignored because the session
	// already held messages.
	IgnoredSetMessages bool
}

// ResumeOf reads an EventResume event's data.
func ResumeOf(event string, data map[string]any) (Resume, bool) {
	if event != EventResume {
		return Resume{}, false
	}
	return Resume{
		Session: str(data, "session"), Messages: num(data, "messages"), Repaired: num(data, "repaired"),
		Migrated: boolean(data, "migrated"), IgnoredSetMessages: boolean(data, "ignored_set_messages"),
	}, true
}

func str(data map[string]any, key string) string {
	s, _ := data[key].(string)
	return s
}

func num(data map[string]any, key string) int {
	switch n := data[key].(type) {
	case int:
		return n
	case int64:
		return int(n)
	case float64:
		return int(n)
	}
	return 0
}

func boolean(data map[string]any, key string) bool {
	b, _ := data[key].(bool)
	return b
}
