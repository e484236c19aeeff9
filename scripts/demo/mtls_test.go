package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/internal/testpki"
)

// TestDemoOverMutualTLS runs the demo's seed scenario against a Kafka that
// requires and verifies TLS client certificates: the producer, the real
// handler under the local Functions host (KAFKA_TLS_CERT_PEM, and an
// encrypted KAFKA_TLS_KEY_PEM with KAFKA_TLS_KEY_PASSWORD) and the verifier
// all present the client certificate, and every record arrives once and in
// order. The key shows nowhere in the demo's output.
func TestDemoOverMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the handler and runs the whole demo")
	}
	dir := filepath.Join("..", "..", "config", "testdata")
	encKey, err := os.ReadFile(filepath.Join(dir, "enc-default.pem"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := os.ReadFile(filepath.Join(dir, "plain.pem"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(plain)
	key, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	serverCA, clientCA := testpki.NewCA(t, "broker CA"), testpki.NewCA(t, "client CA")
	client := clientCA.ClientValid(t, "ehmirror demo", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), key.(crypto.Signer))
	mtls := &mutualTLS{
		Broker:      testpki.BrokerTLS(serverCA.Server(t), clientCA),
		CAPEM:       serverCA.PEM,
		CertPEM:     client.CertPEM,
		KeyPEM:      encKey,
		KeyPassword: "s3cret pass",
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	oc, err := run(ctx, options{count: 1000, partitions: 2, maxRecords: 400, catchUpAfter: 1, seed: 11, mtls: mtls}, &out)
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatalf("demo over mutual TLS: %v", err)
	}
	tot := oc.report.Total()
	if !oc.report.OK() || tot.KafkaRecords != 1000 || tot.Events != 1000 || tot.Missing != 0 || tot.Duplicates != 0 || tot.OrderViolations != 0 || tot.Lag != 0 {
		t.Fatalf("report %+v: want 1000 records mirrored once, in order, lag 0", tot)
	}
	if !strings.Contains(out.String(), "mutual TLS") {
		t.Errorf("the output does not say Kafka requires client certificates")
	}
	for _, l := range strings.Split(string(encKey), "\n") {
		if len(l) >= 16 && !strings.HasPrefix(l, "-----") && strings.Contains(out.String(), l) {
			t.Fatalf("a line of the key is in the demo's output")
		}
	}
	if strings.Contains(out.String(), mtls.KeyPassword) {
		t.Fatal("the key password is in the demo's output")
	}
}
