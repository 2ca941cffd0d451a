package openaiview

import (
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/ctxstore/ctxstore/recall"
)

// RecallTool offers the recall tool to a Chat Completions request (add it
// to ChatCompletionNewParams.Tools). Answer the model's calls to it with
// recall.Tool.Answers on the message ChatReply made.
func RecallTool(t *recall.Tool) openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        t.Name(),
		Description: param.NewOpt(t.Description()),
		Parameters:  shared.FunctionParameters(t.Parameters()),
	})
}

// RecallResponseTool offers the recall tool to a Responses request (add it
// to ResponseNewParams.Tools). Answer the model's calls to it with
// recall.Tool.Answers on the message ResponseReply made.
func RecallResponseTool(t *recall.Tool) responses.ToolUnionParam {
	return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
		Name:        t.Name(),
		Description: param.NewOpt(t.Description()),
		Parameters:  t.Parameters(),
		Strict:      param.NewOpt(false),
	}}
}
