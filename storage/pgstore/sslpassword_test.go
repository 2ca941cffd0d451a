package pgstore

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSSLPassword: the sslpassword that unlocks an encrypted client key is
// a secret like the password: a connection string holding the right one
// connects (the driver decrypts the key with it as it parses the string),
// and one holding a wrong one fails with ErrBadDSN saying why, never
// showing either.
func TestSSLPassword(t *testing.T) {
	dsn := testDSN(t)
	dir := t.TempDir()
	keyFile, certFile := writeClientKey(t, dir, secret)
	withKey := func(pass string) string {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("sslmode", "prefer") // the key is read whether or not the server speaks TLS
		q.Set("sslkey", keyFile)
		q.Set("sslcert", certFile)
		// The driver reads a '+' in sslpassword as it is: %20 for spaces.
		u.RawQuery = q.Encode() + "&sslpassword=" + strings.ReplaceAll(url.QueryEscape(pass), "+", "%20")
		return u.String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := Open(ctx, withKey(secret), Options{Schema: freshSchema(t, dsn)})
	if err != nil {
		t.Fatalf("Open with the key's sslpassword: %v", err)
	}
	st.Close()

	_, err = Open(ctx, withKey(secret+" wrong"), Options{Schema: freshSchema(t, dsn)})
	if !errors.Is(err, ErrBadDSN) || !strings.Contains(err.Error(), "decrypt") || !strings.Contains(err.Error(), "sslpassword=xxxxx") {
		t.Fatalf("Open with a wrong sslpassword: %v, want ErrBadDSN saying the key does not decrypt", err)
	}
	for _, w := range secretWords {
		if strings.Contains(err.Error(), w) {
			t.Errorf("the error shows %q, a piece of the sslpassword: %v", w, err)
		}
	}
}

// writeClientKey writes an RSA key encrypted with pass and a certificate
// for it into dir, and returns their paths.
func writeClientKey(t *testing.T, dir, pass string) (keyFile, certFile string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 libpq's and pgx's encrypted key format
	block, err := x509.EncryptPEMBlock(rand.Reader, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key), []byte(pass), x509.PEMCipherAES128) //nolint:staticcheck
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ctxstore test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyFile, certFile = filepath.Join(dir, "client.key"), filepath.Join(dir, "client.crt")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return keyFile, certFile
}
