package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/internal/testpki"
	"github.com/ehmirror/ehmirror/mirror"
)

// A client certificate that expires while the app runs keeps working on
// open connections, so the status itself flags it: a problem
// KAFKA_TLS_CERT_WARN_DAYS before expiry, and at once once expired.
func TestStatusFlagsAnExpiringCertificate(t *testing.T) {
	ca := testpki.NewCA(t, "test CA")
	now := time.Now()
	cert := ca.ClientValid(t, "mirror", now.Add(-time.Hour), now.Add(72*time.Hour), nil)
	c, err := config.ParseClientCertificate(string(cert.CertPEM), string(cert.KeyPEM), "", now, config.SettingNames)
	if err != nil {
		t.Fatal(err)
	}
	a := &app{settings: config.Settings{KafkaClientCert: c, CertWarnDays: config.DefaultCertWarnDays}}
	check := func(at time.Time, wantOK bool, want string) {
		t.Helper()
		h := mirror.Health{OK: true, Problems: []mirror.Problem{}}
		a.certificateHealth(&h, at)
		if h.OK != wantOK || (want != "" && (!strings.Contains(h.Reason, want) || len(h.Causes) != 1 || h.Causes[0].Kind != mirror.KindCertificate)) {
			t.Errorf("at %s: ok %v, reason %q, causes %+v; want ok %v and %q", at.Format(time.RFC3339), h.OK, h.Reason, h.Causes, wantOK, want)
		}
	}
	check(now, false, "KAFKA_TLS_CERT_PEM: the client certificate (subject \"CN=mirror\") expires at ")
	check(now.Add(100*time.Hour), false, "expired at ")
	a.settings.CertWarnDays = 1
	check(now, true, "")
	check(now.Add(50*time.Hour), false, ", in 2")
}
