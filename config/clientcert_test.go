package config

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/internal/testpki"
)

const testPassword = "s3cret pass"

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// parseKeyFile parses a testdata key written by OpenSSL.
func parseKeyFile(t *testing.T, name string) crypto.Signer {
	t.Helper()
	b, _ := pem.Decode([]byte(readTestdata(t, name)))
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k.(crypto.Signer)
}

// bodyLines returns the base64 lines of a PEM block: none may show in an
// error.
func bodyLines(pemText string) []string {
	var out []string
	for _, l := range strings.Split(pemText, "\n") {
		if l = strings.TrimSpace(l); len(l) >= 16 && !strings.HasPrefix(l, "-----") && !strings.Contains(l, ":") {
			out = append(out, l)
		}
	}
	return out
}

// TestEncryptedPKCS8FromOpenSSL decrypts keys OpenSSL encrypted with PBES2
// (its default AES-256-CBC with HMAC-SHA-256, AES-128 with HMAC-SHA-1, 3DES
// with HMAC-SHA-512) and gets the very key OpenSSL started from; the
// schemes it does not support are refused naming the key setting and
// saying what to do.
func TestEncryptedPKCS8FromOpenSSL(t *testing.T) {
	ca := testpki.NewCA(t, "test CA")
	plain := parseKeyFile(t, "plain.pem")
	cert := ca.ClientValid(t, "mirror", time.Now().Add(-time.Hour), time.Now().Add(time.Hour), plain)
	for _, f := range []string{"enc-default.pem", "enc-aes128-sha1.pem", "enc-des3-sha512.pem"} {
		c, err := ParseClientCertificate(string(cert.CertPEM), readTestdata(t, f), testPassword, time.Now(), SettingNames)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if !plain.(interface{ Equal(crypto.PrivateKey) bool }).Equal(c.tls.PrivateKey) {
			t.Errorf("%s: decrypted to another key", f)
		}
		_, err = ParseClientCertificate(string(cert.CertPEM), readTestdata(t, f), "wrong "+testPassword, time.Now(), SettingNames)
		checkCertError(t, f+" wrong password", err, KafkaTLSKeyPassword, "does not decrypt", readTestdata(t, f))
	}
	for f, says := range map[string]string{
		"enc-scrypt.pem":     "scrypt",
		"enc-pbes1.pem":      "legacy PKCS#12",
		"rsa-legacy-enc.pem": "legacy OpenSSL way",
	} {
		_, err := ParseClientCertificate(string(cert.CertPEM), readTestdata(t, f), testPassword, time.Now(), SettingNames)
		checkCertError(t, f, err, KafkaTLSKeyPEM, says, readTestdata(t, f))
	}
}

// checkCertError wants a one-line *CertError naming setting and saying says,
// with no line of secret in it and no password.
func checkCertError(t *testing.T, name string, err error, setting, says, secret string) {
	t.Helper()
	var ce *CertError
	if !errors.As(err, &ce) {
		t.Errorf("%s: error %v, want a CertError", name, err)
		return
	}
	msg := err.Error()
	if ce.Setting != setting || !strings.HasPrefix(msg, setting+": ") || !strings.Contains(msg, says) || strings.Contains(msg, "\n") {
		t.Errorf("%s: %q, want one line naming %s and saying %q", name, msg, setting, says)
	}
	for _, l := range bodyLines(secret) {
		if strings.Contains(msg, l) || strings.Contains(msg, l[:12]) {
			t.Errorf("%s: key material in the error %q", name, msg)
		}
	}
	if strings.Contains(msg, "s3cret") || strings.Contains(msg, "wrong-pw") {
		t.Errorf("%s: password in the error %q", name, msg)
	}
}

// TestClientCertificateProblems: every wrong certificate or key is one line
// naming the setting at fault, without the key.
func TestClientCertificateProblems(t *testing.T) {
	ca := testpki.NewCA(t, "test CA")
	good := ca.Client(t, "mirror")
	other := ca.Client(t, "someone else")
	expired := ca.ClientValid(t, "mirror", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour), nil)
	future := ca.ClientValid(t, "mirror", time.Now().Add(24*time.Hour), time.Now().Add(48*time.Hour), nil)
	rsaKey := readTestdata(t, "rsa-pkcs1.pem")
	goodCert, goodKey := string(good.CertPEM), string(good.KeyPEM)
	for _, c := range []struct {
		name, cert, key, password string
		setting, says             string
	}{
		{"garbage certificate", "not a certificate", goodKey, "", KafkaTLSCertPEM, "no PEM certificate"},
		{"truncated certificate", goodCert[:200], goodKey, "", KafkaTLSCertPEM, "no PEM certificate"},
		{"damaged certificate", strings.Replace(goodCert, "\n", "\nAAAA", 2), goodKey, "", KafkaTLSCertPEM, "certificate"},
		{"key in the certificate setting", goodKey, goodKey, "", KafkaTLSCertPEM, "holds a private key"},
		{"garbage key", goodCert, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "", KafkaTLSKeyPEM, "not a valid private key"},
		{"truncated key", goodCert, goodKey[:100], "", KafkaTLSKeyPEM, "no PEM private key"},
		{"certificate in the key setting", goodCert, goodCert, "", KafkaTLSKeyPEM, "holds a certificate"},
		{"key of another certificate", goodCert, string(other.KeyPEM), "", KafkaTLSKeyPEM, "does not match"},
		{"RSA key for an EC certificate", goodCert, rsaKey, "", KafkaTLSKeyPEM, "does not match"},
		{"expired", string(expired.CertPEM), string(expired.KeyPEM), "", KafkaTLSCertPEM, "expired"},
		{"not yet valid", string(future.CertPEM), string(future.KeyPEM), "", KafkaTLSCertPEM, "not valid before"},
		{"certificate without key", goodCert, "", "", KafkaTLSKeyPEM, "missing"},
		{"key without certificate", "", goodKey, "", KafkaTLSCertPEM, "missing"},
		{"password for a plain key", goodCert, goodKey, "wrong-pw", KafkaTLSKeyPassword, "not encrypted"},
		{"encrypted key without password", goodCert, readTestdata(t, "enc-default.pem"), "", KafkaTLSKeyPassword, "missing"},
	} {
		_, err := ParseClientCertificate(c.cert, c.key, c.password, time.Now(), SettingNames)
		checkCertError(t, c.name, err, c.setting, c.says, c.key)
	}
	// The RSA PKCS#1 and the EC SEC 1 forms are read too, and a chain.
	rsa := parseRSA(t, rsaKey)
	rsaCert := ca.ClientValid(t, "rsa", time.Now().Add(-time.Hour), time.Now().Add(time.Hour), rsa)
	chain := string(rsaCert.CertPEM) + string(ca.PEM)
	c, err := ParseClientCertificate(chain, rsaKey, "", time.Now(), SettingNames)
	if err != nil || len(c.Chain) != 2 || len(c.tls.Certificate) != 2 {
		t.Fatalf("RSA PKCS#1 key with a chain: %v", err)
	}
	if !strings.Contains(c.String(), `CN=rsa`) || strings.Contains(c.String(), "PRIVATE") {
		t.Errorf("String %q", c.String())
	}
}

func parseRSA(t *testing.T, p string) crypto.Signer {
	b, _ := pem.Decode([]byte(p))
	k, err := x509.ParsePKCS1PrivateKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestLoadClientCertificate: the settings need KAFKA_TLS; PEM with its line
// breaks written as \n is read, and PEM with CRLF line ends; the status summary names the certificate and
// hides the key; Secrets covers every line of the key; the TLS config
// presents the certificate, and refuses once it has expired.
func TestLoadClientCertificate(t *testing.T) {
	ca := testpki.NewCA(t, "test CA")
	good := ca.Client(t, "mirror")
	env := valid()
	env[KafkaTLSCertPEM] = string(good.CertPEM)
	env[KafkaTLSKeyPEM] = string(good.KeyPEM)
	_, problems := Load(getenv(env))
	if len(problems) != 1 || problems[0].Setting != KafkaTLSCertPEM || !strings.Contains(problems[0].Message, "KAFKA_TLS is not true") {
		t.Errorf("without KAFKA_TLS: %v", problems)
	}
	env[KafkaTLS] = "true"
	env[KafkaTLSCertPEM] = strings.ReplaceAll(strings.TrimSpace(string(good.CertPEM)), "\n", `\n`)
	env[KafkaTLSKeyPEM] = strings.ReplaceAll(string(good.KeyPEM), "\n", "\r\n") // Windows line ends
	s, problems := Load(getenv(env))
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	sum := s.Summary()
	if !strings.Contains(sum[KafkaTLSCertPEM], "CN=mirror") || sum[KafkaTLSKeyPEM] != "(set, redacted)" {
		t.Errorf("summary: cert %q key %q", sum[KafkaTLSCertPEM], sum[KafkaTLSKeyPEM])
	}
	secrets := strings.Join(Secrets(getenv(env)), "\x00")
	for _, l := range bodyLines(string(good.KeyPEM)) {
		if !strings.Contains(secrets, l) {
			t.Errorf("Secrets lacks a key line")
		}
	}
	cfg, err := s.KafkaTLSConfig()
	if err != nil || cfg.GetClientCertificate == nil {
		t.Fatalf("tls config: %v", err)
	}
	cert, err := cfg.GetClientCertificate(&tls.CertificateRequestInfo{})
	if err != nil || len(cert.Certificate) != 1 {
		t.Fatalf("client certificate: %v", err)
	}
	// A certificate that expires while the process runs fails the
	// handshake with a line naming the setting.
	s.KafkaClientCert.Chain[0].NotAfter = time.Now().Add(-time.Second)
	if _, err := cfg.GetClientCertificate(&tls.CertificateRequestInfo{}); err == nil || !strings.HasPrefix(err.Error(), KafkaTLSCertPEM+": ") || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired during the run: %v", err)
	}

	delete(env, KafkaTLSCertPEM)
	delete(env, KafkaTLSKeyPEM)
	env[KafkaTLSKeyPassword] = "pw"
	if _, problems := Load(getenv(env)); len(problems) != 1 || problems[0].Setting != KafkaTLSKeyPassword {
		t.Errorf("password alone: %v", problems)
	}
	env[KafkaTLSKeyPassword] = ""
	env[KafkaTLSKeyPEM] = "@Microsoft.KeyVault(SecretUri=https://v.vault.azure.net/secrets/k/)"
	env[KafkaTLSCertPEM] = string(good.CertPEM)
	if _, problems := Load(getenv(env)); len(problems) != 1 || problems[0].Setting != KafkaTLSKeyPEM || !strings.Contains(problems[0].Message, "Key Vault") {
		t.Errorf("unresolved Key Vault reference: %v", problems)
	}
}

// FuzzClientKey: any key block, encrypted or not, with any password, gives
// a key or a one-line error naming a setting, never a panic, and the error
// never holds the key's base64.
func FuzzClientKey(f *testing.F) {
	for _, name := range []string{"enc-default.pem", "enc-aes128-sha1.pem", "enc-des3-sha512.pem", "enc-scrypt.pem", "enc-pbes1.pem", "plain.pem"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		p, _ := pem.Decode(b)
		f.Add(p.Type == "ENCRYPTED PRIVATE KEY", p.Bytes, testPassword)
	}
	ca := testpki.NewCA(f, "fuzz CA")
	cert := string(ca.Client(f, "mirror").CertPEM)
	f.Fuzz(func(t *testing.T, encrypted bool, der []byte, password string) {
		typ := "PRIVATE KEY"
		if encrypted {
			typ = "ENCRYPTED PRIVATE KEY"
		}
		keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
		_, err := ParseClientCertificate(cert, keyPEM, password, time.Now(), SettingNames)
		if err == nil {
			return
		}
		var ce *CertError
		if !errors.As(err, &ce) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("error %q", err)
		}
		for _, l := range bodyLines(keyPEM) {
			if strings.Contains(err.Error(), l) {
				t.Fatalf("key material in %q", err)
			}
		}
	})
}
