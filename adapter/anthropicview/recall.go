package anthropicview

import (
	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/ctxstore/ctxstore/recall"
)

// RecallTool offers the recall tool to a Messages request (add it to
// MessageNewParams.Tools). Answer the model's calls to it with
// recall.Tool.Answers on the message Reply made: the answers are
// "tool_result" blocks, as the API expects.
func RecallTool(t *recall.Tool) anthropic.ToolUnionParam {
	schema := t.Parameters()
	return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
		Name:        t.Name(),
		Description: anthropic.String(t.Description()),
		InputSchema: anthropic.ToolInputSchemaParam{
			Properties:  schema["properties"],
			ExtraFields: map[string]any{"additionalProperties": false},
		},
	}}
}
