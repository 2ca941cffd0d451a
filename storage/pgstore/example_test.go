package pgstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/pgstore"
)

// Open a store on a shared server, append durably, read the session back.
func Example() {
	ctx := context.Background()
	st, err := pgstore.Open(ctx, "postgres://agent@db.internal:5432/memory", pgstore.Options{Schema: "ctxstore"})
	if err != nil {
		log.Fatal(err) // names the server, never the password
	}
	defer st.Close()
	first, _, err := st.Append(ctx, "support-42", storage.Record{Message: ctxstore.NewMessage("user", "hello")})
	if err != nil {
		log.Fatal(err)
	}
	for e, err := range st.Messages(ctx, "support-42", first) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d %s\n", e.Seq, e.Raw)
	}
}
