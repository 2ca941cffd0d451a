// Package viewcases holds the views both adapters' tests send through the
// official clients: one per shape a ctxstore view takes (parallel tool
// calls, Anthropic blocks, images, a repaired call, a summary, a compacted
// view with its notice), and ReplyTurn, one agent turn with an in-memory
// manager for the tests of replies coming in.
package viewcases

import (
	"github.com/ctxstore/ctxstore"
)

// Case is one named view.
type Case struct {
	Name string
	View ctxstore.View
}

// entry is one message of a case with its origin.
type entry struct {
	json string
	o    ctxstore.Origin
}

func whole(json string) entry { return entry{json: json, o: ctxstore.Origin{Form: ctxstore.FormWhole}} }

func form(f ctxstore.Form, json string) entry { return entry{json: json, o: ctxstore.Origin{Form: f}} }

// view builds a view numbering stored messages 1, 2, … unless skip says a
// gap (removed messages) comes before an entry.
func view(session string, stable int, skip map[int]uint64, es ...entry) ctxstore.View {
	v := ctxstore.View{Session: session, StablePrefix: stable}
	var seq uint64
	for i, e := range es {
		v.Messages = append(v.Messages, ctxstore.MustParseMessage([]byte(e.json)))
		o := e.o
		switch o.Form {
		case ctxstore.FormNotice, ctxstore.FormRepair:
		case ctxstore.FormSummary:
			o.FromSeq = seq + 1
			seq += 10
			o.Seq = seq
		default:
			seq += 1 + skip[i]
			o.Seq = seq
		}
		v.Origins = append(v.Origins, o)
	}
	return v
}

const sys = `{"role":"system","content":"You are a careful coding agent. Use tools to inspect the repository before answering."}`

// Interrupted is the content of a repaired tool result.
const Interrupted = "[interrupted: no result was recorded]"

// Cases returns the views every adapter must send successfully. Messages
// carry keys no provider accepts ("metadata", "id") where a host or
// ctxstore may have stored them.
func Cases() []Case {
	const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
	return []Case{
		{"parallel tool calls", view("s-parallel", 0, nil,
			whole(sys),
			whole(`{"role":"user","content":"Why does the build fail?","metadata":{"client":"tui"}}`),
			whole(`{"role":"assistant","content":null,"tool_calls":[`+
				`{"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"go.mod\"}"}},`+
				`{"id":"call_b","type":"function","function":{"name":"run","arguments":""}},`+
				`{"id":"call_c","type":"function","function":{"name":"run","arguments":"not json"}}]}`),
			whole(`{"role":"tool","tool_call_id":"call_a","content":"module example.com/x\n\ngo 1.26","id":"row-17"}`),
			whole(`{"role":"tool","tool_call_id":"call_b","content":"ok"}`),
			whole(`{"role":"tool","tool_call_id":"call_c","content":[{"type":"text","text":"exit status 1"}]}`),
			whole(`{"role":"assistant","content":"The go directive is too new for the installed toolchain."}`),
			whole(`{"role":"user","content":"Fix it."}`),
		)},
		{"anthropic blocks", view("s-blocks", 0, nil,
			whole(sys),
			whole(`{"role":"user","content":[{"type":"text","text":"List the source files."}]}`),
			whole(`{"role":"assistant","content":[`+
				`{"type":"thinking","thinking":"Two directories to list.","signature":"c2ln"},`+
				`{"type":"text","text":"Listing both directories."},`+
				`{"type":"tool_use","id":"toolu_1","name":"ls","input":{"dir":"."}},`+
				`{"type":"tool_use","id":"toolu_2","name":"ls","input":{"dir":"src"}}]}`),
			whole(`{"role":"user","content":[`+
				`{"type":"tool_result","tool_use_id":"toolu_1","content":"main.go"},`+
				`{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"lib.go"}],"is_error":false}],"metadata":{"source":"host"}}`),
			whole(`{"role":"assistant","content":[{"type":"text","text":"main.go and src/lib.go."}]}`),
			whole(`{"role":"user","content":[{"type":"text","text":"Open lib.go."}]}`),
		)},
		{"images", view("s-images", 0, nil,
			whole(sys),
			whole(`{"role":"user","content":[{"type":"text","text":"What do these show?"},`+
				`{"type":"image_url","image_url":{"url":"data:image/png;base64,`+png+`","detail":"low"}},`+
				`{"type":"image_url","image_url":{"url":"https://example.com/chart.png"}}]}`),
			whole(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_shot","type":"function","function":{"name":"screenshot","arguments":"{}"}}]}`),
			whole(`{"role":"tool","tool_call_id":"call_shot","content":"saved to shot.png"}`),
			whole(`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_img","name":"view_image","input":{"path":"shot.png"}}]}`),
			whole(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_img","content":[`+
				`{"type":"text","text":"shot.png"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+png+`"}}]}]}`),
			whole(`{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://example.com/logo.png"}},{"type":"text","text":"And this one?"}]}`),
		)},
		{"repaired interrupted call", view("s-repair", 0, nil,
			whole(sys),
			whole(`{"role":"user","content":"Run the tests and the linter."}`),
			whole(`{"role":"assistant","content":"Running both.","tool_calls":[`+
				`{"id":"call_t","type":"function","function":{"name":"run","arguments":"{\"cmd\":\"go test ./...\"}"}},`+
				`{"id":"call_l","type":"function","function":{"name":"run","arguments":"{\"cmd\":\"go vet ./...\"}"}}]}`),
			whole(`{"role":"tool","tool_call_id":"call_t","content":"ok  \texample.com/x\t0.01s"}`),
			form(ctxstore.FormRepair, `{"role":"tool","tool_call_id":"call_l","content":"`+Interrupted+`","metadata":{"source":"context-repair"}}`),
			whole(`{"role":"user","content":"The linter hung; go on without it."}`),
		)},
		{"summary", view("s-summary", 2, nil,
			whole(sys),
			form(ctxstore.FormSummary, `{"role":"user","content":"Previous conversation summary: the user asked for a CSV exporter; it is written and tested.","metadata":{"source":"context-summary"}}`),
			whole(`{"role":"user","content":"Now add a --tsv flag."}`),
			whole(`{"role":"assistant","tool_calls":[{"id":"call_e","type":"function","function":{"name":"edit","arguments":"{\"file\":\"main.go\"}"}}]}`),
			whole(`{"role":"tool","tool_call_id":"call_e","content":"edited"}`),
			whole(`{"role":"assistant","content":"Added --tsv."}`),
			whole(`{"role":"user","content":"Thanks."}`),
		)},
		{"compacted with notice", view("s-compacted", 5, map[int]uint64{4: 30},
			whole(sys),
			whole(`{"role":"user","content":"Migrate the store to the new schema."}`),
			whole(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"schema.sql\"}"}}]}`),
			form(ctxstore.FormTruncated, `{"role":"tool","tool_call_id":"call_1","content":"[truncated: ~900 tokens - call tool again if needed] CREATE TABLE a (id INTEGER PRIMARY KEY","metadata":{"source":"truncated"}}`),
			whole(`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_9","name":"run","input":{"cmd":"make migrate"}}]}`),
			whole(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"migrated 3 tables"}]}`),
			form(ctxstore.FormNotice, `{"role":"user","content":"[Context compacted: 30 earlier messages were omitted, 1 tool result was truncated. The full history is kept; call tools again if you need details that are missing.]","metadata":{"source":"context-compaction"}}`),
		)},
		{"starts with an assistant turn", view("s-start", 0, nil,
			whole(sys),
			whole(`{"role":"assistant","content":"Hello, what shall we build?"}`),
			whole(`{"role":"user","content":"A parser."}`),
		)},
		omittedOutput(),
	}
}
