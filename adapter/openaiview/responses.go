package openaiview

import (
	"fmt"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/adapter/internal/wire"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
)

// ResponseInput converts v into Responses API input items.
func ResponseInput(v ctxstore.View) (responses.ResponseInputParam, error) {
	ws, err := wire.Read(v.Messages)
	if err != nil {
		return nil, fmt.Errorf("openaiview: session %q: %w", v.Session, err)
	}
	var r respBuilder
	for _, w := range ws {
		if err := r.add(w); err != nil {
			return nil, fmt.Errorf("openaiview: session %q: message %d (%s): %w", v.Session, w.Index, w.Role, err)
		}
	}
	return r.out, nil
}

type respBuilder struct {
	out   responses.ResponseInputParam
	calls calls
}

func (r *respBuilder) result(id string, ps []wire.Part, plain bool) error {
	if err := r.calls.answer(id); err != nil {
		return err
	}
	out := responses.ResponseInputItemFunctionCallOutputParam{CallID: param.NewOpt(id)}
	if plain {
		out.Output.OfString = param.NewOpt(wire.Texts(ps))
	} else {
		list := responses.ResponseFunctionCallOutputItemListParam{}
		for _, p := range ps {
			switch p.Kind {
			case wire.KindText:
				list = append(list, responses.ResponseFunctionCallOutputItemUnionParam{OfInputText: &responses.ResponseInputTextContentParam{Text: p.Text}})
			case wire.KindImage:
				list = append(list, responses.ResponseFunctionCallOutputItemUnionParam{OfInputImage: &responses.ResponseInputImageContentParam{
					ImageURL: param.NewOpt(p.DataURI()), Detail: responses.ResponseInputImageContentDetail(p.Detail),
				}})
			default:
				return fmt.Errorf("%w: %s block in a tool result", ErrUnsupported, p.Kind)
			}
		}
		if len(list) == 0 {
			out.Output.OfString = param.NewOpt("")
		} else {
			out.Output.OfResponseFunctionCallOutputItemArray = list
		}
	}
	r.out = append(r.out, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &out})
	return nil
}

func (r *respBuilder) add(w wire.Message) error {
	rest, err := splitResults(w, r.result)
	if err != nil || w.Role == ctxstore.RoleTool {
		return err
	}
	if len(rest) == 0 && len(w.Calls) == 0 {
		return nil // results only, or nothing to send
	}
	switch w.Role {
	case ctxstore.RoleSystem, ctxstore.RoleDeveloper, ctxstore.RoleUser:
		role := responses.EasyInputMessageRole(w.Role)
		if w.Plain {
			r.out = append(r.out, responses.ResponseInputItemParamOfMessage(wire.Texts(rest), role))
			return nil
		}
		var list responses.ResponseInputMessageContentListParam
		for _, p := range rest {
			switch p.Kind {
			case wire.KindText:
				list = append(list, responses.ResponseInputContentParamOfInputText(p.Text))
			case wire.KindImage:
				if w.Role != ctxstore.RoleUser {
					return fmt.Errorf("%w: image in a %s message", ErrUnsupported, w.Role)
				}
				detail := responses.ResponseInputImageDetail(p.Detail)
				if detail == "" {
					detail = responses.ResponseInputImageDetailAuto
				}
				list = append(list, responses.ResponseInputContentUnionParam{OfInputImage: &responses.ResponseInputImageParam{
					ImageURL: param.NewOpt(p.DataURI()), Detail: detail,
				}})
			case wire.KindThinking, wire.KindRedactedThinking:
			default:
				return fmt.Errorf("%w: %s block in a %s message", ErrUnsupported, p.Kind, w.Role)
			}
		}
		r.out = append(r.out, responses.ResponseInputItemParamOfMessage(list, role))
	case ctxstore.RoleAssistant:
		r.calls = calls{}
		if text := wire.Texts(rest); text != "" {
			r.out = append(r.out, responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleAssistant))
		}
		call := func(id, name, args string) {
			r.calls.ask(id)
			r.out = append(r.out, responses.ResponseInputItemParamOfFunctionCall(args, id, name))
		}
		for _, p := range rest {
			switch p.Kind {
			case wire.KindToolUse:
				call(p.ID, p.Name, wire.ArgumentsText(p.Input))
			case wire.KindImage:
				return fmt.Errorf("%w: image in an assistant message", ErrUnsupported)
			}
		}
		for _, k := range w.Calls {
			call(k.ID, k.Name, k.Arguments)
		}
	default:
		return fmt.Errorf("%w: role %q", ErrUnsupported, w.Role)
	}
	return nil
}
