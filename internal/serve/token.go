package serve

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
)

// NewToken returns a random token for one run of the viewer.
func NewToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("serve: make a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// hostAllowed reports whether a request's Host header names this server:
// the port it listens on, with "localhost" or an IP address. A name that
// resolves here only because an attacker's DNS says so (DNS rebinding) is
// refused.
func hostAllowed(host string, port int) bool {
	h, p, err := net.SplitHostPort(host)
	if err != nil || p != fmt.Sprint(port) {
		return false
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	return h == "localhost" || net.ParseIP(h) != nil
}
