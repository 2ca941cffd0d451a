package wire

import (
	"encoding/json"
	"testing"
)

// TestUnquote checks the one-pass decoder against encoding/json.
func TestUnquote(t *testing.T) {
	for _, in := range []string{
		`""`, `"plain"`, `"line\nnext\ttab \"q\" \\ \/ \b\f\r"`, `"é ü 日本"`,
		`"\u00e9 \ud83d\ude00"`, `"bad \x"`, "\"\xff\"", `"trailing \"`,
	} {
		var want string
		wantErr := json.Unmarshal([]byte(in), &want)
		got, err := unquote([]byte(in))
		if (err != nil) != (wantErr != nil) || got != want {
			t.Errorf("unquote(%s) = %q, %v; encoding/json gives %q, %v", in, got, err, want, wantErr)
		}
	}
}
