// Package anthropicview turns a ctxstore view into the request types of
// the official Anthropic Go SDK, version 2, whose module path ends in /v2:
//
//	import (
//		"github.com/anthropics/anthropic-sdk-go/v2" // package anthropic
//		"github.com/ctxstore/ctxstore/adapter/anthropicview"
//	)
//
// (the v1 path, github.com/anthropics/anthropic-sdk-go, is another module
// whose types these functions do not take). An agent sends one turn with
//
//	params, err := anthropicview.Params(view, anthropic.ModelClaudeSonnet4_5, 4096)
//	…
//	params.Tools = tools
//	reply, err := client.Messages.New(ctx, params)
//
// and stores the reply and reports its usage with
//
//	msg, err := anthropicview.Reply(reply)
//	…
//	err = m.AddMessage(ctx, msg)
//	err = m.ReportUsage(ctx, anthropicview.Usage(reply.Usage))
//
// # Conversion
//
// The leading system and developer messages become the system text blocks.
// Later ones (a host may store a system message mid-conversation) become
// user text, since the Messages API takes one system prompt before the
// conversation. Assistant "tool_calls" become tool_use blocks whose input
// is the call's arguments; the API takes the input as a JSON object, so
// arguments that are empty, not valid JSON or not an object are sent as {}.
// Tool-role results become tool_result blocks in a user message. Messages
// stored as Anthropic blocks (text, image, tool_use, tool_result, thinking,
// redacted_thinking) pass through; OpenAI content parts (text, image_url)
// are converted, a data: URI image becoming a base64 image source and any
// other URL a url source. Only the fields of these shapes are read: keys
// the API does not know (such as a stored "metadata") never reach the
// request. Content of any other type (audio, files) is an error matching
// ErrUnsupported.
//
// The API requires user and assistant turns to alternate, starting with a
// user turn, and every tool_result to answer a tool_use of the assistant
// turn just before it. Consecutive messages of one role are merged into one
// turn, with a user turn's tool_result blocks placed before its other
// blocks; a conversation that starts with an assistant turn (its first
// user message was compacted away) gets a one-line user turn in front.
// Empty text blocks and messages left without content are dropped. A view
// whose tool results do not answer the assistant turn before them is
// rejected rather than sent.
//
// # Replies
//
// Reply stores a reply as Anthropic blocks (text, tool_use, thinking with
// its signature, redacted_thinking), which views carry as they are: sent
// out again, a stored reply is the assistant turn the SDK's own
// Message.ToParam makes, thinking signatures included. Tool results may
// then be stored either way, ctxstore.NewToolResult or tool_result
// blocks. Usage counts what the provider counted as input: uncached,
// cache-read and cache-written tokens.
//
// # Cache breakpoints
//
// Anthropic caches a request's prefix (tools, then system, then messages)
// only where a block carries cache_control, at most four per request. A
// later request reads the cache when its prefix up to one of its own
// breakpoints, or up to a block at most 20 blocks before one, is
// byte-identical to a prefix an earlier request wrote at a breakpoint.
// Prefixes shorter than the model's minimum (1,024 to 4,096 tokens,
// depending on the model) are not cached at all; a breakpoint there costs
// nothing.
//
// Params places up to four breakpoints:
//
//   - the last system block: tools and system prompt, the part every
//     request of a session shares;
//   - the last block wholly inside the view's stable prefix (the leading
//     messages identical to the previous view of the same budget): this is
//     where the previous request wrote its last breakpoint, so the whole
//     stable prefix is read from the cache;
//   - the last block before the compaction notice that ctxstore appends to
//     a compacted view, or the last block when there is none: the next
//     request extends this prefix, so writing it here makes the next
//     request's stable prefix a cache read (the notice moves every turn and
//     is not worth caching);
//   - the end of the compacted part of the view (the last summarized,
//     truncated or stubbed message): when compaction next goes further it
//     changes the view just after this point, and the next request's
//     stable prefix ends here.
//
// Breakpoints never sit on thinking blocks, which cannot carry
// cache_control; the nearest earlier block takes it. A host that adds
// cache_control to its tools must keep the total at four: drop one with
// Options.MaxBreakpoints.
package anthropicview

import (
	"fmt"
	"slices"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/adapter/internal/wire"
)

// ErrUnsupported is matched (errors.Is) by the errors for views the
// Messages API cannot take: content of a type it has no block for, tool
// results that do not answer the assistant turn before them.
var ErrUnsupported = wire.ErrUnsupported

// MaxBreakpoints is how many cache_control breakpoints the Messages API
// accepts in one request.
const MaxBreakpoints = 4

// StartText is the user turn put in front of a conversation whose first
// remaining message is an assistant turn.
const StartText = "[conversation continues]"

// Options adjust the conversion. The zero Options are the defaults.
type Options struct {
	// MaxBreakpoints caps the breakpoints placed, for a host that marks
	// blocks of its own (tools): 0 means MaxBreakpoints, negative none.
	// The least useful are dropped first: compacted-part end, system end,
	// stable-prefix end.
	MaxBreakpoints int
	// TTL is the cache_control ttl ("5m" or "1h"); "" leaves it to the API
	// (five minutes).
	TTL anthropic.CacheControlEphemeralTTL
}

// Params converts v into the parameters of one Messages API request with
// the given model and output limit. The caller adds tools and other
// settings before sending.
func Params(v ctxstore.View, model anthropic.Model, maxTokens int64) (anthropic.MessageNewParams, error) {
	system, msgs, err := Options{}.Messages(v)
	if err != nil {
		return anthropic.MessageNewParams{}, err
	}
	return anthropic.MessageNewParams{Model: model, MaxTokens: maxTokens, System: system, Messages: msgs}, nil
}

// Messages converts v with the default Options.
func Messages(v ctxstore.View) ([]anthropic.TextBlockParam, []anthropic.MessageParam, error) {
	return Options{}.Messages(v)
}

// turn is one merged Messages API turn under construction; src holds the
// view index each block came from (a block the adapter adds counts as part of the message it was added for).
type turn struct {
	user   bool
	blocks []anthropic.ContentBlockParamUnion
	src    []int
}

// Messages converts v into system blocks and alternating turns with cache
// breakpoints placed as the package documentation describes.
func (o Options) Messages(v ctxstore.View) ([]anthropic.TextBlockParam, []anthropic.MessageParam, error) {
	ws, err := wire.Read(v.Messages)
	if err != nil {
		return nil, nil, fmt.Errorf("anthropicview: session %q: %w", v.Session, err)
	}
	var system []anthropic.TextBlockParam
	var systemSrc []int
	i := 0
	for ; i < len(ws) && isSystem(ws[i].Role); i++ {
		for _, p := range ws[i].Parts {
			if p.Kind != wire.KindText {
				return nil, nil, fmt.Errorf("anthropicview: session %q: message %d (%s): %w: %s block in a system message",
					v.Session, i, ws[i].Role, ErrUnsupported, p.Kind)
			}
			system = append(system, anthropic.TextBlockParam{Text: p.Text})
			systemSrc = append(systemSrc, i)
		}
	}
	turns, err := buildTurns(ws[i:])
	if err != nil {
		return nil, nil, fmt.Errorf("anthropicview: session %q: %w", v.Session, err)
	}
	o.place(v, system, systemSrc, turns)
	out := make([]anthropic.MessageParam, len(turns))
	for k, t := range turns {
		if t.user {
			out[k] = anthropic.MessageParam{OfUser: &anthropic.UserMessageParam{Content: t.blocks}}
		} else {
			out[k] = anthropic.MessageParam{OfAssistant: &anthropic.AssistantMessageParam{Content: t.blocks}}
		}
	}
	return system, out, nil
}

func isSystem(role string) bool { return role == ctxstore.RoleSystem || role == ctxstore.RoleDeveloper }

// buildTurns converts the conversation messages and merges same-role runs.
func buildTurns(ws []wire.Message) ([]turn, error) {
	var turns []turn
	for _, w := range ws {
		user, blocks, err := convert(w)
		if err != nil {
			return nil, fmt.Errorf("message %d (%s): %w", w.Index, w.Role, err)
		}
		if len(blocks) == 0 {
			continue
		}
		if len(turns) == 0 && !user {
			turns = append(turns, turn{user: true, blocks: []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock(StartText)}, src: []int{w.Index}})
		}
		if n := len(turns); n > 0 && turns[n-1].user == user {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			for range blocks {
				turns[n-1].src = append(turns[n-1].src, w.Index)
			}
			continue
		}
		t := turn{user: user, blocks: blocks}
		for range blocks {
			t.src = append(t.src, w.Index)
		}
		turns = append(turns, t)
	}
	for k := range turns {
		if turns[k].user {
			resultsFirst(&turns[k])
		}
		if err := checkPairing(turns, k); err != nil {
			return nil, err
		}
	}
	return turns, nil
}

// convert returns the role (user or not) and blocks of one message.
func convert(w wire.Message) (bool, []anthropic.ContentBlockParamUnion, error) {
	switch w.Role {
	case ctxstore.RoleUser, ctxstore.RoleSystem, ctxstore.RoleDeveloper:
		bs, err := blocks(w.Parts, false)
		return true, bs, err
	case ctxstore.RoleTool:
		inner, err := resultContent(w.Parts)
		if err != nil {
			return true, nil, err
		}
		return true, []anthropic.ContentBlockParamUnion{{OfToolResult: &anthropic.ToolResultBlockParam{ToolUseID: w.CallID, Content: inner}}}, nil
	case ctxstore.RoleAssistant:
		bs, err := blocks(w.Parts, true)
		if err != nil {
			return false, nil, err
		}
		for _, c := range w.Calls {
			bs = append(bs, anthropic.ContentBlockParamUnion{OfToolUse: &anthropic.ToolUseBlockParam{
				ID: c.ID, Name: c.Name, Input: wire.ArgumentsObject([]byte(c.Arguments)),
			}})
		}
		return false, bs, nil
	}
	return false, nil, fmt.Errorf("%w: role %q (a function message names no call id to answer)", ErrUnsupported, w.Role)
}

func blocks(ps []wire.Part, assistant bool) ([]anthropic.ContentBlockParamUnion, error) {
	out := make([]anthropic.ContentBlockParamUnion, 0, len(ps))
	for _, p := range ps {
		switch p.Kind {
		case wire.KindText:
			out = append(out, anthropic.NewTextBlock(p.Text))
		case wire.KindImage:
			out = append(out, anthropic.ContentBlockParamUnion{OfImage: image(p)})
		case wire.KindToolUse:
			if !assistant {
				return nil, fmt.Errorf("%w: tool_use block outside an assistant message", ErrUnsupported)
			}
			out = append(out, anthropic.ContentBlockParamUnion{OfToolUse: &anthropic.ToolUseBlockParam{ID: p.ID, Name: p.Name, Input: p.Input}})
		case wire.KindToolResult:
			if assistant {
				return nil, fmt.Errorf("%w: tool_result block in an assistant message", ErrUnsupported)
			}
			inner, err := resultContent(p.Result)
			if err != nil {
				return nil, err
			}
			out = append(out, anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{
				ToolUseID: p.ToolUseID, Content: inner, IsError: isError(p.IsError),
			}})
		case wire.KindThinking:
			out = append(out, anthropic.NewThinkingBlock(p.Signature, p.Text))
		case wire.KindRedactedThinking:
			out = append(out, anthropic.NewRedactedThinkingBlock(p.Data))
		}
	}
	return out, nil
}

func isError(b bool) param.Opt[bool] {
	if b {
		return anthropic.Bool(true)
	}
	return param.Opt[bool]{}
}

func resultContent(ps []wire.Part) ([]anthropic.ToolResultBlockParamContentUnion, error) {
	var out []anthropic.ToolResultBlockParamContentUnion
	for _, p := range ps {
		switch p.Kind {
		case wire.KindText:
			out = append(out, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: p.Text}})
		case wire.KindImage:
			out = append(out, anthropic.ToolResultBlockParamContentUnion{OfImage: image(p)})
		default:
			return nil, fmt.Errorf("%w: %s block in a tool result", ErrUnsupported, p.Kind)
		}
	}
	return out, nil
}

func image(p wire.Part) *anthropic.ImageBlockParam {
	if mt, data, ok := p.ImageSource(); ok {
		return &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{
			OfBase64: &anthropic.Base64ImageSourceParam{MediaType: anthropic.Base64ImageSourceMediaType(mt), Data: data},
		}}
	}
	return &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{
		OfURL: &anthropic.URLImageSourceParam{URL: p.URL},
	}}
}

// resultsFirst moves a user turn's tool_result blocks before its other
// blocks, keeping the order within each group.
func resultsFirst(t *turn) {
	type pair struct {
		b   anthropic.ContentBlockParamUnion
		src int
	}
	ps := make([]pair, len(t.blocks))
	for k := range t.blocks {
		ps[k] = pair{t.blocks[k], t.src[k]}
	}
	slices.SortStableFunc(ps, func(a, b pair) int {
		return rank(a.b) - rank(b.b)
	})
	for k := range ps {
		t.blocks[k], t.src[k] = ps[k].b, ps[k].src
	}
}

func rank(b anthropic.ContentBlockParamUnion) int {
	if b.OfToolResult != nil {
		return 0
	}
	return 1
}

// checkPairing checks turn k against the rules of tool use: its
// tool_results answer the previous assistant turn's tool_use blocks, all
// of them, once each.
func checkPairing(turns []turn, k int) error {
	t := turns[k]
	if !t.user {
		return nil
	}
	var asked []string
	if k > 0 {
		for _, b := range turns[k-1].blocks {
			if b.OfToolUse != nil {
				asked = append(asked, b.OfToolUse.ID)
			}
		}
	}
	var answered []string
	for j, b := range t.blocks {
		if b.OfToolResult == nil {
			continue
		}
		id := b.OfToolResult.ToolUseID
		if !slices.Contains(asked, id) || slices.Contains(answered, id) {
			return fmt.Errorf("message %d: %w: tool result %q does not answer a pending tool call of the assistant turn before it",
				t.src[j], ErrUnsupported, id)
		}
		answered = append(answered, id)
	}
	if len(answered) != len(asked) {
		return fmt.Errorf("message %d: %w: %d of %d tool calls of the assistant turn before it have no result",
			t.src[0], ErrUnsupported, len(asked)-len(answered), len(asked))
	}
	return nil
}
