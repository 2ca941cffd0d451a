//go:build ignore

// gen_vocab writes the compact vocabulary files this package embeds, from
// the vocabularies github.com/tiktoken-go/tokenizer compiles in (which are
// tiktoken's own). Run with `go generate ./internal/bpe`.
//
// Format, gzip-compressed: for each rank from 0, a uvarint byte length
// followed by the token's bytes; length 0 marks a rank with no token.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/tiktoken-go/tokenizer"
)

func main() {
	for _, enc := range []struct {
		name tokenizer.Encoding
		n    int // ranks of ordinary tokens
	}{{tokenizer.O200kBase, 199998}, {tokenizer.Cl100kBase, 100256}} {
		if err := write(enc.name, enc.n); err != nil {
			fmt.Fprintln(os.Stderr, "gen_vocab:", err)
			os.Exit(1)
		}
	}
}

func write(name tokenizer.Encoding, n int) error {
	codec, err := tokenizer.Get(name)
	if err != nil {
		return err
	}
	var raw bytes.Buffer
	var lb [binary.MaxVarintLen64]byte
	missing := 0
	for id := range n {
		tok, err := codec.Decode([]uint{uint(id)})
		if err != nil {
			missing++
			tok = ""
		}
		raw.Write(lb[:binary.PutUvarint(lb[:], uint64(len(tok)))])
		raw.WriteString(tok)
	}
	if missing > 0 {
		fmt.Fprintf(os.Stderr, "%s: %d ranks without a token\n", name, missing)
	}
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return err
	}
	zw.Write(raw.Bytes())
	if err := zw.Close(); err != nil {
		return err
	}
	file := string(name) + ".vocab.gz"
	fmt.Fprintf(os.Stderr, "%s: %d tokens, %d bytes raw, %d compressed\n", file, n, raw.Len(), out.Len())
	return os.WriteFile(file, out.Bytes(), 0o644)
}
