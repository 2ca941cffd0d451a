package amplifier_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/amplifier"
	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
)

// gen makes random typed messages.
type gen struct{ r *rand.Rand }

var alphabet = []string{"a", "Z", "0", " ", "\"", "\\", "/", "<", ">", "&", "\n", "\t", "\u0001", "é", "漢", "😀", "\u2028", "{", "]", ","}

func (g gen) str() string {
	n := g.r.IntN(12)
	if g.r.IntN(5) == 0 {
		n = 0
	}
	var b strings.Builder
	for range n {
		b.WriteString(alphabet[g.r.IntN(len(alphabet))])
	}
	return b.String()
}

// json returns JSON text of any kind, with the spellings a lossy decoder
// would change (1.0, 9007199254740993, 1e400, escapes, inner whitespace).
func (g gen) json(depth int) string {
	switch k := g.r.IntN(9); {
	case depth > 2 || k == 0:
		return []string{"1.0", "9007199254740993", "1e400", "-0", "true", "null", `"\u00e9\/"`, "0.1"}[g.r.IntN(8)]
	case k <= 2:
		s, _ := json.Marshal(g.str())
		return string(s)
	case k <= 5:
		return g.object(depth)
	default:
		items := make([]string, g.r.IntN(4))
		for i := range items {
			items[i] = g.json(depth + 1)
		}
		return "[" + strings.Join(items, ", ") + "]"
	}
}

func (g gen) object(depth int) string {
	members := make([]string, g.r.IntN(4))
	for i := range members {
		k, _ := json.Marshal(g.str() + fmt.Sprint(i))
		members[i] = string(k) + ": " + g.json(depth+1)
	}
	return "{" + strings.Join(members, " ,") + "}"
}

// optJSON is "" (unset) or JSON.
func (g gen) optJSON(object bool) string {
	switch {
	case g.r.IntN(4) == 0:
		return ""
	case object:
		return g.object(0)
	}
	return g.json(0)
}

func (g gen) items() []string {
	out := make([]string, g.r.IntN(3))
	for i := range out {
		out[i] = g.json(1)
	}
	return out
}

func (g gen) block(kind int) *pb.ContentBlock {
	b := &pb.ContentBlock{Visibility: pb.Visibility(g.r.IntN(4))}
	switch kind {
	case 0:
		b.Block = &pb.ContentBlock_TextBlock{TextBlock: &pb.TextBlock{Text: g.str()}}
	case 1:
		b.Block = &pb.ContentBlock_ThinkingBlock{ThinkingBlock: &pb.ThinkingBlock{Thinking: g.str(), Signature: g.str(), Content: g.optJSON(false)}}
	case 2:
		b.Block = &pb.ContentBlock_RedactedThinkingBlock{RedactedThinkingBlock: &pb.RedactedThinkingBlock{Data: g.str()}}
	case 3:
		b.Block = &pb.ContentBlock_ToolCallBlock{ToolCallBlock: &pb.ToolCallBlock{Id: g.str(), Name: g.str(), InputJson: g.optJSON(true)}}
	case 4:
		b.Block = &pb.ContentBlock_ToolResultBlock{ToolResultBlock: &pb.ToolResultBlock{ToolCallId: g.str(), OutputJson: g.optJSON(false)}}
	case 5:
		b.Block = &pb.ContentBlock_ImageBlock{ImageBlock: g.image()}
	default:
		b.Block = &pb.ContentBlock_ReasoningBlock{ReasoningBlock: &pb.ReasoningBlock{Content: g.items(), Summary: g.items()}}
	}
	return b
}

// image is an image block as the kernel writes it (media type and data
// copied from the source), or with fields of its own.
func (g gen) image() *pb.ImageBlock {
	media, data := []string{"image/png", "image/jpeg", ""}[g.r.IntN(3)], g.str()
	src, _ := json.Marshal(map[string]string{"type": "base64", "media_type": media, "data": data})
	im := &pb.ImageBlock{MediaType: media, Data: []byte(data), SourceJson: string(src)}
	switch g.r.IntN(4) {
	case 0:
		im.SourceJson = ""
	case 1:
		im.MediaType = g.str()
	case 2:
		im.Data = []byte{0, 0xff, byte(g.r.IntN(256))}
	}
	return im
}

func (g gen) message() *pb.Message {
	m := &pb.Message{Role: pb.Role(1 + g.r.IntN(6))}
	if g.r.IntN(2) == 0 {
		m.Content = &pb.Message_TextContent{TextContent: g.str()}
	} else {
		list := &pb.ContentBlockList{}
		for range g.r.IntN(8) {
			list.Blocks = append(list.Blocks, g.block(g.r.IntN(7)))
		}
		m.Content = &pb.Message_BlockContent{BlockContent: list}
	}
	if g.r.IntN(2) == 0 {
		m.Name = g.str()
	}
	if m.Role == pb.Role_ROLE_TOOL || g.r.IntN(3) == 0 {
		m.ToolCallId = "call_" + g.str()
	}
	if g.r.IntN(2) == 0 {
		m.MetadataJson = g.object(0)
	}
	return m
}

// TestRoundTripProperty: a random typed message, every block kind among
// them, becomes ctxstore JSON and comes back as the identical proto — in
// memory, and through a real store file.
func TestRoundTripProperty(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(28, 1))}
	const n = 3000
	kinds := map[string]int{}
	var want []*pb.Message
	for i := range n {
		p := g.message()
		if i < 7 { // every block kind at least once, alone
			p.Content = &pb.Message_BlockContent{BlockContent: &pb.ContentBlockList{Blocks: []*pb.ContentBlock{g.block(i)}}}
		}
		for _, b := range p.GetBlockContent().GetBlocks() {
			kinds[fmt.Sprintf("%T", b.GetBlock())]++
		}
		m, err := amplifier.ProtoToMessage(p)
		if err != nil {
			t.Fatalf("message %d: ProtoToMessage(%v): %v", i, p, err)
		}
		back, err := amplifier.MessageToProto(m)
		if err != nil {
			t.Fatalf("message %d: MessageToProto(%s): %v", i, m, err)
		}
		if !proto.Equal(p, back) {
			t.Fatalf("message %d changed:\n sent %v\n JSON %s\n back %v", i, p, m, back)
		}
		want = append(want, p)
	}
	if len(kinds) != 7 {
		t.Fatalf("block kinds generated: %v, want all 7", kinds)
	}

	// Through a store file: what comes back from the log is the same.
	s := openSession(t, filepath.Join(t.TempDir(), "ctx.db"), "prop")
	ctx := context.Background()
	for i, p := range want[:300] {
		m, _ := amplifier.ProtoToMessage(p)
		if err := s.AddMessage(ctx, m); err != nil {
			t.Fatalf("AddMessage %d: %v", i, err)
		}
	}
	got, err := s.GetMessages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range got {
		if back := amplifier.ToProto(m); !proto.Equal(back, want[i]) {
			t.Fatalf("stored message %d changed:\n sent %v\n back %v", i, want[i], back)
		}
	}
}

func openSession(t testing.TB, db, name string) *amplifier.Session {
	t.Helper()
	s, err := amplifier.OpenSession(amplifier.SessionConfig{DB: db, Session: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestProtoToMessageJSON pins the JSON a typed message becomes: the shape
// Amplifier's kernel writes for a native message.
func TestProtoToMessageJSON(t *testing.T) {
	blocks := func(bs ...*pb.ContentBlock) *pb.Message_BlockContent {
		return &pb.Message_BlockContent{BlockContent: &pb.ContentBlockList{Blocks: bs}}
	}
	tests := []struct {
		name string
		msg  *pb.Message
		want string
	}{
		{"text", &pb.Message{Role: pb.Role_ROLE_USER, Content: &pb.Message_TextContent{TextContent: "a <b> & c"}},
			`{"role":"user","content":"a <b> & c"}`},
		{"no content", &pb.Message{Role: pb.Role_ROLE_ASSISTANT, Name: "n"}, `{"role":"assistant","name":"n"}`},
		{"tool call", &pb.Message{Role: pb.Role_ROLE_ASSISTANT, Content: blocks(
			&pb.ContentBlock{Block: &pb.ContentBlock_ThinkingBlock{ThinkingBlock: &pb.ThinkingBlock{Thinking: "hm", Signature: "sig"}}, Visibility: pb.Visibility_VISIBILITY_LLM_ONLY},
			&pb.ContentBlock{Block: &pb.ContentBlock_ToolCallBlock{ToolCallBlock: &pb.ToolCallBlock{Id: "c1", Name: "ls", InputJson: `{"n": 1.0}`}}})},
			`{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"sig","visibility":"internal"},{"type":"tool_call","id":"c1","name":"ls","input":{"n": 1.0}}]}`},
		{"tool result", &pb.Message{Role: pb.Role_ROLE_TOOL, ToolCallId: "c1", MetadataJson: `{"k":[1]}`, Content: blocks(
			&pb.ContentBlock{Block: &pb.ContentBlock_ToolResultBlock{ToolResultBlock: &pb.ToolResultBlock{ToolCallId: "c1", OutputJson: `"ok"`}}})},
			`{"role":"tool","content":[{"type":"tool_result","tool_call_id":"c1","output":"ok"}],"tool_call_id":"c1","metadata":{"k":[1]}}`},
		{"image from its source", &pb.Message{Role: pb.Role_ROLE_USER, Content: blocks(
			&pb.ContentBlock{Block: &pb.ContentBlock_ImageBlock{ImageBlock: &pb.ImageBlock{MediaType: "image/png", Data: []byte("iVBO"), SourceJson: `{"type":"base64","media_type":"image/png","data":"iVBO"}`}}})},
			`{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}]}`},
		{"image bytes only", &pb.Message{Role: pb.Role_ROLE_USER, Content: blocks(
			&pb.ContentBlock{Block: &pb.ContentBlock_ImageBlock{ImageBlock: &pb.ImageBlock{MediaType: "image/gif", Data: []byte{0, 1}}}})},
			`{"role":"user","content":[{"type":"image","media_type":"image/gif","data":"AAE="}]}`},
		{"reasoning", &pb.Message{Role: pb.Role_ROLE_ASSISTANT, Content: blocks(
			&pb.ContentBlock{Block: &pb.ContentBlock_ReasoningBlock{ReasoningBlock: &pb.ReasoningBlock{Summary: []string{`{"text":"s"}`}}}, Visibility: pb.Visibility_VISIBILITY_USER_ONLY},
			&pb.ContentBlock{Block: &pb.ContentBlock_RedactedThinkingBlock{RedactedThinkingBlock: &pb.RedactedThinkingBlock{Data: "xx"}}, Visibility: pb.Visibility_VISIBILITY_ALL})},
			`{"role":"assistant","content":[{"type":"reasoning","content":[],"summary":[{"text":"s"}],"visibility":"user"},{"type":"redacted_thinking","data":"xx","visibility":"developer"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := amplifier.ProtoToMessage(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			if m.String() != tt.want {
				t.Fatalf("JSON\n got %s\nwant %s", m, tt.want)
			}
		})
	}
}

// TestUntypedForm: role 0 carries the message's JSON, stored byte for
// byte and given back typed when it has a typed form, untyped otherwise.
func TestUntypedForm(t *testing.T) {
	tests := []struct {
		name, json string
		typed      bool
	}{
		{"native message", `{"role":"user","content":[{"type":"text","text":"hi","visibility":"user"}],"metadata":{"x": 1e400}}`, true},
		{"keys in another order", `{"content":"hi","name":"bob","role":"assistant"}`, true},
		{"OpenAI tool calls", `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}`, false},
		{"Anthropic block", `{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"ls","input":{}}]}`, false},
		{"extra block key", `{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &pb.Message{Content: &pb.Message_TextContent{TextContent: tt.json}}
			m, err := amplifier.ProtoToMessage(in)
			if err != nil {
				t.Fatal(err)
			}
			if m.String() != tt.json {
				t.Fatalf("stored %s, want the text byte for byte", m)
			}
			out := amplifier.ToProto(m)
			_, err = amplifier.MessageToProto(m)
			if typed := err == nil; typed != tt.typed {
				t.Fatalf("typed form: %v (%v), want %v", typed, err, tt.typed)
			}
			if !tt.typed {
				if !errors.Is(err, amplifier.ErrUntyped) || !proto.Equal(out, in) {
					t.Fatalf("untyped message came back as %v (err %v), want the JSON as sent", out, err)
				}
				return
			}
			if out.GetRole() == pb.Role_ROLE_UNSPECIFIED {
				t.Fatalf("typed message came back untyped: %v", out)
			}
		})
	}
}

// TestProtoToMessageRefuses: what a message cannot mean is refused with
// ErrInvalidMessage naming the field.
func TestProtoToMessageRefuses(t *testing.T) {
	block := func(b *pb.ContentBlock) *pb.Message {
		return &pb.Message{Role: pb.Role_ROLE_ASSISTANT, Content: &pb.Message_BlockContent{BlockContent: &pb.ContentBlockList{Blocks: []*pb.ContentBlock{{Block: &pb.ContentBlock_TextBlock{TextBlock: &pb.TextBlock{}}}, b}}}}
	}
	tests := []struct {
		name  string
		msg   *pb.Message
		field string
	}{
		{"nil", nil, "message"},
		{"unknown role", &pb.Message{Role: 42}, "role"},
		{"tool without call id", &pb.Message{Role: pb.Role_ROLE_TOOL, Content: &pb.Message_TextContent{TextContent: "x"}}, "tool_call_id"},
		{"metadata not JSON", &pb.Message{Role: pb.Role_ROLE_USER, MetadataJson: "{oops"}, "metadata_json"},
		{"input not JSON", block(&pb.ContentBlock{Block: &pb.ContentBlock_ToolCallBlock{ToolCallBlock: &pb.ToolCallBlock{Id: "c", InputJson: "not json"}}}), "block_content.blocks[1].tool_call_block.input_json"},
		{"empty block", block(&pb.ContentBlock{}), "block_content.blocks[1]"},
		{"bad visibility", block(&pb.ContentBlock{Block: &pb.ContentBlock_TextBlock{TextBlock: &pb.TextBlock{}}, Visibility: 7}), "block_content.blocks[1].visibility"},
		{"reasoning item not JSON", block(&pb.ContentBlock{Block: &pb.ContentBlock_ReasoningBlock{ReasoningBlock: &pb.ReasoningBlock{Content: []string{""}}}}), "block_content.blocks[1].reasoning_block.content[0]"},
		{"untyped without text", &pb.Message{Content: &pb.Message_BlockContent{BlockContent: &pb.ContentBlockList{}}}, "role"},
		{"untyped with a name", &pb.Message{Name: "x", Content: &pb.Message_TextContent{TextContent: `{"role":"user"}`}}, "name"},
		{"untyped not JSON", &pb.Message{Content: &pb.Message_TextContent{TextContent: "hello"}}, ""},
		{"untyped unknown role", &pb.Message{Content: &pb.Message_TextContent{TextContent: `{"role":"robot"}`}}, "role"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := amplifier.ProtoToMessage(tt.msg)
			var me *ctxstore.MessageError
			if !errors.As(err, &me) || !errors.Is(err, ctxstore.ErrInvalidMessage) {
				t.Fatalf("err = %v, want a *ctxstore.MessageError", err)
			}
			if me.Field != tt.field {
				t.Fatalf("field %q, want %q (%v)", me.Field, tt.field, err)
			}
		})
	}
}
