package pgstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage"
)

// TestStorageOpenHidesPassword: storage.Open of a postgres:// URL (what
// persistent.Open and resume.Open pass on) whose password holds / # ? @ :
// % and spaces fails as pgstore.Open does: a typed *ConnectError naming the
// server, never the password nor a piece of it, whether the URL
// percent-encodes the password or not, with a schema= parameter or not.
func TestStorageOpenHidesPassword(t *testing.T) {
	host, port, _, db := serverParts(t)
	server := net.JoinHostPort(host, port)
	const noRole = "ctxstore_no_such_role"
	encoded := strings.NewReplacer("%", "%25", "/", "%2F", "#", "%23", "?", "%3F", "@", "%40", ":", "%3A", " ", "%20").Replace(secret)
	for _, tc := range []struct {
		name, url string
		kind      error
	}{
		{"not encoded", "postgres://" + noRole + ":" + secret + "@" + server + "/" + db, ErrBadDSN},
		{"not encoded, schema", "postgres://" + noRole + ":" + secret + "@" + server + "/" + db + "?schema=s", ErrBadDSN},
		{"encoded, no such role", "postgres://" + noRole + ":" + encoded + "@" + server + "/" + db + "?schema=s", ErrAuth},
		{"encoded, port closed", "postgresql://" + noRole + ":" + encoded + "@" + net.JoinHostPort(host, "1") + "/" + db + "?schema=s", ErrUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st, err := storage.Open(ctx, tc.url, storage.OpenOptions{})
			if err == nil {
				st.Close()
				t.Fatal("storage.Open succeeded")
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("storage.Open: %v, want %v", err, tc.kind)
			}
			for _, w := range secretWords {
				if strings.Contains(err.Error(), w) {
					t.Errorf("storage.Open's error shows %q, a piece of the password: %v", w, err)
				}
			}
		})
	}
}
