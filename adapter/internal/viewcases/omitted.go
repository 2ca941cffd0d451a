package viewcases

import (
	"context"
	"fmt"
	"strings"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/simple"
)

// omittedOutput is the view a manager computes at a tight budget for a
// conversation whose tool output (an OpenAI tool message and an Anthropic
// tool_result block) the assistant has since summed up: each result shows
// a stub in place of its output and still answers its call. Annotations
// are on, so the stubs and the notice carry metadata no request may send.
func omittedOutput() Case {
	ctx := context.Background()
	m, err := simple.New(simple.Config{Annotations: true})
	if err != nil {
		panic(fmt.Sprintf("viewcases: %v", err))
	}
	rows := strings.Repeat("INSERT INTO a VALUES (1, 'row of the schema dump');\n", 200)
	for _, js := range []string{
		sys,
		`{"role":"user","content":"Migrate the store to the new schema."}`,
		`{"role":"assistant","content":"Reading the schema first.","tool_calls":[{"id":"call_o1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"schema.sql\"}"}}]}`,
		`{"role":"tool","tool_call_id":"call_o1","content":` + quote(rows) + `}`,
		`{"role":"assistant","content":[{"type":"text","text":"Three tables; running the migration."},{"type":"tool_use","id":"toolu_o2","name":"run","input":{"cmd":"make migrate"}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_o2","content":` + quote(rows) + `}]}`,
		`{"role":"assistant","content":"Migrated: tables a, b and c are on schema 7."}`,
		`{"role":"user","content":"Now add an index on a.id."}`,
	} {
		if err := m.AddMessage(ctx, ctxstore.MustParseMessage([]byte(js))); err != nil {
			panic(fmt.Sprintf("viewcases: %v", err))
		}
	}
	v, err := m.Explain(ctx, ctxstore.Request{TokenBudget: 1000})
	if err != nil {
		panic(fmt.Sprintf("viewcases: %v", err))
	}
	v.Session = "s-omitted"
	return Case{"omitted tool output", v}
}

func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}
